"""
What a WebSocket message costs the site proxy: 10,000 small messages each
way (a client sends, an echo origin answers each) through C{twistd
netlog-proxy} logging every message as a line, against the same proxy with
C{--no-log} (which only counts frames), on plain C{ws://} through the
forward port.

It prints, per target, the wall time and the proxy's CPU time (user +
system, from C{/proc/PID/stat}) per message relayed (20,000 per round),
median over the rounds, and the logged proxy's extra CPU per message.

Run from the repository: C{.venv/bin/python -m benchmarks.bench_websocket}
(C{--rounds 5}, C{--messages 10000}, C{--size 64}, C{--deflate} to have
the origin agree to permessage-deflate).
"""

from __future__ import annotations

import argparse
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Message, Request, TextMessage
from wsproto.extensions import PerMessageDeflate

from benchmarks.bench_site import siteArgv
from benchmarks.harness import HOST, Environment, ProcessTarget, cpuSeconds, freePort, sourceEnv, waitListening

#: Messages the client keeps in flight before it waits for echoes.
WINDOW = 64
#: Seconds a socket read may wait before the run gives up.
READ_TIMEOUT = 30.0


def serve(port: int, deflate: bool) -> None:
    """
    The echo origin: each whole message sent back once (one thread per
    connection: the benchmark opens one at a time).
    """
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    while True:
        conn, _ = listener.accept()
        conn.settimeout(READ_TIMEOUT * 4)
        ws = WSConnection(ConnectionType.SERVER)
        try:
            while True:
                data = conn.recv(262144)
                if not data:
                    break
                ws.receive_data(data)
                out = bytearray()
                closing = False
                for event in ws.events():
                    if isinstance(event, Request):
                        out += ws.send(AcceptConnection(extensions=[PerMessageDeflate()] if deflate else []))
                    elif isinstance(event, Message):
                        out += ws.send(TextMessage(data=event.data) if isinstance(event.data, str)
                                       else event)  # type: ignore[arg-type]
                    elif isinstance(event, CloseConnection):
                        out += ws.send(event.response())
                        closing = True
                if out:
                    conn.sendall(out)
                if closing:
                    break
        except OSError:
            pass
        finally:
            conn.close()


def relay(proxyPort: int, originPort: int, messages: int, size: int) -> float:
    """
    One WebSocket through the proxy: C{messages} sent, each echoed; the
    wall time.
    """
    sock = socket.create_connection(("127.0.0.1", proxyPort), timeout=READ_TIMEOUT)
    ws = WSConnection(ConnectionType.CLIENT)
    sock.sendall(ws.send(Request(host=f"{HOST}:{originPort}", target=f"http://{HOST}:{originPort}/ws",
                                 extensions=[PerMessageDeflate()])))
    text = "m" * size
    started = time.perf_counter()
    sent = received = 0
    accepted = False
    while received < messages:
        if accepted and sent < messages and sent - received < WINDOW:
            batch = bytearray()
            while sent < messages and sent - received < WINDOW:
                batch += ws.send(TextMessage(data=text))
                sent += 1
            sock.sendall(batch)
        data = sock.recv(262144)
        if not data:
            raise SystemExit("the proxy closed the WebSocket")
        ws.receive_data(data)
        for event in ws.events():
            if isinstance(event, AcceptConnection):
                accepted = True
            elif isinstance(event, Message) and event.message_finished:
                received += 1
    elapsed = time.perf_counter() - started
    sock.sendall(ws.send(CloseConnection(code=1000)))
    for _ in range(100):
        if not sock.recv(65536):
            break
    sock.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--deflate", action="store_true")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.deflate)
        return
    with tempfile.TemporaryDirectory() as directory:
        originPort = freePort()
        origin = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_websocket", "--serve", str(originPort)]
            + (["--deflate"] if args.deflate else []),
            env=sourceEnv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        env = Environment(directory, originPort, originPort, "", ssl.create_default_context())

        def unlogged(env: Environment, port: int) -> list[str]:
            argv = siteArgv(env, port)
            at = argv.index("--log")
            return argv[:at] + ["--no-log"] + argv[at + 2:]

        targets = [ProcessTarget("site, logged", argv=siteArgv), ProcessTarget("site, --no-log", argv=unlogged)]
        results: dict[str, list[tuple[float, float]]] = {t.name: [] for t in targets}
        try:
            waitListening(originPort, origin, "the echo origin")
            for target in targets:
                target.start(env)
            for _ in range(args.rounds):
                for target in targets:
                    before = cpuSeconds(target.pid) or 0.0
                    assert target.proxyPort is not None
                    wall = relay(target.proxyPort, originPort, args.messages, args.size)
                    time.sleep(0.2)  # the close and the end line
                    cpu = (cpuSeconds(target.pid) or 0.0) - before
                    results[target.name].append((wall, cpu))
        finally:
            for target in targets:
                target.stop()
            origin.terminate()
            origin.wait()
        relayed = 2 * args.messages
        print(f"{args.messages:,} messages of {args.size} bytes each way "
              f"({'permessage-deflate' if args.deflate else 'uncompressed'}), "
              f"median of {args.rounds} rounds\n")
        print("| target | wall (s) | proxy CPU (s) | CPU per message (µs) |")
        print("|---|---|---|---|")
        perMessage = {}
        for name, runs in results.items():
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            perMessage[name] = cpu / relayed * 1e6
            print(f"| {name} | {wall:.2f} | {cpu:.2f} | {perMessage[name]:.1f} |")
        logged, bare = perMessage["site, logged"], perMessage["site, --no-log"]
        print(f"\nlogging each message costs {logged - bare:.1f} µs of CPU per message "
              f"({logged / bare if bare else float('nan'):.2f}x)")


if __name__ == "__main__":
    main()
