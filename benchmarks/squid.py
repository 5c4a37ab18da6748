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

squid decrypting (L{SquidBumpTarget}, C{squid-bump}) is the peer of the site
proxy: Debian's C{squid-openssl}, peeking at the client's hello then
bumping, with host certificates made by its own helper and signed by a CA
of the run's (ECDSA P-256, as netlog's site proxy signs its own), and re-encrypting to the origin's TLS port. The package
conflicts with C{squid}, so it is unpacked, not installed:
C{python -m benchmarks.squid --unpack-bump} fetches it with C{apt-get
download} and unpacks it under L{BUMP_HOME} (its libraries and shared files
are those the C{squid} package installed, the same version).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from benchmarks.harness import (
    HOST,
    Environment,
    ProcessTarget,
    Target,
    TargetUnavailable,
    freePort,
    makeCertificate,
    waitListening,
)

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


def loopbackConfig(directory: str, name: str) -> str:
    """
    What every squid netlog starts (the benchmarks' and the tests') has:
    its files in C{directory}, no cache, names from its hosts file and
    nothing asked outside the machine, no other listeners, no pinger, a
    quick stop.
    """
    return f"""\
pid_filename {directory}/squid.pid
cache_log {directory}/cache.log
coredump_dir {directory}
visible_hostname {name}
# no cache, in memory or on disk
cache deny all
cache_mem 0 MB
# names: from the hosts file; nothing leaves the machine
hosts_file {directory}/hosts
dns_nameservers 127.0.0.1
# no other listeners
icp_port 0
htcp_port 0
snmp_port 0
# no ICMP pinger (a helper that measures the network)
pinger_enable off
# stop at once when told to
shutdown_lifetime 0 seconds
"""


def squidConfig(directory: str, port: int, env: Environment) -> str:
    """
    squid's configuration for a run: loopback only, no cache, an access log,
    localhost allowed, CONNECT to the origin's TLS port only.
    """
    return f"""\
http_port 127.0.0.1:{port}
access_log daemon:{directory}/access.log squid
# who may use it, and where CONNECT may go
acl CONNECT method CONNECT
acl SSL_ports port {env.tlsPort}
acl Safe_ports port {env.port} {env.tlsPort}
http_access deny !Safe_ports
http_access deny CONNECT !SSL_ports
http_access allow localhost
http_access deny all
""" + loopbackConfig(directory, "netlog-bench")


