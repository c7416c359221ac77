"""HiveD's guarantee whatever the pods' PriorityClasses, on the leader.

A guaranteed pod whose VC's cells opportunistic pods use gets them back through kube-scheduler's
preemption: cellfit's filter refuses, kube-scheduler calls the preempt verb, cellfit names the
opportunistic pods. But kube-scheduler offers as victims only pods of *lower* priority than the
preemptor, and never calls cellfit at all for a pod whose every node its own filters found full:
an opportunistic pod of equal or higher priority (a user's mistake, the cluster's default class)
would keep the cells for ever. Every ``reclaim.periodSeconds`` this controller

1. books the cells of each guaranteed pod that kube-scheduler has found unschedulable for
   ``reclaim.afterSeconds`` and that HiveD would place only by preempting opportunistic pods
   (*stranded*): on a node kube-scheduler will accept it on once they are gone (its node
   selector, node affinity and taints, scheduler/kube/node_rules.py; its cores, memory and a
   pod slot fit there without them, beside the pods kube-scheduler nominated there, and their
   GPUs too; scheduler/cluster/stranded.py), as the filter books a pod waiting for its victims. A pod with
   constraints those rules do not model is left as it is, and the log says why;
2. reads the guaranteed pods waiting for cells (``waiting_guarantees``, under the engine lock)
   and, for each that has waited ``reclaim.afterSeconds`` since the leader first saw it wait,
   preempts itself those of its opportunistic pods kube-scheduler will not: each marked
   DisruptionTarget and deleted with its own grace period (scheduler/cluster/disruption.py), an
   Event on both pods, a log line, the counter ``cellfit_reclaimed_pods_total``. The victim's
   Event ends with what the deletion does to its Job, in the words the preempt verb's reclaim
   victims get (scheduler/preemption/reclaimed.py: counted against its backoffLimit, failed at
   once, or created again), from the Jobs the watch showed (``jobs``). The ones of
   lower priority are left to kube-scheduler, which preempts them once the others are gone.

Before the first victim of a waiting pod is deleted, its booking is recorded on it (annotation
``cellfit.io/reclaim-booking``, scheduler/cluster/stranded.py's :class:`ReclaimRecords`): every
replica's engine then keeps those cells for it, whichever replica kube-scheduler calls. A record
that cannot be written deletes nothing for that pod this round. A waiting pod whose victims the
watch shows leaving, preempted (every victim of its booking terminating with kube-scheduler's
DisruptionTarget condition: a preemption deleted them), gets its record too, at the next round:
a restarted replica then keeps its cells from its first list, even after kube-scheduler
cleared the pod's nomination (which it does when an attempt meets an extender that does not
answer) and the victims are gone, so the victim Job's next pod does not take them. Each round
keeps every pending pod's record in line with the leader's engine: rewritten when its booking
moved, cleared when the engine holds none for the pod (placed elsewhere without preemption,
given back), written only where it differs from what the pod carries; a record left stale
would be applied by the next replica to read the pod afresh (a restart, a rolling update).
A bound pod's record is cleared too: no engine reads it once the pod is bound (its cells are
kept by its node and bind-info), and left there it names, in ``kubectl describe``, cells the
pod waits for no more; a new leader clears what a former one left.

Never touched: a pod not labelled opportunistic, not of cellfit's kube-scheduler profile, already
terminating, or deleted by this leader already; nor anything for a waiting pod that is gone,
terminating, not cellfit's, or waits no more (the wait counts again from its next wait), or one
of whose victims neither cellfit may delete nor kube-scheduler preempt (its cells would be freed
in part only). A pending pod HiveD can never place as written (a virtual cluster unknown or
removed by a reload, no VC label, more GPUs than its cells hold) is skipped and named once in
the log: it never stops the round for the other tenants' pods. A
gang's pods are booked as the filter books them: the gang planned whole, each pod its slot and
the slot's victims.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from scheduler.cells.capabilities import WaitingGuarantee
from scheduler.cluster.disruption import PodDeletion, Preempted, preempt_pod
from scheduler.cluster.preempted_jobs import JobEvents, tell_job_of_preempted
from scheduler.cluster.stranded import ReclaimRecords, StrandedGuarantees, immovable, reclaimable
from scheduler.config import ReclaimSettings
from scheduler.core.model import PodInfo
from scheduler.errors import CellfitError
from scheduler.preemption.reclaimed import reclaimed_job_outcome

log = logging.getLogger(__name__)

# A pod deleted here is not deleted again while it terminates (the watch may not show it so yet).
_RECLAIMED_MEMORY_SECONDS = 600.0
# Bound pods' records cleared at most per round (_clear_bound), after the round's deletions: the
# first round after an upgrade (or a leader that could not write for a while) finds every bound
# pod the reclaim ever booked for carrying one, a PATCH each (300 at 15 ms: 4.5 s).
CLEARS_PER_ROUND = 50
# A bound pod whose clear was refused (a third-party webhook refusing cellfit's status writes, say)
# is tried again after the round's period doubled per refusal, at most this long (seconds).
CLEAR_BACK_OFF_MAX_SECONDS = 600.0
WHY = "kube-scheduler preempts only lower priorities"


class WaitingCells(Protocol):
    """The guaranteed pods waiting for opportunistic pods to leave their cells
    (:class:`~scheduler.cells.capabilities.GuaranteeKeeping`)."""

    def waiting_guarantees(self) -> list[WaitingGuarantee]: ...

    def reclaim_record(self, pod_uid: str) -> str | None: ...


class PodRecord(Protocol):
    """The pods by UID, as the watch shows them (scheduler.core.pods.PodStore)."""

    def get(self, uid: str) -> PodInfo | None: ...

    def pods(self) -> Iterator[PodInfo]: ...


class JobOutcomes(Protocol):
    """What preempting pods does to their Jobs, by pod UID, from the Jobs the watch showed (None:
    its Job resumes it): FitGppEngine.victim_outcomes, the words its victims are told, asked
    without recording the victims among their Jobs' failed pods not counted yet; each is recorded
    (``record_victims``) once its deletion succeeded, so that a deletion failing and retried does
    not count the victim among the failed pods before it. Called under the engine lock."""

    def victim_outcomes(self, victims: Sequence[PodInfo], *, record: bool = True) -> Mapping[str, str | None]: ...

    def record_victims(self, victims: Sequence[PodInfo]) -> None: ...


class ReclaimApi(PodDeletion, JobEvents, Protocol):
    pass


@dataclass(frozen=True)
class Reclaim:
    """One opportunistic pod to delete for one waiting guaranteed pod."""

    waiting: PodInfo
    victim: PodInfo
    vc: str
    cell: str
    node: str | None


@dataclass(frozen=True)
class Waiting:
    """A waiting guaranteed pod as the engine and the watch show it, read under the engine lock."""

    guarantee: WaitingGuarantee
    pod: PodInfo | None
    victims: tuple[PodInfo | None, ...]
    record: str | None = None  # its booking as recorded on the pod (the engine's reclaim_record)


def reclaims_due(
    *, waiting: Sequence[Waiting], since: Mapping[str, float], now: float, after_seconds: float, scheduler_name: str
) -> list[Reclaim]:
    """The opportunistic pods to delete now: of each guaranteed pod of ``scheduler_name`` that has
    waited ``after_seconds`` since ``since[its UID]``, its victims that kube-scheduler will not
    preempt for it (priority not lower than its own) and that may be touched (:func:`reclaimable`).
    None for a pod one of whose victims nobody will remove (:func:`immovable`): the others'
    deletion would free its cells in part only."""
    due: list[Reclaim] = []
    for entry in waiting:
        pod, started = entry.pod, since.get(entry.guarantee.pod_uid)
        if pod is None or pod.terminating or pod.scheduler_name != scheduler_name or started is None or now - started < after_seconds:
            continue
        if not pod.may_preempt:  # preemptionPolicy: Never, as kube-scheduler honours it
            continue
        if any(immovable(victim, waiting=pod, scheduler_name=scheduler_name) for victim in entry.victims):
            continue
        for victim in entry.victims:
            if victim is not None and reclaimable(victim, scheduler_name=scheduler_name) and victim.priority >= pod.priority:
                due.append(Reclaim(waiting=pod, victim=victim, vc=entry.guarantee.vc, cell=entry.guarantee.cell, node=entry.guarantee.node))
    return due


def preempting(waiting: Sequence[Waiting]) -> list[tuple[str, PodInfo, str]]:
    """The waiting pods whose victims are leaving already, preempted (kube-scheduler's
    preemption, or cellfit's own, deleted them), with their bookings to record on them: the
    cells kept while they leave live in the engine's memory only, and kube-scheduler clears the
    pod's nomination when an attempt meets an extender that does not answer, so after a restart
    of cellfit nothing else would tie the pod to those cells, and the victim Job's next pod
    would take them (and be preempted again). Only when every victim of the booking the watch
    shows is leaving so (:func:`preempted`): victims leaving for another reason (their Job
    deleted), or only some of them (a preemption planned on other GPUs, by a replica whose
    engine chose them), are not what the booking waits for, and a record would pin the pod on
    every replica to cells nobody frees for it."""
    return [(entry.guarantee.pod_uid, entry.pod, entry.record) for entry in waiting
            if entry.pod is not None and entry.record is not None and not entry.pod.terminating and entry.pod.node_name is None
            and any(victim is not None for victim in entry.victims)
            and all(victim is None or preempted(victim) for victim in entry.victims)]


def preempted(victim: PodInfo) -> bool:
    """Whether the pod is leaving because a preemption deleted it: terminating, and marked
    DisruptionTarget with reason PreemptionByScheduler, as kube-scheduler's preemption marks
    each victim before deleting it (and cellfit's own, scheduler/cluster/disruption.py)."""
    return victim.terminating and victim.disruption is not None and victim.disruption.by_preemption


def victim_message(reclaim: Reclaim, *, job_outcome: str | None = None) -> str:
    """The victim's Event; ``job_outcome``: what its deletion does to its Job (None: not known,
    not said)."""
    message = (f"preempted for guaranteed pod {reclaim.waiting.key} of virtual cluster {reclaim.vc}, which waits for cell "
               f"{reclaim.cell} on node {reclaim.node}: {WHY}, and this pod's priority {reclaim.victim.priority} is not lower "
               f"than its {reclaim.waiting.priority}")
    return message if job_outcome is None else f"{message}; {job_outcome}"


def waiting_message(reclaim: Reclaim) -> str:
    return (f"opportunistic pod {reclaim.victim.key} (priority {reclaim.victim.priority}) deleted from cell {reclaim.cell} "
            f"of virtual cluster {reclaim.vc} on node {reclaim.node}: {WHY}, and its priority is not lower than this "
            f"pod's {reclaim.waiting.priority}")


class ReclaimController:
    """``clock``: wall-clock seconds (the waits, and the DisruptionTarget condition's time).
    ``on_reclaim``: told each deleted pod's VC (the metric). ``remember_victims``: told each
    deleted pod's UID (``ClusterCache.remember_victims``), so that kube-scheduler is made to retry
    its parked pods once the watch has shown the pod gone (scheduler/cluster/nudge.py,
    VictimRequeue): retried on the deletion alone, the waiting pod may reach cellfit's filter
    before the engine has seen the deletion, and be parked again until kube-scheduler's flush.
    ``jobs``: what each deletion does to the victim's Job, for its Event (None: not said)."""

    def __init__(
        self,
        *,
        api: ReclaimApi,
        engine: WaitingCells,
        pods: PodRecord,
        lock: threading.RLock,
        settings: ReclaimSettings,
        scheduler_name: str,
        clock: Callable[[], float] = time.time,
        on_reclaim: Callable[[str], None] | None = None,
        remember_victims: Callable[[Iterable[str]], None] | None = None,
        stranded: StrandedGuarantees | None = None,
        jobs: JobOutcomes | None = None,
    ) -> None:
        self._api = api
        self._jobs = jobs
        self._stranded = stranded
        self._engine = engine
        self._pods = pods
        self._lock = lock
        self._settings = settings
        self._scheduler_name = scheduler_name
        self._clock = clock
        self._on_reclaim = on_reclaim
        self._remember_victims = remember_victims
        self._since: dict[str, float] = {}  # waiting pod UID -> when this leader first saw it wait
        self._reclaimed: dict[str, float] = {}  # victim UID -> when it was deleted
        # Bound pod UID -> its clears refused in a row, and when it is tried again (_clear_bound).
        self._clear_refused: dict[str, tuple[int, float]] = {}
        self._records = stranded.records if stranded is not None else ReclaimRecords(api=api)
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._run, name="cell-reclaim", daemon=True)

    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._settings.period_seconds):
            try:
                self.reconcile()
            except Exception:  # a defect must not end the guarantee's keeping
                log.exception("cell reclaim round failed")

    def reconcile(self) -> list[Reclaim]:
        """One look: the opportunistic pods deleted."""
        now = self._clock()
        for uid in self._book_stranded(now=now):
            # It has waited its afterSeconds already, unschedulable: its victims are due now.
            self._since[uid] = now - self._settings.after_seconds
        with self._lock:
            waiting = [Waiting(guarantee=g, pod=self._pods.get(g.pod_uid), victims=tuple(self._pods.get(v) for v in g.victims),
                               record=self._engine.reclaim_record(g.pod_uid))
                       for g in self._engine.waiting_guarantees()]
            self._records.forget_shown(self._pods)
            # The pending pods that carry a record, with the engine's booking for them now.
            carried = [(pod, self._engine.reclaim_record(pod.uid)) for pod in self._records.carrying(self._pods)]
            every_pod = list(self._pods.pods())  # read for bound pods' records outside the lock
        self._since = {w.guarantee.pod_uid: self._since.get(w.guarantee.pod_uid, now) for w in waiting}
        self._reclaimed = {uid: at for uid, at in self._reclaimed.items() if now - at < _RECLAIMED_MEMORY_SECONDS}
        due = reclaims_due(waiting=waiting, since=self._since, now=now, after_seconds=self._settings.after_seconds,
                           scheduler_name=self._scheduler_name)
        records = {w.guarantee.pod_uid: w.record for w in waiting}
        recorded = self._keep_records_in_line(carried, preempting(waiting))
        done = []
        for reclaim in due:
            if reclaim.victim.uid in self._reclaimed:
                continue
            uid = reclaim.waiting.uid
            if uid not in recorded:
                record = records.get(uid)
                recorded[uid] = record is not None and self._records.write(reclaim.waiting, record)
            if recorded[uid] and self._reclaim(reclaim, now=now):
                done.append(reclaim)
        self._clear_bound(every_pod, now=now)  # after the deletions: nothing due waits for them
        return done

    def _keep_records_in_line(
        self, carried: Sequence[tuple[PodInfo, str | None]], leaving: Sequence[tuple[str, PodInfo, str]]
    ) -> dict[str, bool]:
        """Make each pending pod's record the engine's booking for it now: a pod that carries one
        gets the booking the engine holds for it now when that differs (moved: the filter placed
        it anew once its victims were kept past their wait), none when the engine holds none
        (placed elsewhere without preemption, or given back); a pod whose victims a preemption is
        deleting gets its booking recorded. A record left as it was would be applied by every
        engine that reads the pod afresh (a restart, a rolling update's new replica): the old
        cells booked for the pod again, and whoever took them since its victim. Nothing is
        written for a pod whose record is already the booking. Whether each pod with a booking
        carries it now (the reclaim deletes nothing for one that does not)."""
        recorded: dict[str, bool] = {}
        for pod, record in carried:
            written = self._records.write(pod, record)
            if record is not None:
                recorded[pod.uid] = written
        for uid, pod, record in leaving:
            if uid not in recorded:
                recorded[uid] = self._records.write(pod, record)
        return recorded

    def _clear_bound(self, pods: Iterable[PodInfo], *, now: float) -> None:
        """Clear the record from the pods bound since it was written, but those being deleted
        (gone soon, the record with them): once a pod is bound, every engine keeps its cells by
        its node and bind-info and none reads the record, which named in ``kubectl describe``
        the cells it waited for. After the round's deletions, :data:`CLEARS_PER_ROUND` at most
        (the rest the next rounds). A write that fails is tried again a later round, after the
        round's period doubled per refusal in a row (at most :data:`CLEAR_BACK_OFF_MAX_SECONDS`),
        warned of once per pod (then at DEBUG): a clear refused for ever (a third-party webhook)
        no longer warns every round."""
        refused, self._clear_refused = self._clear_refused, {}
        cleared = 0
        for pod in pods:
            if pod.node_name is None or pod.terminating or self._records.carried(pod) is None:
                continue
            times, again_at = refused.get(pod.uid, (0, now))
            if now < again_at or cleared >= CLEARS_PER_ROUND:
                if times:
                    self._clear_refused[pod.uid] = (times, again_at)
                continue
            cleared += 1
            if not self._records.write(pod, None, quiet=times > 0):
                pause = min(self._settings.period_seconds * 2.0 ** times, CLEAR_BACK_OFF_MAX_SECONDS)
                self._clear_refused[pod.uid] = (times + 1, now + pause)

    def _book_stranded(self, *, now: float) -> list[str]:
        """The UIDs of the stranded guaranteed pods whose cells were booked now."""
        if self._stranded is None:
            return []
        try:
            return [booked.pod.uid for booked in self._stranded.book(now=now)]
        except CellfitError as error:
            log.warning("the stranded guaranteed pods were not read", extra={"reason": str(error)})
            return []

    def _job_outcome(self, victim: PodInfo) -> str | None:
        """What deleting ``victim`` does to its Job, as the preempt verb's reclaim victims are told
        it; None without the Jobs. Records nothing: the victim is recorded once deleted."""
        if self._jobs is None:
            return None
        with self._lock:
            not_resumed = self._jobs.victim_outcomes([victim], record=False).get(victim.uid)
        return reclaimed_job_outcome(not_resumed)

    def _reclaim(self, reclaim: Reclaim, *, now: float) -> bool:
        victim = reclaim.victim
        message = victim_message(reclaim, job_outcome=self._job_outcome(victim))
        try:
            preempted = preempt_pod(self._api, namespace=victim.namespace, name=victim.name, uid=victim.uid, message=message, now=now)
        except CellfitError as error:
            log.warning("opportunistic pod not reclaimed", extra={"pod": victim.key, "reason": str(error)})
            return False
        if preempted is not Preempted.DELETED:  # it freed nothing now: not told preempted, not counted
            log.warning("opportunistic pod not reclaimed", extra={"pod": victim.key, "reason": preempted.value})
            return False
        if self._jobs is not None:
            with self._lock:
                self._jobs.record_victims([victim])
        self._reclaimed[victim.uid] = now
        if self._remember_victims is not None:
            self._remember_victims([victim.uid])
        if self._on_reclaim is not None:
            self._on_reclaim(reclaim.vc)
        log.info("opportunistic pod preempted for a guaranteed pod: " + WHY,
                 extra={"pod": victim.key, "priority": victim.priority, "waiting": reclaim.waiting.key,
                        "waitingPriority": reclaim.waiting.priority, "vc": reclaim.vc, "cell": reclaim.cell, "node": reclaim.node})
        self._event(victim, reason="Preempted", message=message, warning=True)
        try:  # its Job's too: the pod's Event leaves with the pod
            tell_job_of_preempted(self._api, namespace=victim.namespace, pod_name=victim.name, pod_uid=victim.uid, owner=victim.owner,
                                  message=message)
        except CellfitError as error:
            log.warning("reclaim event not written", extra={"pod": victim.key, "job": victim.owner.name if victim.owner else "",
                                                             "reason": str(error)})
        self._event(reclaim.waiting, reason="ReclaimingCells", message=waiting_message(reclaim), warning=False)
        return True

    def _event(self, pod: PodInfo, *, reason: str, message: str, warning: bool) -> None:
        try:
            self._api.create_event(namespace=pod.namespace, pod_name=pod.name, pod_uid=pod.uid, reason=reason, message=message, warning=warning)
        except CellfitError as error:
            log.warning("reclaim event not written", extra={"pod": pod.key, "reason": str(error)})

