"""Whether a Job AlloX started still holds its machines (placer/holding.py), and the live
controller counting only those that do: a started Job whose pods run elsewhere, were never
bound within the bound, or are gone holds none of AlloX's machines, and the Job is told."""

from __future__ import annotations

from typing import Any

import pytest

from placer.controller import PlacerController
from placer.holding import JobPods, hold
from scheduler.core.pods import PodStore
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi, job

NOW = 1767225700.0  # 2026-01-01T00:01:40Z


@pytest.mark.parametrize(("pods", "age", "expected"), [
    (JobPods(here=1), 10_000, "running"),  # bound to AlloX's nodes: holds, however long ago it started
    (JobPods(here=1, elsewhere=1), 10, "running"),
    (JobPods(elsewhere=1), 10, "elsewhere"),  # its capacity is not AlloX's
    (JobPods(unbound=1), 10, "starting"),  # on its way through kube-scheduler
    (None, 10, "starting"),  # the Job controller has not made its pod yet (or between two waves)
    (JobPods(unbound=1), 300, "unbound"),  # never bound in the bound
    (None, 301, "gone"),  # finished (the cache forgets finished pods) or deleted
])
def test_what_a_started_job_holds(pods: JobPods | None, age: float, expected: str) -> None:
    assert hold(pods=pods, started=NOW - age, now=NOW, unbound_hold_seconds=300) == expected


def placer_with(api: RecordingApi, jobs: list[Any], pods: dict[str, JobPods], *, gpus: int = 1, clock: Any = None) -> PlacerController:
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=(gpus + 4) * 1000, memory_bytes=64 * 2**30, gpus=gpus)},
        capacity=lambda: Resources(cpu_millis=(gpus + 4) * 1000, memory_bytes=64 * 2**30, gpus=gpus),
        clock=clock or (lambda: NOW), job_pods=lambda owners: {uid: found for uid, found in pods.items() if uid in owners},
        unbound_hold_seconds=300,
    )


def test_started_jobs_hold_only_the_machines_their_pods_are_on() -> None:
    # One GPU and one CPU slot on AlloX's node. A Job AlloX started, g, whose pod runs on
    # another node, holds nothing of AlloX's: w starts on the GPU at once instead of waiting
    # for g's estimate. (A Job unsuspended by hand whose pod was never bound: below.)
    api = RecordingApi()
    jobs = [job("g", gpu=3000, cpu=9000, suspend=False, placement="gpu", started="2026-01-01T00:01:00Z"),
            job("w", gpu=100, cpu=1000, created=5)]
    placer = placer_with(api, jobs, {"uid-g": JobPods(elsewhere=1)})
    decision = placer.admit()
    assert decision.busy_machines == {}
    assert [(s.key, s.kind) for s in decision.starts] == [("alice/w", "gpu")]
    told = {name: (c["reason"], c["message"]) for name, c in api.conditions if name == "g"}
    assert told["g"][0] == "PodsElsewhere" and "outside AlloX's" in told["g"][1]
    assert {row["job"]: row["why"] for row in placer.inspect()["lastDecision"]["holdingNoMachine"]} == {"alice/g": "elsewhere"}


