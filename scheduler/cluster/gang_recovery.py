"""The gang members a recorded FitGpp preemption left running on other nodes.

A gang FitGpp takes whole has members on other nodes than the one kube-scheduler deletes the
victims of (scheduler/preemption/gang_victims.py); the replica that answered marks and deletes
those itself, in the background after its answer (``ClusterCache.record_preemption``). Killed
between the answer and those deletions, it leaves them running for ever while their gang-mates
are gone: the distributed job hangs on their GPUs. The decision outlives it in the preemptor's
record (``cellfit.io/preemptor-hold``, scheduler/preemption/records.py), written first, which
names those members (``elsewhere``). A replica that lists the pods (a restart, a relist) finishes
what the record says: each member it names that still runs, not deleted yet, is preempted as
the answering replica would have (marked DisruptionTarget, deleted with its grace period, a
Preempted Event), whoever leads: the answering replica deletes them, leader or not, and a
deletion is guarded by the pod's UID, so a second one changes nothing.

The replica that decided may still be acting: its record is written first, and its mark and
deletion of each member are tried again over a bounded time (cache.py PREEMPT_PAUSES_SECONDS). A
replica that lists the pods in that time (its start in a rolling update, a relist after an API
outage) would preempt the member a second time and tell it the deciding replica stopped. So a
record is finished only once it is ``after_seconds`` old (its ``at``, the decision's wall-clock
time); a younger one is left for a later look (:attr:`Unfinished.recheck_at`). The preemptor
usually binds well before that (once its victims on its node have exited): its binding leaves the
record on it while a member it names runs (scheduler/preemption/bound_records.py), and a bound
preemptor's record is read as a pending one's; one none of whose members runs any more is spent,
to be taken off (:attr:`Unfinished.spent`).

The record is an annotation: where the chart's state policy is off (or audit-only), anyone who
may update a pod can write one. So it is trusted only as far as FitGpp's own decisions go: on a
preemptor cellfit's scheduler (profile) schedules, a member is deleted only if it is a pod of
cellfit's gang (``cellfit.io/gang: "true"``, scheduled by cellfit's profile) that a Job the
record names (``gangs``) owns. Any other pod it names, and a record naming members but no gang or
no decision time (the format of the day before they were recorded), is passed over with a
warning naming the record.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Iterable

from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.model import PodInfo
from scheduler.errors import InvalidAnnotation
from scheduler.preemption import records
from scheduler.preemption.bound_records import runs
from scheduler.preemption.gang_victims import is_gang_pod, preempted_elsewhere

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfinishedMember:
    """A gang member the preemption recorded on ``preemptor`` (of pods on ``node``) took, still
    running on its own node."""

    preemptor: PodInfo
    node: str
    member: PodInfo

    def message(self) -> str:
        """The member's Event and DisruptionTarget message: who, where, why, and that the
        preemption was finished from its record."""
        owner = self.member.owner
        gang = f"{self.member.namespace}/{owner.name}" if owner is not None else None
        head = preempted_elsewhere(gang=gang, preemptor=self.preemptor.key, node=self.node, ran_on=self.member.node_name or "?")
        return (
            f"{head} and goes with every pod of {f'the gang {gang}' if gang else 'its gang'}, as a gang runs whole or not at "
            f"all; deleted from the decision recorded on {self.preemptor.key}, which the replica that made it did not "
            "finish"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Unfinished:
    """The members to preempt now (``due``), the earliest wall-clock time a record too young
    to finish now may be (``recheck_at``; None: none is), and the records on bound preemptors
    none of whose members runs any more, to take off (``spent``: the pod, its record)."""

    due: list[UnfinishedMember]
    recheck_at: float | None
    spent: list[tuple[PodInfo, str]] = field(default_factory=list)


def unfinished_members(
    pods: Iterable[PodInfo], *, current: Callable[[str], PodInfo | None], ours: Callable[[str], bool], scheduler_name: str,
    now: float, after_seconds: float,
) -> Unfinished:
    """The members named by the records ``pods`` carry that still run, not deleted yet, on a
    node, of records at least ``after_seconds`` old at ``now`` (wall-clock seconds): ``current``
    gives a pod by UID as the watch shows it (None: gone). A member ``ours`` (this replica's own
    decision, whose writes are queued) is left to those writes. A record that does not read is
    passed over, as the holds pass it over (another version's); so is one that is not FitGpp's
    decision for a pod of ``scheduler_name`` (cellfit's profile) and a member that is not a gang
    member of ``scheduler_name`` a Job the record names owns, with a warning naming the record.
    A bound preemptor's record none of whose members runs is spent: its binding left it on the
    pod for its members' sake only (scheduler/preemption/bound_records.py)."""
    found: list[UnfinishedMember] = []
    spent: list[tuple[PodInfo, str]] = []
    recheck_at: float | None = None
    for pod in pods:
        text = pod.annotations.get(ANNOTATION_PREEMPTOR_HOLD)
        if not text:
            continue
        try:
            record = records.decode(text, whole=True)  # a newer version's is left to its replicas
        except InvalidAnnotation:
            continue
        if record is None or not record.elsewhere:
            continue
        if pod.scheduler_name != scheduler_name or not record.gangs or record.at is None:
            why = ("names no gang or no decision time (an older format)" if pod.scheduler_name == scheduler_name
                   else f"is on a pod of scheduler {pod.scheduler_name!r}")
            log.warning("a preemptor's record that names gang members elsewhere " + why + ": none of them is deleted",
                        extra={"pod": pod.key, "record": text[:500]})
            continue
        running = [m for m in map(current, record.elsewhere) if m is not None and runs(m)]
        if not running and pod.node_name is not None:
            spent.append((pod, text))
        members = [m for m in running if not ours(m.uid)]
        if not members:
            continue
        due_at = record.at + after_seconds
        if now < due_at:  # the deciding replica may still be trying them
            recheck_at = due_at if recheck_at is None else min(recheck_at, due_at)
            continue
        for member in members:
            if not _of_a_recorded_gang(member, gangs=record.gangs, scheduler_name=scheduler_name):
                log.warning("a preemptor's record names a pod that is no member of the gangs it names: not deleted",
                            extra={"pod": pod.key, "member": member.key, "record": text[:500]})
                continue
            found.append(UnfinishedMember(preemptor=pod, node=record.node, member=member))
    return Unfinished(due=found, recheck_at=recheck_at, spent=spent)


def _of_a_recorded_gang(member: PodInfo, *, gangs: tuple[str, ...], scheduler_name: str) -> bool:
    return is_gang_pod(member) and member.owner is not None and member.owner.uid in gangs and member.scheduler_name == scheduler_name
