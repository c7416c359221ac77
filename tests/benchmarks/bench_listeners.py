"""What a flood of the metrics port costs the extender verbs, on ``cellfit serve`` over real
sockets: the process's resident memory under a header flood, and filter latency while the
metrics port is flooded with connections, each against the same process unflooded.

Phases, one server process (``cellfit serve --standalone``, metrics listener on, the default
limits unless the source has none), its file descriptor limit set to ``--server-nofile``:

* ``quiet``: filter calls, each on a new connection (as after kube-scheduler's idle timeout),
  nothing else;
* ``header flood``: the same while ``--header-clients`` connections each send
  ``--header-mib`` MiB of one header to the metrics port (again and again when cut off); the
  process's peak RSS is sampled meanwhile;
* ``connection flood``: the same while ``--connections`` connections are opened to the metrics
  port and held (the ones cellfit closes are opened again);
* ``costly bodies``: the same while another client posts 8 MiB filters of full Nodes in a loop.

Latency is p50/p99 of the filter calls in each phase and failures (no answer, refused, not
200); ``x quiet`` is the ratio to the quiet phase of the same run. ``--source DIR`` runs the
cellfit of another checkout (a worktree of an older commit, for a before/after comparison).

    python tests/benchmarks/bench_listeners.py [--seconds 10] [--connections 6000] [--source DIR]

This prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support import kube_objects as k  # noqa: E402

FILTER = "/v1/extender/filter"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(source: Path, port: int, metrics_port: int, nofile: int, workdir: Path) -> subprocess.Popen[bytes]:
    config = workdir / "cellfit.yaml"
    config.write_text(
        f"server: {{port: {port}, metricsHost: 127.0.0.1, metricsPort: {metrics_port}, maxRequestBytes: 16777216}}\n"
        "logging: {format: json}\n"
    )
    log = (workdir / "cellfit.log").open("w")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    process = subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", "serve", "--standalone", "--config", str(config)],
        cwd=source, stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit,
        env={**os.environ, "PYTHONPATH": str(source)},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/readyz")
            if connection.getresponse().status == 200:
                return process
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"cellfit did not start: {(workdir / 'cellfit.log').read_text()[-2000:]}")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _filter_calls(port: int, seconds: float, body: bytes) -> tuple[list[float], int]:
    """Filter calls for ``seconds``, each on a new connection: latencies (s) and failures."""
    latencies: list[float] = []
    failures = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        started = time.perf_counter()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("POST", FILTER, body=body, headers={"Content-Type": "application/json", "Connection": "close"})
            response = connection.getresponse()
            response.read()
            connection.close()
            if response.status != 200:
                failures += 1
                continue
        except OSError:
            failures += 1
            time.sleep(0.01)
            continue
        latencies.append(time.perf_counter() - started)
        time.sleep(0.002)
    return latencies, failures


def _header_flood(port: int, mib: int, stop: Any) -> None:  # a process of its own
    chunk = b"a" * 65536
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: cellfit\r\nX-Flood: ")
                for _ in range(mib * 16):
                    if stop.is_set():
                        return
                    sock.sendall(chunk)
        except OSError:
            time.sleep(0.01)


def _connection_flood(port: int, connections: int, stop: Any) -> None:  # a process of its own
    resource.setrlimit(resource.RLIMIT_NOFILE, (connections + 256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    held: list[socket.socket] = []
    while not stop.is_set():
        alive = []
        for sock in held:  # keep those cellfit still holds
            try:
                sock.setblocking(False)
                if sock.recv(1) == b"":
                    sock.close()
                    continue
            except BlockingIOError:
                alive.append(sock)
                continue
            except OSError:
                sock.close()
                continue
            sock.close()
        held = alive
        while len(held) < connections and not stop.is_set():
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                time.sleep(0.01)
                break
        time.sleep(0.05)
    for sock in held:
        sock.close()


def _costly_bodies(port: int, stop: Any) -> None:  # a process of its own
    node = k.node("gpu-x", gpus=8)
    count = 8 * 2**20 // len(k.dumps(node))
    body = k.dumps(k.extender_args(k.pod("big-0", gpus=1), [k.node(f"n-{i}", gpus=8) for i in range(count)], node_cache_capable=False))
    while not stop.is_set():
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("POST", FILTER, body=body, headers={"Content-Type": "application/json"})
            connection.getresponse().read()
            connection.close()
        except OSError:
            time.sleep(0.05)


def _phase(name: str, port: int, pid: int, seconds: float, body: bytes, flood: Any = None, args: tuple = ()) -> dict[str, Any]:
    stop = multiprocessing.Event()
    floods = []
    if flood is not None:
        floods = [multiprocessing.Process(target=flood, args=(*args, stop), daemon=True) for _ in range(1)]
        for process in floods:
            process.start()
        time.sleep(2)  # let the flood build up
    peak = _rss_mib(pid)
    sampling = True

    def sample() -> None:
        nonlocal peak
        while sampling:
            try:
                peak = max(peak, _rss_mib(pid))
            except OSError:
                return
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    latencies, failures = _filter_calls(port, seconds, body)
    sampling = False
    sampler.join()
    stop.set()
    for process in floods:
        process.join(10)
        if process.is_alive():
            process.kill()
    latencies.sort()
    return {
        "phase": name,
        "calls": len(latencies),
        "failures": failures,
        "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))] if latencies else float("nan"),
        "peak_rss_mib": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="filter calls per phase, seconds")
    parser.add_argument("--connections", type=int, default=6000, help="connections the flood holds")
    parser.add_argument("--header-mib", type=int, default=1024, help="MiB of header per flood connection")
    parser.add_argument("--server-nofile", type=int, default=4096, help="cellfit's RLIMIT_NOFILE")
    parser.add_argument("--source", type=Path, default=ROOT, help="checkout whose cellfit runs")
    options = parser.parse_args()

    port, metrics_port = _free_port(), _free_port()
    body = k.dumps(k.extender_args(k.pod("train-0", gpus=1), [k.node("gpu-a", gpus=8)], node_cache_capable=False))
    with tempfile.TemporaryDirectory() as workdir:
        server = _start(options.source.resolve(), port, metrics_port, options.server_nofile, Path(workdir))
        try:
            rows = [
                _phase("quiet", port, server.pid, options.seconds, body),
                _phase("header flood", port, server.pid, options.seconds, body, _header_flood, (metrics_port, options.header_mib)),
                _phase("connection flood", port, server.pid, options.seconds, body, _connection_flood, (metrics_port, options.connections)),
                _phase("costly bodies", port, server.pid, options.seconds, body, _costly_bodies, (port,)),
            ]
            alive = server.poll() is None
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
        log_bytes = (Path(workdir) / "cellfit.log").stat().st_size
    quiet = rows[0]
    print(f"cellfit from {options.source}, RLIMIT_NOFILE {options.server_nofile}, {options.seconds:g} s per phase, "
          f"filter on a new connection per call")
    print(f"{'phase':<18}{'calls':>7}{'failed':>8}{'p50 ms':>9}{'p99 ms':>9}{'p99 x quiet':>13}{'peak RSS MiB':>14}")
    for row in rows:
        print(f"{row['phase']:<18}{row['calls']:>7}{row['failures']:>8}{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}"
              f"{row['p99_ms'] / quiet['p99_ms']:>13.1f}{row['peak_rss_mib']:>14.0f}")
    print(f"server alive at the end: {alive}; log written: {log_bytes / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
