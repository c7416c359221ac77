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

A record outlives its pod in the replica's memory (``kept``): a trial preemptor, a short run,
may finish (or be deleted) before its record is old enough to finish, and the cache forgets a
finished pod; a pending preemptor's record is taken off when its hold gives up (lapsed, stuck
victims, its node gone); and the deciding replica's own deletion of a member may give up while
the API server fails. Read only from the pods, each left that member running for ever beside
its deleted gang-mates (review27 R2, R5, R6). A kept record is read as a bound one's, and
forgotten once none of its members runs (:attr:`Unfinished.forgotten`). Memory does not outlive a
restart: the members are also named on their gang's Job (``cellfit.io/gang-preempted``,
scheduler/preemption/gang_records.py), by a replica that reads a young record it did not decide
(:attr:`Unfinished.to_record`) or keeps one in memory, and read from the Jobs alike (a member
that Job owns only); a member a Job names that runs no more is taken off it
(:attr:`Unfinished.gone_from_jobs`).

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
from scheduler.preemption import gang_records, records
from scheduler.preemption.bound_records import runs
from scheduler.preemption.resume_records import JobRef
from scheduler.preemption.gang_victims import is_gang_pod, preempted_elsewhere

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfinishedMember:
    """A gang member the preemption of ``by`` (the preemptor, ``namespace/name``; of pods on
    ``node``) took, still running on its own node; ``record``: the preemptor's record that names
    it, and ``preemptor`` the pod as last seen (none where the member's Job named it)."""

    by: str
    node: str
    member: PodInfo
    record: str = ""
    preemptor: PodInfo | None = None

    def message(self) -> str:
        """The member's Event and DisruptionTarget message: who, where, why, and that the
        preemption was finished from its record."""
        owner = self.member.owner
        gang = f"{self.member.namespace}/{owner.name}" if owner is not None else None
        head = preempted_elsewhere(gang=gang, preemptor=self.by, node=self.node, ran_on=self.member.node_name or "?")
        return (
            f"{head} and goes with every pod of {f'the gang {gang}' if gang else 'its gang'}, as a gang runs whole or not at "
            f"all; deleted from the decision recorded on {self.by}, which the replica that made it did not "
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
    # Kept records (the preemptor's UID, the record's text) none of whose members runs: forgotten.
    forgotten: list[tuple[str, str]] = field(default_factory=list)
    # Members of young records to name on their Jobs, which do not yet (gang_records.py).
    to_record: list[tuple[JobRef, str, gang_records.LeftMember]] = field(default_factory=list)
    # Members the Jobs name that run no more, to take off them.
    gone_from_jobs: list[tuple[JobRef, tuple[str, ...]]] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class _Look:
    """One look at the records: what it found so far."""

    current: Callable[[str], PodInfo | None]
    ours: Callable[[str], bool]
    scheduler_name: str
    now: float
    after_seconds: float
    on_jobs: set[tuple[str, str]]  # (Job UID, member UID) the Jobs name
    found: list[UnfinishedMember] = field(default_factory=list)
    due: set[str] = field(default_factory=set)
    recheck_at: float | None = None
    spent: list[tuple[PodInfo, str]] = field(default_factory=list)
    forgotten: list[tuple[str, str]] = field(default_factory=list)
    to_record: list[tuple[JobRef, str, gang_records.LeftMember]] = field(default_factory=list)
    gone_from_jobs: list[tuple[JobRef, tuple[str, ...]]] = field(default_factory=list)

    def young(self, at: float) -> bool:
        """Whether a decision at ``at`` is too young to finish now (the deciding replica may still
        be trying its members): looked at again once it is not."""
        due_at = at + self.after_seconds
        if self.now >= due_at:
            return False
        self.recheck_at = due_at if self.recheck_at is None else min(self.recheck_at, due_at)
        return True

    def take(self, member: UnfinishedMember) -> None:
        if member.member.uid not in self.due:
            self.due.add(member.member.uid)
            self.found.append(member)

    def record(self, pod: PodInfo, text: str, *, remembered: bool) -> None:
        """A preemptor's record (``remembered``: one no pod shows any more)."""
        try:
            record = records.decode(text, whole=True)  # a newer version's is left to its replicas
        except InvalidAnnotation:
            return
        if record is None or not record.elsewhere:
            return
        if pod.scheduler_name != self.scheduler_name or not record.gangs or record.at is None:
            why = ("names no gang or no decision time (an older format)" if pod.scheduler_name == self.scheduler_name
                   else f"is on a pod of scheduler {pod.scheduler_name!r}")
            log.warning("a preemptor's record that names gang members elsewhere " + why + ": none of them is deleted",
                        extra={"pod": pod.key, "record": text[:500]})
            return
        running = [m for m in map(self.current, record.elsewhere) if m is not None and runs(m)]
        if not running and remembered:
            self.forgotten.append((pod.uid, text))
        elif not running and pod.node_name is not None:
            self.spent.append((pod, text))
        members = []
        for member in running:
            if self.ours(member.uid):
                continue
            if not _of_a_recorded_gang(member, gangs=record.gangs, scheduler_name=self.scheduler_name):
                log.warning("a preemptor's record names a pod that is no member of the gangs it names: not deleted",
                            extra={"pod": pod.key, "member": member.key, "record": text[:500]})
                continue
            members.append(member)
        if not members:
            return
        if self.young(record.at):
            for member in members:  # on its Job too, which outlives the preemptor and this replica
                assert member.owner is not None  # _of_a_recorded_gang
                if (member.owner.uid, member.uid) not in self.on_jobs:
                    job = JobRef(uid=member.owner.uid, namespace=member.namespace, name=member.owner.name)
                    self.to_record.append((job, member.uid, gang_records.LeftMember(by=pod.key, node=record.node, at=record.at)))
            return
        for member in members:
            self.take(UnfinishedMember(by=pod.key, node=record.node, member=member, record=text, preemptor=pod))

    def job(self, job: JobRef, text: str) -> None:
        """A Job's record of its members still to delete (gang_records.py)."""
        try:
            named = gang_records.decode(text)
        except InvalidAnnotation as error:
            log.warning("a Job's record of its gang members still to delete does not read: none of them is deleted",
                        extra={"job": job.key, "reason": str(error)})
            return
        gone = []
        for uid, left in named.items():
            member = self.current(uid)
            if member is None or not runs(member):
                gone.append(uid)
            elif self.ours(uid):
                continue
            elif member.namespace != job.namespace or not _of_a_recorded_gang(member, gangs=(job.uid,), scheduler_name=self.scheduler_name):
                log.warning("a Job's record names a pod that is no member of its gang: not deleted",
                            extra={"job": job.key, "member": member.key, "record": text[:500]})
            elif not self.young(left.at):
                self.take(UnfinishedMember(by=left.by, node=left.node, member=member))
        if gone:
            self.gone_from_jobs.append((job, tuple(gone)))


def unfinished_members(
    pods: Iterable[PodInfo], *, current: Callable[[str], PodInfo | None], ours: Callable[[str], bool], scheduler_name: str,
    now: float, after_seconds: float, kept: Iterable[tuple[PodInfo, str]] = (), jobs: Iterable[tuple[JobRef, str]] = (),
) -> Unfinished:
    """The members named by the records ``pods`` carry that still run, not deleted yet, on a
    node, of records at least ``after_seconds`` old at ``now`` (wall-clock seconds): ``current``
    gives a pod by UID as the watch shows it (None: gone). A member ``ours`` (this replica's own
    decision, whose writes are queued) is left to those writes. A record that does not read is
    passed over, as the holds pass it over (another version's); so is one that is not FitGpp's
    decision for a pod of ``scheduler_name`` (cellfit's profile) and a member that is not a gang
    member of ``scheduler_name`` a Job the record names owns, with a warning naming the record.
    A bound preemptor's record none of whose members runs is spent: its binding left it on the
    pod for its members' sake only (scheduler/preemption/bound_records.py). ``kept``: records no
    pod shows any more (the preemptor, as last seen, and the text), read as a bound pod's; one none
    of whose members runs is forgotten. ``jobs``: the Jobs' records of their members still to
    delete (each Job, its ``cellfit.io/gang-preempted`` text), read alike; a member a Job names
    must be a gang member of that Job. A member two records name is due once; a member of a young
    record that its Job does not name yet is to be named there."""
    jobs = list(jobs)
    on_jobs: set[tuple[str, str]] = set()
    for job, text in jobs:
        try:
            on_jobs.update((job.uid, uid) for uid in gang_records.decode(text))
        except InvalidAnnotation:
            continue
    look = _Look(current=current, ours=ours, scheduler_name=scheduler_name, now=now, after_seconds=after_seconds, on_jobs=on_jobs)
    shown: set[tuple[str, str]] = set()
    for pod in pods:
        carried = pod.annotations.get(ANNOTATION_PREEMPTOR_HOLD)
        if carried:
            shown.add((pod.uid, carried))
            look.record(pod, carried, remembered=False)
    for pod, text in kept:
        if (pod.uid, text) not in shown:
            look.record(pod, text, remembered=True)
    for job, text in jobs:
        look.job(job, text)
    return Unfinished(due=look.found, recheck_at=look.recheck_at, spent=look.spent, forgotten=look.forgotten,
                      to_record=look.to_record, gone_from_jobs=look.gone_from_jobs)


def _of_a_recorded_gang(member: PodInfo, *, gangs: tuple[str, ...], scheduler_name: str) -> bool:
    return is_gang_pod(member) and member.owner is not None and member.owner.uid in gangs and member.scheduler_name == scheduler_name
