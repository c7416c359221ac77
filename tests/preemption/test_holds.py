"""Resume holds: the node a preempted best-effort pod left keeps room for its Job's next pod.

The scene of every test: node n1 (8 GPUs) runs BE Jobs a and b (4 GPUs each); a trial pod
preempts b's pod (FitGpp's choice: the shorter grace period), b's Job makes a new pod that
waits, and a BE pod of another Job ("waiter") wants the same GPUs.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.cells import HivedEngine
from scheduler.config import parse_settings
from scheduler.errors import ConfigError
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings, InvalidPreemptionSettings
from scheduler.preemption.engine import FitGppEngine
from scheduler.preemption.holds import ResumeHolds

from tests.preemption.test_engine import GI, full_node, running, te

BE_PRIORITY = 500
RESUMED_PRIORITY = 750


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pending(uid: str, *, job: str, gpus: int = 4, priority: int = BE_PRIORITY, labels: dict[str, str] | None = None) -> PodInfo:
    return PodInfo(
        uid=uid, namespace="ml", name=uid, requests=Resources(4000, 32 * GI, gpus),
        labels={"cellfit.io/job-class": "best-effort", **(labels or {})}, priority=priority,
        owner=OwnerRef("Job", job, f"job-{job}"),
    )


def engine_with_resumed_pod(*, clock: FakeClock | None = None, hold_seconds: float | None = None,
                            trial_done: bool = True) -> tuple[FitGppEngine, PodInfo]:
    """n1 after the trial pod took b's place: b's new pod pending; the trial pod finished
    (``trial_done``) or still running."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), resume_hold_seconds=hold_seconds, clock=clock)
    full_node(engine)
    trial = te(gpus=4)
    assert engine.select_victims(trial, {"n1": ["be-long", "be-short"]}, {}) == {"n1": ["be-short"]}
    engine.delete_pod("be-short")  # gone after its grace period
    engine.reserve(trial, "n1")
    resumed = pending("be-short-2", job="b", priority=RESUMED_PRIORITY)
    engine.apply_pod(resumed)
    if trial_done:
        engine.apply_pod(replace(trial, node_name="n1", phase="Succeeded"))
    return engine, resumed


def test_a_waiting_best_effort_pod_is_turned_away_from_the_room_the_resumed_pod_needs():
    engine, resumed = engine_with_resumed_pod()
    waiter = pending("waiter", job="w")
    decision = engine.filter(waiter, ["n1"])
    assert list(decision.feasible) == []
    assert decision.failed_count == 1 and decision.unresolvable_count == 0  # resolvable: it frees
    assert decision.failed["n1"] == (
        "its free resources are kept for ml/be-short-2, a best-effort Job preempted there and now "
        "resuming (FitGpp resumes preempted jobs first)"
    )
    # the resumed pod itself, and a trial pod, pass
    assert list(engine.filter(resumed, ["n1"]).feasible) == ["n1"]
    assert list(engine.filter(te("te-2", gpus=4), ["n1"]).feasible) == ["n1"]
    assert engine.stats()["resumeHolds"] == 1


def test_the_hold_ends_when_the_resumed_pod_is_bound():
    engine, resumed = engine_with_resumed_pod()
    engine.reserve(resumed, "n1")
    assert not engine.holds.active
    assert engine.stats()["resumeHolds"] == 0
    # the node is full again: the waiter fails on resources, not on a hold
    assert "kept for" not in engine.filter(pending("waiter", job="w"), ["n1"]).failed["n1"]


def test_a_failed_binding_gives_the_hold_back():
    engine, resumed = engine_with_resumed_pod()
    engine.reserve(resumed, "n1")
    engine.unreserve(resumed.uid)  # the binding API call failed: the pod waits again
    assert [h.pods for h in engine.holds.holds()] == [("ml/be-short-2",)]
    assert list(engine.filter(pending("waiter", job="w"), ["n1"]).feasible) == []
    engine.reserve(resumed, "n1")
    engine.apply_pod(replace(resumed, node_name="n1", phase="Running"))  # the watch confirms it
    engine.unreserve("unknown")  # nothing to give back
    assert not engine.holds.active


def test_the_hold_ends_when_the_watch_shows_the_resumed_pod_bound_elsewhere():
    engine, resumed = engine_with_resumed_pod()
    engine.apply_node(NodeInfo(name="n2", allocatable=Resources(32000, 256 * GI, 8)))
    engine.apply_pod(replace(resumed, node_name="n2", phase="Pending"))  # bound by someone, not yet running
    assert not engine.holds.active
    assert list(engine.filter(pending("waiter", job="w"), ["n1"]).feasible) == ["n1"]


def test_no_pending_pod_no_hold_and_a_deleted_job_forgets_its_place():
    engine, resumed = engine_with_resumed_pod()
    engine.delete_pod(resumed.uid)
    assert engine.holds.holds() == []
    assert list(engine.filter(pending("waiter", job="w"), ["n1"]).feasible) == ["n1"]
    engine.apply_pod(resumed)  # a new pending pod of the same Job holds again
    assert list(engine.filter(pending("waiter", job="w"), ["n1"]).feasible) == []
    engine.delete_job("job-b")
    assert not engine.holds.active
    assert list(engine.filter(pending("waiter", job="w"), ["n1"]).feasible) == ["n1"]


