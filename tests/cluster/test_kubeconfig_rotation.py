"""Credentials of a kubeconfig that change while cellfit runs (scheduler/cluster/api.py,
KubeconfigCredentials), through KubernetesApi.connect against real servers on loopback:

- embedded ones (``token``, ``client-certificate-data``/``client-key-data``,
  ``certificate-authority-data``) rewritten in the file by a rotation: sent on new connections
  from the next refresh; a rewrite that does not load keeps the last good ones, with a warning
  naming the file and the field;
- an exec plugin's (a tiny plugin that counts its runs and hands out numbered tokens or
  certificates): obtained again when they expire or when the API server answers 401.

The credentials' refresh interval (loop_http.CREDENTIALS_REFRESH_SECONDS) is set to 0 here so
that each request refreshes them: what is tested is what a refresh does, not its pacing."""

from __future__ import annotations

import base64
import json
import logging
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client as k8s

from scheduler.cluster import loop_http
from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings
from scheduler.errors import ConfigError
from tests.cluster.test_loop_http_tls_rotation import ApiServer, ClientAuthority
from tests.support.loopback_http import LoopbackServer, QuietHandler
from tests.support.tls import ServingCertificate, make_serving_certificate

PAST = "2000-01-01T00:00:00Z"
FAR = "2999-01-01T00:00:00Z"
PLUGIN = '''
import json, pathlib, sys, time
counter, kind, expires, pairs = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], pathlib.Path(sys.argv[4])
run = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(run))
if kind == "token-once" and run > 1:
    sys.exit("error: the identity provider did not answer")
if kind == "token-held" and run > 1:  # answers once the test releases it (or 10 s on: a bound on a hang)
    waited = time.monotonic()
    while not (pairs / "release").exists() and time.monotonic() - waited < 10:
        time.sleep(0.01)
if kind.startswith("token"):
    status = {"token": f"token-{run}"}
else:
    status = {"clientCertificateData": (pairs / f"{run}.crt").read_text(), "clientKeyData": (pairs / f"{run}.key").read_text()}
if expires != "never":
    status["expirationTimestamp"] = expires
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}))
'''


@pytest.fixture(autouse=True)
def refresh_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_http, "CREDENTIALS_REFRESH_SECONDS", 0.0)


class TokenServer:
    """An API server over HTTP that accepts the bearer tokens in ``accepted`` (any, when None)
    and answers 401 to others, recording each Authorization header it was sent."""

    def __init__(self) -> None:
        self.accepted: set[str] | None = None
        self.sent: list[str] = []
        owner = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                token = self.headers.get("Authorization", "")
                owner.sent.append(token)
                allowed = owner.accepted is None or token in owner.accepted
                code, body = (200, b'{"kind":"Status","code":200}') if allowed else (401, b'{"kind":"Status","code":401,"message":"Unauthorized"}')
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = LoopbackServer(Handler)

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture
def token_server() -> Iterator[TokenServer]:
    server = TokenServer()
    yield server
    server.stop()


@pytest.fixture
def serving(tmp_path: Path) -> ServingCertificate:
    return make_serving_certificate(tmp_path / "serving")


@pytest.fixture
def authority() -> ClientAuthority:
    return ClientAuthority("client-ca")


@pytest.fixture
def tls_server(serving: ServingCertificate, authority: ClientAuthority) -> Iterator[ApiServer]:
    server = ApiServer(serving, authority, keep_alive=False)  # each request on a new connection
    yield server
    server.stop()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(*, server: str, user: dict[str, Any], ca: bytes | None = None) -> str:
    cluster: dict[str, Any] = {"server": server}
    if ca is not None:
        cluster["certificate-authority-data"] = b64(ca)
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "here",
        "clusters": [{"name": "here", "cluster": cluster}],
        "users": [{"name": "cellfit", "user": user}],
        "contexts": [{"name": "here", "context": {"cluster": "here", "user": "cellfit"}}],
    })


def embedded_pair(pair: tuple[bytes, bytes]) -> dict[str, str]:
    return {"client-certificate-data": b64(pair[0]), "client-key-data": b64(pair[1])}


