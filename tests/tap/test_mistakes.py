"""
Each mistake a user can make on a proxy's command line ends C{twistd} with
one line naming the option, the value and what to do, and a non-zero exit
status, before anything is bound or opened: no listener, no log file, not
even twistd's own log.
"""

from __future__ import annotations

import os
import site
import socket
import subprocess
import sys
from typing import Callable

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.support import REPO, freePort, sourceEnv, twistdArgv

#: Seconds a refusal may take (a Python start).
WAIT = 30.0

SITES = """\
[[site]]
name = "shop"
origins = ["https://shop.test"]
backend = "http://127.0.0.1:1"
"""


@pytest.mark.slow
class MistakeTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)
        self.log = os.path.join(self.folder, "logs", "network.jsonl")
        self.sites = os.path.join(self.folder, "sites.toml")
        with open(self.sites, "w") as f:
            f.write(SITES)

    def refused(
        self,
        plugin: str,
        args: list[str],
        *words: str,
        made: bool = False,
        twistdArgs: list[str] = (),  # type: ignore[assignment]
        python: tuple[str, dict[str, str]] | None = None,
    ) -> str:
        """
        Run C{twistd -n PLUGIN ARGS} (with C{--log self.log} unless ARGS
        name one); check that it exits non-zero with one line holding
        C{words}, having bound nothing and made no log file (unless C{made}:
        the test put something there).
        """
        twistdLog = os.path.join(self.folder, "twistd.log")
        argv = [*twistdArgv(), "-n", "--pidfile=", "--logfile", twistdLog, *twistdArgs, plugin]
        env = sourceEnv()
        if python is not None:
            argv[0], env = python
        log = args[args.index("--log") + 1] if "--log" in args else self.log
        if "--log" not in args:
            argv += ["--log", log]
        if plugin == "netlog-proxy":
            if "--sites" not in args:
                argv += ["--sites", self.sites]
            argv += ["--state", os.path.join(self.folder, "state")]
        argv += args
        done = subprocess.run(argv, env=env, cwd=self.folder, capture_output=True, timeout=WAIT)
        said = (done.stdout + done.stderr).decode("utf-8", "replace")
        self.assertNotEqual(done.returncode, 0, said)
        lines = said.splitlines()
        self.assertEqual(len(lines), 1, said)
        [line] = lines
        self.assertTrue(line.startswith(f"twistd {plugin}: "), line)
        for word in words:
            self.assertIn(word, line)
        # twistd starts its log before its privileged step binds anything.
        self.assertFalse(os.path.exists(twistdLog), said)
        if not made:
            self.assertFalse(os.path.lexists(log))
        return line

    def both(self, check: Callable[[str], object]) -> None:
        for plugin in ("netlog-standin", "netlog-proxy"):
            check(plugin)

    def test_listenNotAPort(self) -> None:
        """
        --listen tcp:notaport: the port must be a number.
        """
        self.both(lambda p: self.refused(
            p, ["--listen", "tcp:notaport"], "--listen tcp:notaport:", "must be a number from 0 to 65535"))

    def test_listenPortTooHigh(self) -> None:
        """
        --listen tcp:99999: past the highest port.
        """
        self.both(lambda p: self.refused(
            p, ["--listen", "tcp:99999"], "--listen tcp:99999:", "must be a number from 0 to 65535", "'99999'"))

    def test_interfaceNotAnAddress(self) -> None:
        """
        interface= naming no address (a device name), or an address this
        machine hasn't.
        """
        self.both(lambda p: self.refused(
            p, ["--listen", "tcp:0:interface=eth0"], "--listen tcp:0:interface=eth0:",
            "interface= wants an IPv4 address of this machine", "'eth0'"))
        # TEST-NET-2: never an address of a test machine.
        self.both(lambda p: self.refused(
            p, ["--listen", "tcp:0:interface=198.51.100.7"], "198.51.100.7 is not an address of this machine"))

    def test_portInUse(self) -> None:
        """
        A port another program listens on, for --listen and --api, and a
        port given twice.
        """
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            self.both(lambda p: self.refused(
                p, ["--listen", f"tcp:{port}:interface=127.0.0.1"],
                f"--listen tcp:{port}:interface=127.0.0.1: port {port} on 127.0.0.1 is in use already"))
            self.refused("netlog-standin", ["--listen", "tcp:0:interface=127.0.0.1", "--api", f"tcp:{port}"],
                         f"--api tcp:{port}:interface=127.0.0.1: port {port} on 127.0.0.1 is in use already")
        free = freePort()
        self.refused("netlog-standin", ["--listen", f"tcp:{free}:interface=127.0.0.1", "--api", f"tcp:{free}"],
                     f"--api tcp:{free}:interface=127.0.0.1: port {free}", "given twice")

    def test_defaultListenInUse(self) -> None:
        """
        With no --listen, a port 3128 in use is said to be the default's,
        not a --listen the user never gave.
        """
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                taken.bind(("127.0.0.1", 3128))
                taken.listen(1)
            except OSError:
                # in use already (another proxy on this machine): the same
                pass
            self.both(lambda p: self.refused(
                p, [], "the default --listen tcp:3128:interface=127.0.0.1 (no --listen given): "
                       "port 3128 on 127.0.0.1 is in use already"))

    def test_routes(self) -> None:
        """
        The site proxy's route listeners are checked the same way.
        """
        self.refused("netlog-proxy", ["--http-route", "tcp:80x"], "--http-route tcp:80x:", "must be a number")
        self.refused("netlog-proxy", ["--https-route", "tcp:1:interface=\\:\\:1"],
                     "--https-route tcp:1:interface=\\:\\:1:", "interface= wants an IPv4 address")
        self.refused("netlog-proxy", ["--https-route", "tcp6:1:interface=::1"],
                     "--https-route tcp6:1:interface=::1:", "write each colon of an IPv6 address as \\:")

    def test_logUnderAFile(self) -> None:
        """
        --log under a file.
        """
        afile = os.path.join(self.folder, "afile")
        with open(afile, "w"):
            pass
        log = os.path.join(afile, "network.jsonl")
        self.both(lambda p: self.refused(
            p, ["--log", log], f"--log {log}:", f"under {afile}, which is a file, not a folder"))

    def test_logIsAFolder(self) -> None:
        """
        --log naming a folder.
        """
        self.both(lambda p: self.refused(
            p, ["--log", self.folder], f"--log {self.folder}:", "is a folder; name a file in it", made=True))

    def test_logFolderMissing(self) -> None:
        """
        --log given by hand in a folder that isn't there: netlog makes
        folders only for its default log, so a typo is one line ("no such
        folder") and no folder is made, even where one could be.
        """
        log = "/sys/netlog-test/network.jsonl"
        self.both(lambda p: self.refused(p, ["--log", log], f"--log {log}:", "no such folder: /sys/netlog-test"))
        typo = os.path.join(self.folder, "lgos", "network.jsonl")
        self.both(lambda p: self.refused(
            p, ["--log", typo], f"--log {typo}:", f"no such folder: {os.path.dirname(typo)}"))
        self.assertFalse(os.path.lexists(os.path.dirname(typo)))

    def test_stateFolderMissing(self) -> None:
        """
        --state given by hand whose parent isn't there (a typo): one line,
        and neither it nor its parent is made; a --state that is a file is
        not a folder.
        """
        state = os.path.join(self.folder, "lib-typo", "netlog")
        log = os.path.join(self.folder, "network.jsonl")
        for plugin in ("netlog-standin", "netlog-proxy"):
            args = ["--log", log, "--api", "tcp:0"] if plugin == "netlog-standin" else ["--log", log]
            # the site proxy's own --state is given by refused(); the last one counts
            self.refused(plugin, [*args, "--state", state], f"--state {state}:",
                         f"no such folder: {os.path.dirname(state)}")
            self.assertFalse(os.path.lexists(os.path.dirname(state)))
            self.refused(plugin, [*args, "--state", self.sites], f"--state {self.sites}: not a folder")

    def test_symlinkAtLog(self) -> None:
        """
        A symbolic link at the log path; its target is untouched.
        """
        target = os.path.join(self.folder, "target")
        with open(target, "w") as f:
            f.write("precious\n")
        os.makedirs(os.path.dirname(self.log))
        os.symlink(target, self.log)
        for plugin in ("netlog-standin", "netlog-proxy"):
            for extra in ([], ["--no-supervise"]):
                line = self.refused(plugin, extra, f"--log {self.log}:", "is a symbolic link", made=True)
        self.assertIn("remove it or choose another --log", line)
        with open(target) as f:
            self.assertEqual(f.read(), "precious\n")

    def test_hardLinkAtLog(self) -> None:
        """
        A second name (hard link) at the log path; the file is untouched.
        """
        other = os.path.join(self.folder, "other")
        with open(other, "w") as f:
            f.write("precious\n")
        os.chmod(other, 0o600)
        os.makedirs(os.path.dirname(self.log))
        os.link(other, self.log)
        self.both(lambda p: self.refused(p, [], f"--log {self.log}:", "has 2 names (hard links)", made=True))
        self.assertEqual(os.stat(other).st_mode & 0o777, 0o600)
        with open(other) as f:
            self.assertEqual(f.read(), "precious\n")

    def test_sameOriginTwice(self) -> None:
        """
        A sites.toml naming one origin twice in a site (with and without
        its default port).
        """
        with open(self.sites, "w") as f:
            f.write(SITES.replace('["https://shop.test"]', '["https://shop.test", "https://shop.test:443"]'))
        self.refused("netlog-proxy", [], f"--sites {self.sites}, line 3:",
                     "origin 'https://shop.test:443' is https://shop.test, which its origins already name")

    def test_uidCannotRunPython(self) -> None:
        """
        Root starting a proxy with --uid nobody from a Python nobody can't
        run (a virtual environment in root's home, mode 0700) is told so,
        and what to do (a venv made by the system's Python, netlog installed
        into it from the clone), before anything starts, supervised or not.
        """
        if os.geteuid() != 0:
            raise self.failureException("this test drops from root to nobody and must run as root")
        private = os.path.join(self.folder, "root-home")
        os.makedirs(os.path.join(private, "bin"))
        os.chmod(private, 0o700)
        python = os.path.join(private, "bin", "python")
        os.symlink(sys.executable, python)
        env = sourceEnv()
        packages = [p for p in site.getsitepackages() if os.path.isdir(p)]
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *packages])
        for plugin in ("netlog-standin", "netlog-proxy"):
            line = self.refused(
                plugin, [], f"--uid nobody: nobody can't run {python}",
                "a virtual environment in root's home, or made by a Python installed there",
                "system's Python", "/usr/bin/python3 -m venv /opt/netlog",
                "then in the clone /opt/netlog/bin/pip install .",
                twistdArgs=["--uid", "nobody", "--gid", "nogroup"], python=(python, env),
            )
        self.assertIn("nobody can't run", line)
        # Without the worker (--no-supervise), the packages must still be
        # readable: netlog imports some after the drop.
        os.chmod(private, 0o755)
        hidden = os.path.join(self.folder, "hidden")
        os.makedirs(hidden)
        os.chmod(hidden, 0o700)
        os.symlink(REPO + "/netlog", os.path.join(hidden, "netlog"))
        env["PYTHONPATH"] = os.pathsep.join([hidden, REPO, *packages])
        self.refused(
            "netlog-standin", ["--no-supervise"], f"--uid nobody: nobody can't read {hidden}",
            twistdArgs=["--uid", "nobody", "--gid", "nogroup"], python=(python, env),
        )

    def test_unknownOption(self) -> None:
        """
        An option the plugin hasn't: one line, not twistd's whole help.
        """
        self.both(lambda p: self.refused(p, ["--lsiten", "tcp:0"], "--lsiten not recognized", f"{p} --help"))
