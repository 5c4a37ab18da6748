"""
The one engine both proxies run on: the browser's side (an HTTP/1.1
connection, or a stream of an HTTP/2 one), the one dispatch of a request,
the exchange and its states, the answer sources (upstream connections and
their pool, a recording, a rule's local answer), the blind tunnel, and the
answers netlog gives itself. What differs between the site proxy and the
stand-in is a L{netlog.proxy.mode.IMode}: routing, decryption, what is kept,
rewrites. See C{docs/engine.rst}.
"""
