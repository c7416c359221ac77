"""The event loop's connection pool to the API server (scheduler/cluster/loop_http.py) when the
connections it keeps die without a word: the API server's node gone, or a load balancer or NAT
in between that forgot its flows (an API server failover behind it). Between the pool and the
server (tests/cluster/test_loop_http.py's, on loopback) runs a TCP relay that can stop carrying
the flows it has, silently, while new connections get through."""

from __future__ import annotations

import asyncio
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from kubernetes.config import incluster_config as k8s_incluster

from scheduler.cluster import loop_http
from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings
from scheduler.errors import KubernetesApiError
from tests.cluster.test_loop_http import client_for, event_loop_kind, server, tls_server  # noqa: F401 - fixtures

TIMEOUT_SECONDS = 0.5


class SilentRelay:
    """Relays TCP to ``port``; :meth:`forget_flows` makes every flow open now drop what it
    carries (no FIN, no reset), as a load balancer that lost its state does."""

    def __init__(self, port: int) -> None:
        self._upstream = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._forgotten: set[int] = set()
        self._flows = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def forget_flows(self) -> None:
        with self._lock:
            self._forgotten.update(range(self._flows))

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._upstream))
            with self._lock:
                flow, self._flows = self._flows, self._flows + 1
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(flow, source, target), daemon=True).start()

    def _pump(self, flow: int, source: socket.socket, target: socket.socket) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            with self._lock:
                if flow in self._forgotten:
                    continue
            try:
                target.sendall(data)
            except OSError:
                return


@pytest.fixture
def relay(server) -> Iterator[SilentRelay]:  # noqa: F811 - the imported fixture
    httpd, _ = server
    made = SilentRelay(httpd.server_address[1])
    yield made
    made.close()


def test_after_a_request_on_a_dead_kept_alive_connection_times_out_the_next_ones_open_fresh_connections(relay: SilentRelay) -> None:
    """Four connections kept alive, then their flows forgotten: each later request took the
    next dead one and waited out its whole timeout, so at one bind a second every bind failed
    for as long as the pool had dead connections (64 in production, 10 s each, past
    kube-scheduler's 5 s). The first timeout now closes the other idle connections too.

    Only the request on a dead connection is given the short timeout: the ones that must be
    answered (four slow requests through the relay's threads, then fresh connections) get a
    long one, which a loaded machine's scheduling never reaches (0.5 s for a 0.3 s answer made
    this test fail once at load 11). Were the other dead connections kept, the next request
    would still wait out its whole timeout on one of them and fail."""
    answered_within = 5.0
    client = client_for(relay.port, max_connections=4, timeout=answered_within)

    async def scenario() -> list[str]:
        await asyncio.gather(*(client.request("GET", "/slow") for _ in range(4)))
        assert client.idle_connections == 4
        relay.forget_flows()
        outcomes = []
        for attempt in range(4):
            client._timeout = TIMEOUT_SECONDS if attempt == 0 else answered_within
            try:
                status, _ = await client.request("GET", "/pods")
                outcomes.append(str(status))
            except KubernetesApiError as error:
                outcomes.append(str(error))
        client.close()
        return outcomes

    outcomes = asyncio.run(scenario())
    assert outcomes == [f"Kubernetes API did not answer within {TIMEOUT_SECONDS:g}s", "200", "200", "200"]


def test_requests_queued_for_a_connection_give_up_at_their_own_timeout_unsent(server) -> None:  # noqa: F811
    """More requests than connections while the API server hangs: the timeout began only once
    a connection was free, so each queued bind waited for every one before it to time out (at
    64 connections and a burst of 1,000, the last ~2.5 minutes, its GPUs reserved all along,
    long after kube-scheduler gave up at 5 s). The wait for a connection counts now, and a
    request that never got one says so, and that nothing was sent."""
    httpd, recorder = server
    # The first request holds the one connection for the server's 3 s (/hang), with a timeout
    # past that; the requests queued behind it are asked with the short one, so they give up
    # while it still holds the connection, whatever the timing of their start.
    client = client_for(httpd.server_address[1], max_connections=1, timeout=10)

    async def burst() -> list[BaseException | tuple[int, bytes]]:
        holding = asyncio.ensure_future(client.request("GET", "/hang"))
        while not recorder.requests:  # it has the connection and the server has its request
            await asyncio.sleep(0.01)
        client._timeout = TIMEOUT_SECONDS
        answers = await asyncio.gather(holding, *(client.request("GET", "/hang") for _ in range(2)), return_exceptions=True)
        # The queued requests that gave up left the connection's slot free: the next one goes.
        answers.append(await client.request("GET", "/pods"))
        client.close()
        return answers

    first, *queued, after = asyncio.run(burst())
    assert first == (200, b'{"echo": "/hang"}')
    for answer in queued:
        assert isinstance(answer, loop_http.RequestNotSent), answer
        assert str(answer) == (f"Kubernetes API request not sent: no connection to it came free or opened within {TIMEOUT_SECONDS:g}s "
                               "(all 1 in use, or connecting)")
    assert after == (200, b'{"echo": "/pods"}')
    assert [request["path"] for request in recorder.requests] == ["/hang", "/pods"]


