"""``kubectl cellfit`` end to end on this machine: the command line, the kubeconfig as kubectl
reads it, the tables and ``-o json|yaml``, and every error a user can meet.

The API server here is a small HTTP server answering as kube-apiserver does: its service proxy
forwards to a real cellfit inspect listener (a HiveD runtime with a full VC), and its refusals
are kube-apiserver's Status bodies. The same paths against the real kube-apiserver, RBAC
included, are e2e/test_kubectl_plugin.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import yaml

from scheduler.config import parse_settings
from scheduler.extender.runtime import build_runtime
from scheduler.kubectl import cli
from scheduler.kubectl.errors import Forbidden, NotInstalled, PluginError, Unreachable, UsageError, ViewUnavailable
from scheduler.kubectl.kubeconfig import open_session
from tests.support import hived
from tests.support.server import running_server

ROOT = Path(__file__).resolve().parents[2]
PROXY = "/api/v1/namespaces/cellfit-system/services/http:cellfit:inspect/proxy"


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """kube-apiserver's Status body."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


FORBIDDEN = status(403, "Forbidden", 'services "http:cellfit:inspect" is forbidden: User "alice" cannot get resource '
                   '"services/proxy" in API group "" in the namespace "cellfit-system"')
NO_SERVICE = status(404, "NotFound", 'services "cellfit" not found')
NO_ENDPOINTS = status(503, "ServiceUnavailable", 'no endpoints available for service "http:cellfit:inspect"')


class ApiServer:
    """Answers GETs: ``routes`` maps a path to (status, body) or to a callable; the service
    proxy's path goes to ``inspect_url`` unless ``routes`` says otherwise. Records the tokens."""

    def __init__(self, inspect_url: str | None) -> None:
        self.inspect_url = inspect_url
        self.routes: dict[str, tuple[int, Any]] = {}
        self.tokens: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                owner.tokens.append(self.headers.get("Authorization", ""))
                path, _, query = self.path.partition("?")
                code, body = owner.answer(path, query)
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, query: str) -> tuple[int, Any]:
        if path in self.routes:
            return self.routes[path]
        if path.startswith(PROXY) and self.inspect_url is not None:
            response = httpx.get(self.inspect_url + path[len(PROXY):] + (f"?{query}" if query else ""), timeout=10)
            return response.status_code, response.json()
        return 404, status(404, "NotFound", f"the server could not find the requested resource ({path})")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def inspect_url() -> Iterator[str]:
    runtime = build_runtime(parse_settings("policy: {name: hived}\n" + hived.CONFIG), standalone=True)
    with running_server(runtime.inspect_app) as url:
        yield url


@pytest.fixture
def apiserver(inspect_url: str) -> Iterator[ApiServer]:
    server = ApiServer(inspect_url)
    yield server
    server.close()


