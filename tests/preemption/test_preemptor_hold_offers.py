"""A preemptor's hold survives an offer that lacks its node.

The scene: n1 and n2 (8 GPUs each) each run a long-grace and a short-grace best-effort pod of
4 GPUs. A trial pod (4 GPUs) preempts n1's short-grace pod, whose 30 s grace period then runs.
Meanwhile kube-scheduler asks about the trial pod again with candidate nodes that do not
include n1: its own NodeResourcesFit turns n1 away while the victim terminates, its dry run
finds no victim needed on n1 once its cache has dropped the victim (cellfit's watch has not yet),
or it samples other nodes of a large cluster. FitGpp took a second victim on n2 then, which moved
the trial pod's hold to n2: the room n1's victim freed went to whichever pod came next, and a
second Job was counted preempted for a pod that needed one node.
"""

from __future__ import annotations

from msgspec.structs import replace

from scheduler.cells import HivedEngine
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine

from tests.preemption.test_engine import GI, NODE, full_node, hived_full_of_opportunistic_pods, running
from tests.preemption.test_holds import FakeClock, pending
from tests.preemption.test_preemptor_holds import trial
from scheduler.kube.names import filter_offered

N2_CANDIDATES = {"n2": ["c-long", "d-short"]}


def preempting_on_n1(*, clock: FakeClock | None = None, hold_seconds: float | None = None) -> tuple[FitGppEngine, PodInfo]:
    """The scene, just after FitGpp chose be-short on n1 for the trial pod: the watch shows the
    victim terminating (kube-scheduler deleted it)."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(), resume_hold_seconds=hold_seconds, clock=clock)
    full_node(engine)
    engine.apply_node(NodeInfo(name="n2", allocatable=NODE.allocatable))
    engine.apply_pod(running("c-long", job="c", gpus=4, grace=600, node="n2"))
    engine.apply_pod(running("d-short", job="d", gpus=4, grace=30, node="n2"))
    preemptor = trial()
    engine.apply_pod(preemptor)
    assert engine.select_victims(preemptor, {"n1": ["be-long", "be-short"]}, {}) == {"n1": ["be-short"]}
    engine.apply_pod(replace(running("be-short", job="b", gpus=4, grace=30), terminating=True))
    return engine, preemptor


def preemptor_holds(engine: FitGppEngine) -> list[tuple[str, tuple[str, ...]]]:
    return [(hold.node, hold.pods) for hold in engine.holds.holds() if hold.kind == "preemptor"]


def test_an_offer_without_its_node_takes_no_second_victim_and_the_room_stays_the_preemptors():
    engine, preemptor = preempting_on_n1()
    assert list(filter_offered(engine, preemptor, ["n2"]).feasible) == []  # n2 is full
    choice = engine.decide_preemption(preemptor, N2_CANDIDATES, {})
    assert choice.victims == {}
    assert choice.refusal == "pods already terminating on node n1 free enough for this pod; waiting for them to exit"
    assert preemptor_holds(engine) == [("n1", ("ml/te-1",))]
    assert engine.preemptions_of_job("job-d") == 0  # n2's Job was not counted preempted
    engine.delete_pod("be-short")  # the victim's grace period ends
    assert list(filter_offered(engine, pending("waiter", job="w"), ["n1", "n2"]).feasible) == []  # the room stays kept
    assert list(filter_offered(engine, preemptor, ["n1", "n2"]).feasible) == ["n1"]


def test_the_preemptor_waits_no_longer_than_its_victims_grace_period_and_hold_seconds():
    """A victim stuck behind a finalizer never leaves: the hold gives up 30 s (be-short's grace
    period) + 60 s (hold_seconds) after the preemptor first waited, and FitGpp preempts on n2."""
    clock = FakeClock()
    engine, preemptor = preempting_on_n1(clock=clock, hold_seconds=60)
    clock.now += 5
    assert engine.decide_preemption(preemptor, N2_CANDIDATES, {}).victims == {}  # its first wait
    clock.now += 90
    assert engine.decide_preemption(preemptor, N2_CANDIDATES, {}).victims == {}  # 90 s: still within
    clock.now += 1
    assert engine.decide_preemption(preemptor, N2_CANDIDATES, {}).victims == {"n2": ["d-short"]}
    assert preemptor_holds(engine) == [("n2", ("ml/te-1",))]
    assert engine.stats()["resumeHoldsLapsed"] == 1


def test_a_preemptor_offered_its_node_again_still_waits_there():
    engine, preemptor = preempting_on_n1()
    choice = engine.decide_preemption(preemptor, {"n1": ["be-long"], **N2_CANDIDATES}, {})
    assert choice.victims == {} and preemptor_holds(engine) == [("n1", ("ml/te-1",))]


def test_under_hived_an_offer_without_the_booked_node_keeps_the_booking():
    """A guaranteed trial pod of VC vision gets its cell back from speech's opportunistic pods:
    HiveD books it on one node while the victim there terminates. kube-scheduler, counting the
    victim, offers only the other node."""
    engine = hived_full_of_opportunistic_pods()
    owed = PodInfo(uid="vision-1", namespace="ml", name="vision-1", requests=Resources(1000, GI, 8),
                   labels={"cellfit.io/virtual-cluster": "vision", "cellfit.io/job-class": "trial"}, priority=1000)
    booked = next(iter(filter_offered(engine, owed, ["g0", "g1"]).failed))
    assert engine.decide_preemption(owed, {booked: []}, {}).victims  # HiveD's reclaim: one opportunistic pod
    other = "g1" if booked == "g0" else "g0"
    filter_offered(engine, owed, [other])
    assert isinstance(engine.inner, HivedEngine)
    assert engine.inner.booked_nodes().get("vision-1") == booked
