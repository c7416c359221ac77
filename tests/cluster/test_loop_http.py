"""The event loop's HTTP/1.1 client for kube-scheduler's path (scheduler/cluster/loop_http.py),
against a real HTTP server on loopback (Python's http.server, HTTP/1.1 with keep-alive), and
the bind request KubernetesApi sends through it."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
import uvloop
from kubernetes import client as k8s

from scheduler.cluster import loop_http
from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings
from scheduler.errors import KubernetesApiError
from tests.support.tls import make_serving_certificate


@pytest.fixture(autouse=True, params=["asyncio", "uvloop"])
def event_loop_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test on asyncio's own loop and on uvloop's, which cellfit serves on (their TLS
    transports differ)."""
    if request.param == "uvloop":
        def run_on_uvloop(coroutine: Any) -> Any:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(coroutine)

        monkeypatch.setattr(asyncio, "run", run_on_uvloop)
    return str(request.param)


class Recorder:
    """What the server saw: each request (method, path, headers, body) and each connection."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.connections: list[int] = []  # one entry per connection accepted
        self.open_now = 0
        self.most_open = 0
        self.lock = threading.Lock()


def make_handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            with recorder.lock:
                self.number = len(recorder.connections)
                recorder.connections.append(self.number)

        def log_message(self, *args: Any) -> None:  # keep the test output quiet
            pass

        def _reply(self, status: int, body: bytes, *, close: bool = False, chunked: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for start in range(0, len(body), 7):
                    piece = body[start:start + 7]
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with recorder.lock:
                recorder.requests.append({"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                          "body": body, "connection": self.number})
                recorder.open_now += 1
                recorder.most_open = max(recorder.most_open, recorder.open_now)
            try:
                if self.path.startswith("/slow"):
                    time.sleep(0.3)
                if self.path.startswith("/hang"):
                    time.sleep(3)
                if self.path.startswith("/cut"):  # headers, half a body, then the connection closes
                    self.send_response(200)
                    self.send_header("Content-Length", "100")
                    self.end_headers()
                    self.wfile.write(b'{"half":')
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if self.path.startswith("/missing"):
                    self._reply(404, b'{"kind":"Status","code":404,"message":"pods \\"x\\" not found"}')
                    return
                self._reply(
                    int(self.headers.get("X-Status", "200")),
                    json.dumps({"echo": self.path}).encode(),
                    close=self.path.startswith("/close"),
                    chunked=self.path.startswith("/chunked"),
                )
            finally:
                with recorder.lock:
                    recorder.open_now -= 1

        do_GET = do_POST = _handle

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[ThreadingHTTPServer, Recorder]]:
    recorder = Recorder()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(recorder))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, recorder
    httpd.shutdown()
    httpd.server_close()


def client_for(port: int, *, max_connections: int = 4, timeout: float = 5.0, token: str = "t0k3n",
               ssl_context: ssl.SSLContext | None = None) -> loop_http.LoopHttpClient:
    endpoint = loop_http.Endpoint(host="127.0.0.1", port=port, path_prefix="", ssl=loop_http.TlsContext.fixed(ssl_context) if ssl_context else None,
                                  server_hostname="127.0.0.1" if ssl_context else None)
    return loop_http.LoopHttpClient(endpoint=endpoint, headers=lambda: {"Authorization": f"Bearer {token}"},
                                    timeout_seconds=timeout, max_connections=max_connections)


def test_requests_share_one_kept_alive_connection_and_carry_the_credentials(server):
    httpd, recorder = server
    http = client_for(httpd.server_address[1])

    async def run() -> list[tuple[int, bytes]]:
        return [await http.request("POST", f"/a/{i}", b'{"x":1}') for i in range(3)] + [await http.request("GET", "/chunked/long-path-body")]

    answers = asyncio.run(run())
    assert [status for status, _ in answers] == [200, 200, 200, 200]
    assert json.loads(answers[0][1]) == {"echo": "/a/0"}
    assert json.loads(answers[3][1]) == {"echo": "/chunked/long-path-body"}  # chunked, put together
    assert len(recorder.connections) == 1
    first = recorder.requests[0]
    assert first["headers"]["authorization"] == "Bearer t0k3n" and first["body"] == b'{"x":1}'
    assert first["headers"]["content-type"] == "application/json" and first["headers"]["host"].startswith("127.0.0.1:")
    assert "content-length" not in recorder.requests[3]["headers"]  # a GET sends no body


def test_a_connection_the_server_closes_is_not_reused(server):
    httpd, recorder = server
    http = client_for(httpd.server_address[1])

    async def run() -> list[int]:
        statuses = [(await http.request("GET", "/close/1"))[0], (await http.request("GET", "/2"))[0]]
        return statuses

    assert asyncio.run(run()) == [200, 200]
    assert len(recorder.connections) == 2


def test_a_kept_alive_connection_closed_while_idle_is_retried_on_a_new_one(server):
    """The server's idle timeout closes a pooled connection; the next request meets the closed
    socket before any answer, and goes out again on a fresh connection."""
    httpd, recorder = server
    accepted: dict[Any, socket.socket] = {}
    get_request = httpd.get_request

    def remember() -> tuple[socket.socket, Any]:
        sock, address = get_request()
        accepted[address] = sock
        return sock, address

    httpd.get_request = remember  # type: ignore[method-assign]
    http = client_for(httpd.server_address[1])

    async def scenario() -> list[int]:
        statuses = []
        for path in ("/1", "/2", "/3"):
            statuses.append((await http.request("GET", path))[0])
            [pooled] = http._idle  # noqa: SLF001 - the connection the server is about to drop
            accepted[pooled.transport.get_extra_info("sockname")].shutdown(socket.SHUT_RDWR)
            if path == "/2":
                await asyncio.sleep(0.2)  # this time the client sees the close while idle
        return statuses

    # /2 goes out on the closed connection before the loop saw it close, /3 after.
    assert asyncio.run(scenario()) == [200, 200, 200]
    assert [r["path"] for r in recorder.requests] == ["/1", "/2", "/3"]
    assert len(recorder.connections) == 3


def test_a_response_cut_midway_is_an_error_and_not_sent_again(server):
    httpd, recorder = server
    http = client_for(httpd.server_address[1])
    with pytest.raises(KubernetesApiError, match="unreachable: connection closed by the server mid-response"):
        asyncio.run(http.request("POST", "/cut", b"{}"))
    assert len(recorder.requests) == 1  # a write the server may have carried out is not repeated


def test_no_answer_within_the_timeout_is_an_error_naming_it(server):
    httpd, _ = server
    http = client_for(httpd.server_address[1], timeout=0.5)
    started = time.monotonic()
    with pytest.raises(KubernetesApiError, match=r"did not answer within 0.5s"):
        asyncio.run(http.request("GET", "/hang"))
    assert time.monotonic() - started < 2


def test_the_pool_opens_at_most_max_connections_and_queues_the_rest(server):
    httpd, recorder = server
    http = client_for(httpd.server_address[1], max_connections=2)

    async def run() -> list[int]:
        answers = await asyncio.gather(*(http.request("GET", f"/slow/{i}") for i in range(6)))
        return [status for status, _ in answers]

    assert asyncio.run(run()) == [200] * 6
    assert recorder.most_open <= 2 and len(recorder.connections) == 2


def test_unreachable_server_is_an_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(KubernetesApiError, match="unreachable"):
        asyncio.run(client_for(port).request("GET", "/"))


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[ThreadingHTTPServer, Recorder, Path]]:
    certificate = make_serving_certificate(tmp_path / "tls")
    recorder = Recorder()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(recorder))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate.cert_file, certificate.key_file)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, recorder, certificate.ca_file
    httpd.shutdown()
    httpd.server_close()


def api_for(host: str, *, ca_file: Path | None = None, verify: bool = True, proxy: str | None = None) -> KubernetesApi:
    configuration = k8s.Configuration()
    configuration.host = host
    configuration.api_key = {"authorization": "s3cr3t"}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    configuration.ssl_ca_cert = str(ca_file) if ca_file else None
    configuration.verify_ssl = verify
    configuration.proxy = proxy
    return KubernetesApi(k8s.ApiClient(configuration), settings=ClusterSettings(), source="test")


def test_bind_sends_the_binding_with_its_annotations_over_verified_tls(tls_server):
    httpd, recorder, ca_file = tls_server
    api = api_for(f"https://127.0.0.1:{httpd.server_address[1]}", ca_file=ca_file)
    annotations = {"cellfit.io/bind-info": '{"node":"gpu-a","gpus":[0,1]}'}

    asyncio.run(api.create_binding(namespace="ml", name="train-0", uid="u-1", node_name="gpu-a", annotations=annotations))

    [request] = recorder.requests
    assert request["method"] == "POST" and request["path"] == "/api/v1/namespaces/ml/pods/train-0/binding"
    assert request["headers"]["authorization"] == "Bearer s3cr3t"
    assert json.loads(request["body"]) == {
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "train-0", "namespace": "ml", "uid": "u-1", "annotations": annotations},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-a"},
    }


def test_a_server_certificate_the_ca_did_not_sign_is_refused(tls_server, tmp_path):
    httpd, recorder, _ = tls_server
    other_ca = make_serving_certificate(tmp_path / "other").ca_file
    api = api_for(f"https://127.0.0.1:{httpd.server_address[1]}", ca_file=other_ca)
    with pytest.raises(KubernetesApiError, match="unreachable"):
        asyncio.run(api.create_binding(namespace="ml", name="p", uid="u", node_name="n", annotations={}))
    assert recorder.requests == []


def test_bind_refused_by_the_api_raises_with_its_status_and_message(server):
    httpd, _ = server
    api = api_for(f"http://127.0.0.1:{httpd.server_address[1]}/missing")  # the server answers 404 there
    with pytest.raises(KubernetesApiError, match=r'bind pod ml/x to n: pods "x" not found \(HTTP 404\)') as caught:
        asyncio.run(api.create_binding(namespace="ml", name="x", uid="u", node_name="n", annotations={}))
    assert caught.value.status == 404


def test_get_pod_is_none_for_a_pod_that_does_not_exist(server):
    httpd, recorder = server
    api = api_for(f"http://127.0.0.1:{httpd.server_address[1]}/missing")  # a server URL with a path
    assert asyncio.run(api.get_pod("ml", "x")) is None
    assert recorder.requests[0]["path"] == "/missing/api/v1/namespaces/ml/pods/x"


def test_behind_a_proxy_the_client_is_not_used():
    configuration = k8s.Configuration()
    configuration.host = "https://10.0.0.1:6443"
    configuration.proxy = "http://proxy.invalid:3128"
    assert loop_http.for_configuration(configuration, headers=dict, timeout_seconds=1, max_connections=1) is None


def test_credentials_are_refreshed_through_the_clients_hook_at_most_every_few_seconds():
    configuration = k8s.Configuration()
    tokens = iter(f"token-{i}" for i in range(100))
    calls: list[float] = []
    now = [1000.0]

    def refresh(config: k8s.Configuration) -> None:  # what a kubeconfig or in-cluster loader installs
        calls.append(now[0])
        config.api_key = {"BearerToken": next(tokens)}
        config.api_key_prefix = {"BearerToken": "Bearer"}

    configuration.api_key = {"BearerToken": "as loaded"}  # the loaders set a token, then the hook
    configuration.refresh_api_key_hook = refresh
    credentials = loop_http.Credentials(configuration, clock=lambda: now[0])
    seen = []
    for step in (0, 1, 9.9, 10, 10.5, 25):
        now[0] = 1000.0 + step
        seen.append(dict(credentials())["authorization"])
    assert seen == ["Bearer token-0", "Bearer token-0", "Bearer token-0", "Bearer token-1", "Bearer token-1", "Bearer token-2"]
    assert calls == [1000.0, 1010.0, 1025.0]
