"""FitGpp's preemptor keeps its VC's quota under HiveD, not only its node's room (user24's F1).

team-a owns 2 node cells of 4 V100 nodes, both in use by best-effort pods (be-1 on one node,
be-3 and be-4 on the other). The trial pod te-2 (8 GPUs) has FitGpp preempt be-3 and be-4.
When they leave, team-a's cell on their node is unbound; before, a pending best-effort pod of
team-a (a resumed one) passed the filter on a free node and bound team-a's second cell there,
and te-2's bind was refused for a quota exhausted, its victims preempted for nothing. Now the
moment its last victim leaves HiveD books te-2's cells on that node (the kind of booking its own
reclaim makes), and the other pod is refused with a reason naming te-2.

On FitGppEngine around the real HivedEngine (production's composition).
"""

from __future__ import annotations

import copy

import msgspec

from scheduler.cells import HivedEngine
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.model import Disruption, JobInfo, PodInfo
from scheduler.errors import SchedulingConflict
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import V100_TYPES, node, schedule
from tests.preemption.test_hived_fitgpp_candidates import job_pod

NODES = ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
PREEMPTED = Disruption(reason="PreemptionByScheduler", message="cellfit: preempting to accommodate a higher priority pod")
QUOTA = "virtual cluster 'team-a' quota exhausted"
PROFILE = "cellfit"  # the kube-scheduler profile FitGppEngine serves by default
BOOKED = "cells booked for ns/te-2 while its victims leave"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def engine(clock: Clock | None = None) -> FitGppEngine:
    topology = {"cellTypes": copy.deepcopy(V100_TYPES), "physicalCells": [{"cellType": "V100-NODE", "nodeName": n} for n in NODES]}
    vcs = {"team-a": [{"cellType": "V100-NODE", "count": 2}], "team-b": [{"cellType": "V100-NODE", "count": 1}]}
    made = FitGppEngine(HivedEngine.from_config({"topology": topology, "virtualClusters": vcs}), settings=FitGppSettings(),
                        resume_hold_seconds=30.0 if clock is not None else None, clock=clock)
    for name in NODES:
        made.apply_node(node(name))
    return made


def hived(made: FitGppEngine) -> HivedEngine:
    assert isinstance(made.inner, HivedEngine)
    return made.inner


def place(made: FitGppEngine, p: PodInfo, nodes: list[str]) -> PodInfo:
    assert p.owner is not None
    made.apply_job(JobInfo(uid=p.owner.uid, namespace="ns", name=p.owner.name))
    placed = schedule(made, p, nodes)  # type: ignore[arg-type]
    assert placed is not None, p.uid
    placed = msgspec.structs.replace(placed, priority=p.priority, grace_period_seconds=p.grace_period_seconds)
    made.apply_pod(placed)
    return placed


class Scene:
    """te-2 has had FitGpp preempt be-3 and be-4 on gpu-1; ``resumed`` (team-a, 4 GPUs) waits."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.made = engine(clock)
        self.be1 = place(self.made, job_pod("be-1", 8, "team-a", "be-1", "best-effort", grace=10), ["gpu-0"])
        self.be3 = place(self.made, job_pod("be-3", 4, "team-a", "be-3", "best-effort", grace=30), ["gpu-1"])
        self.be4 = place(self.made, job_pod("be-4", 4, "team-a", "be-4", "best-effort", grace=40), ["gpu-1"])
        self.te2 = msgspec.structs.replace(job_pod("te-2", 8, "team-a", "te-2", "trial"), scheduler_name=PROFILE)
        self.made.apply_job(JobInfo(uid="uid-te-2", namespace="ns", name="te-2"))
        self.made.apply_pod(self.te2)
        choice = self.made.decide_preemption(self.te2, {"gpu-1": ["be-3", "be-4"]}, {})
        assert {node: sorted(uids) for node, uids in choice.victims.items()} == {"gpu-1": ["be-3", "be-4"]}, choice.refusal
        assert choice.preemptor_record is not None
        self.record = choice.preemptor_record
        self.resumed = job_pod("be-r", 4, "team-a", "be-r", "best-effort")
        self.made.apply_job(JobInfo(uid="uid-be-r", namespace="ns", name="be-r"))
        self.made.apply_pod(self.resumed)

    def victims_leave(self) -> None:
        for victim in (self.be3, self.be4):
            self.made.apply_pod(msgspec.structs.replace(victim, terminating=True, disruption=PREEMPTED))
        for victim in (self.be3, self.be4):
            self.made.delete_pod(victim.uid)

    def resumed_elsewhere(self) -> str:
        """The filter's answer for the resumed pod on the free nodes: its reason, or the node it got."""
        decision = filter_offered(self.made, self.resumed, ["gpu-2", "gpu-3"])
        if list(decision.feasible):
            return str(decision.feasible[0])
        return " | ".join([*decision.failed.values(), *decision.unresolvable.values()])


