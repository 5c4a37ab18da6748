"""
C{netlog session} against a real stand-in's API, given the token wrong, a
token file that isn't there, or a rules file that isn't there: one line that
says which, naming the command's own options (not the Python client's), and
exit 1.
"""

from __future__ import annotations

import os
import subprocess

from twisted.trial.unittest import SynchronousTestCase

from tests.client.support import startStandin
from tests.standin.support import tempDirectory
from tests.support import netlogArgv, sourceEnv

#: Seconds one command may take.
TIMEOUT = 60


class SessionCommandMistakeTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = tempDirectory(self)
        state = os.path.join(self.folder, "state")
        _, self.api = startStandin(self.folder, self.addCleanup, ["--state", state])
        self.tokenFile = os.path.join(state, "api-token")
        self.emptyTokenFile = os.path.join(self.folder, "empty-token")
        open(self.emptyTokenFile, "w").close()

    def session(self, *args: str) -> tuple[int, str, bytes]:
        """
        C{netlog session ARGS --api URL}, with no C{$NETLOG_API_TOKEN}: its
        status, standard error and output.
        """
        env = sourceEnv()
        env.pop("NETLOG_API_TOKEN", None)
        done = subprocess.run([*netlogArgv(), "session", *args, "--api", self.api], env=env,
                              capture_output=True, timeout=TIMEOUT, cwd=self.folder, stdin=subprocess.DEVNULL)
        return done.returncode, done.stderr.decode(), done.stdout

    def assertOneLine(self, said: str, *words: str) -> None:
        self.assertEqual(said.count("\n"), 1, said)
        for word in words:
            self.assertIn(word, said)

    def test_wrongToken(self) -> None:
        """
        A wrong token is told apart from none: "the token given is not the
        one in" the token file; the hint names C{--token} and
        C{--token-file}, not the Python keyword. The right one makes the
        session.
        """
        status, said, out = self.session("create", "t1", "--token", "not-the-token")
        self.assertEqual((status, out), (1, b""), said)
        self.assertOneLine(said, "netlog session create: POST ", ": 401 ",
                           f"the token given is not the one in {self.tokenFile}",
                           "give the API's token: --token TOKEN, $NETLOG_API_TOKEN, or --token-file FILE")
        self.assertNotIn("token=", said)
        status, said, _ = self.session("create", "t1", "--token-file", self.emptyTokenFile)
        self.assertEqual(status, 1, said)
        self.assertOneLine(said, f"needs Authorization: Bearer TOKEN, the token in {self.tokenFile}",
                           "--token-file FILE")
        self.assertNotIn("the token given", said)
        status, said, out = self.session("create", "t1", "--token-file", self.tokenFile)
        self.assertEqual(status, 0, said)
        self.assertIn(b'"name": "t1"', out)

    def test_missingTokenFile(self) -> None:
        """
        A C{--token-file} that doesn't exist is a mistake said before the
        API is asked, not a request sent with no token.
        """
        missing = os.path.join(self.folder, "no-such-token")
        status, said, out = self.session("create", "t1", "--token-file", missing)
        self.assertEqual((status, out), (1, b""), said)
        self.assertEqual(said, f"netlog session create: --token-file: the token file {missing} does not exist\n")
        status, said, out = self.session("list", "--token-file", self.tokenFile)
        self.assertEqual(status, 0, said)
        self.assertIn(b'"sessions": []', out)

    def test_missingRulesFile(self) -> None:
        """
        C{netlog session rules NAME missing.toml} says the rules file can't
        be read, in the words start-up uses for C{--rules}, with no raw
        C{[Errno 2]}.
        """
        status, said, _ = self.session("create", "t1", "--token-file", self.tokenFile)
        self.assertEqual(status, 0, said)
        status, said, out = self.session("rules", "t1", "missing.toml", "--token-file", self.tokenFile)
        self.assertEqual((status, out), (1, b""), said)
        self.assertEqual(said, "netlog session rules: the rules file missing.toml: can't be read: "
                               "No such file or directory\n")
