"""
C{netlog session} against a real stand-in's API, given the token wrong, a
token file that isn't there, or a rules file that isn't there: one line that
says which, naming the command's own options (not the Python client's), and
exit 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from netlog.session.cli import CLI_TOKEN_HINT
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
        return self.netlog("session", *args)

    def netlog(self, *args: str) -> tuple[int, str, bytes]:
        """
        C{netlog ARGS --api URL}, with no C{$NETLOG_API_TOKEN}: its status,
        standard error and output.
        """
        env = sourceEnv()
        env.pop("NETLOG_API_TOKEN", None)
        done = subprocess.run([*netlogArgv(), *args, "--api", self.api], env=env,
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

    def test_wrongTokenRotate(self) -> None:
        """
        C{netlog rotate} given a wrong token says so in one line whose hint
        names C{--token} and C{--token-file}, as C{netlog session} does,
        not the Python keyword.
        """
        status, said, out = self.netlog("rotate", "--token", "not-the-token")
        self.assertEqual((status, out), (1, b""), said)
        self.assertOneLine(said, "netlog rotate: POST ", ": 401 ", f"the token given is not the one in {self.tokenFile}",
                           f"give the API's token: {CLI_TOKEN_HINT}")
        self.assertNotIn("token=", said)

    def test_wrongTokenMcp(self) -> None:
        """
        An agent's tool call through C{netlog mcp --token WRONG} is refused
        with the API's words and a hint that names C{netlog mcp}'s own
        C{--token} and C{--token-file}, not the Python keyword.
        """
        import anyio
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        env = sourceEnv()
        env.pop("NETLOG_API_TOKEN", None)
        params = StdioServerParameters(command=sys.executable, env=env,
                                       args=["-m", "netlog.cli", "mcp", "--api", self.api, "--token", "not-the-token"])
        seen: dict[str, Any] = {}
        errors = open(os.path.join(self.folder, "mcp.err"), "w")
        self.addCleanup(errors.close)

        async def agent() -> None:
            with anyio.fail_after(TIMEOUT):
                async with stdio_client(params, errlog=errors) as (read, write), ClientSession(read, write) as mcp:
                    await mcp.initialize()
                    made = await mcp.call_tool("make_session", {"name": "agent"})
                    seen["made"] = (made.is_error, " ".join(getattr(c, "text", "") for c in made.content))

        anyio.run(agent)
        isError, text = seen["made"]
        self.assertTrue(isError, text)
        self.assertIn("netlog refused (401): ", text)
        self.assertIn(f"the token given is not the one in {self.tokenFile}", text)
        self.assertIn(f"give the API's token: {CLI_TOKEN_HINT}", text)
        self.assertNotIn("token=", text)

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
