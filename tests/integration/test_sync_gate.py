"""No decision before the watch cache has synced.

kube-scheduler never reads /readyz, so a restarted cellfit is called as soon as it listens. Until
every bound pod has been listed, the engine would see their GPUs as free and could place a new
pod on them. Here the Kubernetes API's Pods list is held back while kube-scheduler's calls arrive
over real HTTP: every verb refuses (filter and bind in their ``Error`` field, which users read in
events; prioritize and preempt with HTTP 503, kube-scheduler's only other way to fail a call),
and once the list arrives the running pod's GPUs are not offered again.

The API here is a double serving canned lists (tests/support/api_double.py); the cache, engine,
service and HTTP are real.
"""

from __future__ import annotations

from typing import Iterator

import httpx
import pytest

from scheduler.config import parse_settings
from scheduler.extender.runtime import build_runtime
from tests.support import kube_objects as k
from tests.support.api_double import ListingApi
from tests.support.server import running_server, wait_until_ready

VERB = "/v1/extender/"
RUNNING = k.pod("old-0", uid="uid-old", gpus=8, node_name="gpu-a", phase="Running")


@pytest.fixture
def held_back() -> Iterator[tuple[ListingApi, httpx.Client]]:
    job = {"metadata": {"name": "old", "namespace": "ml", "uid": "uid-job-old", "resourceVersion": "7"}}
    api = ListingApi(nodes=[k.node("gpu-a", gpus=8), k.node("gpu-b", gpus=8)], pods=[RUNNING], jobs=[job], hold_pods=True)
    settings = parse_settings("policy: {name: resource-fit}\n")  # FitGpp over resource fit: Jobs are watched
    runtime = build_runtime(settings, api=api)  # type: ignore[arg-type]
    try:
        with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
            yield api, client
    finally:
        api.release_pods()


def post(client: httpx.Client, verb: str, body: object) -> httpx.Response:
    return client.post(VERB + verb, content=k.dumps(body), headers={"Content-Type": "application/json"})


def test_every_verb_refuses_until_the_pods_are_listed(held_back: tuple[ListingApi, httpx.Client]) -> None:
    api, client = held_back
    nodes = [k.node("gpu-a", gpus=8), k.node("gpu-b", gpus=8)]
    new = k.pod("new-0", uid="uid-new", gpus=8)
    args = k.extender_args(new, nodes, node_cache_capable=True)

    assert client.get("/readyz").status_code == 503
    filtered = post(client, "filter", args)
    assert filtered.status_code == 200
    assert filtered.json()["NodeNames"] is None
    assert "cellfit is starting and cannot decide yet (watch cache not synced yet: pods)" in filtered.json()["Error"]
    for verb, body in (("prioritize", args), ("preempt", k.preemption_args(new, {"gpu-a": [RUNNING]}, node_cache_capable=True))):
        refused = post(client, verb, body)
        assert refused.status_code == 503, verb
        assert "watch cache not synced yet" in refused.json()["Error"]
    bound = post(client, "bind", {"PodName": "new-0", "PodNamespace": "ml", "PodUID": "uid-new", "Node": "gpu-a"})
    assert bound.status_code == 200 and "cannot decide yet" in bound.json()["Error"]
    assert api.bindings == []
    metrics = client.get("/metrics").text
    assert 'cellfit_extender_requests_total{result="error",verb="filter"} 1.0' in metrics
    assert 'cellfit_extender_requests_total{result="rejected",verb="prioritize"} 1.0' in metrics
    assert 'cellfit_bindings_total{result="not_ready"} 1.0' in metrics

    api.release_pods()
    wait_until_ready(client)
    # The listed pod holds gpu-a's 8 GPUs: the new pod goes to gpu-b only.
    filtered = post(client, "filter", args).json()
    assert filtered["Error"] == "" and filtered["NodeNames"] == ["gpu-b"]
    scores = {p["Host"]: p["Score"] for p in post(client, "prioritize", args).json()}
    assert scores["gpu-a"] == 0
    # The cache-size gauges count what the watch cache holds.
    metrics = client.get("/metrics").text
    for kind, count in (("nodes", 2), ("pods", 1), ("jobs", 1)):
        assert f'cellfit_cache_objects{{kind="{kind}"}} {count}.0' in metrics, kind
