"""
C{netlog --version}: the version, and whether the hot path runs compiled
(an extension module) or as pure Python.
"""

from __future__ import annotations

import importlib
import importlib.machinery

from netlog import __version__

#: The modules every exchange runs through, the ones worth compiling.
HOT_PATH = ("netlog.core.http1", "netlog.core.logline", "netlog.core.websocket")


def isCompiled(name: str) -> bool:
    """
    Whether module C{name} was loaded from an extension module.
    """
    path = getattr(importlib.import_module(name), "__file__", None) or ""
    return path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def versionLine() -> str:
    """
    What C{netlog --version} prints: C{netlog 0.1.0 (pure Python)}, or
    C{(hot path compiled)} once it is, or C{(hot path partly compiled)}.
    """
    compiled = [isCompiled(name) for name in HOT_PATH]
    how = "hot path compiled" if all(compiled) else "hot path partly compiled" if any(compiled) else "pure Python"
    return f"netlog {__version__} ({how})"