def test_the_resumed_pod_of_the_same_vc_is_refused_elsewhere_and_the_preemptor_binds() -> None:
    scene = Scene()
    scene.victims_leave()
    said = scene.resumed_elsewhere()
    assert QUOTA in said and BOOKED in said, said
    assert list(filter_offered(scene.made, scene.te2, NODES).feasible) == ["gpu-1"]
    placement = scene.made.reserve(scene.te2, "gpu-1")
    assert placement.node_name == "gpu-1"


def test_a_bind_of_the_resumed_pod_that_passed_filter_before_is_refused_and_the_preemptor_binds() -> None:
    # kube-scheduler's two cycles ran at once: the resumed pod's filter answered while the
    # victims were still leaving, and its bind reaches cellfit after they have left.
    scene = Scene()
    scene.victims_leave()
    try:
        scene.made.reserve(scene.resumed, "gpu-2")
    except SchedulingConflict as refused:
        assert QUOTA in str(refused) and BOOKED in str(refused)
    else:
        raise AssertionError("the resumed pod took team-a's quota kept for te-2")
    assert scene.made.reserve(scene.te2, "gpu-1").node_name == "gpu-1"


def test_another_vcs_pod_gets_none_of_the_preemptors_cells() -> None:
    # team-b's guaranteed pod does not yield to te-2's hold (another tenant's), so only HiveD's
    # booking keeps gpu-1's cells for te-2.
    scene = Scene()
    scene.victims_leave()
    other = job_pod("tb-1", 8, "team-b", "tb-1", "best-effort")
    scene.made.apply_job(JobInfo(uid="uid-tb-1", namespace="ns", name="tb-1"))
    scene.made.apply_pod(other)
    assert list(filter_offered(scene.made, other, ["gpu-1"]).feasible) == []
    assert list(filter_offered(scene.made, other, NODES).feasible) in (["gpu-2"], ["gpu-3"])


def test_a_preemptor_that_binds_keeps_its_cells_as_its_own() -> None:
    scene = Scene()
    scene.victims_leave()
    bound = schedule(scene.made, scene.te2, NODES)  # type: ignore[arg-type]
    assert bound is not None and bound.node_name == "gpu-1"
    scene.made.apply_pod(msgspec.structs.replace(bound, annotations={**bound.annotations, ANNOTATION_PREEMPTOR_HOLD: ""}))
    assert hived(scene.made).allocator.by_pod["te-2"].node == "gpu-1"
    assert QUOTA in scene.resumed_elsewhere()  # team-a's two cells are in use: be-1's and te-2's


def test_a_deleted_preemptor_gives_its_cells_back() -> None:
    scene = Scene()
    scene.victims_leave()
    assert "te-2" in hived(scene.made).allocator.by_pod
    scene.made.delete_pod(scene.te2.uid)
    assert "te-2" not in hived(scene.made).allocator.by_pod
    assert scene.resumed_elsewhere() in ("gpu-2", "gpu-3", "gpu-1")  # team-a's second cell is free again


def test_a_lapsed_hold_gives_the_cells_back() -> None:
    clock = Clock()
    scene = Scene(clock)
    scene.victims_leave()
    assert "te-2" in hived(scene.made).allocator.by_pod
    # te-2 never comes: its hold keeps the resumed pod off gpu-1, and lapses 30 s later.
    assert list(filter_offered(scene.made, scene.resumed, ["gpu-1"]).feasible) == []
    clock.now = 31.0
    scene.made.holds.holds()  # the hold lapses as anything reads it
    assert "te-2" not in hived(scene.made).allocator.by_pod
    assert scene.resumed_elsewhere() in ("gpu-2", "gpu-3")


def test_victims_stuck_leaving_book_nothing_and_the_claim_ends_with_the_wait() -> None:
    clock = Clock()
    scene = Scene(clock)
    for victim in (scene.be3, scene.be4):  # deleted, never gone (a finalizer)
        scene.made.apply_pod(msgspec.structs.replace(victim, terminating=True, disruption=PREEMPTED))
    waiting = scene.made.decide_preemption(scene.te2, {"gpu-1": []}, {})
    assert waiting.victims == {}  # waits for them
    clock.now = 40.0 + 30.0 + 1.0  # their longest grace, the hold's seconds, and past
    assert scene.made.decide_preemption(scene.te2, {"gpu-1": []}, {}).victims == {}
    assert scene.made.holds.nominated_node("te-2") is None
    for victim in (scene.be3, scene.be4):
        scene.made.delete_pod(victim.uid)
    assert "te-2" not in hived(scene.made).allocator.by_pod  # the claim ended with the hold: nothing booked
    assert scene.resumed_elsewhere() in ("gpu-1", "gpu-2", "gpu-3")


