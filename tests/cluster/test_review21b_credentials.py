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
- a write refused 401 is sent again only while the replica's term of leadership lasts;
- the plugin never runs on the event loop (a 401's refresh in a thread, expired credentials
  obtained in one), and requests refused together wait for one run;
- a run ahead of expiry of a plugin the kubeconfig was rewritten away from is dropped;
- the same kept-alive rotation on the Kubernetes client's own connections (urllib3's pools).

The credentials' refresh interval is 0 here, as in test_kubeconfig_rotation.py: each request
refreshes them."""

from __future__ import annotations

import asyncio
import io
import json
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from scheduler.cluster import exec_plugin
from scheduler.cluster import loop_http
from scheduler.cluster.api import KubernetesApi, TermEnded
from scheduler.config import ClusterSettings
from scheduler.errors import ConfigError
from tests.cluster.test_kubeconfig_rotation import TokenServer, b64, embedded_pair, exec_user, kubeconfig
from tests.cluster.test_loop_http_tls_rotation import ApiServer, ClientAuthority
from tests.support.loopback_http import LoopbackServer, QuietHandler
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

        self.server = LoopbackServer(Handler, tls=ApiServer.make_context(serving, client_ca))

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.stop()


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


# ------------------------------------------------------------------ how an exec plugin is run

REPORTING_PLUGIN = '''
import json, os, pathlib, sys, time
report, mode = pathlib.Path(sys.argv[1]), sys.argv[2]
runs = report.with_suffix(".runs")
run = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(run))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
report.write_text(json.dumps({"interactive": info["spec"]["interactive"], "stdin": os.path.realpath("/proc/self/fd/0"),
                              "cluster": info["spec"].get("cluster")}))
if mode == "hang" or (mode == "hang-later" and run > 1):  # held until the test releases it (a bound on a hang)
    waited = time.monotonic()
    while not report.with_suffix(".release").exists() and time.monotonic() - waited < 30:
        time.sleep(0.01)
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": f"token-{run}", "expirationTimestamp": sys.argv[3]}}))
'''


def plugin_kubeconfig(tmp_path: Path, *, server: str, mode: str, expires: str = "2999-01-01T00:00:00Z",
                      **exec_fields: Any) -> tuple[Path, Path]:
    """A kubeconfig whose user runs the reporting plugin; the file it reports what it was given in."""
    script, report = tmp_path / "plugin.py", tmp_path / "report.json"
    script.write_text(REPORTING_PLUGIN)
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=server, user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": [str(script), str(report), mode, expires], **exec_fields}}))
    return path, report


class Terminal(io.StringIO):
    """Standard output as when cellfit is started from a shell."""

    def isatty(self) -> bool:
        return True


def test_an_exec_plugin_never_reads_cellfit_s_standard_input_nor_is_told_it_is_interactive(
    token_server: TokenServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cellfit started from a terminal (a developer's shell): the Kubernetes client's runner
    took stdout being a terminal for an interactive session and handed the plugin cellfit's
    standard input, with ``spec.interactive`` true, whatever ``interactiveMode`` said (Never
    here): a plugin prompting for a login would wait on a terminal no one watches, the
    follower's lock held. client-go gives a plugin its standard input only when interactive."""
    typed = tmp_path / "typed-at-the-terminal"
    typed.write_text("password\n")
    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setattr(sys, "stdin", typed.open())
    path, report = plugin_kubeconfig(tmp_path, server=token_server.url, mode="report", interactiveMode="Never")
    connect(path)
    told = json.loads(report.read_text())
    assert told["interactive"] is False
    assert told["stdin"] == "/dev/null"


def test_an_exec_plugin_that_needs_a_terminal_is_a_configuration_error(token_server: TokenServer, tmp_path: Path) -> None:
    """``interactiveMode: Always``: client-go refuses to run the plugin without a terminal;
    cellfit, a server, has none to give it."""
    path, report = plugin_kubeconfig(tmp_path, server=token_server.url, mode="report", interactiveMode="Always")
    with pytest.raises(ConfigError, match=r"users\[cellfit\]\.user\.exec\.interactiveMode: Always"):
        connect(path)
    assert not report.exists()


