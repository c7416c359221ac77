"""Every listener bounds what its clients may hold (server.extenderListener, metricsListener,
admissionListener), each apart from the others: proven on ``cellfit serve`` over real sockets.

A header flood is refused before it is buffered (the process does not grow with it), a
connection beyond the cap is closed at once while the extender verbs go on answering, even with
the process's file descriptor limit far below the number of connections thrown at it, idle and
slow connections are cut by their timers, TLS handshakes are counted and timed too, and a flood
of bad requests writes a bounded log that says how much it held back."""

from __future__ import annotations

import json
import resource
import selectors
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.integration.test_metrics_listener import ROOT
from tests.support.ports import free_port
from tests.support import kube_objects as k
from tests.support.tls import make_serving_certificate

FILTER = "/v1/extender/filter"
FILTER_BODY = k.dumps(k.extender_args(k.pod("train-0", gpus=1), [k.node("gpu-a", gpus=8)], node_cache_capable=False))

pytestmark = pytest.mark.slow


class Served:
    """A ``cellfit serve --standalone`` process, its ports and its log file."""

    def __init__(self, tmp_path: Path, server: str, *, admission: str = "", nofile: int | None = None) -> None:
        self.port, self.metrics_port, self.admission_port = free_port(), free_port(), free_port()
        config = tmp_path / "cellfit.yaml"
        config.write_text(
            f"server: {{port: {self.port}, metricsHost: 127.0.0.1, metricsPort: {self.metrics_port}{', ' + server if server else ''}}}\n"
            "logging: {format: json}\n"
            + (f"admission: {{enabled: true, host: 127.0.0.1, port: {self.admission_port}, {admission}}}\n" if admission else "")
        )
        self.log = tmp_path / "cellfit.log"
        # A file, not a pipe: a pipe nobody reads would stall the process once full.
        with self.log.open("w") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "scheduler.cli", "serve", "--standalone", "--config", str(config)],
                cwd=ROOT, stdout=output, stderr=subprocess.STDOUT,
                preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None,
            )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"cellfit serve exited with {self.process.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("cellfit serve did not become ready")

    def filter_answers(self) -> bool:
        """One filter call on a fresh connection answers 200 with the node."""
        try:
            response = httpx.post(f"http://127.0.0.1:{self.port}{FILTER}", content=FILTER_BODY, timeout=5)
        except httpx.HTTPError:
            return False
        return response.status_code == 200 and response.json()["Nodes"]["items"][0]["metadata"]["name"] == "gpu-a"

    def refusals(self, listener: str, reason: str) -> float:
        """cellfit_listener_refusals_total of ``listener`` for ``reason``, scraped on the extender's port."""
        scraped = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        series = f'cellfit_listener_refusals_total{{listener="{listener}",reason="{reason}"}} '
        (line,) = [line for line in scraped.splitlines() if line.startswith(series)]
        return float(line.removeprefix(series))

    def connections(self, listener: str) -> float:
        """cellfit_listener_connections of ``listener`` (TLS handshakes in progress included)."""
        scraped = httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        series = f'cellfit_listener_connections{{listener="{listener}"}} '
        (line,) = [line for line in scraped.splitlines() if line.startswith(series)]
        return float(line.removeprefix(series))

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.log.read_text()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[type[Served]]:
    started: list[Served] = []

    def start(server: str, **options: object) -> Served:
        served = Served(tmp_path, server, **options)  # type: ignore[arg-type]
        started.append(served)
        served.wait_ready()
        return served

    yield start  # type: ignore[misc]
    for served in started:
        served.stop()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _all_closed(socks: list[socket.socket], *, within: float) -> int:
    """How many of ``socks`` the server closes within ``within`` seconds (one deadline for all)."""
    pending = {sock.fileno(): sock for sock in socks}
    closed = 0
    deadline = time.monotonic() + within
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        while pending and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=max(0.0, deadline - time.monotonic())):
                sock = pending.pop(key.fd)
                selector.unregister(sock)
                try:
                    sock.recv(65536)
                except OSError:
                    pass
                closed += 1
    return closed


