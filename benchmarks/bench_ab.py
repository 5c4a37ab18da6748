"""
Benchmark both proxies of another checkout beside this one's, in the same
interleaved rounds: the before-and-after of a change to the engine, measured
side by side (CPU per request is the figure to read on a loaded machine).

    git worktree add /tmp/before main
    .venv/bin/python -m benchmarks.bench_ab --before /tmp/before --rounds 5
    .venv/bin/python -m benchmarks.bench_ab --before /tmp/before --no-site --only CONNECT

Each proxy of the other checkout runs with that checkout first on
C{PYTHONPATH} (its C{netlog} and its twistd plugins), and logs to a file of
its own.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

from benchmarks.bench_site import SiteTarget, siteArgv
from benchmarks.bench_standin import standinArgv
from benchmarks.harness import Environment, ProcessTarget, Target, freePort, waitListening
from benchmarks.runner import main


def renamed(argv: Callable[[Environment, int], list[str]], suffix: str) -> Callable[[Environment, int], list[str]]:
    """
    C{argv} with the files each proxy writes (its log, its state folder, its
    twistd log) given C{suffix}, so two checkouts' proxies never share one.
    """

    def build(env: Environment, port: int) -> list[str]:
        out: list[str] = []
        for arg in argv(env, port):
            if out and out[-1] in ("--log", "--state"):
                stem, ext = os.path.splitext(arg)
                arg = stem + suffix + ext
            elif arg.startswith("--logfile="):
                stem, ext = os.path.splitext(arg)
                arg = stem + suffix + ext
            out.append(arg)
        return out

    return build


def otherSource(source: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = source
    return env


@dataclass
class OtherProcess(ProcessTarget):
    """
    A proxy of the other checkout.
    """

    source: str = ""

    def start(self, env: Environment) -> None:
        self.proxyPort = freePort()
        self.process = subprocess.Popen(
            self.argv(env, self.proxyPort), env=otherSource(self.source), cwd=env.directory,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        waitListening(self.proxyPort, self.process, self.name)


@dataclass
class OtherSite(OtherProcess, SiteTarget):
    """
    The other checkout's site proxy, its CA trusted too.
    """

    def start(self, env: Environment) -> None:
        state = os.path.join(env.directory, f"site-state{self.suffix}")
        subprocess.run([sys.executable, "-m", "netlog.cli", "ca", "--state", state], env=otherSource(self.source),
                       check=True, stdout=subprocess.DEVNULL)
        env.sslContext.load_verify_locations(cafile=os.path.join(state, "ca.pem"))
        OtherProcess.start(self, env)

    @property
    def suffix(self) -> str:
        return "-" + self.name.split("-", 1)[1]


if __name__ == "__main__":
    ours = argparse.ArgumentParser(add_help=False)
    ours.add_argument("--before", required=True, help="the other checkout (a folder with its netlog/ and twisted/)")
    ours.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results-ab.md"))
    ours.add_argument("--no-site", action="store_true", help="the stand-ins only (a change to tunnels, say)")
    known, argv = ours.parse_known_args(sys.argv[1:])
    before = os.path.abspath(known.before)
    proxies: list[Target] = [
        ProcessTarget("standin", argv=standinArgv),
        OtherProcess("standin-before", argv=renamed(standinArgv, "-before"), source=before),
    ]
    if not known.no_site:
        proxies += [
            SiteTarget("site", argv=siteArgv),
            OtherSite("site-before", argv=renamed(siteArgv, "-before"), source=before),
        ]
    main(proxies, argv + ["--out", known.out], title="this checkout against --before")
