"""
Writing to a TCP transport without waiting for the reactor's next turn.

Twisted's C{transport.write} only buffers: the bytes go out when the next
poll says the socket is writable, which costs two C{epoll_ctl} calls, a turn
of the loop and a C{doWrite} per write. A proxy writes a head or a short
answer almost every time it reads one, so that round trip is most of what
relaying a small exchange costs. L{sendNow} sends at once when nothing is
waiting ahead of the bytes and hands the rest (or everything, on any doubt) to
C{transport.write}, whose buffering, producer pausing and error handling then
apply as usual.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import tcp

#: The transports whose buffer and socket L{sendNow} may use directly: plain
#: TCP connections, exactly (a subclass may write differently).
_DIRECT = frozenset({tcp.Server, tcp.Client})


def noDelay(transport: Any) -> None:
    """
    Send small writes at once (C{TCP_NODELAY}): a proxy's heads and short
    answers must not wait for the peer's delayed ACK. Under TLS, the TCP
    transport beneath is found through C{.transport}.
    """
    while transport is not None:
        setter = getattr(transport, "setTcpNoDelay", None)
        if setter is not None:
            try:
                setter(True)
            except OSError:
                pass
            return
        transport = getattr(transport, "transport", None)


def nothingBuffered(transport: Any) -> bool:
    """
    Whether C{transport} is a plain, open TCP connection with nothing
    buffered, so bytes sent now can't overtake any.
    """
    return (
        type(transport) in _DIRECT
        and transport.connected
        and not transport.disconnecting
        and not transport.dataBuffer
        and not getattr(transport, "_tempDataLen", 1)
        and not getattr(transport, "_writeDisconnected", True)
        and not getattr(transport, "TLS", True)
    )


def sendNow(transport: Any, data: bytes) -> None:
    """
    Write C{data} to C{transport}, sending what the socket takes at once when
    nothing is buffered ahead of it.
    """
    if data and nothingBuffered(transport):
        sent = transport.writeSomeData(data)
        if isinstance(sent, int) and sent > 0:
            if sent == len(data):
                return
            data = data[sent:]
        # A lost connection (an exception returned) or a full socket: the
        # transport's own write finds the same and deals with it.
    transport.write(data)
