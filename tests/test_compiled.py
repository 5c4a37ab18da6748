"""
The hot path is compiled when the build should be (C{NETLOG_BUILD=compiled})
and plain Python otherwise, and the reason a proxy gives for running
uncompiled names what is plain.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

from twisted.trial.unittest import SynchronousTestCase

from netlog.compiled import COMPILED_MODULES, isCompiled, uncompiledReason
from tests.support.build import compiledExpected


class BuildTests(SynchronousTestCase):
    def test_expectedBuild(self) -> None:
        """
        Each module of the hot path is loaded from an extension module when
        the run expects the compiled build, from its C{.py} when it expects
        the pure one; the reason to say at start agrees.
        """
        compiled = compiledExpected()
        for name in COMPILED_MODULES:
            module = importlib.import_module(name)
            self.assertEqual(str(module.__file__).endswith(".py"), not compiled, module.__file__)
            self.assertEqual(isCompiled(name), compiled, name)
        self.assertEqual(uncompiledReason() is None, compiled)

    def test_reason(self) -> None:
        """
        The reason counts the modules when none is compiled and names them
        when only some are; there is none when all are.
        """
        origins = {"a.one": "/x/a/one.py", "a.two": "/x/a/two.cpython-311-x86_64-linux-gnu.so",
                   "a.three": "/x/a/three.py"}

        def find(name: str) -> SimpleNamespace:
            return SimpleNamespace(origin=origins[name])

        self.assertIsNone(uncompiledReason(("a.two",), find))
        self.assertTrue(uncompiledReason(("a.one", "a.three"), find).startswith(  # type: ignore[union-attr]
            "the 2 modules of the hot path are plain Python (installed where no C compiler"))
        self.assertTrue(uncompiledReason(("a.one", "a.two", "a.three"), find).startswith(  # type: ignore[union-attr]
            "a.one, a.three are plain Python ("))
        self.assertTrue(uncompiledReason(("a.one", "a.two"), find).startswith(  # type: ignore[union-attr]
            "a.one is plain Python ("))
