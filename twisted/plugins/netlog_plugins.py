from twisted.application.service import ServiceMaker


class _NetlogServiceMaker(ServiceMaker):
    """
    A netlog proxy's plugin: before twistd reads the proxy's options (the
    first thing of netlog it runs), netlog's reactor is installed, unless
    twistd's C{--reactor} installed another (L{netlog.net.reactors}).
    """

    @property
    def options(self):  # type: ignore[override]
        from netlog.net.reactors import install

        install()
        return super().options


netlogProxy = _NetlogServiceMaker(
    "netlog site proxy",
    "netlog.tap.proxy",
    "The site proxy: decrypts configured sites, keeps each exchange whole in the network log.",
    "netlog-proxy",
)
netlogStandin = _NetlogServiceMaker(
    "netlog stand-in",
    "netlog.tap.standin",
    "The stand-in: a forward proxy that decrypts nothing and logs every connection.",
    "netlog-standin",
)
