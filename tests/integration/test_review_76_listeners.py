"""Review 76 of the webhook listener: what a client of the HTTPS listener can do to it.

- A TLS listener accepts its connections itself (listeners._TlsAcceptor); an accept that fails
  (EMFILE when the process is out of file descriptors, ENFILE, ENOBUFS, ECONNABORTED) must
  cost that one connection, not end the accept loop: a listener that stops accepting leaves
  the ``placed-pods`` webhook (failurePolicy: Fail) refusing every placed pod until cellfit is
  restarted, with /healthz (on the extender's port) still answering.
- HTTP/1.1 answers pipelined requests in order: a refusal of a later request (431, 408, 400)
  comes after the answers of the requests before it, not in their place.
- A client that reads none of a large answer does not hold its connection (one of
  maxConnections) past idleTimeoutSeconds.
"""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from tests.integration.test_listener_limits import Served
from tests.integration.test_metrics_listener import ROOT
from tests.support import kube_objects as k
from tests.support.ports import free_port
from tests.support.tls import ServingCertificate, make_serving_certificate

pytestmark = pytest.mark.slow

# A TLS listener of cellfit's (ListenerConfig, BoundedServer) serving a one-route app, in a
# process whose soft RLIMIT_NOFILE leaves room for only a few connections beyond what it holds
# once serving: the next accept fails with EMFILE.
_TIGHT_LISTENER = textwrap.dedent(
    """
    import asyncio, os, resource, socket, sys

    from scheduler.config import ListenerLimits
    from scheduler.extender.listeners import BoundedServer, ListenerConfig
    from scheduler.extender.server import _tls_context

    cert_file, key_file, port, room = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    async def main():
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        limits = ListenerLimits(maxConnections=64, readTimeoutSeconds=1, idleTimeoutSeconds=5)
        config = ListenerConfig(app, limits=limits, setting="server.admissionListener",
                                tls=_tls_context(cert_file, key_file), lifespan="off", log_config=None)
        server = BoundedServer(config)
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + room, hard))
        print("serving", flush=True)
        await serving

    asyncio.run(main())
    """
)


class TightListener:
    def __init__(self, pair: ServingCertificate, *, room: int) -> None:
        self.port = free_port()
        self.pair = pair
        self.process = subprocess.Popen(
            [sys.executable, "-c", _TIGHT_LISTENER, str(pair.cert_file), str(pair.key_file), str(self.port), str(room)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.strip() == "serving", line + self.process.stdout.read()

    def answers_https(self, *, within: float) -> bool:
        """A GET over a fresh TLS connection answers 200 within ``within`` seconds (each try
        gets 2 s: a listener that no longer accepts leaves the handshake unanswered)."""
        trust = ssl.create_default_context(cafile=str(self.pair.ca_file))
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"https://127.0.0.1:{self.port}/", verify=trust, timeout=2).status_code == 200:
                    return True
            except httpx.HTTPError:
                time.sleep(0.2)
        return False

    def stop(self) -> str:
        self.process.terminate()
        try:
            output, _ = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            output, _ = self.process.communicate()
        return output


@pytest.fixture
def tight_listener(tmp_path: Path) -> Iterator[TightListener]:
    listener = TightListener(make_serving_certificate(tmp_path / "tls"), room=4)
    yield listener
    listener.stop()


def test_the_tls_listener_accepts_again_after_running_out_of_file_descriptors(tight_listener: TightListener) -> None:
    assert tight_listener.answers_https(within=10)
    # Silent connections (no ClientHello): 4 take the descriptors left, the next accepts fail.
    flood = [socket.create_connection(("127.0.0.1", tight_listener.port), timeout=5) for _ in range(12)]
    time.sleep(0.5)
    for sock in flood:
        sock.close()
    # The handshakes accepted are cut after readTimeoutSeconds (1 s), giving their descriptors back.
    answered = tight_listener.answers_https(within=15)
    output = tight_listener.stop()
    assert answered, output[-3000:]
    assert "Too many open files" in output or "accept" in output, output[-3000:]


@pytest.fixture
def extender(tmp_path: Path) -> Iterator[Served]:
    """``cellfit serve --standalone`` with the default limits."""
    served = Served(tmp_path, "")
    try:
        served.wait_ready()
        yield served
    finally:
        served.stop()


def _answers(sock: socket.socket) -> list[bytes]:
    """The HTTP answers ``sock`` gets until the server closes it, each as its status line
    (found anywhere: an answer follows the body before it with no line break between)."""
    sock.settimeout(10)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    return re.findall(rb"HTTP/1\.1 \d{3} [^\r]*", received)


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: cellfit\r\n\r\n"
_REASONS = {b"431": b"Request Header Fields Too Large", b"400": b"Bad Request"}


@pytest.mark.parametrize(
    "refused, status",
    [
        (b"GET /healthz HTTP/1.1\r\nHost: cellfit\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n", b"431"),
        (b"GET /healthz HTTP/1.1\r\nHost: cellfit\r\n" + b"X-Many: 1\r\n" * 200 + b"\r\n", b"431"),
        (b"GET /healthz HTTP/1.1\r\nHost: cellfit\r\nContent-Length: x\r\n\r\n", b"400"),
    ],
    ids=["header-bytes", "header-count", "invalid"],
)
def test_a_refused_pipelined_request_is_answered_after_the_requests_before_it(
    extender: Served, refused: bytes, status: bytes
) -> None:
    served = extender
    client = socket.create_connection(("127.0.0.1", served.port), timeout=5)
    client.sendall(HEALTHZ + HEALTHZ + refused)
    assert _answers(client) == [b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK", b"HTTP/1.1 " + status + b" " + _REASONS[status]]



def test_a_client_that_never_reads_its_answer_does_not_hold_a_connection_forever(tmp_path: Path) -> None:
    """A filter answer of a few MB to a client that reads none of it: the answer waits on the
    socket's send buffer, no timer of the listener runs (the idle one starts after the
    answer, the read one ended with the request), and the connection is held for good, one of
    maxConnections. Unread for idleTimeoutSeconds, it is closed."""
    served = Served(tmp_path, "extenderListener: {idleTimeoutSeconds: 1}")
    try:
        served.wait_ready()
        nodes = [k.node(f"gpu-{index}", gpus=8) for index in range(3000)]
        body = k.dumps(k.extender_args(k.pod("train-0", gpus=1), nodes, node_cache_capable=False))
        reader = socket.socket()
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.connect(("127.0.0.1", served.port))
        reader.sendall(
            b"POST /v1/extender/filter HTTP/1.1\r\nHost: cellfit\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
        # Then nothing is read. Only the scrape's own connection is left once it is closed.
        deadline = time.monotonic() + 30
        while served.connections("extender") > 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert served.connections("extender") == 1, "the connection that reads nothing is still held"
        assert served.refusals("extender", "write_timeout") == 1
        reader.close()
    finally:
        served.stop()
