"""
Benchmark the site proxy (C{twistd netlog-proxy}, logging whole exchanges to a
file) against direct, the bare Twisted relay, and the stand-in.

The origin is configured as a site (C{bench.test} on both of the origin's
ports, its backend the plain port), so every request is decrypted where it
comes through CONNECT, routed, and kept whole. The clients trust netlog's CA
besides the origin's certificate.

The stand-in runs in the same rounds (its CONNECTs are blind tunnels to the
origin's TLS port), so the issue's target, a decrypted HTTPS burst no worse
than 2x the stand-in's tunnel burst, is a ratio of two medians measured side
by side; it is printed under the table.

Run from the repository: C{.venv/bin/python -m benchmarks.bench_site}
(C{--rounds 10} for steadier medians, C{--only burst} for some scenarios,
C{--no-standin} to leave the stand-in out). C{--profile N SCENARIO} profiles
the site proxy as C{bench_standin --profile} does the stand-in.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from dataclasses import dataclass

from benchmarks.bench_standin import profile, standinArgv
from benchmarks.harness import HOST, Environment, ProcessTarget, Results, Target, sourceEnv
from benchmarks.runner import main
from benchmarks.squid import squidBumpTargets

#: The scenario the issue compares with the stand-in's.
BURST_TLS = "burst, CONNECT+TLS (1,024 / 64)"
#: Small GETs decrypted on kept-alive tunnels.
HTTPS_KEEPALIVE = "HTTPS through CONNECT (400)"
#: The most the site's decrypted burst may take, in stand-in tunnel bursts.
BURST_TLS_TARGET = 2.0


def siteArgv(env: Environment, port: int, https: bool = False, name: str | None = None,
             supervised: bool = False) -> list[str]:
    """
    The site proxy's command line: C{bench.test} a site whose backend is the
    origin's plain port, or with C{https} its TLS port (re-encrypting, as
    squid bumping does).

    @param name: what its files in the run's folder are named after (by
        default C{site}, or C{site-https}).
    @param supervised: run under the supervisor (workers and standbys), as
        users run it, rather than in one process.
    """
    if name is None:
        name = "site-https" if https else "site"
    sites = os.path.join(env.directory, f"{name}.toml")
    backend = (f'backend = "https://{HOST}:{env.tlsPort}"\nca_file = "{env.cert}"\n' if https
               else f'backend = "http://127.0.0.1:{env.port}"\n')
    with open(sites, "w") as f:
        f.write(
            f'[[site]]\nname = "bench"\n'
            f'origins = ["http://{HOST}:{env.port}", "https://{HOST}:{env.tlsPort}"]\n' + backend
        )
    return [
        sys.executable, "-c", "from twisted.scripts.twistd import run; run()",
        "-n", "--pidfile=", f"--logfile={os.path.join(env.directory, f'{name}-twistd.log')}",
        "netlog-proxy", *([] if supervised else ["--no-supervise"]),
        "--listen", f"tcp:{port}:interface=127.0.0.1",
        "--sites", sites,
        "--state", os.path.join(env.directory, f"{name}-state"),
        "--log", os.path.join(env.directory, f"{name}.jsonl"),
        "--resolve-only", "--resolve", f"{HOST}=127.0.0.1",
    ]


def siteHttpsArgv(env: Environment, port: int) -> list[str]:
    return siteArgv(env, port, https=True)


@dataclass
class SiteTarget(ProcessTarget):
    """
    The site proxy; its CA is made first and trusted by the clients.
    """

    def start(self, env: Environment) -> None:
        env.sslContext.load_verify_locations(cafile=makeCA(env, self.name))
        ProcessTarget.start(self, env)


def makeCA(env: Environment, name: str) -> str:
    """
    Make the CA of the site proxy named C{name} (in its C{--state} folder,
    as L{siteArgv} names it) before it starts; the path of its certificate,
    for the clients to trust.
    """
    state = os.path.join(env.directory, f"{name}-state")
    subprocess.run([sys.executable, "-m", "netlog.cli", "ca", "--state", state], env=sourceEnv(),
                   check=True, stdout=subprocess.DEVNULL)
    return os.path.join(state, "ca.pem")


def burstComparison(results: Results) -> str:
    """
    The decrypted burst against the stand-in's tunnel burst, from the same
    run.
    """
    site = results.times.get((BURST_TLS, "site"))
    standin = results.times.get((BURST_TLS, "standin"))
    if not site or not standin:
        return ""
    ratio = statistics.median(site) / statistics.median(standin)
    verdict = "meets" if ratio <= BURST_TLS_TARGET else "misses"
    return (
        f"\nDecrypted HTTPS burst (site) / tunnel burst (stand-in), same run: {ratio:.2f}× "
        f"({verdict} the target of at most {BURST_TLS_TARGET:.0f}×).\n"
    )


def bumpComparison(results: Results) -> str:
    """
    The site proxy's CPU per request against squid bumping, from the same
    run, on the decrypted scenarios: with its plain backend, and
    re-encrypting as squid does.
    """
    lines = []
    for scenario in (HTTPS_KEEPALIVE, BURST_TLS):
        bump = results.cpuPerRequest(scenario, "squid-bump")
        if not bump:
            continue
        for site in ("site", "site-https"):
            ours = results.cpuPerRequest(scenario, site)
            if ours:
                lines.append(f"- {scenario}: {site} {ours * 1000:.3f} ms against squid-bump's "
                             f"{bump * 1000:.3f} ms ({ours / bump:.2f}×)")
    if not lines:
        return ""
    return "\nDecrypted, CPU per request (median), against squid bumping:\n\n" + "\n".join(lines) + "\n"


if __name__ == "__main__":
    import argparse

    if sys.argv[1:2] == ["--profile"]:
        profile(int(sys.argv[2]) if len(sys.argv) > 2 else 2000, *sys.argv[3:4],
                makeArgv=siteArgv, targetClass=SiteTarget, name="site")
        sys.exit(0)

    ours = argparse.ArgumentParser(add_help=False)
    ours.add_argument("--no-standin", action="store_true")
    ours.add_argument("--squid-bump", action="store_true",
                      help="also squid-openssl bumping (python -m benchmarks.squid --unpack-bump) and the site "
                           "proxy re-encrypting to the origin's TLS port")
    ours.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results-site.md"))
    known, argv = ours.parse_known_args(sys.argv[1:])
    proxies: list[Target] = [SiteTarget("site", argv=siteArgv)]
    if known.squid_bump:
        proxies = squidBumpTargets() + proxies + [SiteTarget("site-https", argv=siteHttpsArgv)]
    if not known.no_standin:
        proxies.append(ProcessTarget("standin", argv=standinArgv))
    results = main(proxies, argv + ["--out", known.out], title="the site proxy")
    extra = burstComparison(results) + bumpComparison(results)
    if extra:
        print(extra)
        with open(known.out, "a") as f:
            f.write(extra)
