"""Two replicas holding the same resume holds of one Job (the leader that decided them one at a
time, and a restarted or standby replica that rebuilt them from the Job's record
``cellfit.io/resume-holds``) end and fill the same holds (review29 #1, MEDIUM): a Job's holds
are taken by their smallest victim UID, which both know. Before, RoomHolds._end_one took
``next(iter(nodes))``, the decision order on the leader and the record's order on the rebuilt
replica, so a pod of the Job bound on a node neither hold is on ended different holds; the
leader then wrote its ended victim off the record, the other replica ended that one too, and it
was left with no hold where the leader kept one.

Job b had be-b-9 preempted on n1 (first) and be-b-0 on n2 (later): "be-b-0" < "be-b-9", so the
record lists n2's victim first.
"""

from __future__ import annotations

from typing import Any

from scheduler.constants import ANNOTATION_PREEMPTIONS, ANNOTATION_RESUME_HOLDS
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, NodeInfo
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings, resume_records
from scheduler.preemption.engine import FitGppEngine
from scheduler.preemption.holds import RoomHolds
from tests.preemption.test_holds_recovered import BE, GI, JOB_B, RESUMED_PRIORITY, as_pod
from tests.preemption.test_holds import FakeClock
from tests.support import kube_objects

NODES = [NodeInfo(name=n, allocatable=Resources(32000, 256 * GI, 8)) for n in ("n1", "n2", "n3")]


def job(holds: dict[str, str]) -> JobInfo:
    return JobInfo(uid=JOB_B, namespace="ml", name="be-b",
                   annotations={ANNOTATION_PREEMPTIONS: "2", ANNOTATION_RESUME_HOLDS: resume_records.encode(holds)})


def pending(name: str) -> dict[str, Any]:
    return kube_objects.pod(name, uid=name, gpus=4, priority=RESUMED_PRIORITY, labels=BE, job_uid=JOB_B)


def replica() -> FitGppEngine:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    for node in NODES:
        engine.apply_node(node)
    return engine


def nodes_held(engine: FitGppEngine) -> list[str]:
    return sorted(hold.node for hold in engine.holds.holds())


def scene() -> tuple[FitGppEngine, FitGppEngine]:
    leader = replica()  # saw n1's preemption, then n2's
    leader.apply_job(job({"be-b-9": "n1"}))
    leader.apply_job(job({"be-b-9": "n1", "be-b-0": "n2"}))
    rebuilt = replica()  # restarted (or a standby relisting) after both
    rebuilt.apply_job(job({"be-b-9": "n1", "be-b-0": "n2"}))
    for engine in (leader, rebuilt):
        engine.apply_pod(as_pod(pending("be-b-1")))
        engine.apply_pod(as_pod(pending("be-b-2")))
    assert nodes_held(leader) == nodes_held(rebuilt) == ["n1", "n2"]
    return leader, rebuilt


def test_a_pod_bound_elsewhere_ends_the_same_hold_on_every_replica() -> None:
    leader, rebuilt = scene()
    body = pending("be-b-1")
    body["spec"]["nodeName"] = "n3"
    body["status"]["phase"] = "Running"
    for engine in (leader, rebuilt):  # the watch shows be-b-1 bound on n3 (by kube-scheduler's binder)
        engine.apply_pod(as_pod(body))
    assert nodes_held(rebuilt) == nodes_held(leader)


def test_the_leaders_record_write_leaves_the_rebuilt_replica_the_leaders_hold() -> None:
    leader, rebuilt = scene()
    ended: list[tuple[str, tuple[str, ...]]] = []
    leader.follow_resume_holds(write=lambda ref, added, gone: ended.append((ref.uid, gone)))
    body = pending("be-b-1")

    leader.holds.bound(as_pod(pending("be-b-1")), "n3")
    body["spec"]["nodeName"] = "n3"
    body["status"]["phase"] = "Running"
    leader.apply_pod(as_pod(body))
    assert ended == [(JOB_B, ("be-b-0",))]  # the leader ended n2's hold (the smaller victim UID) and writes it off
    rebuilt.apply_pod(as_pod(body))
    rebuilt.apply_job(job({"be-b-9": "n1"}))  # the record as the leader's write left it
    assert nodes_held(leader) == ["n1"]
    assert nodes_held(rebuilt) == nodes_held(leader)  # rebuilt keeps nothing for be-b-2


def test_one_pending_pod_is_kept_room_on_the_same_node_by_every_replica() -> None:
    """RoomHolds._assignments fills a Job's holds with its pending pods in the same order on
    every replica. Before, in the order the preemptions made them, which a rebuilt replica does
    not have: the leader kept n1 for the one pending pod and the restarted replica n2 (where the
    leader let a best-effort pod in meanwhile, so after a failover be-b-1 had room kept nowhere)."""
    leader = replica()
    leader.apply_job(job({"be-b-9": "n1"}))
    leader.apply_job(job({"be-b-9": "n1", "be-b-0": "n2"}))
    rebuilt = replica()
    rebuilt.apply_job(job({"be-b-9": "n1", "be-b-0": "n2"}))
    for engine in (leader, rebuilt):
        engine.apply_pod(as_pod(pending("be-b-1")))
    assert nodes_held(rebuilt) == nodes_held(leader)


def two_victims_one_gone() -> RoomHolds:
    """Job J had v1 and v2 preempted on n1; v1 has exited, v2 leaves for its long grace period."""
    holds = RoomHolds(hold_seconds=60, clock=FakeClock())
    holds.displaced(job_uid="J", node_name="n1", victim_uid="v1")
    holds.displaced(job_uid="J", node_name="n1", victim_uid="v2")
    holds.victim_gone(job_uid="J", node_name="n1")
    return holds


def test_a_hold_ended_elsewhere_counts_the_victims_still_leaving_as_the_replica_that_ended_it() -> None:
    """review27 R7: the leader ends v1's hold by binding a pod of J elsewhere and takes one off
    the victims gone; a standby following the Job's record kept v1's exit counted, so its hold on
    n1 idled out (resumeHoldSeconds, no pod of J pending) while v2 still left, and the standby
    wrote v2 off the record, which ended the leader's live hold too."""
    leader, standby = two_victims_one_gone(), two_victims_one_gone()
    written: dict[str, list[tuple[str, ...]]] = {"leader": [], "standby": []}
    leader.on_resume_ended = lambda job, victims: written["leader"].append(victims)
    standby.on_resume_ended = lambda job, victims: written["standby"].append(victims)
    leader.bound(as_pod(kube_objects.pod("j-1", uid="j-1", gpus=4, priority=RESUMED_PRIORITY, labels=BE, job_uid="J")), "n9")
    standby.resume_ended_elsewhere(job_uid="J", victim_uid="v1")
    counted = [(holds._displaced["J"]["n1"].pods, holds._displaced["J"]["n1"].gone) for holds in (leader, standby)]
    assert counted == [(1, 0), (1, 0)]  # before: the standby's (1, 1)
    for holds in (leader, standby):
        holds.expire()
        assert isinstance(holds.clock, FakeClock)
        holds.clock.now += 61
        holds.expire()
    assert written == {"leader": [], "standby": []}  # before: the standby wrote ("v2",) off