def test_a_record_taken_off_by_the_replica_whose_hold_lapsed_gives_the_cells_back_here() -> None:
    scene = Scene()
    scene.made.apply_pod(msgspec.structs.replace(scene.te2, annotations={ANNOTATION_PREEMPTOR_HOLD: scene.record}))
    scene.victims_leave()
    assert "te-2" in hived(scene.made).allocator.by_pod
    scene.made.apply_pod(scene.te2)  # the record cleared off the pod
    assert "te-2" not in hived(scene.made).allocator.by_pod


def test_a_restarted_replica_books_the_preemptors_cells_from_its_record() -> None:
    scene = Scene()
    restarted = engine()
    for p in (scene.be1, scene.resumed):  # be-3 and be-4 left while cellfit was down
        assert p.owner is not None
        restarted.apply_job(JobInfo(uid=p.owner.uid, namespace="ns", name=p.owner.name))
        restarted.apply_pod(p)
    restarted.apply_pod(msgspec.structs.replace(scene.te2, annotations={ANNOTATION_PREEMPTOR_HOLD: scene.record}))
    decision = filter_offered(restarted, scene.resumed, ["gpu-2", "gpu-3"])
    assert list(decision.feasible) == []
    said = " | ".join([*decision.failed.values(), *decision.unresolvable.values()])
    assert QUOTA in said and BOOKED in said, said
    assert restarted.reserve(scene.te2, "gpu-1").node_name == "gpu-1"


def test_a_restarted_replica_waits_for_victims_still_listed_before_booking() -> None:
    scene = Scene()
    restarted = engine()
    # The relist shows te-2 first, then its victims still leaving: nothing is booked over them.
    restarted.apply_pod(msgspec.structs.replace(scene.te2, annotations={ANNOTATION_PREEMPTOR_HOLD: scene.record}))
    for p in (scene.be1, scene.be3, scene.be4):
        assert p.owner is not None
        restarted.apply_job(JobInfo(uid=p.owner.uid, namespace="ns", name=p.owner.name))
        leaving = p.uid in ("be-3", "be-4")
        restarted.apply_pod(msgspec.structs.replace(p, terminating=True, disruption=PREEMPTED) if leaving else p)
    assert list(hived(restarted).allocator.anomalies) == []
    assert "te-2" not in hived(restarted).allocator.by_pod
    for victim in (scene.be3, scene.be4):
        restarted.delete_pod(victim.uid)
    assert hived(restarted).allocator.by_pod["te-2"].node == "gpu-1"


def test_offered_other_nodes_the_preemptor_takes_its_booking_there() -> None:
    # kube-scheduler's cache still counts the victims on gpu-1 a moment after cellfit's watch
    # saw them go: it offers te-2 the other nodes. te-2 goes there with its VC's quota.
    scene = Scene()
    scene.victims_leave()
    moved = filter_offered(scene.made, scene.te2, ["gpu-2", "gpu-3"])
    (node_name,) = list(moved.feasible)
    assert hived(scene.made).allocator.by_pod["te-2"].node == node_name
    assert BOOKED in scene.resumed_elsewhere() and QUOTA in scene.resumed_elsewhere()
    assert scene.made.reserve(scene.te2, node_name).node_name == node_name


def test_offered_only_nodes_it_cannot_go_the_preemptor_keeps_its_booking() -> None:
    scene = Scene()
    scene.victims_leave()
    assert list(filter_offered(scene.made, scene.te2, ["gpu-0"]).feasible) == []  # be-1's
    assert hived(scene.made).allocator.by_pod["te-2"].node == "gpu-1"
    assert BOOKED in scene.resumed_elsewhere()


def test_the_preemptors_node_deleted_ends_its_hold_and_gives_the_cells_back() -> None:
    """A hold on a node that is gone keeps nothing any pod could use: before, te-2's booking of
    team-a's cells stayed until the hold lapsed, and a hold that kept no pod off never did."""
    scene = Scene()
    scene.victims_leave()
    assert "te-2" in hived(scene.made).allocator.by_pod
    scene.made.delete_node("gpu-1")
    assert scene.made.holds.nominated_node("te-2") is None
    assert "te-2" not in hived(scene.made).allocator.by_pod
    assert scene.resumed_elsewhere() in ("gpu-2", "gpu-3")