def test_an_exec_plugin_that_hangs_is_killed_and_named(
    token_server: TokenServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Kubernetes client's runner waits for the plugin for good: a plugin that hangs (an
    identity provider that never answers, a login waiting for a browser) held the follower's
    lock, and with it every later refresh of the credentials, the event loop's among them."""
    monkeypatch.setattr(exec_plugin, "EXEC_PLUGIN_TIMEOUT_SECONDS", 0.5)
    path, report = plugin_kubeconfig(tmp_path, server=token_server.url, mode="hang", interactiveMode="Never")
    try:
        with pytest.raises(ConfigError, match=r"users\[cellfit\]\.user\.exec: the credential plugin did not answer within 0\.5s"):
            connect(path)
    finally:
        report.with_suffix(".release").touch()


def test_a_refresh_does_not_wait_for_a_plugin_another_thread_runs(token_server: TokenServer, tmp_path: Path) -> None:
    """The plugin's credentials expired: a watch's thread runs it inline, under the follower's
    lock. The event loop's next refresh waited on that lock for as long as the plugin took
    (for good, for one that hangs); it now sends the current credentials meanwhile."""
    path, report = plugin_kubeconfig(tmp_path, server=token_server.url, mode="hang-later", expires="2000-01-01T00:00:00Z",
                                     interactiveMode="Never")
    api = connect(path)  # run 1, at once; each later one is held until released
    runs = report.with_suffix(".runs")
    held = threading.Thread(target=api.get_path, args=("/api/v1/namespaces/held",))
    held.start()
    try:
        deadline = time.monotonic() + 20
        while runs.read_text() != "2":  # a bound on a hang, not a measure
            assert time.monotonic() < deadline, "the plugin's second run never started"
            time.sleep(0.01)
        released = report.with_suffix(".release")
        api.get_path("/api/v1/namespaces/meanwhile")
        assert not released.exists()
        assert token_server.sent[-1] == "Bearer token-1"
    finally:
        report.with_suffix(".release").touch()
        held.join()


def test_provide_cluster_info_describes_the_cluster_as_client_go_does(token_server: TokenServer, tmp_path: Path) -> None:
    """``provideClusterInfo``: the Kubernetes client's runner handed the plugin the kubeconfig's
    raw cluster entry, a CA given as a file (``certificate-authority``) as its path, which a
    plugin on another machine's folder cannot read, and ``extensions`` as they are. client-go
    hands it the CA's content as ``certificate-authority-data`` and the
    client.authentication.k8s.io/exec extension as ``config``."""
    (tmp_path / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\nthe CA\n-----END CERTIFICATE-----\n")
    path, report = plugin_kubeconfig(tmp_path, server=token_server.url, mode="report", interactiveMode="Never", provideClusterInfo=True)
    document = yaml.safe_load(path.read_text())
    document["clusters"][0]["cluster"] |= {"certificate-authority": "ca.crt", "extensions": [
        {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "cellfit"}}]}
    path.write_text(yaml.safe_dump(document))
    connect(path)
    told = json.loads(report.read_text())["cluster"]
    assert told == {"server": token_server.url, "certificate-authority-data": b64((tmp_path / "ca.crt").read_bytes()),
                    "config": {"audience": "cellfit"}}


# ------------------------------------------------------------------ the plugin's run ahead of expiry, the kubeconfig rewritten meanwhile

NEW_PLUGIN = '''
import json
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": "new", "expirationTimestamp": "2999-01-01T00:00:00Z"}}))
'''


