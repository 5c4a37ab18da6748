"""
A real squid on loopback as the upstream proxy of the tests
(C{--upstream-proxy}), started as the benchmarks start theirs
(L{benchmarks.squid.startSquid}), with three ports: C{open} lets localhost
through, C{auth} wants Basic credentials (checked by a helper script of its
own: C{netlog} and L{PASSWORD}), C{deny} refuses everything. Its names come
from its hosts file only; its access log is read by the tests.

Which process holds a connection's other end (L{holders}) is read from
C{/proc}, so a test can say that an origin's connection came from squid.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import subprocess
import tempfile
import time

from benchmarks.squid import findSquid, loopbackConfig, startSquid
from benchmarks.harness import stopProcess, waitListening
from tests.support import freePort

#: The credentials the C{auth} port takes.
USER = "netlog"
PASSWORD = "s3cret-pass"

#: How long the access log may take to show a request (squid writes it
#: once the request is done).
LOG_WAIT = 10.0

_HELPER = f"""\
#!/bin/sh
while read user password; do
    if [ "$user" = "{USER}" ] && [ "$password" = "{PASSWORD}" ]; then echo OK; else echo ERR; fi
done
"""


def _config(directory: str, ports: dict[str, int]) -> str:
    listen = "".join(f"http_port 127.0.0.1:{port} name={name}\n" for name, port in ports.items())
    return listen + f"""\
access_log stdio:{directory}/access.log squid
buffered_logs off
# the origins see their connections close with each answer (the tests leave nothing open)
server_persistent_connections off
auth_param basic program {directory}/auth.sh
auth_param basic children 1 startup=1 idle=1
auth_param basic realm netlog-tests
acl openPort myportname open
acl authPort myportname auth
acl denyPort myportname deny
acl users proxy_auth REQUIRED
http_access deny denyPort
http_access allow localhost openPort
http_access deny authPort !users
http_access allow localhost authPort
http_access deny all
""" + loopbackConfig(directory, "netlog-tests")


class Squid:
    """
    One squid process (see L{sharedSquid}).

    @ivar ports: C{open}, C{auth} and C{deny}: each port's number.
    """

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts
        self.folder = ""
        self.ports: dict[str, int] = {}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = findSquid()
        if binary is None:
            raise RuntimeError("squid is not installed (.ci/install.d/40-squid.sh installs it)")
        self.folder = tempfile.mkdtemp(prefix="netlog-squid-")
        helper = os.path.join(self.folder, "auth.sh")
        with open(helper, "w") as f:
            f.write(_HELPER)
        os.chmod(helper, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        self.ports = {name: freePort() for name in ("open", "auth", "deny")}
        self.process = startSquid(binary, self.folder, _config(self.folder, self.ports), self.hosts)
        try:
            for port in self.ports.values():
                waitListening(port, self.process, "squid")
        except SystemExit as e:
            self.stop()
            raise RuntimeError(f"squid did not start: {e}") from None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def accessLog(self) -> list[str]:
        try:
            with open(os.path.join(self.folder, "access.log")) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def waitLogged(self, needle: str, count: int = 1) -> list[str]:
        """
        The access log's lines that hold C{needle}, once there are C{count}
        (blocking: call it in a thread).
        """
        deadline = time.monotonic() + LOG_WAIT
        while True:
            lines = [line for line in self.accessLog() if needle in line]
            if len(lines) >= count or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            stopProcess(self.process)
            self.process = None
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


#: The squids started so far, by the names of their hosts files.
_shared: dict[tuple[str, ...], Squid] = {}


def sharedSquid(hosts: list[str]) -> Squid:
    """
    A squid whose hosts file names C{hosts}: started by the first test that
    asks, shared by the others (each test tells its lines in the access log
    by its own ports), stopped when the test run ends. (A class's
    C{setUpClass} would do, but trial doesn't call it.)
    """
    key = tuple(hosts)
    squid = _shared.get(key)
    if squid is None:
        squid = Squid(hosts)
        squid.start()
        atexit.register(squid.stop)
        _shared[key] = squid
    return squid


def _socketInodes(localPort: int, remotePort: int) -> set[str]:
    """
    The inodes of the TCP sockets from C{localPort} to C{remotePort}.
    """
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if int(local.rsplit(":", 1)[1], 16) == localPort and int(remote.rsplit(":", 1)[1], 16) == remotePort:
                found.add(inode)
    return found


def holders(localPort: int, remotePort: int) -> set[int]:
    """
    The processes holding the connection from C{localPort} to C{remotePort}
    on this machine.
    """
    inodes = {f"socket:[{inode}]" for inode in _socketInodes(localPort, remotePort)}
    pids = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    pids.add(int(pid))
                    break
            except OSError:
                continue
    return pids
