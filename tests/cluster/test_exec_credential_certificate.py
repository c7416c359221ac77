"""An exec plugin whose credentials change kind or certificate under kept-alive connections
(scheduler/cluster/api.py, KubeconfigCredentials and _ClientPoolRotation;
scheduler/cluster/loop_http.py, TlsContext), against a real TLS server on loopback that asks for
a client certificate without requiring one (as the API server does: a request without one may
still carry a token):

- the plugin's first run gave a token, a later one a client certificate and key (a token
  revoked, an identity provider that moved to short-lived certificates): the connections kept
  from before went on presenting no certificate, and the Kubernetes client's pools never
  presented it at all (they took the Configuration's files once, when the client was made), so
  every request was refused, the retry after the refresh too. client-go closes its connections
  whenever the plugin's certificate changes (exec.go, connTracker.CloseAll) and presents the
  new one;
- a later run's new certificate where the first gave one (closed as a rotated file's already);
- a run that gives a certificate only stops the earlier run's token being sent.

The credentials' refresh interval is 0 here, as in test_kubeconfig_rotation.py: each request
refreshes them."""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
from pathlib import Path
from typing import Iterator

import pytest

from scheduler.cluster import loop_http
from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings
from tests.cluster.test_kubeconfig_rotation import kubeconfig
from tests.cluster.test_loop_http_tls_rotation import ClientAuthority
from tests.support.loopback_http import LoopbackServer, QuietHandler
from tests.support.tls import ServingCertificate, make_serving_certificate

# Run 1 answers with ``first`` (a token, or the certificate issued as exec-1); every later run
# with the certificate issued as exec-2.
PLUGIN = '''
import json, pathlib, sys
runs, first, pairs = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
run = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(run))
if run == 1 and first == "token":
    status = {"token": "token-1"}
else:
    name = "exec-1" if run == 1 else "exec-2"
    status = {"clientCertificateData": (pairs / f"{name}.crt").read_text(), "clientKeyData": (pairs / f"{name}.key").read_text()}
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}))
'''


@pytest.fixture(autouse=True)
def refresh_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_http, "CREDENTIALS_REFRESH_SECONDS", 0.0)


class CertificateOptionalServer:
    """An API server over TLS with keep-alive that asks for a client certificate signed by its
    client CA without requiring one, and answers what it was shown, ``{"client": common name or
    "", "authorization": header}``; 401 to a request whose certificate's common name or token
    is in ``refused``, or that shows neither (the API server checks each request)."""

    def __init__(self, serving: ServingCertificate, client_ca: ClientAuthority) -> None:
        self.refused: set[str] = set()
        self.shown: list[tuple[str, str]] = []  # (common name, Authorization) per request
        owner = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                subject = dict(item[0] for item in (self.connection.getpeercert() or {}).get("subject", ()))
                name, authorization = str(subject.get("commonName", "")), self.headers.get("Authorization", "")
                owner.shown.append((name, authorization))
                token = authorization.removeprefix("Bearer ")
                authenticated = (name and name not in owner.refused) or (token and token not in owner.refused)
                code = 200 if authenticated else 401
                body = json.dumps({"client": name, "authorization": authorization} if authenticated
                                  else {"kind": "Status", "code": 401, "message": "Unauthorized"}).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(serving.cert_file, serving.key_file)
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=client_ca.pem().decode())
        self.server = LoopbackServer(Handler, tls=context)


class Setup:
    def __init__(self, server: CertificateOptionalServer, serving: ServingCertificate, root: Path, authority: ClientAuthority) -> None:
        self.server, self.serving, self.root = server, serving, root
        pairs = root / "pairs"
        pairs.mkdir()
        for name in ("exec-1", "exec-2"):
            certificate, key = authority.issue(name)
            (pairs / f"{name}.crt").write_bytes(certificate)
            (pairs / f"{name}.key").write_bytes(key)

    def connect(self, *, first: str) -> KubernetesApi:
        """cellfit connected through a kubeconfig whose user runs the plugin (its first run
        already made)."""
        script = self.root / "plugin.py"
        script.write_text(PLUGIN)
        path = self.root / "kubeconfig"
        path.write_text(kubeconfig(server=self.server.server.url, ca=self.serving.ca_pem, user={"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "interactiveMode": "Never",
            "args": [str(script), str(self.root / "runs"), first, str(self.root / "pairs")]}}))
        api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(path)))
        assert api is not None
        return api


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    serving, authority = make_serving_certificate(tmp_path / "serving"), ClientAuthority("client-ca")
    server = CertificateOptionalServer(serving, authority)
    yield Setup(server, serving, tmp_path, authority)
    server.server.stop()


def first_shown(first: str) -> tuple[str, str]:
    return ("", "Bearer token-1") if first == "token" else ("exec-1", "")


@pytest.mark.parametrize("first", ["token", "certificate"])
def test_a_later_exec_certificate_is_presented_on_the_event_loop_s_kept_alive_pool(first: str, setup: Setup) -> None:
    """A bind (here a pod read, the same path) on the connection kept from the first run's
    credentials, then those refused: the plugin runs again and gives exec-2's certificate, and
    the request sent again presents it, without the first run's token."""
    api = setup.connect(first=first)

    async def scenario() -> None:
        assert await api.get_pod("default", "p") is not None  # the connection kept
        setup.server.refused |= {"token-1", "exec-1"}  # revoked, or expired
        assert await api.get_pod("default", "p") is not None

    asyncio.run(scenario())
    assert setup.server.shown == [first_shown(first), first_shown(first), ("exec-2", "")]


@pytest.mark.parametrize("first", ["token", "certificate"])
def test_a_later_exec_certificate_is_presented_on_the_client_s_kept_alive_pool(first: str, setup: Setup) -> None:
    """The same on the Kubernetes client's own connections (urllib3's pools: lists, the
    estimator's and the placer's writes, binds behind a proxy)."""
    api = setup.connect(first=first)
    assert api.get_path("/api/v1/namespaces/default/pods/p") is not None
    setup.server.refused |= {"token-1", "exec-1"}
    assert json.loads(api.get_path("/api/v1/namespaces/default/pods/p") or b"{}")["client"] == "exec-2"
    assert setup.server.shown == [first_shown(first), first_shown(first), ("exec-2", "")]