def connect(path: Path) -> KubernetesApi:
    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(path)))
    assert api is not None
    return api


def shown(api: KubernetesApi) -> str:
    """The common name of the client certificate the TLS server was shown (on the Kubernetes
    client's own connections: a new one per request here)."""
    answer = api.get_path("/whoami")
    assert answer is not None
    return str(json.loads(answer)["client"])


# ------------------------------------------------------------------ embedded credentials rewritten


def test_a_rewritten_embedded_token_is_sent_from_the_next_refresh(token_server: TokenServer, tmp_path: Path) -> None:
    """The Kubernetes client reads a kubeconfig once: a token rotated in the file by an external
    tool was never sent, and once the old one was revoked every call was refused until a restart."""
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=token_server.url, user={"token": "first"}))
    api = connect(path)
    api.get_path("/api/v1/namespaces/default")
    path.write_text(kubeconfig(server=token_server.url, user={"token": "rotated"}))
    api.get_path("/api/v1/namespaces/default")
    api.get_priority_class("cellfit-trial")  # the generated client's path reads the same
    assert token_server.sent == ["Bearer first", "Bearer rotated", "Bearer rotated"]


def test_a_rewritten_embedded_client_certificate_is_presented_on_new_connections(
    tls_server: ApiServer, serving: ServingCertificate, authority: ClientAuthority, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """kubeadm's ``kubeadm certs renew``, or a tool writing a fresh kubeconfig: the client
    certificate and key embedded in it were written to temporary files once, at load; the old
    certificate was presented until it expired, then every connection was refused."""
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=tls_server.url, user=embedded_pair(authority.issue("cellfit-1")), ca=serving.ca_pem))
    api = connect(path)
    seen = [shown(api)]
    caplog.set_level(logging.INFO, logger="scheduler.cluster.credentials")
    path.write_text(kubeconfig(server=tls_server.url, user=embedded_pair(authority.issue("cellfit-2")), ca=serving.ca_pem))
    seen.append(shown(api))
    assert seen == ["cellfit-1", "cellfit-2"]
    [rewritten] = [r for r in caplog.records if "kubeconfig was rewritten" in r.getMessage()]
    assert rewritten.file == str(path) and "client-certificate-data" in rewritten.field  # type: ignore[attr-defined]


def broken_rewrites(authority: ClientAuthority, *, server: str, ca: bytes) -> dict[str, tuple[str, str]]:
    """Rewrites that do not load, by what is wrong: the file's text and the field named."""
    whole = kubeconfig(server=server, user=embedded_pair(authority.issue("cellfit-2")), ca=ca)
    other_key = authority.issue("someone-else")[1]
    mismatched = embedded_pair(authority.issue("cellfit-2")) | {"client-key-data": b64(other_key)}
    return {
        "half-written": (whole[: len(whole) // 2] + '\n  "', "(line"),
        "a key not the certificate's": (kubeconfig(server=server, user=mismatched, ca=ca), "users[cellfit].user.client-key-data"),
        "not base64": (kubeconfig(server=server, user=embedded_pair(authority.issue("x")) | {"client-certificate-data": "%%%"}, ca=ca),
                       "users[cellfit].user.client-certificate-data"),
        "the key missing": (kubeconfig(server=server, user={"client-certificate-data": b64(authority.issue("x")[0])}, ca=ca),
                            "users[cellfit].user.client-key-data"),
        "a CA that is none": (whole.replace(b64(ca), b64(b"-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n")),
                              "clusters[here].cluster.certificate-authority-data"),
    }


@pytest.mark.parametrize("broken", ["half-written", "a key not the certificate's", "not base64", "the key missing", "a CA that is none"])
def test_a_rewrite_that_does_not_load_keeps_the_last_good_credentials_and_names_the_field(
    broken: str, tls_server: ApiServer, serving: ServingCertificate, authority: ClientAuthority, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=tls_server.url, user=embedded_pair(authority.issue("cellfit-1")), ca=serving.ca_pem))
    api = connect(path)
    text, field = broken_rewrites(authority, server=tls_server.url, ca=serving.ca_pem)[broken]
    path.write_text(text)
    seen = [shown(api), shown(api)]
    path.write_text(kubeconfig(server=tls_server.url, user=embedded_pair(authority.issue("cellfit-3")), ca=serving.ca_pem))
    seen.append(shown(api))
    assert seen == ["cellfit-1", "cellfit-1", "cellfit-3"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "does not load" in r.getMessage()]
    assert len(warnings) == 1  # once per rewrite, not per refresh
    assert warnings[0].file == str(path) and warnings[0].field.startswith(field)  # type: ignore[attr-defined]


def test_a_rewrite_changing_the_server_is_logged_as_taking_effect_at_restart(
    token_server: TokenServer, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=token_server.url, user={"token": "first"}))
    api = connect(path)
    path.write_text(kubeconfig(server="https://10.0.0.9:6443", user={"token": "rotated"}))
    api.get_path("/api/v1/namespaces/default")
    assert token_server.sent == ["Bearer rotated"]  # the token is followed; the server is the one connected to
    [restart] = [r for r in caplog.records if "at its restart" in r.getMessage()]
    assert restart.field == "clusters[here].cluster.server"  # type: ignore[attr-defined]


