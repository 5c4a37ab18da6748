"""
More than one serving worker (C{--workers N}): which slot a session goes to
(a pure choice, by tables), how a heartbeat carries a worker's connections,
and over a real C{twistd netlog-standin --workers 2}: sessions spread over
the two slots, each log written by its slot's worker only, and a
C{kill -9} of one slot's worker leaving the other slot's connections alone.
"""

from __future__ import annotations

import http.client
import http.server
import os
import re
import signal
import socket
import threading
from typing import Any

import pytest
from twisted.internet import defer
from twisted.trial import unittest
from twisted.trial.unittest import SynchronousTestCase

from netlog.supervise.supervisor import placeSession
from netlog.supervise.worker import (
    ALIVE,
    HandedListener,
    HandedLog,
    HandedSession,
    WorkerSpec,
    aliveLine,
    connectionPrefix,
    handedToSlot,
    handedWriter,
    readAlive,
)
from netlog.tap.common import workerCount
from tests.session.test_sessions import PLAIN_REQUESTS, caller, drive, entries
from tests.standin.support import inThread, listenOrigin, tempDirectory
from tests.supervise.running import Twistd, alive, checkLog, killServing, readLog, waitFor

#: Sessions made over the API in the two-worker test.
SESSIONS = 4
#: Requests sent on the long-lived connection before and after the kill.
KEEP_ALIVE_REQUESTS = 3
#: Seconds the killed slot's sessions may take to be served again.
TAKE_OVER = 5.0


