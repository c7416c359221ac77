"""review23b (HIGH): a configuration judged never to run on part of the nodes. At a start the
watch cache applies the node list one node a step (``ClusterCache._replacing_nodes``) while the
Jobs' and pods' reflectors run beside it, and the estimator's pass waited only for the Jobs and
sampling pods: a pass could see only some nodes, tell ``ConfigurationNeverRuns`` of a
configuration only a not-yet-applied node holds, delete its RUNNING samples (a running pod
proves a node holds it) and, with the other configuration's samples done, settle the Job on that
one alone. Now no pass runs before the nodes are all applied (``nodes_synced``), and a
configuration with a run bound to a node or running is never judged, nor its runs deleted."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from estimator.controller import NODE_RETURN_SECONDS
from estimator.objects import POD_DECODER
from scheduler.cluster.cache import ClusterCache
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.core.resources import Resources
from tests.estimator.test_controller import controller, finished, job, pending
from tests.estimator.test_review_62 import DeletingApi
from tests.support.api_double import ListingApi
from tests.support.kube_objects import node

GIB = 2**30
SMALL = Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=4)
BIG = Resources(cpu_millis=256_000, memory_bytes=1024 * GIB, gpus=4)


def running(pod: dict[str, Any], node_name: str) -> Any:
    body = {**pod, "spec": {**pod["spec"], "nodeName": node_name}, "status": {"phase": "Running"}}
    return POD_DECODER.decode(json.dumps(body).encode())


def bound(pod: dict[str, Any], node_name: str) -> Any:
    """Bound by the scheduler, its containers not started yet (an image pull)."""
    body = {**pod, "spec": {**pod["spec"], "nodeName": node_name}, "status": {"phase": "Pending"}}
    return POD_DECODER.decode(json.dumps(body).encode())


def never_told(api: DeletingApi) -> list[str]:
    return [message for reason, message in api.events if reason == "ConfigurationNeverRuns"]


def cpu_names(names: list[str]) -> list[str]:
    return [name for name in names if "-cpu-" in name]


@pytest.mark.parametrize("placed", [running, bound], ids=["running", "bound-not-yet-running"])
def test_a_placed_sample_is_not_deleted_when_the_node_it_is_on_is_not_yet_in_the_cache(placed: Any) -> None:
    api = DeletingApi()
    nodes = [SMALL, BIG]
    sampler = controller(api, cpus=1024, share=1.0, gpus=16, nodes=lambda selector: list(nodes))
    sampler._replace_jobs([job("big", cpu="200")])
    sampler.reconcile()
    assert cpu_names([p["metadata"]["name"] for p in api.created])
    # The cache knows only the small node now (a relist under way, a node object re-created).
    sampler._replace_pods([placed(p, "big-node") for p in api.created])
    nodes[:] = [SMALL]
    sampler.reconcile()
    assert cpu_names(api.deleted) == []
    assert never_told(api) == []


def test_a_pending_unbound_sample_is_still_deleted_once_no_node_could_hold_it() -> None:
    api = DeletingApi()
    nodes, now = [SMALL, BIG], [1_800_000_000.0]
    sampler = controller(api, cpus=1024, share=1.0, gpus=16, nodes=lambda selector: list(nodes), clock=lambda: now[0])
    sampler._replace_jobs([job("big", cpu="200")])
    sampler.reconcile()
    created = cpu_names([p["metadata"]["name"] for p in api.created])
    sampler._replace_pods([pending(p) for p in api.created])
    nodes[:] = [SMALL]  # the big node left, with the nodes all synced, and did not come back under its name
    now[0] += NODE_RETURN_SECONDS + 1
    sampler.reconcile()
    assert cpu_names(api.deleted) == created
    assert len(never_told(api)) == 1


def test_gpu_done_cpu_running_and_a_partial_node_list_does_not_settle_the_job_on_gpu_alone() -> None:
    api = DeletingApi()
    nodes = [SMALL, BIG]
    sampler = controller(api, cpus=1024, share=1.0, gpus=16, nodes=lambda selector: list(nodes))
    sampler._replace_jobs([job("big", cpu="200")])
    for _ in range(6):  # every run created
        sampler.reconcile()
        sampler._replace_pods([finished(p, 10.0) if "-gpu-" in p["metadata"]["name"] else running(p, "big-node")
                               for p in api.created])
    nodes[:] = [SMALL]
    sampler.reconcile()
    nodes[:] = [SMALL, BIG]
    sampler.reconcile()
    (view,) = [j for j in sampler.inspect()["jobs"] if j["name"] == "big"]
    assert "cpu not sampled" not in str(view["message"]), view
    assert view["state"] == "sampling", view
    assert never_told(api) == []


def test_no_pass_runs_before_the_nodes_are_all_applied() -> None:
    api = DeletingApi()
    applied = [SMALL]
    done = threading.Event()
    sampler = controller(api, cpus=1024, share=1.0, gpus=16, nodes=lambda selector: list(applied), nodes_synced=done.is_set)
    sampler._replace_jobs([job("big", cpu="200")])
    sampler.replace_pods([])
    sampler._jobs_listed.set()  # the Jobs and the sampling pods listed: only the nodes are not
    assert not sampler.synced and sampler.inspect()["synced"] is False
    sampler.reconcile()
    assert api.created == [] and api.events == [] and sampler.inspect()["jobs"] == []
    applied.append(BIG)
    done.set()
    assert sampler.synced
    sampler.reconcile()
    assert sorted(p["metadata"]["annotations"]["cellfit.io/sample-configuration"] for p in api.created) == ["cpu", "gpu"]
    assert never_told(api) == []


class Interleaving:
    """The cache's pacing, running ``between`` after every step of a pass: the estimator's thread
    taking its turn while the node list is applied."""

    def __init__(self, between: Any) -> None:
        self.between = between

    def run(self, steps: Any) -> None:
        for _ in steps:
            self.between()


def test_the_extenders_estimator_waits_for_the_cache_to_apply_the_whole_node_list() -> None:
    from scheduler.config import parse_settings
    from scheduler.extender.metrics import ExtenderMetrics
    from scheduler.extender.runtime import _estimator
    small, large = node("small", gpus=4, cpu="64"), node("large", gpus=4, cpu="256", memory="1024Gi")
    api = DeletingApi()
    cache = ClusterCache(api=ListingApi(nodes=[small, large], pods=[]), engine=ResourceFitEngine(), lock=threading.RLock(),  # type: ignore[arg-type]
                         gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=None, interchangeable_jobs=True)
    sampler = _estimator(parse_settings(""), api, cache, ExtenderMetrics())  # type: ignore[arg-type]
    assert sampler is not None
    sampler._replace_jobs([job("big", cpu="200")])
    sampler.replace_pods([])
    sampler._jobs_listed.set()
    seen: list[tuple[int, bool]] = []

    def estimator_turn() -> None:
        seen.append((len(cache.allocatable_by_node()), cache.nodes_synced()))
        sampler.reconcile()

    cache.pace_on(Interleaving(estimator_turn))
    cache.nodes._list_and_replace()
    assert (1, False) in seen  # a turn came with only the small node applied
    assert never_told(api) == [] and api.created == []
    assert cache.nodes_synced() and sampler.synced
    sampler.reconcile()
    # The 200-core configuration is sampled on the large node (the budget's first pod; the gpu
    # runs wait for room under the default maxClusterShare).
    assert "cpu" in [p["metadata"]["annotations"]["cellfit.io/sample-configuration"] for p in api.created]
    assert never_told(api) == []
