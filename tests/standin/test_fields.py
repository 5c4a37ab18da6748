"""
The stand-in's one-pass reading of a head's fields says what the reader's
helpers (L{hopByHop}, L{serializeHead}, L{keepAlive}) say, for any fields.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.http1 import hopByHop, keepAlive, serializeHead
from netlog.standin.proxy import _Fields

_NAMES = st.sampled_from(
    [b"Host", b"Connection", b"connection", b"Content-Length", b"Transfer-Encoding", b"Keep-Alive",
     b"Upgrade", b"X-A", b"x-a", b"TE", b"Proxy-Connection", b"Trailer", b"Accept"]
)
_VALUES = st.sampled_from(
    [b"", b"close", b"keep-alive", b"Keep-Alive, X-A", b"x-a", b"content-length", b"host, te",
     b"Transfer-Encoding", b"5", b"chunked", b" upgrade ,, accept "]
)
_HEADERS = st.lists(st.tuples(_NAMES, _VALUES), max_size=8)
_VERSIONS = st.sampled_from([b"HTTP/1.1", b"HTTP/1.0"])


class FieldsTests(SynchronousTestCase):
    @settings(max_examples=300, deadline=None)
    @given(_VERSIONS, _HEADERS, st.lists(st.tuples(_NAMES, _VALUES), max_size=2))
    def test_sameAsTheHelpers(
        self, version: bytes, headers: list[tuple[bytes, bytes]], extra: list[tuple[bytes, bytes]]
    ) -> None:
        """
        The fields dropped, the head built and whether the connection stays
        open are what L{hopByHop}, L{serializeHead} and L{keepAlive} give.
        """
        fields = _Fields(version, headers)
        drop = hopByHop(headers)
        self.assertEqual(set(fields.drop), drop)
        self.assertEqual(
            fields.serialize(b"GET / " + version, extra),
            serializeHead(b"GET / " + version, headers, drop=drop, extra=extra),
        )
        self.assertEqual(fields.kept(), [(n, v) for n, v in headers if n.lower() not in drop])
        self.assertEqual(fields.keepAlive, keepAlive(version, headers))

    def test_framingFieldsNeverDropped(self) -> None:
        """
        An answer whose C{Connection} names C{Content-Length} keeps its
        C{Content-Length} on the way to the browser (dropping it would change
        how the body is framed).
        """
        headers = [(b"Connection", b"content-length, x-a"), (b"Content-Length", b"5"), (b"X-A", b"1")]
        head = _Fields(b"HTTP/1.1", headers).serialize(b"HTTP/1.1 200 OK", [])
        self.assertEqual(head, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
