from twisted.application.service import ServiceMaker

netlogDummy = ServiceMaker("netlog dummy", "tests.supervise.dummy", "A test proxy.", "netlog-dummy")