def test_a_run_ahead_of_expiry_of_a_plugin_rewritten_away_meanwhile_is_not_installed(token_server: TokenServer, tmp_path: Path) -> None:
    """The plugin's run ahead of its credentials' expiry (a thread of its own) under way when the
    kubeconfig is rewritten with another plugin: the new plugin runs at once and its token is
    sent; the old run, answering later, installed its token over the new one (and its expiry)."""
    user, _ = exec_user(tmp_path, kind="token-held", expires=(datetime.now(timezone.utc) + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    (tmp_path / "pairs").mkdir()
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=token_server.url, user=user))
    api = connect(path)  # run 1 of the old plugin
    api.get_path("/api/v1/namespaces/default")  # its run 2 starts ahead of expiry, held
    [ahead] = [thread for thread in threading.enumerate() if thread.name == "kubeconfig-exec"]
    new_script = tmp_path / "new_plugin.py"
    new_script.write_text(NEW_PLUGIN)
    path.write_text(kubeconfig(server=token_server.url, user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(new_script)], "interactiveMode": "Never"}}))
    api.get_path("/api/v1/namespaces/default")  # the rewrite read: the new plugin run at once
    (tmp_path / "pairs" / "release").touch()
    ahead.join()
    api.get_path("/api/v1/namespaces/default")
    assert token_server.sent == ["Bearer token-1", "Bearer new", "Bearer new"]


# ------------------------------------------------------------------ a write refused 401, the term of leadership ended meanwhile


class WriteServer:
    """An API server over HTTP that refuses every request (HTTP 401), counting the writes."""

    def __init__(self) -> None:
        self.writes = 0
        owner = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                owner.writes += 1
                body = b'{"kind":"Status","code":401,"message":"Unauthorized"}'
                self.send_response(401)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = LoopbackServer(Handler)


