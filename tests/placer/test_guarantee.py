"""Under HiveD, AlloX's GPU machines per virtual cluster come from the allocator's own view of
each VC (placer/guarantee.py over HivedEngine.inspect_virtual_cluster), and the controller
matches a Job's GPU configuration only to its VC's machines. A real HivedEngine, pods placed
through its filter and reserve as kube-scheduler does."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from tests.cells.helpers import node_names, pod, rack_cluster, schedule
from estimator.objects import JOB_DECODER
from placer.controller import Guarantees, PlacerController
from placer.guarantee import guarantee_cells, guarantees
from scheduler.cells import HivedEngine
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.matching.capacity import GuaranteeCell, guaranteed_gpu_machines

from tests.placer.test_controller import CONFIGURATIONS, Jobs, RecordingApi

NODES = node_names(1, 2)  # r0n0, r0n1: 8 GPUs each


def engine() -> HivedEngine:
    return HivedEngine.from_config(rack_cluster(1, 2, vcs={"a": [{"cellType": "V100-NODE", "count": 1}],
                                                           "b": [{"cellType": "V100-NODE", "count": 1}]}))


def place(cells: HivedEngine, uid: str, gpus: int, vc: str, **kwargs: Any) -> None:
    placed = schedule(cells, pod(uid, gpus, vc, **kwargs), NODES)
    assert placed is not None
    cells.apply_pod(placed)


def views(cells: HivedEngine, *, except_pods: frozenset[str] = frozenset()) -> dict[str, Any]:
    return cells.inspect_guarantees(except_pods=except_pods)


def machines(cells: HivedEngine, *, except_pods: frozenset[str] = frozenset(), gpus: dict[str, int] | None = None) -> dict[str, int]:
    return guaranteed_gpu_machines(guarantees(views(cells, except_pods=except_pods)), gpus_per_pod=gpus or {})


def test_a_vcs_machines_are_its_quotas_free_gpus_whatever_other_vcs_do():
    cells = engine()
    assert machines(cells) == {"a": 8, "b": 8}
    place(cells, "p1", 3, "a")
    assert machines(cells) == {"a": 5, "b": 8}
    # An opportunistic pod of b on b's or anyone's idle cells is no capacity lost for b (its
    # guaranteed pods preempt it) and none gained for anyone.
    place(cells, "o1", 2, "b", priority="opportunistic")
    assert machines(cells) == {"a": 5, "b": 8}
    place(cells, "p2", 5, "a")
    assert machines(cells) == {"a": 0, "b": 8}
    # Pods of running AlloX Jobs are busy machines of their own: their GPUs count as free here.
    assert machines(cells, except_pods=frozenset({"p1"})) == {"a": 3, "b": 8}
    # Pods of 2 GPUs: 8 GPUs of b's unbound node cell hold 4.
    assert machines(cells, gpus={"b": 2}) == {"a": 0, "b": 4}


def test_a_draining_cell_takes_no_new_pod_and_bad_gpus_are_no_machines():
    cells = engine()
    place(cells, "p1", 2, "a")  # binds a's node cell
    cells.reconfigure({"virtualClusters": {"a": [{"cellType": "V100-NODE", "count": 0}], "b": [{"cellType": "V100-NODE", "count": 1}]}})
    assert views(cells)["a"] == [{"gpus": 8, "guaranteed": 2, "bad": 0, "draining": True, "opportunistic": 0}]
    assert machines(cells) == {"a": 0, "b": 8}
    assert guarantee_cells([{"gpus": 8, "guaranteed": 2, "bad": 3, "draining": False}]) == [GuaranteeCell(gpus=8, free=3)]


def job(name: str, vc: str, *, created: int) -> Any:
    annotations = {"cellfit.io/configurations": json.dumps(CONFIGURATIONS),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 60}, "gpu": {"seconds": 10}})}
    body = {"metadata": {"name": name, "namespace": vc, "uid": f"uid-{name}", "annotations": annotations,
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z"},
            "spec": {"suspend": True, "template": {"metadata": {"labels": {"cellfit.io/virtual-cluster": vc}},
                                                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_the_controller_starts_a_full_vcs_job_on_cpu_and_another_vcs_job_on_its_gpus():
    cells = engine()
    place(cells, "hold", 8, "a")  # VC a's whole quota is in use; b's node is idle
    api = RecordingApi()
    seen: list[frozenset[str]] = []

    def read(running: frozenset[str]) -> Guarantees:
        seen.append(running)
        return Guarantees(cells=guarantees(views(cells)), default_vc=cells.default_vc)

    free = {name: Resources(cpu_millis=64000, memory_bytes=2**38, gpus=8 if name == "r0n1" else 0) for name in NODES}
    placer = PlacerController(
        api=api, jobs=Jobs([job("ja", "a", created=0), job("jb", "b", created=1)]),
        settings=AlloxSettings(alpha=1.0, mechanism="template"), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: free, capacity=lambda: Resources(cpu_millis=128000, memory_bytes=2**39, gpus=16),
        clock=lambda: 1767225700.0, guarantees=read,
    )
    decision = placer.admit()
    assert {(s.key, s.kind, s.pool) for s in decision.starts} == {("a/ja", "cpu", None), ("b/jb", "gpu", "b")}
    assert decision.idle_machines.get("gpu@a", 0) == 0 and decision.idle_machines["gpu@b"] == 8
    rows = {row["job"]: row for row in placer.inspect()["lastDecision"]["starts"]}
    assert rows["b/jb"]["virtualCluster"] == "b" and "virtualCluster" not in rows["a/ja"]
    assert seen == [frozenset()]


def test_a_vcs_machines_are_no_more_than_the_gpus_free_on_alloxs_nodes():
    # The implicit default VC owns every GPU of the cluster, but AlloX runs on one node
    # (allox.nodeSelector) with a single GPU free: one GPU machine, not sixteen.
    cells = HivedEngine.from_config(rack_cluster(1, 2))
    placer = PlacerController(
        api=RecordingApi(), jobs=Jobs([job("j1", "default", created=0), job("j2", "default", created=1)]),
        settings=AlloxSettings(alpha=1.0, mechanism="template"), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"r0n0": Resources(cpu_millis=1000, memory_bytes=2**38, gpus=1)},
        capacity=lambda: Resources(cpu_millis=8000, memory_bytes=2**38, gpus=8), clock=lambda: 1767225700.0,
        guarantees=lambda running: Guarantees(cells=guarantees(views(cells)), default_vc=cells.default_vc),
    )
    decision = placer.admit()
    assert machines(cells) == {"default": 16}
    assert decision.idle_machines == {"gpu@default": 1}
    assert [s.kind for s in decision.starts] == ["gpu"]  # the other waits for it (the same Job twice: either)
    (queued,) = decision.queue
    assert queued.pool == "default" and queued.expected_start_seconds > 0


def gpu_only_job(name: str, vc: str) -> Any:
    body = json.loads(json.dumps({"metadata": {"name": name, "namespace": vc, "uid": f"uid-{name}", "creationTimestamp": "2026-01-01T00:00:00Z",
        "annotations": {"cellfit.io/configurations": json.dumps(CONFIGURATIONS), "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 10}})}},
        "spec": {"suspend": True, "template": {"metadata": {"labels": {"cellfit.io/virtual-cluster": vc}},
                                               "spec": {"containers": [{"name": "c"}]}}}}))
    return JOB_DECODER.decode(json.dumps(body).encode())


def gpu_only_placer(cells: HivedEngine, api: RecordingApi, *, free_gpus: int) -> PlacerController:
    """AlloX over VC a's GPU-only Job a/g, ``free_gpus`` free on node r0n1."""
    return PlacerController(
        api=api, jobs=Jobs([gpu_only_job("g", "a")]), settings=AlloxSettings(alpha=1.0), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"r0n1": Resources(cpu_millis=64000, memory_bytes=2**38, gpus=free_gpus)},
        capacity=lambda: Resources(cpu_millis=128000, memory_bytes=2**39, gpus=16), clock=lambda: 1767225700.0,
        guarantees=lambda running: Guarantees(cells=guarantees(views(cells)), default_vc=cells.default_vc),
    )