def _closed_by_server(sock: socket.socket, *, within: float) -> bytes | None:
    """What the server sent before closing ``sock`` within ``within`` seconds; None if it is
    still open then."""
    sock.settimeout(within)
    received = b""
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline or received:  # an answer came: on to the close
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk
            deadline = max(deadline, time.monotonic() + 3)  # cellfit lingers a second after answering
            sock.settimeout(3)
    except (ConnectionResetError, BrokenPipeError):
        return received
    except socket.timeout:
        return received or None
    return None


# ------------------------------------------------------------------------------ headers


def test_a_header_flood_is_refused_before_it_is_buffered(serve) -> None:  # type: ignore[no-untyped-def]
    served = serve("")  # the default limits
    before = served.rss_bytes()
    flood = _connect(served.metrics_port)
    flood.sendall(b"GET /metrics HTTP/1.1\r\nHost: cellfit\r\nX-Flood: ")
    sent = 0
    chunk = b"a" * 65536
    try:
        while sent < 256 * 2**20:  # 256 MiB of one header value
            flood.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    reply = _closed_by_server(flood, within=10)
    grown = served.rss_bytes() - before
    assert reply is not None and reply.startswith(b"HTTP/1.1 431"), reply
    assert b"server.metricsListener.maxHeaderBytes" in reply
    assert sent < 64 * 2**20, f"the server read {sent} bytes of one header"
    assert grown < 16 * 2**20, f"cellfit grew by {grown / 2**20:.0f} MiB under the flood"
    assert served.filter_answers()
    assert served.refusals("metrics", "header_limit") == 1 and served.refusals("extender", "header_limit") == 0


def test_too_many_header_fields_are_refused(serve) -> None:  # type: ignore[no-untyped-def]
    served = serve("")  # maxHeaderCount 100
    headers = {f"x-field-{n}": "1" for n in range(150)}
    response = httpx.get(f"http://127.0.0.1:{served.port}/healthz", headers=headers, timeout=5)
    assert response.status_code == 431 and "server.extenderListener.maxHeaderCount" in response.text
    assert httpx.get(f"http://127.0.0.1:{served.port}/healthz", headers=dict(list(headers.items())[:50]), timeout=5).status_code == 200


# ------------------------------------------------------------------------------ connections


def test_connections_beyond_the_metrics_cap_are_closed_while_the_verbs_answer(serve) -> None:  # type: ignore[no-untyped-def]
    served = serve("")  # the metrics listener's maxConnections: 32
    held = [_connect(served.metrics_port) for _ in range(32)]
    time.sleep(0.5)  # accepted in order: these are the 32 served
    extra = [_connect(served.metrics_port) for _ in range(200)]
    assert _all_closed(extra, within=5) == len(extra)
    assert served.refusals("metrics", "connection_limit") == len(extra)
    assert 'cellfit_listener_connections{listener="metrics"} 32.0' in httpx.get(f"http://127.0.0.1:{served.port}/metrics").text
    assert _all_closed(held, within=0.1) == 0  # the first 32 stay
    assert served.filter_answers()
    # The metrics listener serves again as soon as a connection leaves.
    held.pop().close()
    time.sleep(0.3)
    assert httpx.get(f"http://127.0.0.1:{served.metrics_port}/healthz", timeout=5).status_code == 200
    for sock in held + extra:
        sock.close()


def test_the_verbs_answer_under_a_connection_flood_beyond_the_descriptor_limit(serve) -> None:  # type: ignore[no-untyped-def]
    """1,500 connections at a process allowed 600 file descriptors: without a cap the process
    runs out and the extender's listener cannot accept kube-scheduler's next call. The default
    caps (256 + 32) and the reserve fit 600."""
    served = serve("", nofile=600)
    flood = []
    for _ in range(1500):
        try:
            flood.append(_connect(served.metrics_port))
        except OSError:
            pass
    time.sleep(1)
    answered = [served.filter_answers() for _ in range(5)]
    for sock in flood:
        sock.close()
    assert all(answered), answered
    assert served.process.poll() is None


def test_descriptor_limit_too_low_for_the_caps_is_refused_at_start_naming_the_settings(tmp_path: Path) -> None:
    served = Served(tmp_path, "metricsListener: {maxConnections: 500}", nofile=300)
    assert served.process.wait(timeout=60) == 2
    output = served.stop()
    assert "server.metricsListener.maxConnections 500" in output and "RLIMIT_NOFILE" in output, output


