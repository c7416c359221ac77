"""Review of the kubeconfig credentials' follower (scheduler/cluster/api.py,
KubeconfigCredentials; scheduler/cluster/loop_http.py), against loopback servers and real exec
plugins:

- a client certificate rotated under kept-alive connections: the event loop's pool went on
  presenting the old one on the connections it had (client-go closes them all on a rotation,
  transport/cert_rotation.go), so once the API server refused it every bind was refused, its
  retry too;
- an exec plugin is run as client-go runs a non-interactive one: its standard input never
  cellfit's, ``spec.interactive`` false, ``interactiveMode: Always`` refused, a plugin that
  hangs killed after EXEC_PLUGIN_TIMEOUT_SECONDS (with the follower's lock held, a hang had
  stalled every later refresh, the event loop's among them, for good);
- a write refused 401 is sent again only while the replica's term of leadership lasts.

The credentials' refresh interval is 0 here, as in test_kubeconfig_rotation.py: each request
refreshes them."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from scheduler.cluster import loop_http
from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings
from tests.cluster.test_kubeconfig_rotation import TokenServer, embedded_pair, kubeconfig
from tests.cluster.test_loop_http_tls_rotation import ClientAuthority
from tests.support.loopback_http import QuietHandler
from tests.support.tls import ServingCertificate, make_serving_certificate


@pytest.fixture(autouse=True)
def refresh_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_http, "CREDENTIALS_REFRESH_SECONDS", 0.0)


@pytest.fixture
def token_server() -> Iterator[TokenServer]:
    server = TokenServer()
    yield server
    server.stop()


def connect(path: Path) -> KubernetesApi:
    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(path)))
    assert api is not None
    return api


# ------------------------------------------------------------------ a client certificate rotated under kept-alive connections


class KeptAliveTlsServer:
    """An API server over TLS with keep-alive that answers a pod named after the client
    certificate's common name, or 401 to a certificate in ``refused`` (as the API server's x509
    authenticator checks the certificate of each request, not of each handshake: an expired
    one is refused on the connection it was accepted on)."""

    def __init__(self, serving: ServingCertificate, client_ca: ClientAuthority) -> None:
        self.refused: set[str] = set()
        self.handshakes: list[str] = []
        owner = self

        class Handler(QuietHandler):
            def setup(self) -> None:
                super().setup()
                owner.handshakes.append(self.common_name())

            def common_name(self) -> str:
                return str(dict(item[0] for item in self.connection.getpeercert()["subject"])["commonName"])

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                name = self.common_name()
                if name in owner.refused:
                    code, body = 401, b'{"kind":"Status","code":401,"message":"Unauthorized"}'
                else:
                    code, body = 200, json.dumps({"metadata": {"name": name, "namespace": "default", "uid": "u"}}).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(serving.cert_file, serving.key_file)
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=client_ca.pem().decode())
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def kept_alive(tmp_path: Path) -> Iterator[tuple[KeptAliveTlsServer, ServingCertificate, ClientAuthority]]:
    serving, authority = make_serving_certificate(tmp_path / "serving"), ClientAuthority("client-ca")
    server = KeptAliveTlsServer(serving, authority)
    yield server, serving, authority
    server.stop()


def test_a_rotated_client_certificate_is_presented_on_the_event_loop_s_kept_alive_pool(
    kept_alive: tuple[KeptAliveTlsServer, ServingCertificate, ClientAuthority], tmp_path: Path,
) -> None:
    """The kubeconfig's certificate renewed (kubeadm certs renew, an exec plugin's short-lived
    one: Pinniped's last minutes) and the old one refused since: the loop's pool kept the
    connections made with it, so a bind (here a pod read, the same path) was refused, and its
    retry after the refresh went out on the same connection, refused alike."""
    server, serving, authority = kept_alive
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=server.url, user=embedded_pair(authority.issue("cellfit-1")), ca=serving.ca_pem))
    api = connect(path)

    async def scenario() -> list[str]:
        seen = []
        pod = await api.get_pod("default", "p")
        seen.append(pod.metadata.name if pod is not None else "")
        path.write_text(kubeconfig(server=server.url, user=embedded_pair(authority.issue("cellfit-2")), ca=serving.ca_pem))
        server.refused.add("cellfit-1")  # expired, or revoked
        pod = await api.get_pod("default", "p")
        seen.append(pod.metadata.name if pod is not None else "")
        return seen

    assert asyncio.run(scenario()) == ["cellfit-1", "cellfit-2"]
    assert server.handshakes == ["cellfit-1", "cellfit-2"]
