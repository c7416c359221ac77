"""Preemptor holds: the room FitGpp's victims leave is kept for the pod they were preempted for.

The scene (as in test_holds): node n1 (8 GPUs) runs BE Jobs a and b (4 GPUs each); a trial pod
preempts b's pod. The victim has left in cellfit's view, but the trial pod is not bound yet:
kube-scheduler may have dropped its nomination (its cache saw the victim go first, cellfit's
filter refused the trial pod on the victim it still saw, and no preemption helped). A BE pod of
another Job ("waiter") is then tried on n1 and must not take the trial pod's GPUs.
"""

from __future__ import annotations

from msgspec.structs import replace

import pytest

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine

from tests.preemption.test_engine import GI, full_node, hived_full_of_opportunistic_pods, te
from tests.preemption.test_holds import RESUMED_PRIORITY, FakeClock, pending
from scheduler.kube.names import filter_offered

TRIAL_PRIORITY = 1000


def trial(uid: str = "te-1", *, priority: int = TRIAL_PRIORITY) -> PodInfo:
    return replace(te(uid, gpus=4), priority=priority)


def preempted(*, clock: FakeClock | None = None, hold_seconds: float | None = None) -> tuple[FitGppEngine, PodInfo]:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), resume_hold_seconds=hold_seconds, clock=clock)
    full_node(engine)
    preemptor = trial()
    engine.apply_pod(preemptor)  # pending
    assert engine.select_victims(preemptor, {"n1": ["be-long", "be-short"]}, {}) == {"n1": ["be-short"]}
    engine.delete_pod("be-short")  # gone after its grace period; the trial pod is not bound yet
    return engine, preemptor


def test_the_waiter_is_kept_off_the_room_the_preemption_freed_and_the_preemptor_passes():
    engine, preemptor = preempted()
    decision = filter_offered(engine, pending("waiter", job="w"), ["n1"])
    assert list(decision.feasible) == []
    assert decision.failed_count == 0 and decision.unresolvable_count == 1
    assert decision.unresolvable["n1"] == (
        "its free resources are kept for ml/te-1, for which FitGpp preempted pods there "
        "(kube-scheduler nominated it to this node)"
    )
    assert list(filter_offered(engine, preemptor, ["n1"]).feasible) == ["n1"]
    assert [(h.node, h.kind, h.pods) for h in engine.holds.holds()] == [("n1", "preemptor", ("ml/te-1",))]
    assert engine.stats()["preemptorHolds"] == 1


@pytest.mark.parametrize(
    ("pod", "turned_away"),
    [
        (pending("w", job="w", priority=RESUMED_PRIORITY), True),  # the victim's own resumed pod, too
        (pending("be-short-2", job="b", priority=RESUMED_PRIORITY), True),
        (trial("te-2"), True),  # same priority: kube-scheduler also counts the nominated pod first
        (trial("te-3", priority=TRIAL_PRIORITY + 1), False),  # higher priority goes first
        (pending("w", job="w", labels={"cellfit.io/virtual-cluster": "speech"}), False),  # another tenant's guarantee
        (pending("small", job="s", gpus=0), False),  # leaves the preemptor its room
    ],
)
def test_who_yields_to_a_preemptor(pod, turned_away):
    engine, _ = preempted()
    assert (list(filter_offered(engine, pod, ["n1"]).feasible) == []) is turned_away


def test_the_hold_ends_when_the_preemptor_is_bound_and_a_failed_binding_gives_it_back():
    engine, preemptor = preempted()
    engine.reserve(preemptor, "n1")
    assert engine.stats()["preemptorHolds"] == 0
    engine.unreserve(preemptor.uid)  # the binding API call failed: the pod waits again
    assert engine.stats()["preemptorHolds"] == 1
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == []
    engine.reserve(preemptor, "n1")
    engine.apply_pod(replace(preemptor, node_name="n1", phase="Running"))  # the watch confirms it
    engine.unreserve("unknown")
    assert engine.stats()["preemptorHolds"] == 0


def test_the_hold_ends_when_the_preemptor_goes_elsewhere_or_away():
    engine, preemptor = preempted()
    engine.apply_node(NodeInfo(name="n2", allocatable=Resources(32000, 256 * GI, 8)))
    engine.apply_pod(replace(preemptor, node_name="n2", phase="Pending"))  # kube-scheduler placed it on n2
    assert engine.stats()["preemptorHolds"] == 0
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == ["n1"]

    engine, preemptor = preempted()
    engine.delete_pod(preemptor.uid)
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == ["n1"]


def test_a_preemption_on_another_node_moves_the_hold():
    engine, preemptor = preempted()
    engine.holds.preempting(preemptor, node_name="n2")
    assert [(h.node, h.kind) for h in engine.holds.holds()] == [("n2", "preemptor")]
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1"]).feasible) == ["n1"]


