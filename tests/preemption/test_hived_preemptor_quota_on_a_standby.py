"""A standby's HiveD books FitGpp's preemptor's cells from the record whatever the order of the
writes the watch shows (review24 F9, F2; 0854128's VC-quota hold after a failover).

The scene of test_hived_preemptor_quota_hold.py: te-2 (team-a, 8 GPUs) had the active replica's
FitGpp preempt be-3 and be-4 on gpu-1. A standby watches the pods:

* F9: kube-scheduler's nomination and the victims' deletion reach its watch before the replica's
  record patch: the hold rebuilt from the nomination stood for no record, so the record arriving
  after it booked no cells (the VC-quota race reopened after a failover) and its removal did not
  end the hold;
* F2: after the standby's hold followed a cleared record off, the active replica's later decision
  on gpu-1 (a new record) was refused a hold there and booked nothing.
"""

from __future__ import annotations

import msgspec

from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.model import JobInfo, PodInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import records
from scheduler.preemption.engine import FitGppEngine
from tests.preemption.test_hived_preemptor_quota_hold import BOOKED, PREEMPTED, QUOTA, Scene, engine, hived, place


def carrying(p: PodInfo, record: str | None, *, nominated: str | None = "gpu-1") -> PodInfo:
    annotations = {ANNOTATION_PREEMPTOR_HOLD: record} if record is not None else {}
    return msgspec.structs.replace(p, annotations=annotations, nominated_node_name=nominated)


def standby_of(scene: Scene) -> FitGppEngine:
    """A standby whose watch shows be-1, the resumed pod, be-3 and be-4 leaving for cellfit's
    preemption, and te-2 nominated to gpu-1 (no record yet)."""
    standby = engine()
    for p in (scene.be1, scene.be3, scene.be4, scene.resumed):
        assert p.owner is not None
        standby.apply_job(JobInfo(uid=p.owner.uid, namespace="ns", name=p.owner.name))
        leaving = p.uid in ("be-3", "be-4")
        standby.apply_pod(msgspec.structs.replace(p, terminating=True, disruption=PREEMPTED) if leaving else p)
    standby.apply_job(JobInfo(uid="uid-te-2", namespace="ns", name="te-2"))
    return standby


def refusal_elsewhere(made: FitGppEngine, p: PodInfo) -> str:
    decision = filter_offered(made, p, ["gpu-2", "gpu-3"])
    if list(decision.feasible):
        return str(decision.feasible[0])
    return " | ".join([*decision.failed.values(), *decision.unresolvable.values()])


def test_a_standby_hold_rebuilt_from_the_nomination_books_the_cells_once_the_record_arrives() -> None:
    scene = Scene()
    standby = standby_of(scene)
    standby.apply_pod(carrying(scene.te2, None))
    assert standby.holds.nominated_node("te-2") == "gpu-1"  # from the nomination
    standby.apply_pod(carrying(scene.te2, scene.record))  # the record's write reaches the watch
    for victim in (scene.be3, scene.be4):
        standby.delete_pod(victim.uid)
    assert hived(standby).allocator.by_pod["te-2"].node == "gpu-1"
    said = refusal_elsewhere(standby, scene.resumed)
    assert QUOTA in said and BOOKED in said, said
    # The active replica's hold lapsed and took the record off: the standby's hold and cells go too.
    standby.apply_pod(carrying(scene.te2, "", nominated=None))
    assert standby.holds.nominated_node("te-2") is None
    assert "te-2" not in hived(standby).allocator.by_pod


def test_a_standby_books_the_cells_of_a_later_decision_on_the_node_whose_first_record_was_cleared() -> None:
    scene = Scene()
    standby = standby_of(scene)
    standby.apply_pod(carrying(scene.te2, scene.record))
    for victim in (scene.be3, scene.be4):
        standby.delete_pod(victim.uid)
    assert hived(standby).allocator.by_pod["te-2"].node == "gpu-1"
    standby.apply_pod(carrying(scene.te2, "", nominated=None))  # the active replica's hold lapsed
    assert standby.holds.nominated_node("te-2") is None
    assert "te-2" not in hived(standby).allocator.by_pod
    # The same record seen again (an older event) rebuilds nothing.
    standby.apply_pod(carrying(scene.te2, scene.record))
    assert standby.holds.nominated_node("te-2") is None
    # be-r took gpu-1 meanwhile; the active replica preempts it for te-2 and records that.
    placed = place(standby, scene.resumed, ["gpu-1"])
    standby.apply_pod(msgspec.structs.replace(placed, terminating=True, disruption=PREEMPTED))
    later = records.encode(node="gpu-1", victims=("be-r",))
    standby.apply_pod(carrying(scene.te2, later))
    assert standby.holds.nominated_node("te-2") == "gpu-1"
    standby.delete_pod(placed.uid)
    assert hived(standby).allocator.by_pod["te-2"].node == "gpu-1"
