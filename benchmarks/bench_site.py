"""
Benchmark the site proxy (C{twistd netlog-proxy}, logging whole exchanges to a
file) against direct and the bare Twisted relay.

The origin is configured as a site (C{bench.test} on both of the origin's
ports, its backend the plain port), so every request is decrypted where it
comes through CONNECT, routed, and kept whole. The clients trust netlog's CA
besides the origin's certificate.

Run from the repository: C{.venv/bin/python -m benchmarks.bench_site}
(C{--rounds 10} for steadier medians, C{--only burst} for some scenarios).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from benchmarks.harness import HOST, Environment, ProcessTarget, main, sourceEnv


def siteArgv(env: Environment, port: int) -> list[str]:
    sites = os.path.join(env.directory, "sites.toml")
    with open(sites, "w") as f:
        f.write(
            f'[[site]]\nname = "bench"\n'
            f'origins = ["http://{HOST}:{env.port}", "https://{HOST}:{env.tlsPort}"]\n'
            f'backend = "http://127.0.0.1:{env.port}"\n'
        )
    return [
        sys.executable, "-c", "from twisted.scripts.twistd import run; run()",
        "-n", "--pidfile=", f"--logfile={os.path.join(env.directory, 'site-twistd.log')}",
        "netlog-proxy", "--no-supervise",
        "--listen", f"tcp:{port}:interface=127.0.0.1",
        "--sites", sites,
        "--state", os.path.join(env.directory, "site-state"),
        "--log", os.path.join(env.directory, "site.jsonl"),
        "--resolve-only", "--resolve", f"{HOST}=127.0.0.1",
    ]


@dataclass
class SiteTarget(ProcessTarget):
    """
    The site proxy; its CA is made first and trusted by the clients.
    """

    def start(self, env: Environment) -> None:
        state = os.path.join(env.directory, "site-state")
        subprocess.run([sys.executable, "-m", "netlog.cli", "ca", "--state", state], env=sourceEnv(),
                       check=True, stdout=subprocess.DEVNULL)
        env.sslContext.load_verify_locations(cafile=os.path.join(state, "ca.pem"))
        ProcessTarget.start(self, env)


if __name__ == "__main__":
    main([SiteTarget("site", argv=siteArgv)], sys.argv[1:], title="the site proxy")
