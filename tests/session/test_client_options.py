"""
L{netlog.session.cli.clientOf}, the one place the commands that call the
API (C{netlog session}, C{netlog mcp}, C{netlog rotate}) make their client:
a wrong option is one L{ClientOptionError} naming it, which each command
says in the same line.
"""

from __future__ import annotations

import os
import subprocess

from twisted.trial.unittest import SynchronousTestCase

from netlog.cli import makeParser
from netlog.session.cli import ClientOptionError, clientOf
from tests.support import netlogArgv, sourceEnv

#: Seconds one command may take.
TIMEOUT = 60
#: An API that no one answers.
NOWHERE = "http://127.0.0.1:1"


class ClientOfTests(SynchronousTestCase):
    def clientOf(self, *argv: str) -> object:
        return clientOf(makeParser().parse_args(["session", "list", *argv]))

    def test_badApi(self) -> None:
        """
        An C{--api} that is not the API's URL is a L{ClientOptionError} for
        C{--api}, whose one line says what to write.
        """
        with self.assertRaises(ClientOptionError) as caught:
            self.clientOf("--api", "8081")
        self.assertEqual(caught.exception.option, "--api")
        self.assertEqual(str(caught.exception),
                         "--api: '8081' is not the API's URL: write it as http://127.0.0.1:8081")

    def test_missingTokenFile(self) -> None:
        """
        A C{--token-file} that is not there, or is a folder, is a
        L{ClientOptionError} for C{--token-file}.
        """
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        missing = os.path.join(folder, "token")
        for path, said in [(missing, f"the token file {missing} does not exist"),
                           (folder, f"the token file {folder} is a folder")]:
            with self.assertRaises(ClientOptionError) as caught:
                self.clientOf("--api", NOWHERE, "--token-file", path)
            self.assertEqual(caught.exception.option, "--token-file")
            self.assertEqual(caught.exception.message, said)


class CommandTests(SynchronousTestCase):
    def test_sameLine(self) -> None:
        """
        C{netlog session}, C{netlog mcp} and C{netlog rotate} say a missing
        C{--token-file} in the same one line after their name, and exit 1.
        """
        missing = os.path.join(os.path.abspath(self.mktemp()), "token")
        for command in (["session", "list"], ["mcp"], ["rotate"]):
            done = subprocess.run([*netlogArgv(), *command, "--api", NOWHERE, "--token-file", missing],
                                  env=sourceEnv(), capture_output=True, text=True, timeout=TIMEOUT,
                                  stdin=subprocess.DEVNULL)
            self.assertEqual((done.returncode, done.stdout, done.stderr),
                             (1, "", f"netlog {' '.join(command)}: --token-file: the token file {missing} "
                                     "does not exist\n"))
