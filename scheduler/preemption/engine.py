"""``FitGppEngine``: FitGpp preemption around any placement engine.

Placement (filter, prioritize, reserve) stays with the wrapped engine (resource-fit or HiveD);
this decorator mirrors the cluster into a :class:`PreemptionIndex` and answers
``select_victims`` with FitGpp's choice:

* a placement engine's own reclaim comes first: when HiveD says the pod's cells are held by
  opportunistic pods, those pods go, whatever the pod's class (HiveD's guarantee that a VC
  always gets its cells back);
* otherwise only a trial (TE) pod preempts, only best-effort (BE) pods are victims, and the
  victim is FitGpp's (eq. 4, or the paper's fallback), on one node, by UID;
* a best-effort pod never preempts anything.

A preempted Job's next pod then goes first among best-effort pods: the node its predecessor
left keeps room for it (:mod:`scheduler.preemption.holds`), and filter keeps the pods that would
take that room off that node.

:meth:`FitGppEngine.decide_preemption` returns the victims with their explanation (a
:class:`VictimChoice`), which the driver turns into events and the victims' Job counts; the
counts are also raised here at once, so that a second preemption cannot slip past P before the
watch brings the Job's new annotation back. Drivers reach this through the
:class:`ExplainedPreemption` capability the composition hands them (``scheduler/composition.py``).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Collection, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np
import numpy.typing as npt
from msgspec import structs

from scheduler.core.nodeindex import NodeIndex, Slots
from scheduler.core.resources import ZERO, Resources

from scheduler.core.engine import FilterDecision, Placement, SchedulingEngine, Scores, TracksJobs, Verdicts
from scheduler.core.model import TERMINAL_PHASES, JobInfo, NodeInfo, PodInfo
from scheduler.constants import (
    ANNOTATION_PREEMPTIONS,
    ANNOTATION_PREEMPTOR_HOLD,
    ANNOTATION_RESUME_HOLDS,
    CACHE_LAG_SECONDS,
    LABEL_JOB_CLASS,
)
from scheduler.core.pods import PodStore
from scheduler.errors import InvalidAnnotation
from scheduler.preemption import records, resume_records
from scheduler.preemption.bound_records import GangRecordsLeft, kept_at_binding, names_members, runs
from scheduler.preemption.fitgpp import Normalisers, NoVictims, PreemptionDecision, choose_victims
from scheduler.preemption.gang_victims import GangMember, GangVictim, gangs_as_rows, is_gang_pod
from scheduler.preemption.holds import BooksPreemptorCells, Clock, PreemptionEvidence, RoomHolds
from scheduler.preemption.model import (
    FitGppSettings,
    JobClass,
    job_class_of,
    job_class_or_best_effort,
    preemption_count_of,
    tenancy_of,
    vc_of,
)
from scheduler.preemption.reclaimed import ReclaimDecision
from scheduler.preemption.resume_records import JobRef
from scheduler.preemption.table import CandidateTable, PreemptionIndex
from scheduler.wording import (
    DELETED_JOB_OUTCOME,
    FAILS_AT_ONCE,
    NO_CONTROLLER_OUTCOME,
    UNKNOWN_JOB_OUTCOME,
    otherwise_if_exits,
    preemption_outcome,
    resumes_unless,
)

DEFAULT_SCHEDULER_NAME = "cellfit"  # the chart's kube-scheduler profile
# How long a preemptor whose victims have left gets no victim elsewhere, from the first time it
# is asked about after they left, while its node still has its room: kube-scheduler's cache's
# lag; past it kube-scheduler refuses the node for a reason FitGpp cannot see (a taint), and the
# pod is preempted for elsewhere.
ROOM_KEPT_SECONDS = CACHE_LAG_SECONDS
# Deleted Jobs' UIDs remembered (FitGppEngine._deleted_lately): ~100 bytes each.
DELETED_JOBS_REMEMBERED = 16_384


def _row_of(pod: PodInfo, preemptions: int | None) -> tuple[object, ...]:
    """Everything the victim table's row of a bound pod is made of (``PreemptionIndex.apply_pod``:
    its node, key, job class, requests, grace period, preemptions, whether terminating, priority,
    whether pinned): equal rows, the same table."""
    count = pod.annotations.get(ANNOTATION_PREEMPTIONS) if preemptions is None else preemptions
    return (pod.node_name, pod.namespace, pod.name, pod.labels.get(LABEL_JOB_CLASS), pod.requests,
            pod.grace_period_seconds, count, pod.terminating, pod.priority, pod.owner)


def _resumes_on_its_node(victim: PodInfo) -> bool:
    """Whether a victim's Job gets a resume hold on its node: a bound pod a batch/v1 Job owns (the
    Job controller makes its next pod; another group's kind "Job", Volcano's, is another
    controller, whose holds cellfit neither writes nor reads)."""
    return victim.owner is not None and victim.owner.is_batch_job and victim.node_name is not None


def _among(positions: npt.NDArray[np.int64], verdicts: Verdicts) -> Verdicts:
    """``verdicts`` by position among ``positions``, as verdicts by the positions they hold."""
    return {reason: positions[at] for reason, at in verdicts.items()}


def _merged(verdicts: Verdicts, more: dict[str, list[int]]) -> Verdicts:
    """``verdicts`` and ``more`` (of other positions) together."""
    merged = dict(verdicts)
    for reason, at in more.items():
        known = merged.get(reason)
        merged[reason] = np.array(at, dtype=np.int64) if known is None else np.concatenate([known, at])
    return merged


@dataclass(frozen=True, slots=True)
class Passed:
    """The best-effort pods on the offered nodes FitGpp passed over for a preemptor, by key:
    guaranteed pods of another VC (HiveD's guarantee), and pods whose room the placement engine
    would not give it (opportunistic pods on cells its VC can neither use nor bind; its VC's own
    pods on cells the VC is draining, whose leaving frees no cell it may bind)."""

    foreign: list[str]
    useless: list[str]
    draining: list[str]

    def __bool__(self) -> bool:
        return bool(self.foreign or self.useless or self.draining)

    def refusal(self, *, left: str | None) -> str:
        """Why FitGpp took no victim: every pod on the offered nodes was passed over (``left``
        None), or FitGpp's reason ``left`` among the others."""
        kinds = [(keys, one, many) for keys, one, many in (
            (self.foreign, "a guaranteed pod of another virtual cluster, whose cells it never loses",
             "guaranteed pods of another virtual cluster, whose cells they never lose"),
            (self.useless, "an opportunistic pod on cells this pod's virtual cluster can neither use nor bind",
             "opportunistic pods on cells this pod's virtual cluster can neither use nor bind"),
            (self.draining, "a pod of this pod's virtual cluster on a cell it is draining (over its quota), "
             "whose leaving frees no cell it may bind",
             "pods of this pod's virtual cluster on cells it is draining (over its quota), whose leaving frees no cell it may bind"),
        ) if keys]
        if left is None and len(kinds) == 1:
            ((keys, one, _),) = kinds
            named = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
            return f"every best-effort pod on the offered nodes ({named}) is {one}"
        said = "; ".join(f"{keys[0]}{f' and {len(keys) - 1} more' if len(keys) > 1 else ''}: {many}" for keys, _, many in kinds)
        return f"no best-effort pod on the offered nodes may be taken for this pod: {said}" if left is None else f"{left}, leaving out {said}"


@runtime_checkable
class ReclaimsCells(Protocol):
    """A placement engine whose victims are a reclaim it must have (HiveD: opportunistic pods
    on the cells a VC's guaranteed pod is owed)."""

    def reclaim_victims(
        self, pod: PodInfo, candidates: Mapping[str, Sequence[str]], victim_pods: Mapping[str, PodInfo]
    ) -> dict[str, list[str]]: ...


@runtime_checkable
class JudgesVictims(Protocol):
    """A placement engine that knows which victims can free room it would give a preemptor
    (HiveD: a guaranteed pod gets GPUs only in its VC's cells, so an opportunistic pod on
    another VC's cells, or on free cells its VC may no longer bind, frees nothing for it)."""

    def preemption_helps(self, preemptor: PodInfo) -> Callable[[PodInfo], bool] | None: ...


@runtime_checkable
class WaitsForFreedCells(Protocol):
    """A placement engine that holds a pod's preemption back while cells it is owed are being
    freed already (HiveD: its VC's own cells, by pods leaving them; scheduler/cells/freeing.py).
    Its sentence is the preempt verb's refusal: where kube-scheduler's own filters turned every
    node away, the placement engine's filter never said it."""

    def freeing_wait(self, pod: PodInfo) -> str | None: ...


@runtime_checkable
class ExplainsRefusals(Protocol):
    """A placement engine that says why a pod's request does not resolve (HiveD: its virtual
    cluster unknown, a bad annotation, no cell for its GPUs), so that the preempt verb's refusal
    of a pod it reclaimed nothing for names that, not a search it never made."""

    def request_refusal(self, pod: PodInfo) -> str | None: ...


@runtime_checkable
class BooksAhead(Protocol):
    """A placement engine that sets resources aside for a pod before it is bound (HiveD: cells
    booked while victims terminate, a gang's planned slots). Resume holds leave such a pod
    alone: keeping it off its booked node would leave the booking out of everyone's reach."""

    def has_booking(self, pod: PodInfo) -> bool: ...


@runtime_checkable
class KeepsPreemptorCells(Protocol):
    """A placement engine that books a FitGpp preemptor's cells once its victims have left
    (HiveD: scheduler/cells/preemptor_claims.py): whether it books them for ``pod`` (HiveD: a
    guaranteed pod of no gang), and the node they are booked on for the pod, or None, so that
    the preempt verb takes no second victim for a pod whose room is kept."""

    def books_cells_for(self, pod: PodInfo) -> bool: ...

    def cells_booked_for(self, pod_uid: str) -> str | None: ...


@runtime_checkable
class GivesBackGangs(Protocol):
    """A placement engine that keeps a gang's slots for its pods (HiveD, all or nothing): told when
    FitGpp preempted the gang whole, so that none of its bookings outlives its pods and the
    preemptor gets the cells (scheduler/cells/gangs.py ``give_back_gang``)."""

    def give_back_gang(self, job_uid: str) -> None: ...


@dataclass(frozen=True, slots=True)
class VictimChoice:
    """The victims chosen for one pod (node -> pod UIDs; empty: none) and why, which it tells
    itself: FitGpp's decision (its rule, scores and the sentences events carry), its reason for
    taking none, HiveD's reclaim of opportunistic pods inside FitGpp (a :class:`ReclaimDecision`,
    rule ``reclaim``, with the sentences its events carry), or ``None`` when the placement engine
    chose them without a word (``chosen_by``: ``reclaim`` where HiveD's reclaim was not told, the
    placement engine alone, ``placement``)."""

    victims: dict[str, list[str]]
    decision: PreemptionDecision | ReclaimDecision | NoVictims | None
    chosen_by: str = "reclaim"
    # Where a victim's Job does not resume its preempted pod (its podFailurePolicy does not
    # ignore DisruptionTarget), what the preemption does to it instead (scheduler/wording.py
    # preemption_outcome: counted against its backoffLimit, or its Job or index failed at once);
    # None where it resumes: what the victim's Event says of its resuming.
    victim_job_outcome: str | None = None
    # FitGpp's decision as the preemptor's annotation cellfit.io/preemptor-hold records it
    # (records.py), for the driver to write on the pod; None when FitGpp took no victim.
    preemptor_record: str | None = None
    # Each victim's own outcome, by UID (victim_job_outcome is the first victim's that has one):
    # the fallback's victims may be of several Jobs, and the pods of one Job are counted one
    # after the other (the second a failed pod more than the first).
    victim_outcomes: Mapping[str, str | None] = field(default_factory=dict)
    # Victims on other nodes than the one answered, by node: the other members of a gang FitGpp
    # took whole (gang_victims.py). kube-scheduler deletes the victims of the one node it picks,
    # so the driver preempts these itself (marked DisruptionTarget, deleted with their grace period).
    elsewhere: Mapping[str, list[str]] = field(default_factory=dict)
    # The resume holds the decision gave the victims' Jobs (victim UID -> node, each Job's), for
    # the driver to record on the Jobs (resume_records.py): a restart after the victims and the
    # preemptor's record are gone keeps that room from them.
    resume_holds: tuple[tuple[JobRef, Mapping[str, str]], ...] = ()

    @property
    def rule(self) -> str:
        """How the victims were chosen: ``fitgpp``, ``fallback``, ``reclaim`` or ``placement``."""
        return self.decision.rule if isinstance(self.decision, PreemptionDecision) else self.chosen_by

    @property
    def refusal(self) -> str | None:
        """Why no victim was taken, in one sentence for an event; None when that was not a choice."""
        return self.decision.reason if isinstance(self.decision, NoVictims) else None

    @property
    def explained(self) -> bool:
        """Whether the choice has sentences for events (:meth:`preemptor_messages`)."""
        return isinstance(self.decision, (PreemptionDecision, ReclaimDecision))

    @property
    def counts_jobs(self) -> bool:
        """Whether the victims' Jobs count the choice (``cellfit.io/preemptions``, which
        preemption.maxPreemptions limits): FitGpp's decisions only, not HiveD's reclaim."""
        return isinstance(self.decision, PreemptionDecision)

    @property
    def victim_uids(self) -> tuple[str, ...]:
        """Every victim: those answered, then those on other nodes (:attr:`elsewhere`)."""
        return tuple(uid for victims in (self.victims, self.elsewhere) for uids in victims.values() for uid in uids)

    def preemptor_messages(self) -> tuple[str, ...]:
        """One event message per victim for the preemptor (none unless :attr:`explained`)."""
        decision = self.decision
        return decision.preemptor_messages() if isinstance(decision, (PreemptionDecision, ReclaimDecision)) else ()

    def victim_message(self) -> str | None:
        """The event message for the first victim whose Job does not resume it, or for every
        victim where each resumes (None unless :attr:`explained`); :meth:`victim_messages` has
        each victim's own."""
        decision = self.decision
        if isinstance(decision, ReclaimDecision):
            first = next((uid for uid in decision.victim_uids if self.victim_outcomes.get(uid) is not None), decision.victim_uids[0])
            return decision.victim_message(first, not_resumed=self.victim_outcomes.get(first))
        if not isinstance(decision, PreemptionDecision):
            return None
        return decision.victim_message(not_resumed=self.victim_job_outcome)

    def victim_messages(self) -> dict[str, str]:
        """Each victim's event message, by UID, with what the preemption does to its own Job
        (none unless :attr:`explained`)."""
        decision = self.decision
        if isinstance(decision, ReclaimDecision):
            return {uid: decision.victim_message(uid, not_resumed=self.victim_outcomes.get(uid)) for uid in decision.victim_uids}
        if not isinstance(decision, PreemptionDecision):
            return {}
        return {uid: decision.victim_message(not_resumed=self.victim_outcomes.get(uid, self.victim_job_outcome), uid=uid)
                for uid in self.victim_uids}


class ExplainedPreemption(Protocol):
    """The preemption capability drivers use (FitGpp's): victims with their explanation, and
    the per-Job state the events and the admission webhook need."""

    def decide_preemption(
        self, pod: PodInfo, candidates: Mapping[str, Sequence[str]], victim_pods: Mapping[str, PodInfo]
    ) -> VictimChoice: ...

    def victim_jobs(self, victim_uids: Sequence[str]) -> list[tuple[JobInfo, int]]: ...

    def victim_outcomes(self, victims: Sequence[PodInfo], *, record: bool = True) -> dict[str, str | None]: ...

    def record_victims(self, victims: Sequence[PodInfo]) -> None: ...

    def victim(self, pod_uid: str) -> PodInfo | None: ...

    def preemptions_of_job(self, job_uid: str) -> int: ...


class FitGppEngine:
    """``resume_hold_seconds`` and ``clock`` bound how long a hold (resume or preemptor) may turn pods away
    (see :class:`RoomHolds`); without them a hold lasts until the pod it keeps room for is bound.

    ``pods``: the composition's one record of the pods, which its driver keeps (``core/pods.py``);
    without one the engine keeps its own from the events it is given. The engine keeps only
    indexes: the victim table, the pods it tracks by Job and by node leaving; a pod it reserved
    that the watch has not shown bound yet is assumed in the store (kube-scheduler's assumed
    pods).

    ``scheduler_name``: the kube-scheduler profile cellfit serves; the holds a restart forgot are
    rebuilt from the evidence of its preemptions only (``holds.py``, "After a restart").

    ``wall_clock``: seconds since the epoch, for the time a preemptor's record carries (read by
    other replicas, whose monotonic clocks are not this one's)."""

    def __init__(
        self,
        inner: SchedulingEngine,
        *,
        settings: FitGppSettings,
        seed: int = 0,
        resume_hold_seconds: float | None = None,
        clock: Clock | None = None,
        pods: PodStore | None = None,
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        wall_clock: Clock = time.time,
    ) -> None:
        self.inner = inner
        self._wall_clock = wall_clock
        self.pods: PodStore = pods if pods is not None else PodStore()
        self._records_pods = pods is None  # its own store: the events it is given are the record
        self.settings = settings
        self._seed = seed
        cells = inner if isinstance(inner, BooksPreemptorCells) else None  # HiveD: the preemptor's VC quota too
        self.holds = RoomHolds(hold_seconds=resume_hold_seconds, clock=clock, pods=self.pods, cells=cells)
        self._scheduler_name = scheduler_name
        self._evidence = PreemptionEvidence(scheduler_name=scheduler_name, present=lambda uid: self.pods.get(uid) is not None)
        self._index = PreemptionIndex(node_index=inner.node_index)  # one node name -> slot map
        self._tracked: dict[str, str | None] = {}  # pods the index holds -> their Job UID
        # Pods bound in the index -> what their row there was made from (_row_of): the watch's
        # bound and Running events of a pod reserved here rewrite nothing that is unchanged.
        self._rows: dict[str, tuple[object, ...]] = {}
        # Pods the index holds -> the VC whose cells they hold as their own (None: opportunistic),
        # and how many hold each VC's: FitGpp's candidates leave out another VC's (_claimable).
        self._tenancy: dict[str, str | None] = {}
        self._holding_vcs: Counter[str] = Counter()
        # Bound gang pods (gang_victims.is_gang_pod) the index holds, by Job: FitGpp takes a gang whole.
        self._gangs: dict[str, set[str]] = {}
        self._chosen: set[str] = set()  # victims chosen and not gone yet (their deletion may lag)
        # Pods on their way out (terminating, or chosen as victims), kept per node as they
        # change: the preempt verb asks about a hundred candidate nodes, not every pod.
        self._leaving: dict[str, Resources] = {}  # node -> their requests, summed
        self._leaving_pods: dict[str, tuple[str, Resources, int]] = {}  # pod UID -> (node, requests, grace period)
        self._job_counts: dict[str, int] = {}  # Job UID -> preemptions
        # The Jobs as the watch last showed them: whether a preempted pod of theirs is a pause or
        # a failure (JobInfo.disruption_action, backoff_limit, failed), as their victims' Events
        # say it (wording.preemption_outcome).
        self._jobs: dict[str, JobInfo] = {}
        self._pods_by_job: dict[str, set[str]] = {}
        # Jobs deleted while pods of theirs still run (the garbage collector deletes the pods
        # after the Job): preempting such a pod counts against no Job and keeps no room for it.
        self._deleted_jobs: set[str] = set()
        # Every Job deleted lately, whether or not pods of it remain (a UID is never reused, so
        # remembering one is never wrong; bounded, oldest forgotten first): a record that still
        # names it (a pending preemptor's ``resumes``, its ``owed``) gives it no hold or count
        # back once its last pod has gone (review27 R3: a deleted Job's hold came back so).
        self._deleted_lately: dict[str, None] = {}
        # Victims chosen here whose failure their Job's status.failed does not count yet (a
        # preempted pod is counted once it has terminated, its grace period later): Job UID ->
        # victim UID -> [the status.failed that counts it, whether the pod is gone]. A victim
        # counts on top of status.failed in the next decision against its Job until
        # status.failed reaches that value, or a Job update comes after the pod is gone (the Job
        # controller counts a pod before letting it go), or the Job is deleted. After a restart
        # none is known: status.failed alone, as before.
        self._uncounted: dict[str, dict[str, list[int | bool]]] = {}
        # Told the victims of a preemptor hold rebuilt from the pods (follow_preemptor_records).
        self._watch_victims: Callable[[Sequence[str]], None] | None = None
        # Bound preemptors whose binding left their record on them, a gang member it names still
        # running (bound_records.py), and told each record to take off once none of them runs.
        self._records_left = GangRecordsLeft()
        self._clear_record: Callable[[PodInfo, str], None] | None = None
        self._finish_owed: Callable[[PodInfo, str], None] | None = None
        # Victims whose Job this process gave a resume hold (decided here, or rebuilt from any
        # evidence), by Job UID -> victim UID -> node: no evidence seen again gives a second one.
        self._given: dict[str, dict[str, str]] = {}
        self._job_refs: dict[str, JobRef] = {}  # Job UID -> its name, for its record's writes
        # Victims the Job's record gave a hold as gone, the watch not showing them (yet): a pods
        # list read after the Jobs' may show them leaving still (victim UID -> Job UID, node).
        self._rebuilt_gone: dict[str, tuple[str, str]] = {}
        # Victims each Job's record has named as the watch showed it: one it names no more had its
        # hold end on another replica (RoomHolds.resume_ended_elsewhere).
        self._recorded: dict[str, set[str]] = {}
        # Told the resume holds given and ended here, for the Jobs' records (follow_resume_holds).
        self._write_resume_holds: Callable[[JobRef, Mapping[str, str], tuple[str, ...]], None] | None = None
        self.holds.on_resume_ended = self._resume_holds_ended

    def follow_preemptor_records(
        self, *, watch_victims: Callable[[Sequence[str]], None], clear_record: Callable[[PodInfo, str], None],
        finish_owed: Callable[[PodInfo, str], None] | None = None,
    ) -> None:
        """Wire the driver's two duties toward the preemptors' records (``records.py``; the watch
        cache, scheduler/cluster/preemptor_records.py): ``watch_victims`` is told the victims
        still present of each preemptor hold rebuilt from the pods (after a restart, this process
        chose none of them, and kube-scheduler may park the preemptor until it is told they went);
        ``clear_record`` is told the preemptor and its record when a hold standing for one ends
        without a binding (:attr:`RoomHolds.on_record_ended`), or once a bound preemptor's record
        names no gang member that runs any more (``bound_records.py``); ``finish_owed`` is told the
        preemptor and its record as the pod is reserved for its binding, which empties the record:
        what the record owes (records.py ``owed``: the Jobs' counts and resume holds, the victims'
        Events) is finished from it, should the replica that decided have been killed before
        (user26). All are called under the engine lock, in the watch's or a verb's thread: they
        must not wait."""
        self._watch_victims = watch_victims
        self._clear_record = clear_record
        self._finish_owed = finish_owed
        self.holds.on_record_ended = clear_record

    def follow_resume_holds(self, *, write: Callable[[JobRef, Mapping[str, str], tuple[str, ...]], None]) -> None:
        """Wire the driver's duty toward the Jobs' records of their resume holds
        (``resume_records.py``; scheduler/cluster/preemptor_records.py; the holds a decision
        gives are in its :attr:`VictimChoice.resume_holds`): ``write`` is told a Job, no holds
        added, and the victims whose holds ended here (a pod of the Job this process bound, or
        the hold gave up). Called under the engine lock: it must not wait."""
        self._write_resume_holds = write

    def follow_hold_ends(self, *, ended: Callable[[str, str, str], None]) -> None:
        """Wire the driver's duty toward the pods a hold kept off: ``ended`` is told what the hold
        kept room for (``job ns/name`` or ``pod ns/name``), its node and why it ended (``lapsed``,
        ``ended elsewhere``, ``deleted``) when a hold that kept a pod off ends without that pod's
        binding (RoomHolds.on_kept_off_ended), for the requeue signal. Called under the engine
        lock: it must not wait."""
        def told(kind: str, holder: str, node: str, why: str) -> None:
            if kind == "resume":
                ref = self._job_ref(holder)
                what = f"job {ref.key if ref is not None else holder}"
            else:
                pod = self.pods.get(holder)
                what = f"pod {pod.key if pod is not None else holder}"
            ended(what, node, why)

        self.holds.on_kept_off_ended = told

    def expire_holds(self, *, nodes_listed: bool = False) -> None:
        """The holds past their time given up now (RoomHolds.expire): the driver calls it now
        and then, as a hold is otherwise looked at only when a filter asks. ``nodes_listed``:
        the watch has listed the nodes, so a hold on a node it never showed ends
        (RoomHolds.node_gone): one a Job's record, or a victim still shown, rebuilt on a node
        deleted while no cellfit watched."""
        self.holds.expire()
        if nodes_listed:
            for node in self.holds.held_nodes():
                if not self._index.has_node(node):
                    self.holds.node_gone(node)

    # ------------------------------------------------------------------ placement: delegated

    @property
    def node_index(self) -> NodeIndex:
        return self.inner.node_index

    def filter(self, pod: PodInfo, offered: Slots) -> FilterDecision:
        if not self.holds.active or (isinstance(self.inner, BooksAhead) and self.inner.has_booking(pod)):
            return self.inner.filter(pod, offered)
        keeps = self.holds.kept_from(pod, free_on=self._free_on)
        if not keeps:
            return self.inner.filter(pod, offered)
        # The kept nodes among the offered ones, found in bulk (a handful of nodes against
        # thousands offered); the placement engine decides over the others, never seeing them.
        index = self.inner.node_index
        kept_slots = {slot: name for slot, name in ((index.get(name), name) for name in keeps) if slot is not None}
        is_kept = np.isin(offered, np.fromiter(kept_slots, dtype=np.int64, count=len(kept_slots)))
        if not is_kept.any():
            return self.inner.filter(pod, offered)
        kept_at, rest_at = np.flatnonzero(is_kept), np.flatnonzero(~is_kept)
        decision = self.inner.filter(pod, offered[rest_at]) if len(rest_at) else FilterDecision()
        kept_names = [kept_slots[slot] for slot in offered[kept_at].tolist()]
        self.holds.kept_off_nodes({name: keeps[name] for name in kept_names})
        kept: dict[str, list[int]] = {}
        for at, name in zip(kept_at.tolist(), kept_names):
            kept.setdefault(keeps[name].reason, []).append(at)
        # Unresolvable: preempting pods there would not help this pod, the hold would still
        # keep it off (and HiveD would book the freed cells for it, out of the held pod's reach).
        # The placement engine answered by position among the rest: put back among all offered.
        return FilterDecision(
            feasible=rest_at[decision.feasible],
            explain=lambda: (_among(rest_at, decision.failed), _merged(_among(rest_at, decision.unresolvable), kept)),
            failed_count=decision.failed_count,
            unresolvable_count=decision.unresolvable_count + len(kept_at),
            named_at=rest_at[decision.named_at],
            by_name=decision.by_name,
            named_after=decision.named_after,  # the kept nodes' reasons come after the placement engine's
        )

    def prioritize(self, pod: PodInfo, offered: Slots) -> Scores:
        return self.inner.prioritize(pod, offered)

    def reserve(self, pod: PodInfo, node_name: str) -> Placement:
        placement = self.inner.reserve(pod, node_name)
        carried = pod.annotations.get(ANNOTATION_PREEMPTOR_HOLD)
        left: str = ""
        running: tuple[str, ...] = ()
        if carried or self.holds.nominated_node(pod.uid) is not None:
            # The binding empties the pod's record of its preemption (records.py; a binding's
            # annotations set keys and never remove one): bound, the pod waits for no room. Not
            # while a gang member it names elsewhere runs: the record is what a replica finishes
            # that gang's preemption from, should the one that decided have died (bound_records.py).
            left, running = kept_at_binding(carried, current=self.pods.get)
            placement = replace(placement, annotations={**placement.annotations, ANNOTATION_PREEMPTOR_HOLD: left})
            if carried and self._finish_owed is not None:
                self._finish_owed(pod, carried)  # the binding empties what the record owes the Jobs and victims
        # As reserved: the bind verb may have read the pod from the API before the watch showed it.
        assumed = structs.replace(pod, node_name=node_name, phase="Running")
        if left:
            self._records_left.bound(assumed, text=left, running=running)
        self.pods.assume(assumed)
        self._track(assumed)
        self.holds.bound(pod, node_name)
        return placement

    def unreserve(self, pod_uid: str) -> None:
        pod = self._tracked_pod(pod_uid)
        self.inner.unreserve(pod_uid)
        self._untrack(pod_uid)
        self._records_left.forget(pod_uid)  # not bound: it carries its record as before
        if pod is not None:
            self.holds.unbound(pod)

    def knows_node(self, node_name: str) -> bool:
        return self.inner.knows_node(node_name)

    def stats(self) -> Mapping[str, int]:
        return {
            **self.inner.stats(),
            "preemptionCandidates": len(self._tracked),
            "jobs": len(self._job_counts),
            **self.holds.stats(),
        }

    # ------------------------------------------------------------------ cluster state: both

    def apply_node(self, node: NodeInfo) -> None:
        self.inner.apply_node(node)
        self._index.apply_node(node)

    def delete_node(self, node_name: str) -> None:
        self._index.delete_node(node_name)  # first: it finds the node's slot in the inner engine's index
        self.inner.delete_node(node_name)
        self.holds.node_gone(node_name)

    def apply_pod(self, pod: PodInfo) -> None:
        if self._records_pods:
            self.pods.record(pod)
        self.inner.apply_pod(pod)
        self.holds.apply_pod(pod)
        # Pending: holds nothing; a bind-time reservation stays, as in the engines.
        if pod.node_name is not None or pod.phase in TERMINAL_PHASES:
            if pod.holds_resources:
                self._track(pod)
            else:
                self._untrack(pod.uid)
        if pod.uid in self._rebuilt_gone and pod.uid in self._tracked:
            self._still_leaving(pod.uid)
        self._count_recorded(pod)
        self._rebuild_holds(pod)
        self._follow_records_left(pod)

    def delete_pod(self, pod_uid: str) -> None:
        for uncounted in self._uncounted.values():  # few: Jobs with victims not counted yet
            if pod_uid in uncounted:
                uncounted[pod_uid][1] = True  # gone: the Job's next update counts it
        self.inner.delete_pod(pod_uid)
        self.holds.delete_pod(pod_uid)
        self._evidence.delete_pod(pod_uid)
        if self._records_left:
            self._records_left.forget(pod_uid)
            self._take_off(self._records_left.member_gone(pod_uid))
        self._untrack(pod_uid)
        if self._records_pods:
            self.pods.forget(pod_uid)

    def apply_job(self, job: JobInfo) -> None:
        if isinstance(self.inner, TracksJobs):
            self.inner.apply_job(job)  # HiveD: a gang's Job width, a deleted Job's slots
        self._jobs[job.uid] = job
        self._forget_uncounted(job)
        try:
            count = preemption_count_of(job.annotations)
        except InvalidAnnotation:
            count = 0
        # Never lower a count raised by a decision the watch has not echoed yet.
        if count > self._job_counts.get(job.uid, -1):
            self._raise_count(job.uid, count)
        self._rebuild_recorded_holds(job)

    def _raise_count(self, job_uid: str, count: int) -> None:
        """The Job's preemption count is ``count`` from now on: its pods' rows, and the holds its
        victims still leaving are owed (a count above zero shows the preemption was FitGpp's)."""
        self._job_counts[job_uid] = count
        for uid in list(self._pods_by_job.get(job_uid, ())):
            self._reindex(uid, preemptions=count)
            self._rebuild_resume_hold(uid)

    def _count_recorded(self, pod: PodInfo) -> None:
        """The counts a pending preemptor's record owes its victims' Jobs (records.py ``owed``),
        counted here at once: the replica that decided may have been killed before writing them
        (user26), and until a replica finishes the record (scheduler/cluster/preemptor_records.py)
        the Job's own count is short; preemption.maxPreemptions, the resumed PriorityClass and the
        resume holds of its victims still leaving read this count. Only a record on a pod of
        cellfit's profile; a count is raised, never lowered."""
        text = pod.annotations.get(ANNOTATION_PREEMPTOR_HOLD)
        if not text or pod.scheduler_name != self._scheduler_name or pod.node_name is not None:
            return
        try:
            record = records.decode(text)
        except InvalidAnnotation:
            return
        if record is None or record.owed is None:
            return
        for job_uid, job in record.owed.jobs.items():
            if not self._job_deleted(job_uid) and job.count > self._job_counts.get(job_uid, 0):
                self._raise_count(job_uid, job.count)

    def delete_job(self, job_uid: str) -> None:
        if isinstance(self.inner, TracksJobs):
            self.inner.delete_job(job_uid)
        self._job_counts.pop(job_uid, None)
        self._jobs.pop(job_uid, None)
        self._uncounted.pop(job_uid, None)
        self.holds.delete_job(job_uid)
        self._job_refs.pop(job_uid, None)
        self._recorded.pop(job_uid, None)
        for victim in self._given.pop(job_uid, {}):
            self._rebuilt_gone.pop(victim, None)
        if job_uid in self._pods_by_job:
            self._deleted_jobs.add(job_uid)
        self._deleted_lately[job_uid] = None
        if len(self._deleted_lately) > DELETED_JOBS_REMEMBERED:
            del self._deleted_lately[next(iter(self._deleted_lately))]

    def _job_deleted(self, job_uid: str) -> bool:
        return job_uid in self._deleted_jobs or job_uid in self._deleted_lately

    # ------------------------------------------------------------------ preemption

    def select_victims(
        self,
        pod: PodInfo,
        candidates: Mapping[str, Sequence[str]],
        victim_pods: Mapping[str, PodInfo],
    ) -> dict[str, list[str]]:
        return self.decide_preemption(pod, candidates, victim_pods).victims

    def decide_preemption(
        self,
        pod: PodInfo,
        candidates: Mapping[str, Sequence[str]],
        victim_pods: Mapping[str, PodInfo],
    ) -> VictimChoice:
        """:meth:`select_victims` with the explanation of the choice."""
        kept = self._room_kept(pod)
        if kept is not None:
            # Its victims have left and their room is kept for it (its preemptor hold, and under
            # HiveD the cells booked for it the moment the last one left): kube-scheduler, whose
            # cache still counts a victim there a moment after cellfit's watch dropped it, asks
            # about other nodes; a victim there (FitGpp's or HiveD's reclaim) is taken for
            # nothing, as the pod binds on its node once the cache shows the victims gone.
            return VictimChoice(
                victims={},
                decision=NoVictims(
                    reason=f"its room on node {kept} is kept for it since its victims left; "
                    "kube-scheduler places it there once its cache shows them gone"
                ),
            )
        if isinstance(self.inner, ReclaimsCells):
            held = self.inner.reclaim_victims(pod, candidates, victim_pods)
            if held:
                self.holds.placed_elsewhere(pod.uid)  # its cells are booked: a FitGpp hold elsewhere ends
                if len(held) != 1:
                    return VictimChoice(victims=held, decision=None)
                return self._reclaim(pod, held)
        try:
            preemptor_class = job_class_of(pod.labels)
        except InvalidAnnotation as error:
            return VictimChoice(victims={}, decision=NoVictims(reason=str(error)))
        if preemptor_class is not JobClass.TRIAL:
            reason = self._freeing_wait(pod) or self._nothing_reclaimed(pod, candidates) or "a best-effort pod never preempts others (FitGpp)"
            return VictimChoice(victims={}, decision=NoVictims(reason=reason))
        waiting = self._freed_by_terminating(pod)
        if waiting is not None:
            # kube-scheduler's own rule (a pod whose nominated node has terminating victims does
            # not preempt again), kept against cellfit's view: kube-scheduler's cache may drop an
            # exited victim a moment before cellfit's watch does, and would then take a second
            # victim for the same pod while the first one's GPUs are about to be free. Whatever
            # the candidates: that node is missing from them when kube-scheduler's dry run found
            # no victim needed there, or sampled other nodes, and a second victim elsewhere would
            # move the pod's hold there and leave the room its first victims free to anybody.
            return VictimChoice(
                victims={},
                decision=NoVictims(
                    reason=f"pods already terminating on node {waiting} free enough for this pod; waiting for them to exit"
                ),
            )
        waits = self._freeing_wait(pod)
        if waits is not None:
            # The placement engine waits for cells of the pod's VC being freed by pods leaving:
            # any victim now, its VC's own best-effort pods included, is preempted for nothing.
            return VictimChoice(victims={}, decision=NoVictims(reason=waits))
        table = self._table_for(pod)
        scale = Normalisers.of(table)  # eq. 3's J: every running best-effort pod, whoever may take it
        table, passed, claimable = self._claimable(pod, table, candidates.keys())
        table, folded = gangs_as_rows(table, self._running_gangs(candidates.keys()), row_of=self._index.row_of)
        decision = choose_victims(
            preemptor=pod, table=table, settings=self.settings, nodes=candidates.keys(), normalisers=scale, seed=self._seed
        )
        if folded and isinstance(decision, PreemptionDecision):
            gang_of = {str(table.uids[row]): gang for row, gang in folded.items()}
            decision = replace(decision, victims=tuple(replace(v, gang=gang_of.get(v.uid)) for v in decision.victims))
        if isinstance(decision, NoVictims) and passed:
            decision = NoVictims(reason=passed.refusal(left=decision.reason if claimable else None))
        if not isinstance(decision, PreemptionDecision):
            return VictimChoice(victims={}, decision=decision)
        elsewhere = decision.elsewhere
        taken = [*decision.victim_uids, *(uid for uids in elsewhere.values() for uid in uids)]
        outcomes = self.victim_outcomes([p for p in (self._tracked_pod(uid) for uid in taken) if p is not None])
        outcome = next((said for said in outcomes.values() if said is not None), None)
        owners = [self._take_victim(uid) for uid in taken]
        if isinstance(self.inner, GivesBackGangs):
            for victim in decision.victims:
                if victim.gang is not None:
                    self.inner.give_back_gang(victim.gang.job)
        for job in dict.fromkeys(owner for owner in owners if owner is not None):
            self._count_preemption(job)
        # The gangs whose members elsewhere the record names, by Job UID: a restarted replica
        # deletes only their members (scheduler/cluster/gang_recovery.py), and only once the
        # decision (wall-clock seconds) is older than this replica's own tries of them.
        gangs = tuple(dict.fromkeys(v.gang.job for v in decision.victims if v.gang is not None and v.gang.other_nodes(decision.node)))
        # The Jobs given a resume hold on the node: a restart after their pods have exited finds
        # nothing else of them.
        resumes = {uid: job for uid, job in zip(decision.victim_uids, owners)
                   if job is not None and (taken_pod := self._tracked_pod(uid)) is not None and _resumes_on_its_node(taken_pod)}
        given = self._resume_holds_given(taken, owners)
        record = records.encode(node=decision.node, victims=tuple(decision.victim_uids), elsewhere=tuple(uid for uids in elsewhere.values() for uid in uids),
                                gangs=gangs, decided_at=self._wall_clock(), resumes=resumes,
                                owed=self._owed(taken, victims_here=decision.victim_uids, given=given))
        self.holds.preempting(pod, node_name=decision.node, record=record)
        return VictimChoice(victims={decision.node: list(decision.victim_uids)}, decision=decision, victim_job_outcome=outcome,
                            preemptor_record=record, victim_outcomes=outcomes, elsewhere=elsewhere, resume_holds=given)

    def _owed(
        self, taken: Sequence[str], *, victims_here: Sequence[str], given: Sequence[tuple[JobRef, Mapping[str, str]]]
    ) -> records.Owed:
        """What the decision's driver writes after its record (records.py ``owed``): each victim's
        Job with the count it is raised to (:meth:`victim_jobs`) and the resume holds it was
        given, and the victims on the node, owed their Preempted Event; a replica that reads the
        record finishes what a killed driver left undone."""
        holds = {ref.uid: holds for ref, holds in given}
        jobs = {job.uid: records.OwedJob(namespace=job.namespace, name=job.name, count=count, holds=dict(holds.get(job.uid, {})))
                for job, count in self.victim_jobs(taken)}
        pods = {uid: f"{pod.namespace}/{pod.name}" for uid in victims_here if (pod := self._tracked_pod(uid)) is not None}
        return records.Owed(jobs=jobs, pods=pods)

    def _running_gangs(self, offered: Collection[str]) -> list[GangVictim]:
        """The gangs with a bound pod the index holds on an ``offered`` node (no other can be
        chosen), with all their running members (each gang's pods a Job owns: cellfit.io/gang's
        key is the Job's UID)."""
        gangs = []
        for job, uids in self._gangs.items():
            if not any((pod := self._tracked_pod(uid)) is not None and pod.node_name in offered for uid in uids):
                continue
            members = []
            name = ""
            for uid in sorted(uids):
                member = self._tracked_pod(uid)
                if member is None or member.node_name is None or member.owner is None:
                    continue
                name = f"{member.namespace}/{member.owner.name}"
                members.append(GangMember(uid=uid, key=member.key, node=member.node_name, gpus=member.requests.gpus))
            if members:
                gangs.append(GangVictim(job=job, name=name, members=tuple(members)))
        return gangs

    def _reclaim(self, pod: PodInfo, held: dict[str, list[str]]) -> VictimChoice:
        """HiveD's reclaim of the cells of ``pod``'s VC on the one node ``held`` names (kube-scheduler
        deletes the victims of the one node it picks), told as FitGpp's decisions are: each
        victim's Event says who reclaims and what the preemption does to its Job. Told once: a
        retry that finds the victims chosen already (kube-scheduler asks again when its
        nomination was cleared) tells nothing more, and counts none of them a failed pod twice."""
        ((node, uids),) = held.items()
        told = not any(uid in self._chosen for uid in uids)
        victims = tuple(p for p in (self._tracked_pod(uid) for uid in uids) if p is not None)
        outcomes = self.victim_outcomes(victims) if told else {}
        for uid in uids:
            self._leave(uid)  # HiveD's reclaim, not FitGpp's: no count, no resume hold
        # Recorded as FitGpp's decisions are, by the replica that answered, leader or not:
        # a restarted replica keeps the node's room for the pod where no record of its
        # cells (the leader's cellfit.io/reclaim-booking) came before the restart.
        record = records.encode(node=node, victims=tuple(uids))
        if not told or not victims:
            return VictimChoice(victims=held, decision=None, preemptor_record=record)
        decision = ReclaimDecision.of(preemptor=pod, node=node, victims=victims)
        return VictimChoice(victims=held, decision=decision, preemptor_record=record, victim_outcomes=outcomes,
                            victim_job_outcome=next((said for said in outcomes.values() if said is not None), None))

    def _nothing_reclaimed(self, pod: PodInfo, candidates: Mapping[str, Sequence[str]]) -> str | None:
        """Why nothing was preempted for a guaranteed pod that is no trial pod, where the placement
        engine reclaims (HiveD): its reclaim, which any guaranteed pod may make, found nothing on
        the offered nodes; FitGpp's own rule is only that such a pod takes no best-effort pod's
        room. None for an opportunistic pod, or without a reclaiming placement engine."""
        if not isinstance(self.inner, ReclaimsCells) or tenancy_of(pod) is None:
            return None
        unresolved = self.inner.request_refusal(pod) if isinstance(self.inner, ExplainsRefusals) else None
        if unresolved is not None:
            return f"{unresolved}: HiveD reclaims nothing for it; and a pod that is not a trial pod takes no best-effort pod's room (FitGpp)"
        nodes = sorted(candidates)
        named = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        where = f"on the offered nodes ({named})" if nodes else "with no node offered"
        return (f"HiveD found no opportunistic pod {where} on cells virtual cluster {vc_of(pod)!r} is owed, which it would "
                "reclaim for this guaranteed pod; and a pod that is not a trial pod takes no best-effort pod's room (FitGpp)")

    def _freeing_wait(self, pod: PodInfo) -> str | None:
        """Why the placement engine preempts nothing for ``pod`` while cells it is owed are being
        freed (:class:`WaitsForFreedCells`), or None."""
        return self.inner.freeing_wait(pod) if isinstance(self.inner, WaitsForFreedCells) else None

    def victim_outcomes(self, victims: Sequence[PodInfo], *, record: bool = True) -> dict[str, str | None]:
        """What the preemption does to each victim where it is no pause (its Event tells it
        instead of its resuming), by UID: counted against its Job's backoffLimit, its Job or index
        failed, nothing to create it again, or its Job not read yet, whose podFailurePolicy alone
        says whether it resumes; None where it resumes (its Job ignores DisruptionTarget, or
        another controller creates it again). The pods of one Job are counted in the decision's
        order, each a failed pod after those before it: the Job's status.failed counts none of
        them yet (the fallback may take two pods of a Job with backoffLimit 1, which fails it),
        nor the Job's pods earlier decisions here preempted that have not been counted yet
        (:attr:`_uncounted`). Records these victims among the latter unless ``record`` is False:
        the leader's reclaim asks it too, for the pods it deletes itself, without recording, and
        records each (:meth:`record_victims`) once its deletion succeeded
        (scheduler/cluster/reclaim.py), under the engine lock."""
        of_job: dict[str, list[str]] = {}
        for victim in victims:
            if victim.owner is not None:
                of_job.setdefault(victim.owner.uid, []).append(victim.uid)
        outcomes: dict[str, str | None] = {}
        for victim in victims:
            same = of_job.get(victim.owner.uid, [victim.uid]) if victim.owner is not None else [victim.uid]
            at = same.index(victim.uid)
            before = len(self._uncounted.get(victim.owner.uid, {})) if victim.owner is not None else 0
            outcomes[victim.uid] = self._outcome_of(victim, earlier=before + at, later=len(same) - at - 1)
        if record:
            self.record_victims(victims)
        return outcomes

    def record_victims(self, victims: Sequence[PodInfo]) -> None:
        """Record these victims, in order, among their Jobs' preempted pods that status.failed
        does not count yet (:attr:`_uncounted`)."""
        for victim in victims:
            job = self._jobs.get(victim.owner.uid) if victim.owner is not None else None
            if job is None or self._job_deleted(job.uid) or job.ignores_disruption or job.disruption_action in FAILS_AT_ONCE:
                continue  # no failed pod it counts (or none known): nothing to add to status.failed
            uncounted = self._uncounted.setdefault(job.uid, {})
            if victim.uid not in uncounted:
                uncounted[victim.uid] = [job.failed + len(uncounted) + 1, False]

    def _forget_uncounted(self, job: JobInfo) -> None:
        """Drop the Job's victims its status.failed now counts, or may count (:attr:`_uncounted`):
        as many as status.failed rose (the earliest first), and those gone before this update."""
        uncounted = self._uncounted.get(job.uid)
        if uncounted is None:
            return
        for uid, (counted_at, gone) in list(uncounted.items()):
            if gone or job.failed >= counted_at:
                del uncounted[uid]
        if not uncounted:
            del self._uncounted[job.uid]

    def _outcome_of(self, victim: PodInfo, *, earlier: int = 0, later: int = 0) -> str | None:
        """:meth:`victim_outcomes` of one victim, after ``earlier`` and before ``later`` pods of
        its Job in the same decision."""
        owner = victim.owner
        if owner is None:
            return NO_CONTROLLER_OUTCOME
        if not owner.is_batch_job:
            return None  # another controller (a ReplicaSet, Volcano's Job) creates it again
        if self._job_deleted(owner.uid):
            return DELETED_JOB_OUTCOME
        job = self._jobs.get(owner.uid)
        if job is None:
            return UNKNOWN_JOB_OUTCOME
        if job.ignores_disruption:
            # Unless a rule on exit codes comes first and takes it (143 after SIGTERM, its usual
            # exit): the exit code is the workload's, unknown until it exits.
            return resumes_unless(job.disruption_exit_codes, job.backoff_limit) if job.disruption_exit_codes else None
        outcome = preemption_outcome(job.disruption_action, job.backoff_limit, failed=job.failed + earlier, with_it=later)
        return otherwise_if_exits(outcome, job.disruption_exit_codes, job.disruption_action, job.backoff_limit)

    def victim_jobs(self, victim_uids: Sequence[str]) -> list[tuple[JobInfo, int]]:
        """The batch/v1 Jobs of these victims with their preemption counts after the decision, for
        the driver to write back to each Job's ``cellfit.io/preemptions`` (another group's kind
        "Job" has none: its preemptions are counted here alone, as a ReplicaSet's are)."""
        jobs: dict[str, tuple[JobInfo, int]] = {}
        for uid in victim_uids:
            pod = self._tracked_pod(uid)
            if pod is not None and pod.owner is not None and pod.owner.is_batch_job and not self._job_deleted(pod.owner.uid):
                job = JobInfo(uid=pod.owner.uid, namespace=pod.namespace, name=pod.owner.name)
                jobs[job.uid] = (job, self._job_counts.get(job.uid, 0))
        return list(jobs.values())

    def preemptions_of_job(self, job_uid: str) -> int:
        """How often FitGpp has preempted this Job: its ``cellfit.io/preemptions``, or more when a
        decision the watch has not echoed yet raised it."""
        return self._job_counts.get(job_uid, 0)

    def victim(self, pod_uid: str) -> PodInfo | None:
        return self._tracked_pod(pod_uid)

    # ------------------------------------------------------------------ holds after a restart

    def _rebuild_holds(self, pod: PodInfo) -> None:
        """Rebuild the holds the pod's state shows a preemption of this scheduler left (a
        restart forgot them; ``holds.py``, "After a restart"); a hold that exists stays as is."""
        self._evidence.apply_pod(pod)
        victim = self._evidence.is_victim(pod)
        if victim:
            self._rebuild_resume_hold(pod.uid)
        if victim or pod.nominated_node_name is not None or ANNOTATION_PREEMPTOR_HOLD in pod.annotations:
            for waiting in self._evidence.preemptors_waiting():
                # Whatever becomes of the preemptor's hold (HiveD's booking keeps its room): each
                # exited victim's Job gets its hold once (_given: a hold decided here, or rebuilt
                # while the victim still terminated or from the Job's record, came with it).
                for exited, job in waiting.resumed.items():
                    self._rebuild_exited_victims_hold(job, victim_uid=exited, node_name=waiting.node)
                if isinstance(self.inner, BooksAhead) and self.inner.has_booking(waiting.pod):
                    continue  # its room is kept otherwise (HiveD booked cells for it), as placed_elsewhere ends a hold
                rebuilt = self.holds.rebuild_preemptor(waiting.pod, node_name=waiting.node, record=waiting.record)
                if rebuilt and isinstance(self.inner, GivesBackGangs):
                    # As the decision did: HiveD recovered the gangs taken whole from a member still
                    # running (the replica that decided died before deleting it), their exited
                    # members' slots on the preemptor's node booked again for their next pods (review28).
                    # Once, as the hold is rebuilt: a gang its Job plans afresh later is its own.
                    for job in waiting.gangs:
                        self.inner.give_back_gang(job)
                if rebuilt and waiting.victims and self._watch_victims is not None:
                    # As the preempt verb remembers the victims it chose: once the watch has seen
                    # them go, kube-scheduler is made to retry the pod it may have parked.
                    self._watch_victims(waiting.victims)

    def _follow_records_left(self, pod: PodInfo) -> None:
        """A bound preemptor's record naming gang members elsewhere is followed, and taken off
        once none of them runs (bound_records.py); as the watch shows it, not only where this
        replica bound it: a replica that finishes the gang's preemption sees its members go."""
        text = pod.annotations.get(ANNOTATION_PREEMPTOR_HOLD)
        if text and pod.holds_resources and not pod.terminating and (members := names_members(text)):
            # Not taken off here where none of them shows running: a restart lists the pods node
            # by node, the members perhaps after the preemptor (a relist takes off a spent one).
            self._records_left.bound(pod, text=text, running=[uid for uid in members if runs(self.pods.get(uid))])
        elif self._records_left:
            self._records_left.forget(pod.uid)
        if self._records_left:
            self._take_off(self._records_left.member_shown(pod))

    def _take_off(self, spent: Sequence[tuple[PodInfo, str]]) -> None:
        """Bound preemptors' records naming no gang member that runs any more, taken off."""
        for preemptor, text in spent:
            if self._clear_record is not None:
                self._clear_record(preemptor, text)

    def _rebuild_exited_victims_hold(self, job_uid: str, *, victim_uid: str, node_name: str) -> None:
        """The resume hold a recorded decision gave the Job of a victim that has exited since."""
        if self._job_deleted(job_uid) or victim_uid in self._given.get(job_uid, {}):
            return
        self._give(job_uid, victim_uid=victim_uid, node_name=node_name)
        self.holds.victim_gone(job_uid=job_uid, node_name=node_name)

    def _rebuild_recorded_holds(self, job: JobInfo) -> None:
        """The resume holds the Job's record names (``resume_records.py``) that this process has
        not given: each victim the watch shows is on its way out as if chosen here (its exit makes
        the Job's next pod due), each other one has exited (its successor is due). A victim the
        record named and names no more had its hold end on the replica that took it off: it ends
        here too. A record that does not read changes nothing: only cellfit writes it (the
        chart's state policy)."""
        try:
            recorded = resume_records.decode(job.annotations.get(ANNOTATION_RESUME_HOLDS, ""))
        except InvalidAnnotation:
            return
        if self._job_deleted(job.uid):
            return
        named = self._recorded.get(job.uid, set())
        for victim in named - recorded.keys():
            self.holds.resume_ended_elsewhere(job_uid=job.uid, victim_uid=victim)
        if not recorded:
            self._recorded.pop(job.uid, None)
            return
        self._recorded[job.uid] = set(recorded)
        self._job_refs.setdefault(job.uid, JobRef(uid=job.uid, namespace=job.namespace, name=job.name))
        given = self._given.get(job.uid, {})
        for victim, node in recorded.items():
            if victim in given:
                continue
            self._give(job.uid, victim_uid=victim, node_name=node)
            pod = self._tracked_pod(victim)
            if pod is None:
                self.holds.victim_gone(job_uid=job.uid, node_name=node)
                self._rebuilt_gone[victim] = (job.uid, node)
            else:
                self._leaving_victim(pod)

    def _still_leaving(self, pod_uid: str) -> None:
        """A victim the Job's record gave a hold as gone is shown after all: on its way out."""
        job, node = self._rebuilt_gone.pop(pod_uid)
        pod = self._tracked_pod(pod_uid)
        if pod is not None and job in self._given:
            self.holds.victim_back(job_uid=job, node_name=node)
            self._leaving_victim(pod)

    def _leaving_victim(self, pod: PodInfo) -> None:
        """A victim of a decision this process did not make, whose Job's hold is rebuilt: on its
        way out as one chosen here; a gang's HiveD slots, recovered from its bind-info, go back."""
        self._leave(pod.uid)
        if is_gang_pod(pod) and pod.owner is not None and isinstance(self.inner, GivesBackGangs):
            self.inner.give_back_gang(pod.owner.uid)

    def _give(self, job_uid: str, *, victim_uid: str, node_name: str) -> None:
        """The Job's resume hold on ``node_name`` for its preempted pod ``victim_uid``."""
        self._given.setdefault(job_uid, {})[victim_uid] = node_name
        self.holds.displaced(job_uid=job_uid, node_name=node_name, victim_uid=victim_uid)

    def _resume_holds_given(self, taken: Sequence[str], owners: Sequence[str | None]) -> tuple[tuple[JobRef, Mapping[str, str]], ...]:
        """The resume holds a decision gave each victim's Job (victim UID -> node), by Job."""
        given: dict[str, dict[str, str]] = {}
        for victim, job in zip(taken, owners):
            node = self._given.get(job, {}).get(victim) if job is not None else None
            if job is not None and node is not None:
                given.setdefault(job, {})[victim] = node
        return tuple((ref, holds) for job, holds in given.items() if (ref := self._job_ref(job)) is not None)

    def resume_hold_ended(self, *, job_uid: str, victim_uid: str) -> bool:
        """Whether this process gave the Job a resume hold for its preempted pod ``victim_uid``
        and that hold has ended since (a pod of the Job bound, the hold gave up, the Job's record
        took it off): a record's ``owed`` finished later must not write it back on the Job, where
        no replica would hold it and a restart would keep its room again (review27 R1)."""
        return victim_uid in self._given.get(job_uid, {}) and not self.holds.holds_for(job_uid=job_uid, victim_uid=victim_uid)

    def _resume_holds_ended(self, job_uid: str, victims: tuple[str, ...]) -> None:
        """Holds that ended here (RoomHolds.on_resume_ended): off the Job's record."""
        ref = self._job_ref(job_uid)
        if self._write_resume_holds is not None and ref is not None:
            self._write_resume_holds(ref, {}, victims)

    def _job_ref(self, job_uid: str) -> JobRef | None:
        """The Job's name, from a victim of it or from the Job watch."""
        ref = self._job_refs.get(job_uid)
        job = self._jobs.get(job_uid)
        return ref if ref is not None or job is None else JobRef(uid=job.uid, namespace=job.namespace, name=job.name)

    def _rebuild_resume_hold(self, pod_uid: str) -> None:
        """A victim of this scheduler's preemption, best-effort, of a Job FitGpp has preempted,
        that this process did not choose: its Job gets the hold the decision gave it."""
        pod = self._tracked_pod(pod_uid)
        if pod is None or pod_uid in self._chosen or not self._evidence.is_victim(pod):
            return
        owner = pod.owner
        if owner is None or not owner.is_batch_job or self._job_deleted(owner.uid) or pod.node_name is None:
            return
        if job_class_or_best_effort(pod.labels) is not JobClass.BEST_EFFORT or self._job_counts.get(owner.uid, 0) < 1:
            return
        if pod_uid in self._given.get(owner.uid, {}):
            return  # its Job's record gave the hold already
        self._job_refs.setdefault(owner.uid, JobRef(uid=owner.uid, namespace=pod.namespace, name=owner.name))
        self._give(owner.uid, victim_uid=pod_uid, node_name=pod.node_name)
        self._leaving_victim(pod)  # as a victim chosen here: its exit makes the Job's next pod due

    # ------------------------------------------------------------------ internals

    def _claimable(self, pod: PodInfo, table: CandidateTable, nodes: Collection[str]) -> tuple[CandidateTable, Passed, bool]:
        """``table`` with only the victims whose preemption can help ``pod`` valid on the offered
        ``nodes``: those it may take (HiveD's tenancy, :func:`may_claim_cells`: pods of its own VC,
        and opportunistic pods) and whose room the placement engine would give it
        (:class:`JudgesVictims`: under HiveD, for a guaranteed pod, cells of its VC, or free
        cells its VC may still bind; asked of its VC's own pods too, as one on a cell the VC
        is draining frees room only when it unbinds that cell). Also the keys of the best-effort pods there passed over, by
        why, and whether any pod there remains for it. Before FitGpp chooses, not after: eq. 4
        and the fallback then pick among the pods whose preemption can help ``pod``, where a
        choice refused after the fact left it pending while its own VC's best-effort pods held
        its cells, and one that fell on an opportunistic pod elsewhere freed nothing for it (H1)."""
        helps = self.inner.preemption_helps(pod) if isinstance(self.inner, JudgesVictims) else None
        mine = vc_of(pod)
        passed = Passed(foreign=[], useless=[], draining=[])
        if helps is None and all(vc == mine for vc in self._holding_vcs):
            return table, passed, True  # every pod held is of its VC, or opportunistic: none to pass over
        slots = [slot for slot in (table.node_index.get(name) for name in nodes) if slot is not None]
        if not slots:
            return table, passed, False
        offered = np.zeros(len(table.node_names), dtype=np.bool_)
        offered[slots] = True
        node_of = table.node_of
        rows = np.flatnonzero(table.valid & (node_of >= 0) & offered[np.where(node_of >= 0, node_of, 0)])
        tenancy, uids, keys = self._tenancy, table.uids, table.keys
        left_out: list[int] = []
        for row in rows.tolist():
            uid = uids[row]
            if uid is None or uid not in tenancy:
                continue
            holds = tenancy[uid]
            if holds is not None and holds != mine:
                passed.foreign.append(str(keys[row]))
            elif helps is not None and (victim := self._tracked_pod(uid)) is not None and not helps(victim):
                (passed.useless if holds is None else passed.draining).append(str(keys[row]))
            else:  # one that helps: its VC's own pod (HiveD gives a guaranteed pod its VC's cells), or opportunistic
                continue
            left_out.append(row)
        if not left_out:
            return table, passed, len(rows) > 0
        passed.foreign.sort()
        passed.useless.sort()
        passed.draining.sort()
        valid = table.valid.copy()
        valid[left_out] = False
        return replace(table, valid=valid), passed, len(rows) > len(left_out)

    def _tracked_pod(self, pod_uid: str) -> PodInfo | None:
        """A pod the index holds, as reserved here or as the watch shows it; None otherwise."""
        if pod_uid not in self._tracked:
            return None
        return self.pods.current(pod_uid)

    def _reindex(self, pod_uid: str, *, preemptions: int) -> None:
        pod = self._tracked_pod(pod_uid)
        if pod is not None:
            self._index_pod(pod, preemptions=preemptions)

    def _index_pod(self, pod: PodInfo, *, preemptions: int | None) -> None:
        """Put the pod's latest state in the victim table. A victim stays out of the candidates
        until it is gone: kube-scheduler patches its status before deleting it, and the watch
        shows it once more as a pod like any other."""
        row = _row_of(pod, preemptions) if pod.holds_resources else None
        if row is not None and self._rows.get(pod.uid) == row:
            return  # the same row (set terminating since if chosen, as below): as reserved, now bound or Running
        self._index.apply_pod(pod, preemptions=preemptions)
        if row is None:
            self._rows.pop(pod.uid, None)
        else:
            self._rows[pod.uid] = row
        if pod.uid in self._chosen:
            self._index.set_terminating(pod.uid)

    def _track(self, pod: PodInfo) -> None:
        job = pod.owner.uid if pod.owner is not None else None
        previous = self._tracked.get(pod.uid)
        if previous is not None and previous != job:
            self._leave_job(pod.uid, previous)
        self._tracked[pod.uid] = job
        self._hold_tenancy(pod.uid, tenancy_of(pod))
        self._note_leaving(pod)
        if job is not None:
            self._pods_by_job.setdefault(job, set()).add(pod.uid)
            if is_gang_pod(pod):
                self._gangs.setdefault(job, set()).add(pod.uid)
        self._index_pod(pod, preemptions=self._job_counts.get(job) if job is not None else None)

    def _hold_tenancy(self, pod_uid: str, tenancy: str | None) -> None:
        if pod_uid in self._tenancy:
            if self._tenancy[pod_uid] == tenancy:
                return
            self._drop_tenancy(pod_uid)
        self._tenancy[pod_uid] = tenancy
        if tenancy is not None:
            self._holding_vcs[tenancy] += 1

    def _drop_tenancy(self, pod_uid: str) -> None:
        if pod_uid not in self._tenancy:
            return
        tenancy = self._tenancy.pop(pod_uid)
        if tenancy is not None:
            self._holding_vcs[tenancy] -= 1
            if not self._holding_vcs[tenancy]:
                del self._holding_vcs[tenancy]

    def _untrack(self, pod_uid: str) -> None:
        self.pods.drop_assumed(pod_uid, bound=True)
        job = self._tracked.get(pod_uid)
        left = self._leaving_pods.get(pod_uid)
        if pod_uid in self._chosen and job is not None and left is not None:
            self.holds.victim_gone(job_uid=job, node_name=left[0])
        self._chosen.discard(pod_uid)
        self._not_leaving(pod_uid)
        job = self._tracked.pop(pod_uid, None)
        self._drop_tenancy(pod_uid)
        if job is not None:
            self._leave_job(pod_uid, job)
        self._index.delete_pod(pod_uid)
        self._rows.pop(pod_uid, None)

    def _leave_job(self, pod_uid: str, job: str) -> None:
        gang = self._gangs.get(job)
        if gang is not None:
            gang.discard(pod_uid)
            if not gang:
                del self._gangs[job]
        members = self._pods_by_job.get(job)
        if members is not None:
            members.discard(pod_uid)
            if not members:
                del self._pods_by_job[job]
                self._deleted_jobs.discard(job)

    def _table_for(self, pod: PodInfo) -> CandidateTable:
        """The candidate table with the room held for preemptors ``pod`` yields to taken out of
        their nodes' free resources: victims chosen so that ``pod`` fits in another preemptor's
        room would be preempted for nothing."""
        table = self._index.table()
        room = self.holds.preemptor_room(pod)
        if not room:
            return table
        free = table.node_free.copy()
        for node, held in room.items():
            slot = table.node_index.get(node)
            if slot is not None:
                free[:, slot] -= held.as_tuple()
        return replace(table, node_free=free)

    def _free_on(self, node_name: str) -> Resources | None:
        try:
            return self._index.free_on(node_name)
        except KeyError:
            return None

    def _freed_by_terminating(self, pod: PodInfo) -> str | None:
        """The node ``pod``'s own preemption nominated it to, offered or not, when the pods
        already on their way out there (deleted, or chosen as victims) free, with what is free
        now, enough for ``pod``, and its hold still waits for them (``RoomHolds.keeps_waiting``:
        not past their grace period); None otherwise. Only that node: kube-scheduler's rule,
        and a pod deleted elsewhere (a long grace period, a finalizer) must not keep trial pods
        waiting. What leaves there for a preemptor ``pod`` yields to is not freed for ``pod``."""
        node = self.holds.nominated_node(pod.uid)
        if node is None:
            return None
        freed = self._leaving.get(node)
        free = self._free_on(node)
        if freed is None or free is None:
            return None
        held = self.holds.preemptor_room(pod).get(node, ZERO)
        if not pod.requests.fits_in(free + freed - held):
            return None
        return node if self.holds.keeps_waiting(pod.uid, grace_seconds=lambda: self._longest_grace_leaving(node)) else None

    def _room_kept(self, pod: PodInfo) -> str | None:
        """The node of ``pod``'s preemptor hold when nothing leaves it any more (its victims have
        left: :meth:`_freed_by_terminating` covers the wait while they leave), a pod can still
        land there (Ready, not cordoned), and its room there is still ``pod``'s: what is free
        fits it, less the room held there for preemptors it yields to, and where the placement
        engine books a preemptor's cells (:class:`KeepsPreemptorCells`, HiveD, for a guaranteed
        pod of no gang) its cells are booked there. For :data:`ROOM_KEPT_SECONDS` from the first
        time it is asked about so (``RoomHolds.keeps_room``), then the pod is preempted for
        elsewhere; its hold stays. None otherwise."""
        node = self.holds.nominated_node(pod.uid)
        if node is None or node in self._leaving or not self._index.usable(node):
            return None
        free = self._free_on(node)
        if free is None or not pod.requests.fits_in(free - self.holds.preemptor_room(pod).get(node, ZERO)):
            return None
        inner = self.inner
        if pod.requests.gpus and isinstance(inner, KeepsPreemptorCells) and inner.books_cells_for(pod) and inner.cells_booked_for(pod.uid) != node:
            return None
        return node if self.holds.keeps_room(pod.uid, seconds=ROOM_KEPT_SECONDS) else None

    def _longest_grace_leaving(self, node_name: str) -> int:
        """The longest grace period (seconds) among the pods leaving the node."""
        return max((grace for node, _, grace in self._leaving_pods.values() if node == node_name), default=0)

    def _note_leaving(self, pod: PodInfo) -> None:
        """Count the tracked pod among its node's leaving pods if it is on its way out."""
        self._not_leaving(pod.uid)  # its node or requests may have changed since
        if pod.node_name is not None and (pod.terminating or pod.uid in self._chosen):
            self._leaving_pods[pod.uid] = (pod.node_name, pod.requests, pod.grace_period_seconds)
            self._leaving[pod.node_name] = self._leaving.get(pod.node_name, ZERO) + pod.requests

    def _not_leaving(self, pod_uid: str) -> None:
        entry = self._leaving_pods.pop(pod_uid, None)
        if entry is None:
            return
        node, requests, _ = entry
        remaining = self._leaving[node] - requests
        if remaining == ZERO:
            del self._leaving[node]
        else:
            self._leaving[node] = remaining

    def _leave(self, pod_uid: str) -> PodInfo | None:
        """The pod was chosen as a victim: on its way out, no longer a candidate. Returns it
        (None: a pod the index does not hold)."""
        self._chosen.add(pod_uid)
        pod = self._tracked_pod(pod_uid)
        if pod is None:
            return None
        self._note_leaving(pod)
        self._index.set_terminating(pod_uid)
        return pod

    def _take_victim(self, pod_uid: str) -> str | None:
        """The victim is on its way out: no longer a candidate, and its Job's next pod gets a
        hold on its node. Returns the UID of its owner, whose count the preemption raises (None:
        no owner, or a Job already deleted)."""
        pod = self._leave(pod_uid)
        if pod is None or pod.owner is None or self._job_deleted(pod.owner.uid):
            return None
        if _resumes_on_its_node(pod):
            assert pod.node_name is not None  # _resumes_on_its_node
            self._job_refs.setdefault(pod.owner.uid, JobRef(uid=pod.owner.uid, namespace=pod.namespace, name=pod.owner.name))
            self._give(pod.owner.uid, victim_uid=pod_uid, node_name=pod.node_name)
        return pod.owner.uid

    def _count_preemption(self, job: str) -> None:
        """One preemption of the Job, however many of its pods it took (§3.2 counts jobs)."""
        self._job_counts[job] = self._job_counts.get(job, 0) + 1
        for uid in self._pods_by_job.get(job, ()):
            self._reindex(uid, preemptions=self._job_counts[job])
