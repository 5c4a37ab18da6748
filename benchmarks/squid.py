"""
squid as a peer in the benchmarks: Debian's C{squid} package, started by the
harness on loopback with a configuration it writes in a folder of its own.

The configuration: listen on C{127.0.0.1} only; cache nothing; an access
log (squid's default module, C{daemon:}, whose writer is a helper process);
C{http_access allow localhost} and nothing else; CONNECT only to the
origin's TLS port; C{bench.test} from a hosts file, and any other name
asked of a DNS server on loopback (none answers), so that no name is ever
looked up outside the machine; its own pid file; C{-N} (no daemon, no
kids: the process started is the one that serves), and no wait for clients
when it is told to stop.

squid runs helpers beside it (the log writer), so its CPU time and memory
are its process tree's (L{benchmarks.harness.cpuSeconds} and
L{benchmarks.harness.peakRSS} count trees).

When squid isn't installed (C{apt-get install squid}), L{squidTargets}
says so in one line and gives no target, and the benchmark runs the rest.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from benchmarks.harness import HOST, Environment, ProcessTarget, Target, TargetUnavailable, freePort, waitListening

#: Where Debian's package puts it (C{/usr/sbin} may be missing from PATH).
SQUID_PATHS = ("/usr/sbin/squid", "/usr/local/sbin/squid")
#: The user squid runs as when started as root (Debian's C{cache_effective_user}).
SQUID_USER = "proxy"


def findSquid() -> str | None:
    """
    The squid binary, if installed.
    """
    found = shutil.which("squid")
    if found:
        return found
    for path in SQUID_PATHS:
        if os.access(path, os.X_OK):
            return path
    return None


def squidVersion(binary: str) -> str:
    try:
        out = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "squid"
    first = out.splitlines()[0] if out else ""
    return first.replace("Squid Cache: Version ", "squid ") or "squid"


def squidConfig(directory: str, port: int, env: Environment) -> str:
    """
    squid's configuration for a run: loopback only, no cache, an access log,
    localhost allowed, CONNECT to the origin's TLS port only.
    """
    return f"""\
http_port 127.0.0.1:{port}
pid_filename {directory}/squid.pid
cache_log {directory}/cache.log
access_log daemon:{directory}/access.log squid
coredump_dir {directory}
visible_hostname netlog-bench
# no cache, in memory or on disk
cache deny all
cache_mem 0 MB
# names: bench.test from the hosts file; nothing leaves the machine
hosts_file {directory}/hosts
dns_nameservers 127.0.0.1
# who may use it, and where CONNECT may go
acl CONNECT method CONNECT
acl SSL_ports port {env.tlsPort}
acl Safe_ports port {env.port} {env.tlsPort}
http_access deny !Safe_ports
http_access deny CONNECT !SSL_ports
http_access allow localhost
http_access deny all
# no other listeners
icp_port 0
htcp_port 0
snmp_port 0
# no ICMP pinger (a helper that measures the network)
pinger_enable off
# stop at once when told to
shutdown_lifetime 0 seconds
"""


@dataclass
class SquidTarget(ProcessTarget):
    """
    squid in a folder of its own (owned by the user it drops to when
    started as root), with the configuration of L{squidConfig}.
    """

    binary: str = "squid"
    folder: str | None = field(default=None)

    def start(self, env: Environment) -> None:
        self.folder = tempfile.mkdtemp(prefix="netlog-bench-squid-")
        os.chmod(self.folder, 0o755)
        self.proxyPort = port = freePort()
        with open(os.path.join(self.folder, "squid.conf"), "w") as f:
            f.write(squidConfig(self.folder, port, env))
        with open(os.path.join(self.folder, "hosts"), "w") as f:
            f.write(f"127.0.0.1 {HOST}\n")
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam(SQUID_USER)
            except KeyError:
                pass
            else:
                os.chown(self.folder, user.pw_uid, user.pw_gid)
        self.process = subprocess.Popen(
            [self.binary, "-N", "-f", os.path.join(self.folder, "squid.conf")],
            cwd=self.folder, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            waitListening(port, self.process, self.name)
        except SystemExit as e:
            why = self._cacheLogTail()
            self.stop()
            raise TargetUnavailable(f"{self.name} did not start ({e}){': ' + why if why else ''}") from None

    def _cacheLogTail(self) -> str:
        assert self.folder is not None
        try:
            with open(os.path.join(self.folder, "cache.log"), errors="replace") as f:
                lines = [line.strip() for line in f if "FATAL" in line or "ERROR" in line]
        except OSError:
            return ""
        return " / ".join(lines[-2:])

    def stop(self) -> None:
        ProcessTarget.stop(self)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def squidTargets(say: object = print) -> list[Target]:
    """
    squid as a target if it is installed; else none, and one line saying so.
    """
    binary = findSquid()
    if binary is None:
        say("squid is not installed (apt-get install squid): running without it")  # type: ignore[operator]
        return []
    return [SquidTarget("squid", binary=binary, note=f"{squidVersion(binary)} ({binary} -N), configured by benchmarks/squid.py")]
