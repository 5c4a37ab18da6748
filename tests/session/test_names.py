"""
Session names, the C{--session} option and where a session's log goes.
"""

from __future__ import annotations

from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from netlog.session.names import BadSession, autoName, checkName, parseSessionOption, sessionLogPath
from netlog.tap.standin import Options


class NameTests(SynchronousTestCase):
    def test_goodNames(self) -> None:
        """
        Letters, digits, C{.}, C{_} and C{-}, 1 to 64 of them, are names.
        """
        for name in ("a", "task-17", "Run_3.retry", "x" * 64, "..a"):
            self.assertEqual(checkName(name), name)

    def test_badNames(self) -> None:
        """
        Anything else is refused with a message that says what a name is:
        empty, too long, a slash, a space, non-ASCII, a dot or two alone, not
        a string.
        """
        for name in ("", "x" * 65, "a/b", "a b", "café", ".", "..", None, 17):
            with self.assertRaises(BadSession) as caught:
                checkName(name)
            self.assertIn("session", str(caught.exception))

    def test_option(self) -> None:
        """
        C{--session NAME=PORT} gives the name and port; C{NAME} alone a free
        port; a port that isn't a number or is out of range is refused.
        """
        self.assertEqual(parseSessionOption("task-1=8101"), ("task-1", 8101))
        self.assertEqual(parseSessionOption("task-1"), ("task-1", 0))
        for bad in ("task-1=", "task-1=http", "task-1=70000", "a/b=8101", "=8101"):
            with self.assertRaises(BadSession):
                parseSessionOption(bad)

    def test_logPath(self) -> None:
        """
        A session's log is beside the main log, named after both.
        """
        self.assertEqual(sessionLogPath("/var/log/netlog/network.jsonl", "task-1"),
                         "/var/log/netlog/network.task-1.jsonl")
        self.assertEqual(sessionLogPath("/tmp/log", "a"), "/tmp/log.a.jsonl")

    def test_autoName(self) -> None:
        """
        A session made with no name gets the first free C{session-N}.
        """
        self.assertEqual(autoName(set()), "session-1")
        self.assertEqual(autoName({"session-1", "session-3"}), "session-2")

    def test_autoNameSkipsUsed(self) -> None:
        """
        A name whose log is still there (an ended session's) is skipped too.
        """
        self.assertEqual(autoName({"session-2"}, lambda name: name in ("session-1", "session-3")), "session-4")


class OptionTests(SynchronousTestCase):
    def test_repeatable(self) -> None:
        """
        C{--session} is repeatable, supervised or not.
        """
        config = Options()
        config.parseOptions(["--session", "a=8101", "--log", "/tmp/x.jsonl"])
        self.assertEqual(config["session"], [("a", 8101)])
        config = Options()
        config.parseOptions(["--no-supervise", "--session", "a=8101", "--session", "b", "--log", "/tmp/x.jsonl"])
        self.assertEqual(config["session"], [("a", 8101), ("b", 0)])

    def test_refused(self) -> None:
        """
        A bad C{--session}, a name given twice or C{--no-log} are usage
        errors that say why.
        """
        cases = [
            (["--no-supervise", "--session", "a/b=1"], "letters"),
            (["--no-supervise", "--session", "a=1", "--session", "a=2"], "twice"),
            (["--no-supervise", "--no-log", "--session", "a=8101"], "--no-log"),
        ]
        for argv, words in cases:
            with self.assertRaises(usage.UsageError) as caught:
                Options().parseOptions(argv)
            self.assertIn(words, str(caught.exception))