def kubeconfig(path: Path, server: str, *, contexts: dict[str, tuple[str, str | None]], current: str) -> Path:
    """``contexts``: name -> (token, namespace)."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": name, "user": {"token": token}} for name, (token, _) in contexts.items()],
        "contexts": [{"name": name, "context": {"cluster": "c", "user": name, **({"namespace": ns} if ns else {})}}
                     for name, (_, ns) in contexts.items()],
    }))
    return path


@pytest.fixture
def config(tmp_path: Path, apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = kubeconfig(tmp_path / "config", apiserver.url, contexts={"alice": ("alice-token", "ml"), "bob": ("bob-token", None)},
                      current="alice")
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("CELLFIT_NAMESPACE", raising=False)
    monkeypatch.delenv("CELLFIT_SERVICE", raising=False)
    return path


# ------------------------------------------------------------------------------ kubeconfig


def test_kubeconfig_current_context_and_its_namespace(config: Path) -> None:
    session = open_session(kubeconfig=None, context=None, namespace=None)
    assert session.namespace == "ml" and session.source == f"context alice of {config}"
    assert open_session(kubeconfig=None, context="bob", namespace=None).namespace == "default"
    assert open_session(kubeconfig=None, context="alice", namespace="other").namespace == "other"


def test_kubeconfig_list_in_kubeconfig_is_merged(tmp_path: Path, apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    first = kubeconfig(tmp_path / "a", apiserver.url, contexts={"alice": ("alice-token", "ml")}, current="alice")
    second = kubeconfig(tmp_path / "b", apiserver.url, contexts={"carol": ("carol-token", "cv")}, current="carol")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)]))
    assert open_session(kubeconfig=None, context=None, namespace=None).namespace == "ml"  # the first file's current context
    assert open_session(kubeconfig=None, context="carol", namespace=None).namespace == "cv"


def test_the_chosen_contexts_credentials_are_sent(config: Path, apiserver: ApiServer) -> None:
    before = len(apiserver.tokens)
    cli.run(["vcs", "--context", "bob"])
    middle = len(apiserver.tokens)
    cli.run(["vcs"])  # vcs reads the VCs and the cell tree: every request with the context's token
    assert set(apiserver.tokens[before:middle]) == {"Bearer bob-token"}
    assert set(apiserver.tokens[middle:]) == {"Bearer alice-token"}


def test_kubeconfig_errors_name_what_is_wrong(tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PluginError, match="--context nope: no such context in .* \\(it has: alice, bob\\)"):
        open_session(kubeconfig=None, context="nope", namespace=None)
    with pytest.raises(PluginError, match="--kubeconfig /nowhere: no such file"):
        open_session(kubeconfig="/nowhere", context=None, namespace=None)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(PluginError, match="no kubeconfig: .*absent does not exist \\(set KUBECONFIG or pass --kubeconfig\\)"):
        open_session(kubeconfig=None, context=None, namespace=None)


# ------------------------------------------------------------------------------ tables


def test_vcs_table_matches_the_inspect_view(config: Path, inspect_url: str) -> None:
    table = cli.run(["vcs"]).splitlines()
    assert table[0].split() == ["VC", "CELL-TYPE", "GPUS/CELL", "QUOTA", "BOUND", "UNBOUND", "DRAINING", "PINNED",
                                "GUARANTEED-PODS", "GUARANTEED-GPUS", "OPPORTUNISTIC-PODS", "OPPORTUNISTIC-GPUS"]
    rows = {(line.split()[0], line.split()[1]): line.split() for line in table[1:]}
    view = httpx.get(f"{inspect_url}/v1/inspect/virtual-clusters", timeout=10).json()
    for vc in view["virtualClusters"]:
        for cell in vc["cells"]:
            row = rows[(vc["name"], cell["cellType"])]
            assert row[2:8] == [str(cell[k]) for k in ("gpusPerCell", "quota", "bound")] + [
                str(cell["quota"] - cell["bound"]), str(cell["draining"]), str(cell["pinned"])]
        # The VC's totals: on its one cell type's row, or on a row of their own.
        totals = rows[(vc["name"], vc["cells"][0]["cellType"] if len(vc["cells"]) == 1 else "(total)")]
        assert totals[8:] == [str(vc[what][priority]) for priority in ("guaranteed", "opportunistic") for what in ("pods", "gpus")]
    assert json.loads(cli.run(["vcs", "-o", "json"])) == view
    assert yaml.safe_load(cli.run(["-o", "yaml", "vcs"])) == view


def test_cells_table_and_node_filter(config: Path, inspect_url: str) -> None:
    whole = cli.run(["cells"]).splitlines()
    assert whole[0].split()[:4] == ["CELL", "TYPE", "STATE", "VC"]
    assert not any(" A100 " in f" {line.split()[1]} " for line in whole[1:])  # no GPU rows without --node
    one = cli.run(["cells", "--node", "gpu-a"]).splitlines()
    assert one[1].split()[:2] == ["gpu-a", "A100-NODE"]
    assert sum(1 for line in one[1:] if line.split()[1] == "A100") == 8
    assert json.loads(cli.run(["cells", "--node", "gpu-a", "-o", "json"])) == httpx.get(
        f"{inspect_url}/v1/inspect/cells", params={"node": "gpu-a"}, timeout=10).json()
    assert cli.run(["cells", "--node", "nope"]) == "no cells on node nope (not a GPU node cellfit knows)"


def test_queue_table(config: Path, apiserver: ApiServer) -> None:
    view = {"queue": {"gpu": [{"job": "ml/b", "kind": "gpu", "position": 2, "expectedStartSeconds": 722.0},
                              {"job": "ml/a", "kind": "gpu", "position": 1, "expectedStartSeconds": 30.0}],
                      "cpu": [{"job": "cv/c", "kind": "cpu", "position": 1, "expectedStartSeconds": 7200.0, "virtualCluster": "cv"}]}}
    apiserver.routes[f"{PROXY}/v1/inspect/allox"] = (200, view)
    assert cli.run(["queue"]).splitlines() == [
        "JOB    KIND   POSITION   EXPECTED-START   VC",
        "cv/c   cpu    1          ~2.0 h           cv",
        "ml/a   gpu    1          ~30 s            -",
        "ml/b   gpu    2          ~12 min          -",
    ]
    apiserver.routes[f"{PROXY}/v1/inspect/allox"] = (200, {"queue": {}})
    assert cli.run(["queue"]) == "AlloX's queue is empty"


def test_queue_when_allox_is_off_says_cellfits_sentence(config: Path) -> None:
    with pytest.raises(ViewUnavailable, match="AlloX admission is not running"):
        cli.run(["queue"])


# ------------------------------------------------------------------------------ why


def test_why_pod_reads_the_pod_its_events_and_cellfits_view(config: Path, apiserver: ApiServer) -> None:
    message = "0/3 nodes are available: 3 virtual cluster 'vision' quota exhausted at level 'A100-NODE': no unbound cell left."
    apiserver.routes["/api/v1/namespaces/ml/pods/train-0"] = (200, {
        "metadata": {"name": "train-0", "namespace": "ml", "uid": "u1", "labels": {"cellfit.io/virtual-cluster": "vision"}},
        "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}})
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": [
        {"reason": "FailedScheduling", "message": message, "type": "Warning", "lastTimestamp": "2026-11-26T12:00:00Z",
         "involvedObject": {"kind": "Pod", "name": "train-0", "uid": "u1"}}]})
    out = cli.run(["why", "pod/train-0"])
    assert out.splitlines()[0] == ("pod/train-0: pending: virtual cluster 'vision' has used its quota at level 'A100-NODE' "
                                   "(0 of 2 'A100-NODE' cells bound)")
    as_json = json.loads(cli.run(["why", "pod/train-0", "-o", "json"]))
    assert as_json["reason"] == "quota" and as_json["namespace"] == "ml" and as_json["object"] == "pod/train-0"


def test_why_unknown_object(config: Path) -> None:
    with pytest.raises(PluginError, match="pod ml/nope not found"):
        cli.run(["why", "pod/nope"])
    with pytest.raises(PluginError, match="Job ml/nope not found"):
        cli.run(["why", "job/nope", "-n", "ml"])


@pytest.mark.parametrize("target", ["nope", "deployment/x", "pod/"])
def test_why_target_must_be_a_pod_or_a_job(config: Path, target: str) -> None:
    with pytest.raises(UsageError, match="name a pod or a Job as pod/NAME or job/NAME"):
        cli.run(["why", target])


# ------------------------------------------------------------------------------ errors


def test_rbac_refusal_names_the_missing_grant(config: Path, apiserver: ApiServer) -> None:
    apiserver.routes[f"{PROXY}/v1/inspect/virtual-clusters"] = (403, FORBIDDEN)
    with pytest.raises(Forbidden) as error:
        cli.run(["vcs"])
    text = str(error.value)
    assert "RBAC does not grant you get on services/proxy 'http:cellfit:inspect' in namespace cellfit-system" in text
    assert "ClusterRole cellfit-viewer" in text and "--clusterrole=cellfit-viewer" in text


def test_rbac_refusal_of_the_users_own_objects(config: Path, apiserver: ApiServer) -> None:
    apiserver.routes["/api/v1/namespaces/ml/pods/p"] = (403, status(403, "Forbidden", 'pods "p" is forbidden: User "alice" cannot get resource "pods"'))
    with pytest.raises(Forbidden, match='you may not read pod ml/p: pods "p" is forbidden'):
        cli.run(["why", "pod/p"])


def test_not_installed(config: Path, apiserver: ApiServer) -> None:
    apiserver.routes[f"{PROXY}/v1/inspect/virtual-clusters"] = (404, NO_SERVICE)
    with pytest.raises(NotInstalled, match="cellfit is not installed here: no Service cellfit in namespace cellfit-system"):
        cli.run(["vcs"])


def test_not_installed_when_the_proxy_finds_no_endpoint_and_no_service(config: Path, apiserver: ApiServer) -> None:
    """kube-apiserver looks for the Service's endpoints before the Service itself: a missing
    Service answers 503 "no endpoints", and the plugin asks for the Service to tell."""
    apiserver.routes[f"{PROXY}/v1/inspect/virtual-clusters"] = (503, status(503, "ServiceUnavailable",
                                                                            'no endpoints available for service "cellfit"'))
    with pytest.raises(NotInstalled, match="cellfit is not installed here: no Service cellfit in namespace cellfit-system"):
        cli.run(["vcs"])


def test_another_install_is_named_by_flags_or_environment(config: Path, apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    other = "/api/v1/namespaces/sched/services/http:cf:inspect/proxy/v1/inspect/virtual-clusters"
    apiserver.routes[other] = (200, {"virtualClusters": []})
    assert cli.run(["vcs", "--cellfit-namespace", "sched", "--cellfit-service", "cf"]) == "no virtual clusters"
    monkeypatch.setenv("CELLFIT_NAMESPACE", "sched")
    monkeypatch.setenv("CELLFIT_SERVICE", "cf")
    assert cli.run(["vcs"]) == "no virtual clusters"


def test_no_inspect_port_is_told_apart_from_no_ready_pod(config: Path, apiserver: ApiServer) -> None:
    apiserver.routes[f"{PROXY}/v1/inspect/virtual-clusters"] = (503, NO_ENDPOINTS)
    service = "/api/v1/namespaces/cellfit-system/services/cellfit"
    apiserver.routes[service] = (200, {"spec": {"ports": [{"name": "metrics", "port": 8889}]}})
    with pytest.raises(Unreachable, match="has no port named 'inspect' \\(it has: metrics\\).*cellfit.inspect.enabled=true"):
        cli.run(["vcs"])
    apiserver.routes[service] = (200, {"spec": {"ports": [{"name": "metrics"}, {"name": "inspect"}]}})
    with pytest.raises(Unreachable, match="cellfit is not reachable through Service cellfit .*no endpoints available.*get pods"):
        cli.run(["vcs"])


def test_api_server_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "c", f"http://127.0.0.1:{port}", contexts={"a": ("t", None)}, current="a")))
    with pytest.raises(Unreachable, match=f"cannot reach the API server http://127.0.0.1:{port}"):
        cli.run(["vcs"])


def test_main_prints_the_error_and_exits_with_its_code(config: Path, apiserver: ApiServer, capsys: pytest.CaptureFixture[str]) -> None:
    apiserver.routes[f"{PROXY}/v1/inspect/virtual-clusters"] = (403, FORBIDDEN)
    assert cli.main(["vcs"]) == Forbidden.exit_code
    assert capsys.readouterr().err.startswith("error: you may not read cellfit's inspect API")
    assert cli.main(["frobnicate"]) == UsageError.exit_code
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_kubectl_plugin_entry_point_is_declared() -> None:
    """kubectl finds plugins as executables named kubectl-<name> on PATH: the package installs
    one (pyproject's console script), pointing at cli.main."""
    import tomllib
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-cellfit"] == "scheduler.kubectl.cli:main"


def test_runs_as_a_program(config: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "scheduler.kubectl.cli", "vcs", "-o", "json"], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "virtualClusters" in json.loads(done.stdout)