def test_while_the_victim_is_still_there_nothing_is_kept_that_the_preemptor_could_not_use():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    full_node(engine)
    preemptor = trial()
    engine.select_victims(preemptor, {"n1": ["be-long", "be-short"]}, {})
    # n1 is full until the victim exits: a waiter fails on resources, not on the hold
    assert "kept for" not in filter_offered(engine, pending("waiter", job="w"), ["n1"]).unresolvable.get("n1", "")


def test_the_hold_gives_up_hold_seconds_after_it_first_kept_a_pod_off():
    clock = FakeClock()
    engine, _ = preempted(clock=clock, hold_seconds=60)
    waiter = pending("waiter", job="w")
    clock.now += 500  # holding without refusing anybody starts no clock
    assert list(filter_offered(engine, waiter, ["n1"]).feasible) == []
    clock.now += 61
    # the preemptor's hold lapsed; so did the victim Job's resume hold, whose Job has made no
    # pod for hold_seconds since its victim left
    assert list(filter_offered(engine, waiter, ["n1"]).feasible) == ["n1"]
    assert engine.stats()["resumeHoldsLapsed"] == 2 and engine.stats()["preemptorHolds"] == 0


def test_the_preemptor_goes_before_the_victims_resumed_pod_and_then_the_resume_hold_keeps_the_rest():
    engine, preemptor = preempted()
    resumed = pending("be-short-2", job="b", priority=RESUMED_PRIORITY)
    engine.apply_pod(resumed)
    reason = filter_offered(engine, pending("waiter", job="w"), ["n1"]).unresolvable["n1"]
    assert reason.startswith("its free resources are kept for ml/te-1, for which FitGpp preempted pods there")
    assert list(filter_offered(engine, resumed, ["n1"]).feasible) == []  # the trial pod first
    engine.reserve(preemptor, "n1")
    engine.apply_pod(replace(preemptor, node_name="n1", phase="Succeeded"))
    assert filter_offered(engine, pending("waiter", job="w"), ["n1"]).unresolvable["n1"].startswith(
        "its free resources are kept for ml/be-short-2, of a best-effort Job preempted there"
    )
    assert list(filter_offered(engine, resumed, ["n1"]).feasible) == ["n1"]


def test_two_preemptors_of_one_priority_never_hold_a_node_for_each_other():
    # A preempted be-short on n1 and waits. B (8 GPUs, same priority) must not be promised A's
    # room: preempting be-long for it would be for nothing. And were both to hold n1, only the
    # later yields: each yielding to the other would keep both off n1.
    engine, a = preempted()
    b = replace(te("te-b", gpus=8), priority=TRIAL_PRIORITY)
    engine.apply_pod(b)
    assert engine.select_victims(b, {"n1": ["be-long"]}, {}) == {}  # 4 free, 4 held for A: no room for 8
    engine.holds.preempting(b, node_name="n1")  # as if B had preempted there anyway, after A
    engine.delete_pod("be-long")
    assert list(filter_offered(engine, a, ["n1"]).feasible) == ["n1"]  # the older hold goes first
    assert filter_offered(engine, b, ["n1"]).unresolvable["n1"].startswith("its free resources are kept for ml/te-1,")


def test_a_preemptor_of_lower_priority_is_not_promised_the_room_held_for_a_higher_one():
    # n1: be-long (4) runs; 4 GPUs free, held for te-1.
    engine, _ = preempted()
    low = replace(te("te-low", gpus=8), priority=TRIAL_PRIORITY - 1)
    assert engine.select_victims(low, {"n1": ["be-long"]}, {}) == {}  # be-long's 4 are all it could get
    engine, _ = preempted()
    small = replace(te("te-small", gpus=4), priority=TRIAL_PRIORITY - 1)
    assert engine.select_victims(small, {"n1": ["be-long"]}, {}) == {"n1": ["be-long"]}  # be-long's room is enough
    engine, _ = preempted()
    higher = replace(te("te-high", gpus=8), priority=TRIAL_PRIORITY + 1)  # te-1's hold is no concern of it
    assert engine.select_victims(higher, {"n1": ["be-long"]}, {}) == {"n1": ["be-long"]}


def test_a_preemptor_whose_cells_hived_books_keeps_no_fitgpp_hold_elsewhere():
    engine = hived_full_of_opportunistic_pods()
    owed = PodInfo(uid="vision-1", namespace="ml", name="vision-1", requests=Resources(1000, GI, 8),
                   labels={"cellfit.io/virtual-cluster": "vision", "cellfit.io/job-class": "trial"}, priority=TRIAL_PRIORITY)
    engine.holds.preempting(owed, node_name="g1")  # an earlier FitGpp decision for it
    node = next(iter(filter_offered(engine, owed, ["g0", "g1"]).failed))
    assert engine.select_victims(owed, {node: ["opp-0", "opp-1"]}, {})  # HiveD reclaims its cell
    assert engine.stats()["preemptorHolds"] == 0