class PlaceSessionTests(SynchronousTestCase):
    """
    L{placeSession}: the fewest open connections wins, then the fewest
    sessions, then the first slot.
    """

    TABLE = [
        # ((open connections, sessions) per slot, the slot chosen)
        ([(0, 0)], 0),
        ([(0, 0), (0, 0)], 0),
        ([(0, 1), (0, 0)], 1),
        ([(0, 1), (0, 1)], 0),
        ([(5, 0), (2, 3)], 1),
        ([(2, 0), (2, 3)], 0),
        ([(3, 2), (3, 1), (3, 1)], 1),
        ([(9, 0), (9, 0), (1, 7)], 2),
    ]

    def test_table(self) -> None:
        for slots, chosen in self.TABLE:
            self.assertEqual(placeSession(slots), chosen, slots)

    def test_madeAtOnceSpreadEvenly(self) -> None:
        """
        Sessions made one after another before any traffic alternate.
        """
        counts = [0, 0]
        for _ in range(SESSIONS):
            counts[placeSession([(0, n) for n in counts])] += 1
        self.assertEqual(counts, [SESSIONS // 2, SESSIONS // 2])


class HeartbeatTests(SynchronousTestCase):
    def test_lines(self) -> None:
        """
        A heartbeat says a count, a bare one says none; nothing else is one.
        """
        table = [
            (ALIVE, 0),
            (aliveLine(0), 0),
            (aliveLine(17), 17),
            (b"alive 17", 17),
            (b"alive\n", 0),
            (b"alive -1\n", None),
            (b"alive x\n", None),
            (b"alive 1234567890\n", None),
            (b"ready\n", None),
            (b"alive  3\n", None),
        ]
        for line, count in table:
            self.assertEqual(readAlive(line), count, line)

    def test_prefix(self) -> None:
        """
        Slot 0's ids are as with one worker; another slot's say its number.
        """
        self.assertEqual([connectionPrefix(slot) for slot in (0, 1, 12)], ["", "w1.", "w12."])


class OneWriterTests(SynchronousTestCase):
    """
    A worker writes only the logs its slot was handed.
    """

    def test_sessionOfAnotherSlot(self) -> None:
        self.assertTrue(handedToSlot("task-1", "/x/network.task-1.jsonl", 1, 1))
        self.assertTrue(handedToSlot("task-0", "/x/network.task-0.jsonl", 0, 0))
        self.assertFalse(handedToSlot("task-1", "/x/network.task-1.jsonl", 0, 1))
        self.assertFalse(handedToSlot("task-2", "/x/network.task-2.jsonl", 2, 0))

    def test_mainLogRefused(self) -> None:
        """
        A worker that does not serve the main listeners, handed the main log
        anyway, logs an error, closes the descriptor and writes nothing.
        """
        from twisted.internet.task import Clock
        from twisted.logger import Logger

        path = os.path.abspath(self.mktemp())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        errors: list[str] = []
        log = Logger(observer=lambda event: errors.append(event["log_format"]))  # type: ignore[arg-type]
        writer = handedWriter(HandedLog(path, fd), False, Clock(), log)
        self.assertFalse(writer.enabled)
        self.assertEqual(len(errors), 1)
        self.assertIn("refusing the log", errors[0])
        self.assertRaises(OSError, os.fstat, fd)

    def test_mainLogWritten(self) -> None:
        from twisted.internet.task import Clock
        from twisted.logger import Logger

        path = os.path.abspath(self.mktemp())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        writer = handedWriter(HandedLog(path, fd), True, Clock(), Logger())
        self.assertTrue(writer.enabled)
        os.close(fd)


class WorkerSpecTests(SynchronousTestCase):
    def test_crossesAsJSON(self) -> None:
        """
        A worker's spec crosses to its process as JSON text and is read
        back whole: its listeners, its sessions with their logs and rules,
        the API's address as a pair.
        """
        spec = WorkerSpec(
            optionsClass="netlog.standin.tap.Options",
            buildProxy="netlog.standin.service.buildProxy",
            argv=["--listen", "tcp:0:interface=127.0.0.1"],
            log=HandedLog("/state/network.log", 3),
            listeners=[HandedListener(4, "AF_INET", "forward", "tcp:0:interface=127.0.0.1")],
            apiAddress=("127.0.0.1", 8099),
            files={"/state/ca.pem": 5},
            standby=True,
            sessions=[HandedSession("shop", HandedLog("/state/sessions/shop/network.log", 6), 7, "AF_INET", 41000,
                                    {"block": ["ads.test"]}, 1)],
            control=8,
            adoptSession="netlog.session.manager.AdoptedSession",
            rules={"block": ["tracker.test"]},
            slot=1,
            servesMain=False,
        )
        text = spec.toJSON()
        self.assertIsInstance(text, str)
        self.assertEqual(WorkerSpec.fromJSON(text), spec)

    def test_noLogNoSessions(self) -> None:
        """
        A spec without a log, an API or sessions reads back as one.
        """
        spec = WorkerSpec("o.Options", "o.build", [], HandedLog(None, None), [], None)
        back = WorkerSpec.fromJSON(spec.toJSON())
        self.assertEqual(back, spec)
        self.assertIsNone(back.log.fd)
        self.assertEqual(back.sessions, [])


class WorkerCountTests(SynchronousTestCase):
    def test_values(self) -> None:
        self.assertEqual(workerCount("1"), 1)
        self.assertEqual(workerCount(" 3 "), 3)
        self.assertEqual(workerCount("auto"), len(os.sched_getaffinity(0)))
        self.assertEqual(workerCount("AUTO"), len(os.sched_getaffinity(0)))
        for bad in ("0", "-1", "x", "1.5", "", "2x"):
            self.assertRaises(ValueError, workerCount, bad)


def slotOfConnection(connection: str) -> int:
    """
    The worker slot a connection id says it came from.
    """
    found = re.fullmatch(r"(?:w(\d+)\.)?c\d+", connection)
    assert found, connection
    return int(found.group(1) or 0)


def slotsOf(records: list[dict[str, Any]]) -> set[int]:
    return {slotOfConnection(r["connection"]) for r in entries(records)}


def servingWorker(twistd: Twistd, slot: int) -> int:
    """
    The PID of the first worker started to serve C{slot} (not a standby).
    """
    found = waitFor(lambda: re.search(rf"started worker (\d+) in slot {slot}\b", twistd.text()),
                    f"slot {slot}'s worker")
    return int(found.group(1))


def keepAliveRequests(conn: http.client.HTTPConnection, originPort: int) -> list[int]:
    statuses = []
    for _ in range(KEEP_ALIVE_REQUESTS):
        conn.request("GET", f"http://origin.test:{originPort}/hello", headers={"X-Session": "kept"})
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)
    return statuses


def lastStarted(text: str, slot: int) -> int:
    """
    The PID of the last worker started in C{slot} (serving or standing by).
    """
    return int(re.findall(rf"started worker (\d+)(?: to stand by)? in slot {slot}\b", text)[-1])


def blockedRequests(ports: list[int], originPort: int) -> list[int]:
    """
    One request for C{/blocked} through each port, on a new connection; the
    statuses.
    """
    statuses = []
    for port in ports:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("GET", f"http://origin.test:{originPort}/blocked")
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
        finally:
            conn.close()
    return statuses


@pytest.mark.slow
class TwoWorkersTests(unittest.TestCase):
    """
    A supervised C{twistd netlog-standin --workers 2}.
    """

    timeout = 180

    @defer.inlineCallbacks
    def test_spreadAndKill(self) -> Any:
        """
        Four sessions made over the API go two to each slot (their
        connection ids say which worker wrote each log) and each log holds
        exactly its own traffic. A keep-alive connection through a slot 0
        session serves the same connection before and after slot 1's
        serving worker is killed with C{kill -9}; slot 1's sessions are
        served again within seconds by its standby, and the exchange left
        open there is ended as "the proxy restarted" in its own log only.
        Rules put on a slot 1 session are in force there and nowhere else; a
        deleted slot 1 session frees its place for the next one made; SIGTERM
        stops the workers of both slots.
        """
        origin, originPort = listenOrigin(self)
        folder = tempDirectory(self)
        log = os.path.join(folder, "network.jsonl")
        args = ["--workers", "2", "--listen", "tcp:0:interface=127.0.0.1", "--log", log, "--api", "tcp:0",
                "--state", folder, "--resolve-only", "--resolve", "origin.test=127.0.0.1",
                "--connect-ports", f"443,{originPort}"]
        for i in range(SESSIONS):
            args += ["--resolve", f"t{i}.test=127.0.0.1"]
        twistd = Twistd(folder, "netlog-standin", args)
        api = caller(os.path.join(folder, "api-token"))
        self.addCleanup(twistd.stop)
        yield inThread(twistd.waitServing, 2)
        apiBase = f"http://127.0.0.1:{twistd.apiPort()}"
        sessions = {}
        for i in range(SESSIONS):
            status, made = yield inThread(api, "POST", apiBase + "/sessions", {"name": f"task-{i}"})
            self.assertEqual(status, 201, made)
            sessions[f"task-{i}"] = made

        def driveAll(names: list[str]) -> defer.Deferred[Any]:
            return defer.gatherResults([
                inThread(drive, sessions[name]["port"], name, originPort, f"t{name[-1]}.test") for name in names
            ])

        names = sorted(sessions)
        results = yield driveAll(names)
        self.assertEqual(results, [[200] * (PLAIN_REQUESTS + 2)] * SESSIONS)
        slotOf = {}
        for name in names:
            records = readLog(sessions[name]["log"])
            checkLog(self, records)
            opened = entries(records)
            self.assertEqual(len(opened), PLAIN_REQUESTS + 1)
            for o in opened:
                if o["kind"] == "exchange":
                    self.assertIn(["X-Session", name], o["request"]["headers"])
            [slotOf[name]] = slotsOf(records)
        self.assertEqual(sorted(slotOf.values()), [0, 0, 1, 1], slotOf)
        kept = next(name for name in names if slotOf[name] == 0)
        killed = [name for name in names if slotOf[name] == 1]

        # A long-lived connection through a slot 0 session.
        conn = http.client.HTTPConnection("127.0.0.1", sessions[kept]["port"], timeout=10)
        self.addCleanup(conn.close)
        statuses = yield inThread(keepAliveRequests, conn, originPort)
        self.assertEqual(statuses, [200] * KEEP_ALIVE_REQUESTS)
        # An exchange left open in a slot 1 session when its worker dies.
        silentLog = sessions[killed[0]]["log"]
        before = len(readLog(silentLog))
        client = socket.create_connection(("127.0.0.1", sessions[killed[0]]["port"]), timeout=10)
        self.addCleanup(client.close)
        client.sendall(f"GET http://origin.test:{originPort}/silent HTTP/1.1\r\n"
                       f"Host: origin.test:{originPort}\r\n\r\n".encode())
        yield inThread(waitFor, lambda: len(readLog(silentLog)) == before + 1, "the open line of the silent request")

        main, victim = servingWorker(twistd, 0), servingWorker(twistd, 1)
        # Each slot has its standby built and waiting.
        yield inThread(waitFor, lambda: twistd.standingByCount() >= 2, "a standby in each slot")
        standby = int(re.search(r"started worker (\d+) to stand by in slot 1", twistd.text()).group(1))
        os.kill(victim, signal.SIGKILL)
        yield inThread(waitFor, lambda: not alive(victim), "slot 1's worker to die")
        statuses = yield inThread(keepAliveRequests, conn, originPort)
        self.assertEqual(statuses, [200] * KEEP_ALIVE_REQUESTS)
        self.assertTrue(alive(main))
        results = yield driveAll(killed)
        self.assertEqual(results, [[200] * (PLAIN_REQUESTS + 2)] * len(killed))
        took = re.search(rf"serving again, ([\d.]+) s after worker {victim} died", twistd.text())
        self.assertIsNotNone(took, twistd.text())
        self.assertLess(float(took.group(1)), TAKE_OVER)
        self.assertIn(f"worker {standby}, standing by, takes over", twistd.text())
        self.assertEqual(twistd.servingCount(), 3)

        keptRecords = readLog(sessions[kept]["log"])
        keptConnections = [o["connection"] for o in entries(keptRecords)
                           if ["X-Session", "kept"] in o["request"]["headers"]]
        self.assertEqual(len(keptConnections), 2 * KEEP_ALIVE_REQUESTS)
        self.assertEqual(len(set(keptConnections)), 1, keptConnections)
        for name in names:
            records = readLog(sessions[name]["log"])
            checkLog(self, records)
            self.assertEqual(slotsOf(records), {slotOf[name]})
            restarted = [r for r in records if r["type"] == "end"
                         and (r.get("_failed") or {}).get("reason") == "the proxy restarted"]
            if name == killed[0]:
                silent = [o["id"] for o in entries(records) if o["request"]["url"].endswith("/silent")]
                self.assertEqual([r["id"] for r in restarted], silent)
            else:
                self.assertEqual(restarted, [])
        self.assertEqual(readLog(log), [])

        # Rules for a slot 1 session reach its (new) worker, and only it.
        ruled = killed[1]
        status, answer = yield inThread(api, "PUT", sessions[ruled]["urls"]["session"] + "/rules",
                                        {"block": ["origin.test/blocked*"]})
        self.assertEqual(status, 200, answer)
        statuses = yield inThread(blockedRequests, [sessions[name]["port"] for name in (ruled, kept)], originPort)
        # The kept session's request reaches the origin, which knows no /blocked.
        self.assertEqual(statuses, [403, 404])
        [blocked] = [o for o in entries(readLog(sessions[ruled]["log"])) if o["request"]["url"].endswith("/blocked")]
        self.assertEqual(blocked["_rules"], [{"rule": "block[0]", "action": "blocked"}])

        # A deleted slot 1 session frees its place: the next one made goes
        # there (slot 0 has the kept connection open, and as many sessions).
        status, deleted = yield inThread(api, "DELETE", sessions[killed[0]]["urls"]["session"])
        self.assertEqual(status, 200, deleted)
        status, late = yield inThread(api, "POST", apiBase + "/sessions", {"name": "late"})
        self.assertEqual(status, 201, late)
        statuses = yield inThread(blockedRequests, [late["port"]], originPort)
        self.assertEqual(statuses, [404])
        self.assertEqual(slotsOf(readLog(late["log"])), {1})

        # A graceful stop stops every slot.
        workers = twistd.workers()
        twistd.process.send_signal(signal.SIGTERM)
        # twistd, once cleanly shut down, ends itself by the signal it got.
        self.assertEqual((yield inThread(twistd.wait)), -signal.SIGTERM)
        text = twistd.text()
        for pid in workers:
            self.assertFalse(alive(pid), pid)
        for slot in (0, 1):
            self.assertRegex(text, rf"worker {lastStarted(text, slot)} stopped \(exited with 0\)")
        for name in names + ["late"]:
            path = late["log"] if name == "late" else sessions[name]["log"]
            checkLog(self, readLog(path))


#: Quick kills of one slot's worker in the kill storm test.
STORM = 6


@pytest.mark.slow
class SlotFaultTests(SynchronousTestCase):
    """
    The restart policy counts each slot's deaths on their own.
    """

    def start(self, *extra: str) -> Twistd:
        folder = tempDirectory(self)
        twistd = Twistd(folder, "netlog-standin", [
            "--workers", "2", "--log", os.path.join(folder, "network.jsonl"),
            "--listen", "tcp:0:interface=127.0.0.1", "--resolve-only", "--resolve", "origin.test=127.0.0.1",
            "--state", folder, *extra])
        self.addCleanup(twistd.stop)
        return twistd

    def test_stormInOneSlot(self) -> None:
        """
        Slot 1's worker killed six times in quick succession: slot 1's
        delays grow (the sixth quick death waits 4 s) and it serves again,
        while slot 0's worker, which serves the main listener, is never
        touched and answers throughout.
        """
        twistd = self.start()
        port = twistd.listenerPort("forward")
        main = twistd.waitServing(1, 0)
        killServing(twistd, STORM, 1)
        # Slot 1 waits its 4 s; slot 0 answers at once.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            client.sendall(b"GET http://elsewhere.test/ HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n")
            self.assertTrue(client.recv(4096).startswith(b"HTTP/1.1 "))
        twistd.waitServing(STORM + 1, 1)
        text = twistd.text()
        self.assertRegex(text, rf"#error\] worker \d+ in slot 1 died \(killed by SIGKILL\) after [0-9.]+ s, "
                               rf"{STORM} quick deaths in a row; starting another in 4 s")
        self.assertNotIn("in slot 0 died", text)
        self.assertNotIn("giving up", text)
        self.assertTrue(alive(main))
        self.assertEqual(twistd.waitServing(1, 0), main)

    def test_outOfFilesInOneSlot(self) -> None:
        """
        Slot 1's worker killed while the supervisor has no descriptor left:
        starting its replacement fails, is logged for slot 1 and tried
        again, while slot 0's worker serves the main listener throughout;
        once descriptors are free again, slot 1 serves again.
        """
        from netlog.api.service import MAX_API_CONNECTIONS
        from tests.supervise.test_faults import FAILED_STARTS, LOW_LIMIT, SPARE_FDS

        folder = tempDirectory(self)
        twistd = Twistd(folder, "netlog-standin", [
            "--workers", "2", "--no-standby", "--log", os.path.join(folder, "network.jsonl"),
            "--listen", "tcp:0:interface=127.0.0.1", "--resolve-only", "--resolve", "origin.test=127.0.0.1",
            "--state", folder, "--api", "tcp:0", "--api-idle-timeout", "300"], openFiles=(LOW_LIMIT, LOW_LIMIT))
        self.addCleanup(twistd.stop)
        apiPort, port = twistd.apiPort(), twistd.listenerPort("forward")
        main, victim = twistd.waitServing(1, 0), twistd.waitServing(1, 1)
        held = []
        self.addCleanup(lambda: [s.close() for s in held])
        for _ in range(MAX_API_CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", apiPort), timeout=10)
            held.append(s)
            s.sendall(f"GET /network HTTP/1.1\r\nHost: 127.0.0.1:{apiPort}\r\n\r\n".encode())
            self.assertTrue(s.recv(12).startswith(b"HTTP/1.1 200"))
        pid = twistd.process.pid
        tight = len(os.listdir(f"/proc/{pid}/fd")) + SPARE_FDS
        import resource

        resource.prlimit(pid, resource.RLIMIT_NOFILE, (tight, tight))
        os.kill(victim, signal.SIGKILL)
        failed = (r"#error\] could not start a worker in slot 1 \(Too many open files\); nobody serves its "
                  r"listeners; trying again in [0-9.]+ s")
        waitFor(lambda: len(re.findall(failed, twistd.text())) >= FAILED_STARTS, "failed starts, logged")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            client.sendall(b"GET http://elsewhere.test/ HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n")
            self.assertTrue(client.recv(4096).startswith(b"HTTP/1.1 "))
        self.assertTrue(alive(main))
        for s in held:
            s.close()
        second = twistd.waitServing(2, 1)
        self.assertRegex(twistd.text(), rf"worker {second} serving again, [0-9.]+ s after worker {victim} died in slot 1")
        self.assertEqual(twistd.waitServing(1, 0), main)
        self.assertNotIn("in slot 0 died", twistd.text())

    def test_giveUpInOneSlot(self) -> None:
        """
        With --give-up-after 3, three quick deaths in slot 1 stop the whole
        proxy with status 70 (a proxy that can't serve some of its sessions
        is failed), every worker of both slots gone; the line says which
        slot's worker gave out.
        """
        twistd = self.start("--give-up-after", "3")
        twistd.waitServing(1, 0)
        killed = killServing(twistd, 3, 1)
        self.assertEqual(twistd.wait(), 70)
        self.assertRegex(twistd.text(), rf"worker {killed[-1]} in slot 1 died \(killed by SIGKILL\) after "
                                        r"[0-9.]+ s; that is 3 quick deaths in a row: giving up")
        for pid in twistd.workers():
            self.assertFalse(alive(pid), pid)


@pytest.mark.slow
class SiteProxyWorkersTests(SynchronousTestCase):
    """
    The site proxy with C{--workers 2}: a worker of slot 1 decrypts too.
    """

    def test_sessionsInBothSlotsDecrypt(self) -> None:
        """
        Two sessions fixed at start go one to each slot; a CONNECT to the
        site through each is decrypted with netlog's CA and answered by the
        backend, and logged in that session's log with that slot's ids; the
        main log, slot 0's, holds nothing.
        """
        import ssl
        import threading

        from tests.site.test_process import _Backend, _Server, readHead

        backend = _Server(("127.0.0.1", 0), _Backend)
        threading.Thread(target=backend.serve_forever, daemon=True).start()
        self.addCleanup(backend.server_close)
        self.addCleanup(backend.shutdown)
        folder = tempDirectory(self)
        sites = os.path.join(folder, "sites.toml")
        with open(sites, "w") as f:
            f.write(f'[[site]]\nname = "shop"\norigins = ["https://shop.test"]\n'
                    f'backend = "http://127.0.0.1:{backend.server_address[1]}"\n')
        log, state = os.path.join(folder, "network.jsonl"), os.path.join(folder, "state")
        twistd = Twistd(folder, "netlog-proxy", [
            "--workers", "2", "--sites", sites, "--listen", "tcp:0:interface=127.0.0.1", "--log", log,
            "--state", state, "--resolve", "shop.test=127.0.0.1", "--resolve-only",
            "--session", "a=0", "--session", "b=0"])
        self.addCleanup(twistd.stop)
        twistd.waitServing(2)
        context = ssl.create_default_context(cafile=os.path.join(state, "ca.pem"))
        for name, slot in (("a", 0), ("b", 1)):
            found = re.search(rf"session {name} listens on IPv4Address\([^)]*port=(\d+)\), logs to (\S+) in slot {slot}",
                              twistd.text())
            self.assertIsNotNone(found, twistd.text())
            sock = socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=10)
            self.addCleanup(sock.close)
            sock.sendall(b"CONNECT shop.test:443 HTTP/1.1\r\nHost: shop.test:443\r\n\r\n")
            self.assertTrue(readHead(sock).startswith(b"HTTP/1.1 200"))
            tls = context.wrap_socket(sock, server_hostname="shop.test")
            tls.sendall(b"GET /hi HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n")
            answer = b""
            while data := tls.recv(65536):
                answer += data
            self.assertTrue(answer.endswith(b"\r\n\r\nok"), answer)
            sessionLog = found.group(2).rstrip(",")
            records = waitFor(lambda: [r for r in readLog(sessionLog) if r["type"] == "end"] and readLog(sessionLog),
                              f"session {name}'s exchange to end")
            checkLog(self, records)
            [opened] = entries(records)
            self.assertEqual(opened["request"]["url"], "https://shop.test/hi")
            self.assertEqual(slotOfConnection(opened["connection"]), slot)
        self.assertEqual(readLog(log), [])


#: Sessions in the burst test, half in each slot.
BURST_SESSIONS = 8
#: Requests each session's client sends in the burst.
BURST_REQUESTS = 200
#: Requests each client has had answered when slot 1's worker is killed.
KILL_AFTER = 50
#: Tries of one request in a slot 1 session, the one cut by the kill among them.
TRIES = 3
#: Seconds a burst client may take at most.
WAIT_BURST = 60.0


class _Hello(http.server.BaseHTTPRequestHandler):
    """
    An origin that answers every GET with a short C{200}, keep-alive.
    """

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, format: str, *args: Any) -> None:
        pass