def startSquid(binary: str, folder: str, config: str, hosts: list[str]) -> subprocess.Popen[bytes]:
    """
    Write C{config} and a hosts file naming C{hosts} (at 127.0.0.1) into
    C{folder}, hand the folder to the user squid drops to when started as
    root, and start C{binary -N} on it (not waiting for it to listen).
    """
    os.chmod(folder, 0o755)
    with open(os.path.join(folder, "squid.conf"), "w") as f:
        f.write(config)
    with open(os.path.join(folder, "hosts"), "w") as f:
        f.write("".join(f"127.0.0.1 {host}\n" for host in hosts))
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam(SQUID_USER)
        except KeyError:
            pass
        else:
            for root, dirs, files in os.walk(folder):
                for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                    os.chown(name, user.pw_uid, user.pw_gid)
    return subprocess.Popen(
        [binary, "-N", "-f", os.path.join(folder, "squid.conf")],
        cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


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
        self.proxyPort = port = freePort()
        self.process = startSquid(self.binary, self.folder, self.config(self.folder, port, env), [HOST])
        try:
            waitListening(port, self.process, self.name)
        except SystemExit as e:
            why = self._cacheLogTail()
            self.stop()
            raise TargetUnavailable(f"{self.name} did not start ({e}){': ' + why if why else ''}") from None

    def config(self, directory: str, port: int, env: Environment) -> str:
        return squidConfig(directory, port, env)

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


#: Where C{--unpack-bump} unpacks Debian's squid-openssl: a folder the user
#: squid drops to may read (it runs the certificate helper from there).
BUMP_HOME = "/var/cache/netlog-bench/squid-openssl"
#: The package, and the binary and certificate helper in it.
BUMP_PACKAGE = "squid-openssl"
BUMP_BINARY = "usr/sbin/squid"
BUMP_CERTGEN = "usr/lib/squid/security_file_certgen"
#: Memory for the host certificates squid makes (in the port's cache and
#: its helper's database): enough for every host of a run.
BUMP_CERT_CACHE = "4MB"


def unpackBump(say: object = print) -> int:
    """
    Fetch Debian's squid-openssl and unpack it under L{BUMP_HOME}; the
    C{squid} package must be installed (its libraries, its helpers' shared
    files).
    """
    os.makedirs(BUMP_HOME, exist_ok=True)
    for old in glob.glob(os.path.join(BUMP_HOME, "*.deb")):
        os.unlink(old)
    fetched = subprocess.run(["apt-get", "download", BUMP_PACKAGE], cwd=BUMP_HOME)
    debs = glob.glob(os.path.join(BUMP_HOME, "*.deb"))
    if fetched.returncode or not debs:
        say(f"apt-get download {BUMP_PACKAGE} failed")  # type: ignore[operator]
        return 1
    shutil.rmtree(os.path.join(BUMP_HOME, "root"), ignore_errors=True)
    subprocess.run(["dpkg-deb", "-x", debs[0], os.path.join(BUMP_HOME, "root")], check=True)
    binary = os.path.join(BUMP_HOME, "root", BUMP_BINARY)
    say(f"unpacked {os.path.basename(debs[0])}: {squidVersion(binary)} at {binary}")  # type: ignore[operator]
    return 0


def bumpConfig(directory: str, port: int, env: Environment, certgen: str) -> str:
    """
    L{squidConfig} with the port bumping TLS: peek at the client's hello,
    then bump; host certificates made by C{certgen} and signed by the run's
    CA; the origin's certificate trusted going out.
    """
    plain = squidConfig(directory, port, env)
    return plain.replace(f"http_port 127.0.0.1:{port}\n", f"""\
http_port 127.0.0.1:{port} ssl-bump cert={directory}/bump-ca.pem key={directory}/bump-ca.key \
generate-host-certificates=on dynamic_cert_mem_cache_size={BUMP_CERT_CACHE}
sslcrtd_program {certgen} -s {directory}/ssl_db -M {BUMP_CERT_CACHE}
sslcrtd_children 4 startup=1 idle=1
acl step1 at_step SslBump1
ssl_bump peek step1
ssl_bump bump all
tls_outgoing_options cafile={env.cert}
""")


@dataclass
class SquidBumpTarget(SquidTarget):
    """
    squid-openssl decrypting every CONNECT (see L{bumpConfig}); its CA is
    trusted by the clients.
    """

    certgen: str = ""

    def config(self, directory: str, port: int, env: Environment) -> str:
        makeCertificate(directory, "bump-ca", "netlog-bench squid CA")
        env.sslContext.load_verify_locations(cafile=os.path.join(directory, "bump-ca.pem"))
        subprocess.run([self.certgen, "-c", "-s", os.path.join(directory, "ssl_db"), "-M", BUMP_CERT_CACHE],
                       check=True, stdout=subprocess.DEVNULL)
        return bumpConfig(directory, port, env, self.certgen)


def squidBumpTargets(say: object = print) -> list[Target]:
    """
    squid-openssl bumping, as C{squid-bump}, if unpacked under L{BUMP_HOME};
    else none, and one line saying how to unpack it.
    """
    binary = os.path.join(BUMP_HOME, "root", BUMP_BINARY)
    certgen = os.path.join(BUMP_HOME, "root", BUMP_CERTGEN)
    if not (os.access(binary, os.X_OK) and os.access(certgen, os.X_OK)):
        say("squid-openssl is not unpacked (python -m benchmarks.squid --unpack-bump): running without squid-bump")  # type: ignore[operator]
        return []
    return [SquidBumpTarget(
        "squid-bump", binary=binary, certgen=certgen,
        note=f"{squidVersion(binary)} ({BUMP_PACKAGE}, unpacked at {binary}), peek then bump, "
             f"re-encrypting to the origin, configured by benchmarks/squid.py",
    )]


if __name__ == "__main__":
    if sys.argv[1:] == ["--unpack-bump"]:
        sys.exit(unpackBump())
    print("usage: python -m benchmarks.squid --unpack-bump")
    sys.exit(2)
