"""The simulator's model of kube-scheduler around the extender: its own resource fit, the room
nominated pods keep, the preemption dry run's candidates, and a nominated TE job whose room a
second TE job took (FitGpp does not see nominations)."""

from __future__ import annotations

from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings
from scheduler.simulator.kube_model import NodeCache, NominatedPods, RunningPod, admits, preemption_candidates
from scheduler.simulator.fitgpp.policies import make_policy
from scheduler.simulator.policy_registry import PolicyOptions
from scheduler.simulator.fitgpp.simulation import Simulation
from scheduler.simulator.cluster import ClusterSpec

from sim_helpers import SMALL_NODE, job

GIB = 2**30


def pod(uid: str, *, gpus: int = 0, cpu: int = 1, priority: int = 0) -> PodInfo:
    return PodInfo(uid=uid, namespace="sim", name=uid, requests=Resources(cpu * 1000, GIB, gpus), priority=priority)


def test_the_cache_offers_only_nodes_with_room_for_every_resource_the_pod_asks_for() -> None:
    cache = NodeCache([("a", SMALL_NODE), ("b", SMALL_NODE)])
    assert cache.fitting(pod("p", gpus=8)) == ["a", "b"]
    cache.bind("a", Resources(0, 0, 4))
    assert cache.fitting(pod("p", gpus=8)) == ["b"]
    assert cache.fitting(pod("p", gpus=4)) == ["a", "b"]
    cache.bind("b", Resources(32_000, 0, 0))  # b's CPUs all taken
    assert cache.fitting(pod("p", gpus=1, cpu=1)) == ["a"]
    cache.release("a", Resources(0, 0, 4))
    assert cache.free("a") == SMALL_NODE


def test_nominated_pods_keep_their_room_from_pods_of_no_higher_priority() -> None:
    nominated = NominatedPods()
    trial = pod("te", gpus=6, priority=1)
    nominated.nominate(trial, "a")
    free = Resources(32_000, 256 * GIB, 8)
    assert not admits(pod("be", gpus=4), "a", free=free, nominated=nominated)
    assert admits(pod("be", gpus=2), "a", free=free, nominated=nominated)
    assert admits(pod("be", gpus=0), "a", free=Resources(32_000, 256 * GIB, 0), nominated=nominated)  # asks no GPU
    assert admits(pod("urgent", gpus=4, priority=2), "a", free=free, nominated=nominated)  # goes before it
    assert admits(trial, "a", free=free, nominated=nominated)  # its own room
    nominated.clear(trial, "a")
    assert not nominated


def test_the_dry_run_offers_nodes_where_lower_priority_pods_make_room_and_reprieves_what_it_can() -> None:
    running = {
        "a": [RunningPod(pod("be-old", gpus=4), 0.0), RunningPod(pod("be-new", gpus=4), 10.0)],
        "b": [RunningPod(pod("te-other", gpus=8, priority=1), 0.0)],  # same priority: never a victim
        "c": [RunningPod(pod("be-c", gpus=4), 0.0)],
    }
    free = {"a": Resources(32_000, 256 * GIB, 0), "b": Resources(32_000, 256 * GIB, 0), "c": Resources(32_000, 256 * GIB, 4)}
    candidates = preemption_candidates(
        pod("te", gpus=4, priority=1),
        nodes=["a", "b", "c", "d"],
        unresolvable={"d": "too small"},
        free_on=free.__getitem__,
        pods_on=lambda node: running.get(node, []),
        nominated=NominatedPods(),
    )
    # a: removing both makes room, and the older (more important) is reprieved; c: room already,
    # so everything is reprieved and c is no candidate (the pod would have fit there).
    assert candidates == {"a": ["be-new"]}


def test_a_nominated_trial_job_whose_room_was_taken_goes_back_to_the_queue() -> None:
    """te-1 preempts be-b (short grace period) and is nominated; te-2, larger, arrives while
    be-b terminates: what be-b frees is not enough for it, so FitGpp takes be-a, and te-2 is
    nominated to the same node. When be-b is gone, te-1's room is owed to te-2 (same priority),
    so te-1 goes back to the TE queue and starts after be-a is gone, with te-2."""
    jobs = [
        job("be-a", gpus=6, duration=1000, grace=100),
        job("be-b", gpus=2, duration=1000, grace=10),
        job("te-1", at=1, trial=True, gpus=2, duration=50),
        job("te-2", at=5, trial=True, gpus=4, duration=50),
    ]
    settings = FitGppSettings()
    sim = Simulation(
        cluster=ClusterSpec(nodes=1, node=SMALL_NODE),
        jobs=jobs,
        policy=make_policy("fitgpp", PolicyOptions(settings=settings)),
        settings=settings,
        record_decisions=True,
    )
    result = sim.run()
    assert sim.decisions == [
        (0, "bind", "be-a", "node-00", ()),
        (0, "bind", "be-b", "node-00", ()),
        (1, "preempt", "te-1", "node-00", ("be-b",)),
        (5, "preempt", "te-2", "node-00", ("be-a",)),
        (105, "bind", "te-2", "node-00", ()),
        (105, "bind", "te-1", "node-00", ()),
        (155.0, "bind", "be-a-run1", "node-00", ()),
        (155.0, "bind", "be-b-run1", "node-00", ()),
    ]
    assert sim.requeues == 1
    assert result.preemptions.tolist() == [1, 1, 0, 0]