# ------------------------------------------------------------------ exec credential plugins


def exec_user(tmp_path: Path, *, kind: str, expires: str) -> tuple[dict[str, Any], Path]:
    """A kubeconfig user whose credentials come from the counting plugin; the file its runs are counted in."""
    script, counter = tmp_path / "plugin.py", tmp_path / "runs"
    script.write_text(PLUGIN)
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "interactiveMode": "Never",
                     "args": [str(script), str(counter), kind, expires, str(tmp_path / "pairs")]}}, counter


def connected_to_plugin(tmp_path: Path, *, server: str, kind: str, expires: str, ca: bytes | None = None) -> tuple[KubernetesApi, Path]:
    """cellfit connected through a kubeconfig whose user runs the counting plugin (``kind``:
    token, token-once, certificate); the file its runs are counted in."""
    user, counter = exec_user(tmp_path, kind=kind, expires=expires)
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=server, user=user, ca=ca))
    return connect(path), counter


def runs(counter: Path) -> int:
    return int(counter.read_text()) if counter.exists() else 0


@pytest.mark.parametrize(("expires", "tokens", "plugin_runs"), [
    (FAR, ["Bearer token-1", "Bearer token-1"], 1),
    (PAST, ["Bearer token-2", "Bearer token-3"], 3),
], ids=["valid", "expired"])
def test_an_exec_token_is_obtained_again_once_it_expires(
    expires: str, tokens: list[str], plugin_runs: int, token_server: TokenServer, tmp_path: Path,
) -> None:
    api, counter = connected_to_plugin(tmp_path, server=token_server.url, kind="token", expires=expires)
    api.get_path("/api/v1/namespaces/default")
    api.get_path("/api/v1/namespaces/default")
    assert token_server.sent == tokens and runs(counter) == plugin_runs


