"""What a connection costs the extender's listener: the event loop's CPU per request on one
kept-alive connection, and per request on a connection of its own (opened, one request
answered, closed by the client), as kube-scheduler's client does for ~0.37 of its calls per pod
in a burst (Go keeps 2 idle connections per host; tests/benchmarks/bench_extender_burst.py's
``dials_per_pod``). The difference is the connection's cost.

The listener is tests/extender/test_listener_verbs.py's (``BoundedServer`` and
``BoundedHttpProtocol`` on uvloop, a trivial filter verb) in a thread of this process, its
thread's CPU read from /proc; the client runs in another process, so it spends none of it.

``protocol_request_us`` and ``protocol_connection_us``: the Python the protocol and
``VerbDispatch`` run for the same request, without the system calls and wake-ups around it
(``BoundedHttpProtocol`` fed the request in process, its answer written to a transport that
keeps it, the thread's CPU clock: a resolution of nanoseconds where /proc's is ticks): per
request on a kept-alive connection, and what a connection adds (made, one request, lost).

Each ``--source`` checkout is measured in turn, alternating (ABBA), in a process of its own;
the medians and their ratios to the first source are printed:

    python tests/benchmarks/bench_listener_connections.py [--requests 3000] [--runs 4] [--source DIR ...]

This prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BODY = b'{"Pod":{}}'
# kube-scheduler's extender request as Go's client writes it (header names and order).
REQUEST = (
    b"POST /v1/extender/filter HTTP/1.1\r\nHost: cellfit\r\nUser-Agent: Go-http-client/1.1\r\n"
    b"Content-Length: %d\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n%s" % (len(BODY), BODY)
)
CLIENT = """
import socket, sys
request, port, count, fresh = eval(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
sock = None
for _ in range(count):
    if sock is None or fresh:
        if sock is not None:
            sock.close()
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(request)
    answer = b""
    while not answer.endswith(b'"Error":""}'):
        answer += sock.recv(65536)
sock.close()
"""


class Transport(asyncio.Transport):
    """A connection's transport in process: what is written is kept (``written``)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []

    def write(self, data: Any) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8888), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def measure(*, requests: int, repeats: int) -> dict[str, float]:
    """µs of the listener thread's CPU per request, kept-alive and on a fresh connection (medians
    of ``repeats``, the two interleaved)."""
    from tests.extender.test_listener_verbs import Listener

    ticks = os.sysconf("SC_CLK_TCK")

    def cpu(tid: int) -> float:
        fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    spent: dict[bool, list[float]] = {False: [], True: []}
    with Listener() as listener:
        tid = listener.thread.native_id
        assert tid is not None
        for _ in range(repeats):
            for fresh in (False, True):
                before = cpu(tid)
                subprocess.run([sys.executable, "-c", CLIENT, repr(REQUEST), str(listener.port), str(requests), "1" if fresh else "0"],
                               check=True)
                time.sleep(0.3)  # the last connection's close handled
                spent[fresh].append((cpu(tid) - before) / requests * 1e6)
    kept, opened = statistics.median(spent[False]), statistics.median(spent[True])
    return {"kept_alive_us": kept, "new_connection_us": opened, "connection_us": opened - kept}


async def protocol_cpu(*, requests: int, repeats: int) -> dict[str, float]:
    """µs of this thread's CPU the protocol spends per request fed in process, kept-alive, and
    what a connection adds (medians of ``repeats``)."""
    from fastapi import FastAPI
    from uvicorn.server import ServerState

    from scheduler.config import ListenerLimits
    from scheduler.extender.dispatch import VerbDispatch, VerbRoute
    from scheduler.extender.listeners import BoundedHttpProtocol, ListenerConfig
    from scheduler.extender.service import Answer

    answer = Answer(200, b'{"NodeNames":["gpu-a"],"Error":""}')
    route = VerbRoute(handler=lambda body: answer, observe_seconds=lambda _: None, count_rejected=lambda: None, count_failed=lambda: None)
    app = VerbDispatch(api=FastAPI(), routes={"/v1/extender/filter": route}, max_request_bytes=1 << 20)
    config = ListenerConfig(
        app, limits=ListenerLimits(), setting="server.extenderListener", host="127.0.0.1", port=8888, lifespan="off", log_config=None, access_log=False
    )
    config.load()
    state = ServerState()
    connections = max(requests // 10, 1)
    per_request, per_connection = [], []
    for _ in range(repeats):
        kept = BoundedHttpProtocol(config=config, server_state=state, app_state={})
        kept.connection_made(Transport())  # its answers kept: a list's appends, the same for every source
        started = time.thread_time()
        for _ in range(requests):
            kept.data_received(REQUEST)
        per_request.append((time.thread_time() - started) / requests * 1e6)
        started = time.thread_time()
        for _ in range(connections):
            protocol = BoundedHttpProtocol(config=config, server_state=state, app_state={})
            protocol.connection_made(Transport())
            protocol.data_received(REQUEST)
            protocol.connection_lost(None)
        per_connection.append((time.thread_time() - started) / connections * 1e6 - per_request[-1])
    return {"protocol_request_us": statistics.median(per_request), "protocol_connection_us": statistics.median(per_connection)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000, help="requests per measurement")
    parser.add_argument("--repeats", type=int, default=4, help="measurements per run, kept-alive and fresh interleaved")
    parser.add_argument("--runs", type=int, default=2, help="runs per source, ABBA")
    parser.add_argument("--source", type=Path, action="append", help="checkout to measure (default: this one)")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        import uvloop

        in_process = uvloop.run(protocol_cpu(requests=args.requests, repeats=4 * args.repeats))
        print(repr({**measure(requests=args.requests, repeats=args.repeats), **in_process}))
        return
    sources = [path.resolve() for path in (args.source or [ROOT])]
    results: dict[Path, list[dict[str, float]]] = {source: [] for source in sources}
    for run in range(args.runs):
        for source in sources if run % 2 == 0 else sources[::-1]:
            env = {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{ROOT}"}
            finished = subprocess.run([sys.executable, __file__, "--inner", "--requests", str(args.requests),
                                       "--repeats", str(args.repeats)], env=env, cwd=source, check=True,
                                      capture_output=True, text=True)
            figures = eval(finished.stdout.strip().splitlines()[-1])  # noqa: S307 - our own child's repr of floats
            results[source].append(figures)
            print(f"run {run} {source}: " + ", ".join(f"{key} {value:.1f}" for key, value in figures.items()), flush=True)
    first = {key: statistics.median(r[key] for r in results[sources[0]]) for key in results[sources[0]][0]}
    print(f"\nmedians over {args.runs} runs, load average {os.getloadavg()[0]:.1f}")
    for source, runs in results.items():
        medians = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        print(f"{source}: " + ", ".join(f"{key} {value:.1f} (x first {value / first[key]:.2f})" for key, value in medians.items()))


if __name__ == "__main__":
    main()
