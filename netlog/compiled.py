"""
Which of netlog's modules an install compiles with mypyc, and whether this
one did.

C{pip install .} compiles the pure modules of the hot path (those named in
L{COMPILED_MODULES}, read by C{setup.py}) when a C compiler and Python's
headers are there, and installs the same modules as plain Python otherwise.
A proxy that runs them uncompiled says so in one line as it starts.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from typing import Callable

#: The modules compiled when the install can: the HTTP/1.1 reader, the log
#: line format, the record builder, the body capture, the WebSocket frame
#: counter and message assembler, the HTTP/2 head checks, the HAR entry
#: builder and its index, the replay matcher, and the HAR builder's
#: decoding of bodies (content codings, charsets). None of them is
#: subclassed or patched from outside (mypyc's native classes allow
#: neither).
COMPILED_MODULES: tuple[str, ...] = (
    "netlog.core.http1",
    "netlog.core.logline",
    "netlog.core.records",
    "netlog.core.capture",
    "netlog.core.websocket",
    "netlog.core.wsmessages",
    "netlog.core.h2head",
    "netlog.core.har",
    "netlog.core.replay",
    "netlog.core.decoding",
    "netlog.core.encodings",
)


def isCompiled(name: str, findSpec: Callable[[str], object | None] = importlib.util.find_spec) -> bool:
    """
    Whether module C{name} is loaded from an extension module (what mypyc
    builds) rather than from its Python source.
    """
    origin = getattr(findSpec(name), "origin", None) or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def uncompiledReason(
    modules: tuple[str, ...] = COMPILED_MODULES,
    findSpec: Callable[[str], object | None] = importlib.util.find_spec,
) -> str | None:
    """
    Why this install runs its hot path as plain Python, or C{None} when every
    module of it is compiled.
    """
    plain = [name for name in modules if not isCompiled(name, findSpec)]
    if not plain:
        return None
    if len(plain) == len(modules):
        which = f"the {len(modules)} modules of the hot path are plain Python"
    else:
        which = ", ".join(plain) + (" is" if len(plain) == 1 else " are") + " plain Python"
    return (f"{which} (installed where no C compiler or Python headers were found, "
            "or run from a source checkout; see README.rst, Start here)")