def listenOriginThread(testCase: SynchronousTestCase) -> int:
    """
    Start a L{_Hello} origin on loopback in a thread; its port. Stopped at
    the test's end.
    """
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    testCase.addCleanup(server.server_close)
    testCase.addCleanup(server.shutdown)
    return server.server_address[1]


class BurstClient(threading.Thread):
    """
    One session's client: L{BURST_REQUESTS} keep-alive GETs, each tried
    again (on a new connection) when it fails, up to L{TRIES} times.
    """

    def __init__(self, port: int, name: str, originPort: int) -> None:
        threading.Thread.__init__(self, daemon=True)
        self.port, self.name, self.originPort = port, name, originPort
        self.answered = 0
        self.errors: list[str] = []

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        for _ in range(BURST_REQUESTS):
            for _ in range(TRIES):
                try:
                    conn.request("GET", f"http://origin.test:{self.originPort}/hello",
                                 headers={"X-Session": self.name})
                    response = conn.getresponse()
                    response.read()
                    if response.status == 200:
                        self.answered += 1
                        break
                    self.errors.append(f"status {response.status}")
                except (OSError, http.client.HTTPException) as e:
                    self.errors.append(repr(e))
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.close()


@pytest.mark.slow
class BurstKillTests(SynchronousTestCase):
    def test_killMidBurst(self) -> None:
        """
        Eight sessions, four in each slot, each sent a burst of keep-alive
        requests; slot 1's serving worker is killed with C{kill -9} in the
        middle: slot 0's sessions see no error at all, slot 1's are all
        answered in the end (a request cut by the kill asked again), and
        every log is whole: numbers without gap, no cut line, every open
        ended, the restart's ends in slot 1's logs only.
        """
        originPort = listenOriginThread(self)
        folder = tempDirectory(self)
        args = ["--workers", "2", "--listen", "tcp:0:interface=127.0.0.1",
                "--log", os.path.join(folder, "network.jsonl"), "--api", "tcp:0", "--state", folder,
                "--resolve-only", "--resolve", "origin.test=127.0.0.1", "--connect-ports", str(originPort)]
        twistd = Twistd(folder, "netlog-standin", args)
        self.addCleanup(twistd.stop)
        api = caller(os.path.join(folder, "api-token"))
        twistd.waitServing(2)
        apiBase = f"http://127.0.0.1:{twistd.apiPort()}"
        sessions = {}
        for i in range(BURST_SESSIONS):
            status, made = api("POST", apiBase + "/sessions", {"name": f"burst-{i}"})
            self.assertEqual(status, 201, made)
            sessions[made["name"]] = made
        slotOf = {name: int(re.search(rf"session {name} listens on .* in slot (\d)", twistd.text()).group(1))
                  for name in sessions}
        self.assertEqual(sorted(slotOf.values()), [0] * (BURST_SESSIONS // 2) + [1] * (BURST_SESSIONS // 2))
        waitFor(lambda: twistd.standingByCount() >= 2, "a standby in each slot")
        victim = servingWorker(twistd, 1)
        clients = [BurstClient(made["port"], name, originPort) for name, made in sessions.items()]
        for client in clients:
            client.start()
        waitFor(lambda: all(c.answered >= KILL_AFTER for c in clients) or not any(c.is_alive() for c in clients),
                "every client well into its burst")
        os.kill(victim, signal.SIGKILL)
        # In the middle of the burst: slot 1's clients were not done.
        self.assertTrue([c for c in clients if slotOf[c.name] == 1 and c.answered < BURST_REQUESTS])
        for client in clients:
            client.join(WAIT_BURST)
            self.assertFalse(client.is_alive(), client.name)
        for client in clients:
            if slotOf[client.name] == 0:
                self.assertEqual(client.errors, [], client.name)
            self.assertEqual(client.answered, BURST_REQUESTS, (client.name, client.errors))
        self.assertFalse(alive(victim))
        for name, made in sessions.items():
            records = readLog(made["log"])
            checkLog(self, records)
            self.assertEqual(slotsOf(records), {slotOf[name]})
            restarted = [r for r in records if (r.get("_failed") or {}).get("reason") == "the proxy restarted"]
            if slotOf[name] == 0:
                self.assertEqual(restarted, [])
                self.assertEqual(len(entries(records)), BURST_REQUESTS)
            else:
                self.assertGreaterEqual(len(entries(records)), BURST_REQUESTS)


#: Browser connections held open through one session in the placement test.
HELD_CONNECTIONS = 3


@pytest.mark.slow
class PlacementTests(SynchronousTestCase):
    def test_busierSlotGetsNoNewSession(self) -> None:
        """
        With slot 0 holding more sessions but slot 1 more open connections
        (as its worker's heartbeat says), a new session goes to slot 0.
        """
        import time

        from netlog.supervise.worker import HEARTBEAT_INTERVAL

        originPort = listenOriginThread(self)
        folder = tempDirectory(self)
        twistd = Twistd(folder, "netlog-standin", [
            "--workers", "2", "--no-standby", "--listen", "tcp:0:interface=127.0.0.1",
            "--log", os.path.join(folder, "network.jsonl"), "--api", "tcp:0", "--state", folder,
            "--resolve-only", "--resolve", "origin.test=127.0.0.1", "--connect-ports", str(originPort)])
        self.addCleanup(twistd.stop)
        api = caller(os.path.join(folder, "api-token"))
        twistd.waitServing(2)
        apiBase = f"http://127.0.0.1:{twistd.apiPort()}"

        def make(name: str) -> tuple[dict[str, Any], int]:
            status, made = api("POST", apiBase + "/sessions", {"name": name})
            self.assertEqual(status, 201, made)
            found = re.search(rf"session {name} listens on .* in slot (\d)", twistd.text())
            return made, int(found.group(1))

        self.assertEqual([make(name)[1] for name in ("s0", "s1", "s2")], [0, 1, 0])
        status, listed = api("GET", apiBase + "/sessions")
        s1 = next(s for s in listed["sessions"] if s["name"] == "s1")
        held = []
        self.addCleanup(lambda: [c.close() for c in held])
        for _ in range(HELD_CONNECTIONS):
            conn = http.client.HTTPConnection("127.0.0.1", s1["port"], timeout=10)
            conn.request("GET", f"http://origin.test:{originPort}/hello")
            conn.getresponse().read()
            held.append(conn)
        # Long enough for two heartbeats to say so.
        time.sleep(2.5 * HEARTBEAT_INTERVAL)
        self.assertEqual(make("s3")[1], 0)
        for conn in held:
            conn.close()