# ------------------------------------------------------------------------------ timers


def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(serve) -> None:  # type: ignore[no-untyped-def]
    served = serve("extenderListener: {idleTimeoutSeconds: 1}")
    silent = _connect(served.port)
    started = time.monotonic()
    assert _closed_by_server(silent, within=10) == b""
    assert 0.8 < time.monotonic() - started < 5
    # After a request as well (keep-alive), with the verbs unaffected.
    with httpx.Client(base_url=f"http://127.0.0.1:{served.port}", timeout=5) as client:
        assert client.post(FILTER, content=FILTER_BODY).status_code == 200


def test_slowloris_headers_are_cut_by_the_read_timeout(serve) -> None:  # type: ignore[no-untyped-def]
    served = serve("metricsListener: {readTimeoutSeconds: 1, idleTimeoutSeconds: 60}")
    slow = _connect(served.metrics_port)
    started = time.monotonic()
    slow.sendall(b"GET /metrics HTTP/1.1\r\n")
    reply = None
    for n in range(40):  # a header line every 0.2 s: never idle, never done
        try:
            slow.sendall(b"X-Slow-%d: 1\r\n" % n)
        except (BrokenPipeError, ConnectionResetError):
            break
        reply = _closed_by_server(slow, within=0.2)
        if reply is not None:
            break
    assert reply is not None and reply.startswith(b"HTTP/1.1 408"), reply
    assert time.monotonic() - started < 3
    assert b"server.metricsListener.readTimeoutSeconds" in reply
    assert served.refusals("metrics", "read_timeout") == 1


def test_a_body_that_stalls_is_cut_by_the_read_timeout(serve) -> None:  # type: ignore[no-untyped-def]
    served = serve("extenderListener: {readTimeoutSeconds: 1}")
    stalled = _connect(served.port)
    stalled.sendall(
        b"POST /v1/extender/filter HTTP/1.1\r\nHost: cellfit\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(FILTER_BODY) + FILTER_BODY[:100]
    )
    reply = _closed_by_server(stalled, within=5)
    assert reply is not None and reply.startswith(b"HTTP/1.1 408"), reply
    assert served.filter_answers()


# ------------------------------------------------------------------------------ TLS


