from twisted.application.service import ServiceMaker

netlogProxy = ServiceMaker(
    "netlog site proxy",
    "netlog.tap.proxy",
    "The site proxy: decrypts configured sites, keeps each exchange whole in the network log.",
    "netlog-proxy",
)
netlogStandin = ServiceMaker(
    "netlog stand-in",
    "netlog.tap.standin",
    "The stand-in: a forward proxy that decrypts nothing and logs every connection.",
    "netlog-standin",
)
