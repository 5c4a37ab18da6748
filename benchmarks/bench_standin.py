"""
Benchmark the stand-in (C{twistd netlog-standin}, logging to a file) against
direct and the bare Twisted relay.

Run from the repository: C{.venv/bin/python -m benchmarks.bench_standin}
(C{--rounds 10} for steadier medians, C{--only burst} for some scenarios).
"""

from __future__ import annotations

import os
import sys

from benchmarks.harness import HOST, Environment, ProcessTarget, main


def standinArgv(env: Environment, port: int) -> list[str]:
    from netlog.tap.standin import Options

    supervise = ["--no-supervise"] if "no-supervise" in Options().longOpt else []
    return [
        sys.executable, "-c", "from twisted.scripts.twistd import run; run()",
        "-n", "--pidfile=", f"--logfile={os.path.join(env.directory, 'standin-twistd.log')}",
        "netlog-standin", *supervise,
        "--listen", f"tcp:{port}:interface=127.0.0.1",
        "--log", os.path.join(env.directory, "standin.jsonl"),
        "--resolve-only", "--resolve", f"{HOST}=127.0.0.1",
        "--connect-ports", f"{env.tlsPort},{env.port}",
    ]


if __name__ == "__main__":
    main([ProcessTarget("standin", argv=standinArgv)], sys.argv[1:], title="the stand-in")