def test_room_nothing_could_use_is_not_kept():
    # The trial pod still runs: 4 GPUs are taken, the resumed pod (4) cannot fit, so a 2-GPU
    # waiter may use the rest; once the trial pod ends, the same waiter is turned away.
    engine, _ = engine_with_resumed_pod(trial_done=False)
    small = pending("small", job="s", gpus=2)
    assert list(engine.filter(small, ["n1"]).feasible) == []  # n1 is full: be-long 4 + trial 4
    engine.apply_pod(replace(te(gpus=4), node_name="n1", phase="Succeeded"))
    assert list(engine.filter(small, ["n1"]).feasible) == []  # 4 free, the resumed pod needs all 4


def test_a_pod_that_leaves_enough_room_passes():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    big = NodeInfo(name="n1", allocatable=Resources(64000, 512 * GI, 16))
    engine.apply_node(big)
    engine.apply_pod(running("be-long", job="a", gpus=4, grace=600))
    engine.apply_pod(running("be-short", job="b", gpus=12, grace=30))
    assert engine.select_victims(te(gpus=12), {"n1": ["be-long", "be-short"]}, {}) == {"n1": ["be-short"]}
    engine.delete_pod("be-short")
    engine.apply_pod(pending("be-short-2", job="b", gpus=4))
    assert list(engine.filter(pending("w2", job="w", gpus=2), ["n1"]).feasible) == ["n1"]  # 12 free: 2 + 4 fit
    assert list(engine.filter(pending("w9", job="w", gpus=9), ["n1"]).feasible) == []  # 12 - 9 < 4


@pytest.mark.parametrize(
    ("waiter", "turned_away"),
    [
        (pending("w", job="w", priority=RESUMED_PRIORITY), True),  # same priority: the resumed Job first
        (pending("w", job="w", priority=RESUMED_PRIORITY + 1), False),  # higher priority goes first
        (pending("w", job="w", labels={"cellfit.io/virtual-cluster": "speech"}), False),  # another tenant's guarantee
        (pending("w", job="w", labels={"cellfit.io/virtual-cluster": "speech", "cellfit.io/priority": "opportunistic"}), True),
        (pending("w", job="b"), False),  # another pod of the preempted Job itself
    ],
)
def test_who_yields_to_a_resumed_pod(waiter, turned_away):
    engine, _ = engine_with_resumed_pod()
    assert (list(engine.filter(waiter, ["n1"]).feasible) == []) is turned_away


def test_a_hold_gives_up_hold_seconds_after_it_first_turned_a_pod_away():
    clock = FakeClock()
    engine, _ = engine_with_resumed_pod(clock=clock, hold_seconds=120)
    waiter = pending("waiter", job="w")
    clock.now += 500  # holding without refusing anybody costs nothing and starts no clock
    assert list(engine.filter(waiter, ["n1"]).feasible) == []
    clock.now += 120
    assert list(engine.filter(waiter, ["n1"]).feasible) == []  # at the limit, still kept
    clock.now += 1
    assert list(engine.filter(waiter, ["n1"]).feasible) == ["n1"]
    assert engine.stats()["resumeHoldsLapsed"] == 1 and engine.stats()["resumeHolds"] == 0


def test_only_the_held_nodes_are_refused_among_many():
    engine, _ = engine_with_resumed_pod()
    for name in ("n2", "n3"):
        engine.apply_node(NodeInfo(name=name, allocatable=Resources(32000, 256 * GI, 8)))
    decision = engine.filter(pending("waiter", job="w"), ["n2", "n1", "n3"])
    assert list(decision.feasible) == ["n2", "n3"]
    assert set(decision.failed) == {"n1"} and decision.failed_count == 1


def test_hived_places_the_waiter_on_another_node_instead():
    VC = {"cellfit.io/virtual-cluster": "default"}
    nodes = [NodeInfo(name=f"g{i}", allocatable=Resources(64000, 512 * GI, 8), labels={"nvidia.com/gpu.product": "A100"}) for i in range(2)]
    hived = HivedEngine.from_config({"virtualClusters": {"default": [{"cellType": "A100-NODE", "count": 2}]}}, nodes=nodes)
    engine = FitGppEngine(hived, settings=FitGppSettings())
    for node in nodes:
        engine.apply_node(node)
    first = pending("a-1", job="a", labels=VC)
    engine.reserve(first, engine.filter(first, ["g0", "g1"]).feasible[0])
    second = pending("b-1", job="b", labels=VC)
    home = engine.filter(second, ["g0", "g1"]).feasible[0]
    engine.reserve(second, home)  # HiveD packs: b lands next to a
    trial = te(gpus=4, vc="default")
    victims = engine.select_victims(trial, {home: ["a-1", "b-1"]}, {})
    (victim,) = victims[home]
    job = "a" if victim == "a-1" else "b"
    engine.delete_pod(victim)
    engine.apply_pod(pending(f"{job}-2", job=job, priority=RESUMED_PRIORITY, labels=VC))
    # HiveD would pack the waiter into the freed GPUs on the home node; the hold sends it to the other
    waiter = pending("waiter", job="w", labels=VC)
    assert list(hived.filter(waiter, ["g0", "g1"]).feasible) == [home]
    decision = engine.filter(waiter, ["g0", "g1"])
    other = "g1" if home == "g0" else "g0"
    assert list(decision.feasible) == [other]
    assert decision.failed_count == 1


def test_hold_seconds_must_be_positive():
    with pytest.raises(InvalidPreemptionSettings, match="resume_hold_seconds"):
        ResumeHolds(hold_seconds=0)
    with pytest.raises(ConfigError, match="resumeHoldSeconds"):
        parse_settings("preemption:\n  resumeHoldSeconds: 0\n")
    assert parse_settings("preemption:\n  resumeHoldSeconds: null\n").preemption.resume_hold_seconds is None
