"""
The one HTTP/1.1 engine both proxies run on: the browser's connection, the
exchange, the upstream connections and their pool, the blind tunnel, and the
answers netlog gives itself. What differs between the site proxy and the
stand-in is a L{netlog.proxy.mode.IMode}: routing, decryption, what is kept,
rewrites. See C{docs/engine.rst}.
"""