def test_an_exec_token_about_to_expire_is_obtained_beside_the_requests(token_server: TokenServer, tmp_path: Path) -> None:
    """Within a minute of its expiry the plugin runs in a thread of its own: a request does not
    wait for it (here it waits for the test), and the next ones send what it gave."""
    soon = (datetime.now(timezone.utc) + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    (tmp_path / "pairs").mkdir()
    api, _ = connected_to_plugin(tmp_path, server=token_server.url, kind="token-held", expires=soon)
    api.get_path("/api/v1/namespaces/default")  # starts the plugin's second run, which is held
    assert token_server.sent == ["Bearer token-1"]
    (tmp_path / "pairs" / "release").touch()
    deadline = time.monotonic() + 10
    while token_server.sent[-1] != "Bearer token-2":  # a bound on a hang, not a measure
        assert time.monotonic() < deadline, f"token-2 never sent: {token_server.sent}"
        time.sleep(0.01)
        api.get_path("/api/v1/namespaces/default")
    # token-2 expires as soon (the plugin hands out one expiry): the request that sent it may
    # have started run 3 beside it already, so the runs are not counted; token-2 was the second's.


def test_an_exec_plugin_that_fails_later_keeps_the_last_token_and_says_so(
    token_server: TokenServer, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    api, counter = connected_to_plugin(tmp_path, server=token_server.url, kind="token-once", expires=PAST)
    api.get_path("/api/v1/namespaces/default")
    assert token_server.sent == ["Bearer token-1"] and runs(counter) == 2
    [failed] = [r for r in caplog.records if "exec plugin failed" in r.getMessage()]
    assert failed.field == "users[cellfit].user.exec" and "did not answer" in failed.reason  # type: ignore[attr-defined]


def test_an_exec_token_refused_by_the_api_server_is_obtained_again(token_server: TokenServer, tmp_path: Path) -> None:
    """A plugin's token without an expirationTimestamp (or revoked before it): the Kubernetes
    client ran the plugin once, at load, and never again; every call was refused (401) until a
    restart. client-go runs the plugin again on a 401; so does cellfit, and sends the request
    once more (it was refused unread)."""
    api, counter = connected_to_plugin(tmp_path, server=token_server.url, kind="token", expires="never")
    token_server.accepted = {"Bearer token-2"}  # token-1 was revoked
    assert api.get_path("/api/v1/namespaces/default") is not None
    assert api.get_path("/api/v1/namespaces/default") is not None
    assert token_server.sent == ["Bearer token-1", "Bearer token-2", "Bearer token-2"] and runs(counter) == 2


def test_an_exec_plugin_s_client_certificate_is_obtained_again_once_it_expires(
    tls_server: ApiServer, serving: ServingCertificate, authority: ClientAuthority, tmp_path: Path,
) -> None:
    """A plugin that hands out a client certificate (clientCertificateData): the Kubernetes client
    installs no refresh for one, so the first certificate was presented past its expiry."""
    pairs = tmp_path / "pairs"
    pairs.mkdir()
    for run in (1, 2):
        certificate, key = authority.issue(f"exec-{run}")
        (pairs / f"{run}.crt").write_bytes(certificate)
        (pairs / f"{run}.key").write_bytes(key)
    api, counter = connected_to_plugin(tmp_path, server=tls_server.url, kind="certificate", expires=PAST, ca=serving.ca_pem)
    assert shown(api) == "exec-2" and runs(counter) == 2


@pytest.mark.parametrize(("user", "field"), [
    ({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/nonexistent/aws-iam-authenticator"}},
     r"users\[cellfit\]\.user\.exec: the credential plugin failed"),
    ({"client-certificate-data": b64(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), "client-key-data": b64(b"-----BEGIN PRIVATE KEY-----\n")},
     r"users\[cellfit\]\.user\.client-certificate-data: the client certificate and key do not load together"),
    ({"token": ""}, r"users\[cellfit\]\.user\.token: not a token"),
], ids=["an exec plugin that fails", "a certificate that does not load", "an empty token"])
def test_credentials_that_do_not_load_at_start_are_a_configuration_error_naming_the_field(
    user: dict[str, Any], field: str, token_server: TokenServer, tmp_path: Path,
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=token_server.url, user=user))
    with pytest.raises(ConfigError, match=rf"cluster\.kubeconfig: {tmp_path}/kubeconfig: {field}"):
        connect(path)


def test_a_follower_that_fails_unforeseen_keeps_the_last_headers() -> None:
    """What follows the credentials raising past its own checks (its folder removed under it: an
    OSError) fails no request: the last headers are sent, and the refresh is tried again."""
    configuration = k8s.Configuration()
    configuration.api_key = {"BearerToken": "Bearer first"}
    calls: list[bool] = []

    def follow(*, refused: bool) -> None:
        calls.append(refused)
        if len(calls) > 1:
            raise FileNotFoundError("/tmp/cellfit-kubeconfig-x/client.pem.new")

    credentials = loop_http.Credentials(configuration, follow=follow)
    assert credentials()["authorization"] == "Bearer first"
    credentials.expire()
    assert credentials()["authorization"] == "Bearer first"
    assert calls == [False, True]