def test_a_write_refused_401_is_not_sent_again_once_the_term_has_ended(tmp_path: Path) -> None:
    """A write refused 401 is sent once more after the credentials' refresh (an exec plugin's
    run: seconds); the term of leadership was checked before the first send only, so a
    replica whose Lease was lost meanwhile wrote anyway (a reclaim's deletion, a Job's patch)."""
    server = WriteServer()
    try:
        path = tmp_path / "kubeconfig"
        path.write_text(kubeconfig(server=server.server.url, user={"token": "revoked"}))
        terms = iter([True])  # in term at the first check; ended by any later one
        api = connect(path).fenced(lambda: next(terms, False))
        with pytest.raises(TermEnded):
            api.write_path("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "x"}})
        assert server.writes == 1
    finally:
        server.server.stop()


# ------------------------------------------------------------------ the event loop never runs the plugin

RELEASED_PLUGIN = '''
import json, pathlib, sys, time
runs, release, first_expires = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
run = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(run))
how = "first"
if run > 1:  # held until the test releases it; else it gives up on its own (a bound on a hang)
    waited, how = time.monotonic(), "unreleased"
    while time.monotonic() - waited < 20:
        if release.exists():
            how = "released"
            break
        time.sleep(0.01)
status = {"token": how} | ({"expirationTimestamp": first_expires} if run == 1 and first_expires != "never" else {})
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}))
'''


def released_plugin_api(tmp_path: Path, *, server: str, first_expires: str) -> tuple[KubernetesApi, Path, Path]:
    """cellfit connected through a kubeconfig whose plugin answers "first" at once (expiring at
    ``first_expires``), then holds each later run until released; its runs' count, its release."""
    script, runs, release = tmp_path / "plugin.py", tmp_path / "runs", tmp_path / "release"
    script.write_text(RELEASED_PLUGIN)
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=server, user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": [str(script), str(runs), str(release), first_expires], "interactiveMode": "Never"}}))
    return connect(path), runs, release


async def release_once_running(runs: Path, release: Path) -> None:
    while not (runs.exists() and runs.read_text() == "2"):
        await asyncio.sleep(0.01)
    release.touch()


def test_a_bind_refused_401_has_the_plugin_run_beside_the_event_loop(token_server: TokenServer, tmp_path: Path) -> None:
    """A request on the event loop's path (a bind) refused 401: the plugin ran inline, on the
    event loop, which answered nothing else (kube-scheduler's verbs, health) until it ended. It
    now runs in a thread while the loop goes on (here: the task that releases it)."""
    api, runs, release = released_plugin_api(tmp_path, server=token_server.url, first_expires="never")
    token_server.accepted = {"Bearer released", "Bearer unreleased"}  # "first" revoked

    async def scenario() -> None:
        releasing = asyncio.create_task(release_once_running(runs, release))
        assert await api.get_pod("default", "p") is not None
        await releasing

    asyncio.run(scenario())
    assert token_server.sent == ["Bearer first", "Bearer released"]


def test_expired_plugin_credentials_are_obtained_beside_the_event_loop(token_server: TokenServer, tmp_path: Path) -> None:
    """The plugin's credentials found expired by a refresh on the event loop (their renewal ahead
    of expiry failed, or the clock jumped): the plugin ran inline there, the loop answering
    nothing else until it ended. It now runs in a thread of its own, the request sending the
    current credentials (the API server's 401, if it refuses them, is retried off the loop)."""
    api, runs, release = released_plugin_api(tmp_path, server=token_server.url, first_expires="2000-01-01T00:00:00Z")

    async def scenario() -> None:
        releasing = asyncio.create_task(release_once_running(runs, release))
        assert await api.get_pod("default", "p") is not None
        await releasing
        [renewal] = [thread for thread in threading.enumerate() if thread.name == "kubeconfig-exec"]
        await asyncio.to_thread(renewal.join)
        assert await api.get_pod("default", "p") is not None

    asyncio.run(scenario())
    assert token_server.sent == ["Bearer first", "Bearer released"]


def test_a_rotated_client_certificate_is_presented_on_the_client_s_kept_alive_pool(
    kept_alive: tuple[KeptAliveTlsServer, ServingCertificate, ClientAuthority], tmp_path: Path,
) -> None:
    """The same on the Kubernetes client's own connections (urllib3's pool: lists, the
    estimator's and the placer's writes, binds behind a proxy): the connection kept from
    before the rotation was used again, its retry too, both refused."""
    server, serving, authority = kept_alive
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=server.url, user=embedded_pair(authority.issue("cellfit-1")), ca=serving.ca_pem))
    api = connect(path)
    seen = [json.loads(api.get_path("/api/v1/namespaces/default/pods/p") or b"{}")["metadata"]["name"]]
    path.write_text(kubeconfig(server=server.url, user=embedded_pair(authority.issue("cellfit-2")), ca=serving.ca_pem))
    server.refused.add("cellfit-1")  # expired, or revoked
    seen.append(json.loads(api.get_path("/api/v1/namespaces/default/pods/p") or b"{}")["metadata"]["name"])
    assert seen == ["cellfit-1", "cellfit-2"]


def test_binds_refused_together_are_all_sent_again_with_the_plugin_s_next_token(token_server: TokenServer, tmp_path: Path) -> None:
    """Several binds (here pod reads, the same path) refused 401 at once, the plugin's token
    revoked: the refresh of one ran the plugin, the others' found it running (or their refusal
    taken over by another request's refresh) and sent the revoked token again, refused. client-go
    waits for the run under way; so does cellfit now, off the event loop, and runs the plugin
    once."""
    user, counter = exec_user(tmp_path, kind="token", expires="never")
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=token_server.url, user=user))
    api = connect(path)  # token-1
    token_server.accepted = {"Bearer token-2"}  # token-1 revoked

    async def scenario() -> list[bool]:
        pods = await asyncio.gather(*(api.get_pod("default", f"p{n}") for n in range(4)))
        return [pod is not None for pod in pods]

    assert asyncio.run(scenario()) == [True] * 4
    assert counter.read_text() == "2"