def test_a_hand_started_job_whose_pod_stays_unbound_beside_an_idle_machine_is_let_go_after_the_limit() -> None:
    # Unsuspended by its user (no cellfit.io/placement) 40 minutes ago, its pod never bound:
    # AlloX does not suspend it again. Its pod may be waiting for a CPU slot, so it takes the
    # idle one first (user26: a hand-started pod takes the first machine to free); still unbound
    # beside it 300 s later, it waits for something else (a node it fits) and holds none.
    api, clock = RecordingApi(), Clock()
    jobs = [job("c", gpu=3000, cpu=9000, suspend=False, started="2025-12-31T23:20:00Z"), job("w", gpu=100, cpu=1000, created=5)]
    pods = {"uid-c": JobPods(unbound=1)}
    placer = placer_with(api, jobs, pods, clock=clock)
    decision = placer.admit()
    assert decision.busy_machines == {"cpu": 1}
    assert [(s.key, s.kind) for s in decision.starts] == [("alice/w", "gpu")]
    assert [c["reason"] for name, c in api.conditions if name == "c"] == ["Unsuspended"]
    placer._jobs = Jobs(jobs[:1])
    clock.now = NOW + 299
    assert placer.admit().busy_machines == {"cpu": 1}
    clock.now = NOW + 300
    assert placer.admit().busy_machines == {}
    told = [(c["reason"], c["message"]) for name, c in api.conditions if name == "c"]
    assert told[-1][0] == "NotBound" and "within 300 s" in told[-1][1]
    assert {row["job"]: row["why"] for row in placer.inspect()["lastDecision"]["holdingNoMachine"]} == {"alice/c": "unbound"}
    # Told once; once c's pod is bound it holds its slot again, and says so.
    before = len(api.conditions)
    placer.admit()
    assert len(api.conditions) == before
    pods["uid-c"] = JobPods(here=1)
    assert placer.admit().busy_machines == {"cpu": 1}
    assert api.conditions[-1][0] == "c" and api.conditions[-1][1]["message"] == "running on cpu: its pods are bound again"


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def test_a_job_just_started_holds_its_machine_while_its_pod_is_on_its_way() -> None:
    api = RecordingApi()
    jobs = [job("g", gpu=3000, cpu=9000, suspend=False, placement="gpu", started="2026-01-01T00:01:30Z"),
            job("w", gpu=100, cpu=100_000, created=5)]
    decision = placer_with(api, jobs, {}).admit()  # no pod of g in the cache yet, 10 s after its start
    assert decision.busy_machines == {"gpu": 1}
    assert decision.starts == ()
    assert not [c for name, c in api.conditions if name == "g"]


def test_a_job_without_pods_long_after_its_start_frees_its_machine_untold() -> None:
    # Its pod finished (the cache forgets it) and the Job is not marked complete yet, or its
    # pods were deleted: nothing holds the GPU, and there is nothing to tell the Job.
    api = RecordingApi()
    jobs = [job("g", gpu=3000, cpu=9000, suspend=False, placement="gpu", started="2025-12-31T23:00:00Z"),
            job("w", gpu=100, cpu=100_000, created=5)]
    decision = placer_with(api, jobs, {}).admit()
    assert [(s.key, s.kind) for s in decision.starts] == [("alice/w", "gpu")]
    assert not [c for name, c in api.conditions if name == "g"]


def test_the_cluster_cache_counts_a_jobs_pods_by_where_they_are() -> None:
    import threading

    from scheduler.cluster.cache import ClusterCache
    from scheduler.core.fit import ResourceFitEngine
    from tests.support.api_double import ListingApi
    from tests.support.kube_objects import node, pod

    ours, other = node("ours", gpus=2), node("other", gpus=2)
    ours["metadata"]["labels"]["pool"] = "allox"
    pods = [pod("run-0", uid="p1", gpus=1, node_name="ours", phase="Running", job_uid="j-here"),
            pod("away-0", uid="p2", gpus=1, node_name="other", phase="Running", job_uid="j-away"),
            pod("wait-0", uid="p3", gpus=1, job_uid="j-wait"),
            pod("done-0", uid="p4", gpus=1, node_name="ours", phase="Succeeded", job_uid="j-done"),
            pod("lost-0", uid="p5", gpus=1, node_name="gone", phase="Running", job_uid="j-lost"),
            pod("failed-0", uid="p6", gpus=1, node_name="ours", phase="Failed", job_uid="j-wait")]
    cache = ClusterCache(api=ListingApi(nodes=[ours, other], pods=pods), engine=ResourceFitEngine(), lock=threading.RLock(),
                         gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=None)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    found = cache.job_pods(frozenset({"j-here", "j-away", "j-wait", "j-done", "j-lost"}), {"pool": "allox"})
    assert found == {"j-here": JobPods(here=1), "j-away": JobPods(elsewhere=1), "j-wait": JobPods(unbound=1),
                     "j-lost": JobPods(unbound=1)}  # j-done's pod finished: forgotten; j-lost's node was deleted
    assert cache.job_pods(frozenset({"j-here"})) == {"j-here": JobPods(here=1)}
