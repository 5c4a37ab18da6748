"""
C{netlog --version}: the version, and whether the hot path runs compiled
(extension modules, L{netlog.compiled}) or as pure Python.
"""

from __future__ import annotations

import importlib.util
from typing import Callable

from netlog import __version__
from netlog.compiled import COMPILED_MODULES, isCompiled


def versionLine(findSpec: Callable[[str], object | None] = importlib.util.find_spec) -> str:
    """
    What C{netlog --version} prints: C{netlog 0.1.0 (pure Python)}, or
    C{(hot path compiled)} when every module L{COMPILED_MODULES} names is
    an extension module, or C{(hot path partly compiled)}.
    """
    compiled = [isCompiled(name, findSpec) for name in COMPILED_MODULES]
    how = "hot path compiled" if all(compiled) else "hot path partly compiled" if any(compiled) else "pure Python"
    return f"netlog {__version__} ({how})"