def test_tls_handshakes_count_against_the_cap_and_are_timed(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pair = make_serving_certificate(tmp_path / "tls")
    served = serve(
        "admissionListener: {maxConnections: 8, readTimeoutSeconds: 3}",
        admission=f"certFile: {pair.cert_file}, keyFile: {pair.key_file}",
    )
    silent = [_connect(served.admission_port) for _ in range(8)]  # no ClientHello: handshakes in progress
    started = time.monotonic()
    # All 8 counted before the ninth comes (a fixed pause lost that race on a loaded machine).
    while served.connections("admission") < 8:
        assert time.monotonic() - started < 2, f"{served.connections('admission')} of 8 handshakes counted"
        time.sleep(0.05)
    try:
        beyond = _connect(served.admission_port)
    except ConnectionResetError:
        pass  # reset (the refusal) before connect() read its outcome: the socket's error is the reset
    else:
        assert _closed_by_server(beyond, within=2) is not None, "a connection beyond the cap was kept"
    assert all(_closed_by_server(sock, within=8) is not None for sock in silent)
    # Cut by readTimeoutSeconds (3 s after they came), not left to the idle timeout or kept.
    assert time.monotonic() - started < 8, "handshakes were not cut by readTimeoutSeconds"
    time.sleep(0.2)
    assert served.refusals("admission", "connection_limit") == 1 and served.refusals("admission", "tls_handshake") == 8
    # The listener serves again once the handshakes are given up.
    trust = ssl.create_default_context(cafile=str(pair.ca_file))
    deadline = time.monotonic() + 5
    while True:
        try:
            assert httpx.get(f"https://127.0.0.1:{served.admission_port}/healthz", verify=trust, timeout=5).status_code == 200
            break
        except httpx.ConnectError:
            assert time.monotonic() < deadline, served.log.read_text()[-3000:]
            time.sleep(0.2)


# ------------------------------------------------------------------------------ logs


def test_a_flood_of_bad_requests_writes_a_bounded_log_saying_what_it_held_back(serve) -> None:  # type: ignore[no-untyped-def]
    served = serve("")  # the metrics listener's maxConnections: 32
    before = served.log.stat().st_size
    junk = b'{"Pod": {"metadata": {"labels": {"' + b"x" * 20000 + b'": 1}}}}'
    absurd = k.dumps(k.extender_args(k.pod("absurd-0", gpus=1, cpu="1e999"), [k.node("gpu-a", gpus=8)], node_cache_capable=False))
    with httpx.Client(base_url=f"http://127.0.0.1:{served.port}", timeout=5) as client:
        for _ in range(600):
            assert client.post(FILTER, content=junk).status_code == 400
            assert client.post(FILTER, content=b"not json").status_code == 400
            assert "larger than any real resource" in client.post(FILTER, content=absurd).json()["Error"]
    for _ in range(300):
        with _connect(served.port) as bad:
            bad.sendall(b"\x00\x01 nonsense\r\n\r\n")
            _closed_by_server(bad, within=2)
    held = [_connect(served.metrics_port) for _ in range(32)]
    time.sleep(0.3)
    beyond = [_connect(served.metrics_port) for _ in range(300)]
    _all_closed(beyond, within=5)
    for sock in held + beyond:
        sock.close()
    time.sleep(0.2)
    written = served.log.read_text()[before:]
    lines = [json.loads(line) for line in written.splitlines() if line.startswith("{")]
    # 2,100 refused requests and 300 refused connections: a burst of each kind, no more.
    assert len(written) < 64 * 1024, f"{len(written)} bytes of log for 2,700 bad requests"
    kinds = {(line["logger"], line["msg"]) for line in lines}
    assert ("scheduler.extender.dispatch", "request rejected") in kinds
    assert ("scheduler.extender.service", "request not carried out") in kinds
    assert ("scheduler.extender.listeners", "invalid HTTP request") in kinds
    assert ("scheduler.extender.listeners", "connection refused: the listener is at its connection limit") in kinds
    assert all(len(str(value)) < 4000 for line in lines for value in line.values())
    # Another bad request later (the bucket refills at 6 a minute) says how many were held back.
    time.sleep(10.5)
    assert httpx.post(f"http://127.0.0.1:{served.port}{FILTER}", content=b"not json", timeout=5).status_code == 400
    time.sleep(0.2)
    latest = [json.loads(line) for line in served.log.read_text()[before:].splitlines() if line.startswith("{")]
    rejected = [line for line in latest if line["msg"] == "request rejected"]
    # Every refused body is accounted for: logged, or counted in the next record that was.
    assert len(rejected) + sum(line.get("suppressed", 0) for line in rejected) == 1201
    assert rejected[-1]["suppressed"] > 0


# ------------------------------------------------------------------------------ costly bodies


def test_a_costly_body_does_not_hold_the_requests_behind_it(serve) -> None:  # type: ignore[no-untyped-def]
    """An 8 MiB filter of full Nodes takes hundreds of milliseconds to parse: it is decided off
    the event loop, so a small filter sent while it is being parsed is answered first."""
    served = serve("maxRequestBytes: 16777216")
    node = k.node("gpu-x", gpus=8)
    count = 8 * 2**20 // len(k.dumps(node))
    costly = k.dumps(k.extender_args(k.pod("big-0", gpus=1), [k.node(f"n-{i}", gpus=8) for i in range(count)], node_cache_capable=False))
    big = _connect(served.port)
    big.sendall(
        b"POST /v1/extender/filter HTTP/1.1\r\nHost: cellfit\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(costly) + costly
    )
    time.sleep(0.05)  # read whole and being parsed
    small = _connect(served.port)
    small.sendall(
        b"POST /v1/extender/filter HTTP/1.1\r\nHost: cellfit\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(FILTER_BODY) + FILTER_BODY
    )
    small.settimeout(30)
    small_answer = small.recv(65536)
    big.setblocking(False)
    try:
        big_answered_first = bool(big.recv(65536))
    except BlockingIOError:
        big_answered_first = False
    assert small_answer.startswith(b"HTTP/1.1 200"), small_answer[:200]
    assert not big_answered_first, "the small filter waited for the 8 MiB one"
    big.settimeout(30)
    assert big.recv(65536).startswith(b"HTTP/1.1 200")
