"""HiveD's reclaim answered by the preempt verb is recorded on its preemptor by the replica that
answered, leader or not (annotation ``cellfit.io/preemptor-hold``, as FitGpp's decisions are):
a replica restarted after kube-scheduler cleared the pod's nomination keeps the node's room for
it where no record of its cells (the leader's ``cellfit.io/reclaim-booking``) came before the
restart: the preemption was answered by a replica that does not lead, or the restart came
within one leader round of the victims' deletion.

The scene of tests/cluster/test_reclaim.py's Cluster, on FitGppEngine around the real
HivedEngine (production's composition): VC a and VC b own a rack each; b's opportunistic pods
fill all eight nodes, and a's guaranteed pod ``g`` (4 GPUs) preempts one of them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from scheduler.cells import HivedEngine
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.model import Disruption, PodInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings, records
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

NODES = node_names()
PROFILE = "cellfit"
LOWER, GUARANTEED = 10, 100  # kube-scheduler's own preemption takes the opportunistic pods
PREEMPTED = Disruption(reason="PreemptionByScheduler", message="cellfit: preempting to accommodate a higher priority pod")


def engine() -> FitGppEngine:
    made = FitGppEngine(
        HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]})),
        settings=FitGppSettings(),
    )
    for name in NODES:
        made.apply_node(node(name))
    return made


def ours(p: PodInfo, priority: int, **changes: Any) -> PodInfo:
    return msgspec.structs.replace(p, priority=priority, scheduler_name=PROFILE, **changes)


def opportunistic(name: str) -> PodInfo:
    return ours(pod(name, 8, "b", priority="opportunistic"), LOWER)


def preempted_for_g() -> tuple[FitGppEngine, list[PodInfo], PodInfo, str, str | None]:
    """The replica kube-scheduler called: the pods as bound, g, its victim, the node, the record."""
    replica = engine()
    running = []
    for i in range(8):
        placed = schedule(replica, opportunistic(f"o{i}"), NODES)  # type: ignore[arg-type]
        assert placed is not None
        running.append(ours(placed, LOWER, phase="Running"))
        replica.apply_pod(running[-1])
    g = ours(pod("g", 4, "a"), GUARANTEED)
    replica.apply_pod(g)
    assert filter_offered(replica, g, NODES).feasible == []  # g books its cells and waits
    ((victim,),) = replica.inner.pending_preemptions().values()  # type: ignore[attr-defined]
    where = next(p.node_name for p in running if p.uid == victim)
    assert where is not None
    choice = replica.decide_preemption(g, {where: [victim]}, {})
    assert choice.victims == {where: [victim]} and choice.rule == "reclaim"
    return replica, running, g, where, choice.preemptor_record


def test_the_reclaim_answered_by_the_preempt_verb_is_recorded_on_its_preemptor() -> None:
    _, running, _, where, record = preempted_for_g()
    assert record is not None
    (victim,) = [p.uid for p in running if p.node_name == where]
    assert records.decode(record) == records.PreemptorRecord(node=where, victims=(victim,))


def test_a_replica_restarted_without_the_leaders_record_keeps_the_room_from_the_victim_jobs_next_pod() -> None:
    _, running, g, where, record = preempted_for_g()
    assert record is not None
    restarted = engine()
    for p in running:
        if p.node_name != where:  # the victim exited while cellfit was down
            restarted.apply_pod(p)
    # The record the answering replica wrote; no reclaim-booking (it does not lead), the
    # nomination cleared by kube-scheduler's attempt that met cellfit down.
    restarted.apply_pod(msgspec.structs.replace(g, annotations={**g.annotations, ANNOTATION_PREEMPTOR_HOLD: record}))
    assert [(h.node, h.kind, h.pods) for h in restarted.holds.holds()] == [(where, "preemptor", ("ns/g",))]
    next_pod = opportunistic("o-next")
    restarted.apply_pod(next_pod)
    taken = filter_offered(restarted, next_pod, NODES)
    assert list(taken.feasible) == [] and "kept for ns/g" in taken.unresolvable[where]
    assert list(filter_offered(restarted, g, NODES).feasible) == [where]


def test_while_the_victim_leaves_the_restarted_replica_keeps_the_room_too() -> None:
    _, running, g, where, record = preempted_for_g()
    assert record is not None
    restarted = engine()
    for p in running:
        restarted.apply_pod(msgspec.structs.replace(p, terminating=True, disruption=PREEMPTED) if p.node_name == where else p)
    restarted.apply_pod(msgspec.structs.replace(g, annotations={**g.annotations, ANNOTATION_PREEMPTOR_HOLD: record}))
    assert [(h.node, h.kind) for h in restarted.holds.holds()] == [(where, "preemptor")]