def connected_through_token_file(folder: Path, *, port: int) -> tuple[Path, KubernetesApi]:
    """A kubeconfig whose user reads its token from the file ``token`` beside it (first-token),
    and cellfit's API connected through it: the token file and the API."""
    token = folder / "token"
    token.write_text("first-token")
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: here\n"
        f"clusters: [{{name: here, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: cellfit, user: {tokenFile: token}}]\n"  # relative to the kubeconfig's folder
        "contexts: [{name: here, context: {cluster: here, user: cellfit}}]\n"
    )
    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(kubeconfig)))
    assert api is not None
    return token, api


def test_a_kubeconfig_token_file_rewritten_is_sent_from_then_on(server, tmp_path) -> None:  # noqa: F811
    """A kubeconfig whose user reads its token from a file (``tokenFile``, a projected token
    rotated beside cellfit): the Kubernetes client reads the file once, at load, and cellfit
    sent the first token for as long as it ran; once it expired, every list, watch and bind was
    refused (HTTP 401) until a restart. client-go reads such a file again as it changes; so
    does cellfit now, on the client's own path at once and on the bind path within its
    credentials refresh."""
    httpd, recorder = server
    token, api = connected_through_token_file(tmp_path, port=httpd.server_address[1])
    api.get_priority_class("cellfit-trial")
    token.write_text("rotated-token\n")  # as `echo` writes it: client-go trims it, so does cellfit
    api.get_priority_class("cellfit-trial")
    assert [request["headers"]["authorization"] for request in recorder.requests] == ["Bearer first-token", "Bearer rotated-token"]


class OneTokenServer:
    """An API server that accepts one bearer token (``accepted``) and answers 401 to any other,
    as kube-apiserver does once a token is revoked; it records the tokens it was sent."""

    def __init__(self) -> None:
        self.accepted = ""
        self.sent: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                token = self.headers.get("Authorization", "")
                owner.sent.append(token)
                code, body = (201, b'{"kind":"Status","code":201}') if token == f"Bearer {owner.accepted}" else (
                    401, b'{"kind":"Status","code":401,"message":"Unauthorized"}')
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def test_a_binding_refused_as_unauthorized_is_sent_again_with_credentials_read_anew(tmp_path) -> None:
    """The token file was rewritten and the old token revoked at once (a service account's
    token Secret replaced): the bind path kept its credentials up to 10 s, and every bind in
    that time failed with HTTP 401. A 401 now has the credentials read again and the request
    (not carried out: the server refused it unread) sent once more."""
    api_server = OneTokenServer()
    api_server.accepted = "first-token"
    token, api = connected_through_token_file(tmp_path, port=api_server.httpd.server_address[1])

    async def binds() -> None:
        await api.create_binding(namespace="ml", name="train-0", uid="uid-train-0", node_name="gpu-a", annotations={})
        token.write_text("rotated-token")
        api_server.accepted = "rotated-token"  # and the first one revoked
        await api.create_binding(namespace="ml", name="train-1", uid="uid-train-1", node_name="gpu-a", annotations={})

    try:
        asyncio.run(binds())
    finally:
        api_server.httpd.shutdown()
        api_server.httpd.server_close()
    assert api_server.sent == ["Bearer first-token", "Bearer first-token", "Bearer rotated-token"]


def test_an_in_cluster_token_rewritten_is_sent_from_the_next_request(tls_server, tmp_path, monkeypatch) -> None:  # noqa: F811
    """In a pod: the Kubernetes client's loader reads the service account's token file again
    at most once a minute, so a token rotated and revoked at once (its Secret replaced) was
    refused for up to a minute whatever cellfit did. The file is read again as it changes."""
    httpd, recorder, ca_file = tls_server
    token = tmp_path / "token"
    token.write_text("first-token")
    monkeypatch.setattr(k8s_incluster, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(k8s_incluster, "SERVICE_CERT_FILENAME", str(ca_file))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(httpd.server_address[1]))
    api = KubernetesApi.connect(ClusterSettings(mode="in-cluster"))
    assert api is not None
    api.get_priority_class("cellfit-trial")
    token.write_text("rotated-token")
    api.get_priority_class("cellfit-trial")
    assert [request["headers"]["authorization"].lower() for request in recorder.requests] == ["bearer first-token", "bearer rotated-token"]