@pytest.mark.parametrize(("held", "free_gpus", "reason"), [
    (8, 8, "WaitingForQuota"),  # a's quota in use, b's GPUs idle on AlloX's nodes
    (0, 0, "NoMachine"),  # a's quota free, but AlloX's nodes have no GPU free
])
def test_a_gpu_only_job_is_told_whether_its_vc_or_the_nodes_lack_gpus(held: int, free_gpus: int, reason: str) -> None:
    cells = engine()
    if held:
        place(cells, "hold", held, "a")
    api = RecordingApi()
    decision = gpu_only_placer(cells, api, free_gpus=free_gpus).admit()
    assert decision.starts == () and decision.waiting_for_pool == ("a/g",)
    ((name, condition),) = api.conditions
    assert condition["reason"] == reason, condition
    if reason == "WaitingForQuota":
        assert "virtual cluster 'a'" in condition["message"]


def test_under_hived_an_unchanged_job_is_handed_to_decide_as_the_same_object_pass_after_pass():
    """What decide keeps between passes (scheduler/matching/reuse.py) is found by the input
    objects' identity: the item with its VC is the last pass's while the Job (its
    resourceVersion) and its VC stay the same, a new one when either changes."""
    cells = engine()

    def versioned(body: Any, version: str, vc: str) -> Any:
        document = json.loads(msgspec.json.encode(body))
        document["metadata"]["resourceVersion"] = version
        document["spec"]["template"]["metadata"]["labels"]["cellfit.io/virtual-cluster"] = vc
        return JOB_DECODER.decode(json.dumps(document).encode())

    source = Jobs([versioned(job("ja", "a", created=0), "5", "a"), versioned(job("jb", "b", created=1), "6", "b")])
    handed: list[list[Any]] = []
    placer = PlacerController(
        api=RecordingApi(), jobs=source, settings=AlloxSettings(alpha=1.0), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {name: Resources(cpu_millis=0, memory_bytes=0, gpus=0) for name in NODES},  # all wait
        capacity=lambda: Resources(cpu_millis=128000, memory_bytes=2**39, gpus=16), clock=lambda: 1767225700.0,
        guarantees=lambda running: Guarantees(cells=guarantees(views(cells)), default_vc=cells.default_vc),
    )
    decide = placer._decide

    def spy(**inputs: Any) -> Any:
        handed.append(list(inputs["waiting"]))
        return decide(**inputs)

    placer._decide = spy  # type: ignore[method-assign]
    first = placer.admit()
    assert placer.admit() == first
    assert [w.pool for w in handed[0]] == ["a", "b"]
    assert all(now is before for now, before in zip(handed[1], handed[0]))
    # jb moves to VC a (a new resourceVersion): a new item, with the new VC; ja's stays.
    source.jobs = [source.jobs[0], versioned(job("jb", "b", created=1), "7", "a")]
    placer.admit()
    assert handed[2][0] is handed[0][0] and handed[2][1] is not handed[0][1] and handed[2][1].pool == "a"
