"""cellfit serve's bind verb under HiveD, over HTTP, against an API server that makes a binding
and loses its answer (tests/cluster/test_review_93_bind.py's server, on loopback): the runtime is
built as production builds it, and the API it binds through is the real KubernetesApi with its
event-loop connection pool. The VC's cells must stay the bound pod's, and no other pod of the VC
may be placed on them."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from typing import Any, Iterator

import httpx
import pytest
from kubernetes import client as k8s

from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings, parse_settings
from scheduler.extender.runtime import build_runtime
from tests.cluster.test_review_93_bind import TIMEOUT_SECONDS, ListedHere, PodServer, make_handler
from tests.support import kube_objects as k
from tests.support.hived import CONFIG, NODES
from tests.support.server import running_server, wait_until_ready

SETTINGS = CONFIG + "estimator: {enabled: false}\n"
VISION = {"cellfit.io/virtual-cluster": "vision"}
PODS = [
    k.pod("run-0", uid="uid-run-0", gpus=8, labels=VISION, node_name="gpu-a", phase="Running"),
    k.pod("train-0", uid="uid-train-0", gpus=8, labels=VISION),
    k.pod("train-1", uid="uid-train-1", gpus=8, labels=VISION),
]


@pytest.fixture
def served() -> Iterator[tuple[PodServer, httpx.Client]]:
    pods = PodServer([json.loads(json.dumps(pod)) for pod in PODS])
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(pods))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{httpd.server_address[1]}"
    real = KubernetesApi(k8s.ApiClient(configuration), settings=ClusterSettings(request_timeout_seconds=TIMEOUT_SECONDS), source="test")
    runtime = build_runtime(parse_settings(SETTINGS), api=ListedHere(real, nodes=NODES, pods=PODS))  # type: ignore[arg-type]
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        yield pods, client
    httpd.shutdown()
    httpd.server_close()


def bind(client: httpx.Client, name: str, node: str) -> str:
    body = {"PodName": name, "PodNamespace": "ml", "PodUID": f"uid-{name}", "Node": node}
    return str(client.post("/v1/extender/bind", content=json.dumps(body)).json()["Error"])


def held(client: httpx.Client) -> dict[str, Any]:
    view = client.get("/v1/inspect/virtual-clusters/vision").json()
    return {"pods": view["pods"], "gpus": view["gpus"]}


@pytest.mark.parametrize("step", ["commit-drop", "commit-500", "commit-slow"])
def test_a_hived_binding_made_but_answered_as_failed_keeps_the_vcs_cells_for_the_bound_pod(served: Any, step: str) -> None:
    pods, client = served
    placed = client.post("/v1/extender/filter", content=k.dumps(k.extender_args(PODS[1], NODES, node_cache_capable=True))).json()
    [node] = placed["NodeNames"]
    pods.script = [step]
    assert bind(client, "train-0", node) == ""
    assert held(client) == {"pods": {"guaranteed": 2, "opportunistic": 0}, "gpus": {"guaranteed": 16, "opportunistic": 0}}
    # vision's two nodes are both bound: its next pod is placed nowhere and bound nowhere.
    again = client.post("/v1/extender/filter", content=k.dumps(k.extender_args(PODS[2], NODES, node_cache_capable=True))).json()
    assert not again["NodeNames"], again
    assert bind(client, "train-1", node) != ""
    with pods.lock:
        assert {name: pod["spec"].get("nodeName") for name, pod in pods.pods.items()} == {"run-0": "gpu-a", "train-0": node, "train-1": None}
