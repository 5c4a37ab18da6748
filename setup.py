"""
Build netlog. The metadata is in setup.cfg; this file only compiles the
pure modules of the hot path (L{netlog.compiled.COMPILED_MODULES}) with
mypyc, as black and mypy ship themselves, when a C compiler and Python's
headers are there. Without them, or with C{NETLOG_COMPILE=0}, the same
modules are installed as plain Python, which netlog says in one line as it
starts.
"""

from __future__ import annotations

import os
import runpy
import shlex
import shutil
import sys
import sysconfig

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))

#: The compiled modules the HAR, WARC and replay builders use and the proxy
#: doesn't: one shared library, the rest another, so that the two compile
#: at once (C compilation is most of an install's time). A call from one
#: library into the other stays native, only not inlined.
EXPORT_MODULES = ("netlog.core.har", "netlog.core.replay", "netlog.core.decoding", "netlog.core.encodings")


def whyNotCompiled() -> str | None:
    """
    Why this build can't compile, or C{None} when it can.
    """
    if os.environ.get("NETLOG_COMPILE") == "0":
        return "NETLOG_COMPILE=0"
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        return f"no Python headers (no Python.h in {include})"
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    if not compiler or shutil.which(compiler[0]) is None:
        return f"no C compiler ({compiler[0] if compiler else 'cc'} not found)"
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "mypyc is not installed"
    return None


def extensions() -> list:
    modules = runpy.run_path(os.path.join(HERE, "netlog", "compiled.py"))["COMPILED_MODULES"]
    reason = whyNotCompiled()
    if reason is not None:
        print(f"netlog: installing uncompiled: {reason}", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    def path(name: str) -> str:
        return os.path.join(*name.split(".")) + ".py"

    groups = [
        ([path(name) for name in modules if name in EXPORT_MODULES], "netlog_export"),
        ([path(name) for name in modules if name not in EXPORT_MODULES], "netlog_proxy"),
    ]
    # The project's mypy configuration names a plugin the build environment
    # doesn't have: mypyc reads only these options.
    options = ["--config-file=", "--ignore-missing-imports", "--check-untyped-defs"]
    return mypycify(options + [path(name) for name in modules], opt_level="3", separate=groups)


class ParallelBuildExt(build_ext):
    """
    Compiles the extension modules at once, one per core, unless told
    otherwise (C{build_ext --parallel N}).
    """

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1


setup(ext_modules=extensions(), cmdclass={"build_ext": ParallelBuildExt})
