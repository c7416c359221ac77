"""Room holds: the room FitGpp's victims leave on a node, kept for the pods that should get it.

Two kinds of hold, one rule for who yields to them:

* a *preemptor hold* keeps the room for the pod the victims were preempted for, until it is
  bound (below, after the resume holds);
* a *resume hold* keeps room for the preempted Job's next pod.

Resume holds.

FitGpp resumes a suspended best-effort (BE) job at the head of the BE queue (§2). The resumed
PriorityClass (``resume.py``) puts its new pod before other BE pods in kube-scheduler's active
queue, but only there: a pod that failed to schedule first waits out a backoff (1 s doubling to
10 s), and a resumed pod has failed at least once while the trial pod held its GPUs. When those
GPUs free up, a BE pod whose backoff ends sooner takes them and the resumed Job waits behind it.
kube-scheduler keeps room for a pod in one case only, a nominated node after a preemption, and a
BE pod never preempts.

So cellfit keeps the room, much as kube-scheduler honours nominated pods. Each pod FitGpp
preempts leaves a hold on its node for one pending pod of its Job (where the Job's node
selector, affinity and tolerations were met). A pod is kept off that node when placing it there
would leave a held pod no room, if it

* is not a trial pod and has a priority no higher than the held pod's,
* is not itself a pod of a Job that waits to resume, and
* runs in the same virtual cluster, or is opportunistic (a hold never spends another tenant's
  guaranteed cells).

Room is kept only for held pods that fit on the node now (as many as fit, in a fixed order), so
nothing is kept that no pod could use, and only from pods that would fit there themselves. A
hold ends when a pod of its Job is bound (anywhere) or the Job goes away, and gives up
``hold_seconds`` after it first kept a pod off (a resumed pod kube-scheduler will not place
there, after a new taint or a changed label, must not keep the room forever); that time starts
again when the hold finds nothing to keep, or a pod that goes before the held ones (a trial
pod) is bound there. It also gives up when its victims have exited and its Job has had no
pending pod for ``hold_seconds``: a Job the preemption failed, or one that finished, makes none.

Preemptor holds. kube-scheduler keeps the room for a preemptor by nominating it to the node, and
counts a nominated pod against pods of no higher priority. It clears the nomination as soon as
an attempt finds no preemption helpful, and one such attempt comes when its cache has dropped an
exited victim a moment before cellfit's watch has: cellfit, still seeing the victim, refuses the
preemptor and declines a second victim, the nomination is cleared, and a lower-priority pod
takes the GPUs the preemption freed (then is preempted itself). So each preemption FitGpp
decides leaves a hold on the victims' node for the preemptor, which keeps off pods of no higher
priority (and, as above, of its virtual cluster or opportunistic) when placing them would leave
it no room; of two preemptors of one priority, only the later yields to the earlier one's hold
(each yielding to the other's would keep both off). It ends when the preemptor is bound
(anywhere) or deleted, or FitGpp preempts for it on another node, or HiveD books cells for it
instead, and gives up after ``hold_seconds`` as a resume hold does. FitGpp preempts for it
nowhere else while pods leaving its node will make room there, whichever nodes kube-scheduler
offers (:meth:`RoomHolds.keeps_waiting`), for at most their grace period and ``hold_seconds``. A resumed pod yields to it;
the preemptor goes before every resume hold.

The node's room is not all a preemptor needs under HiveD: its virtual cluster's quota. When its
last victim leaves, the VC's cell there is unbound, and a pod of the VC filtered for another node
(which this hold does not keep) could bind that quota first, leaving the preemptor refused and its
victims preempted for nothing. So the placement engine is told of each hold that stands for a
record (``cells``, :class:`BooksPreemptorCells`): HiveD books the preemptor's cells on the node in
the step its last victim leaves (scheduler/cells/preemptor_claims.py), and gives them back when
the hold ends without a binding (it lapsed, its wait ran out, or its record was taken off).

After a restart. Holds live in memory, but a preemption in progress leaves evidence on the
pods, and :class:`PreemptionEvidence` rebuilds the holds from it as the watch relists them.
kube-scheduler writes a ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``,
message ``<preemptor's schedulerName>: ...``) on each victim before deleting it, and nominates
the preemptor to the victims' node (``status.nominatedNodeName``). Trusted are only victims
of this scheduler's preemptions (the message names its profile; every preemption of its pods
goes through cellfit's preempt verb) that are still terminating: a nomination of a node with no
such victim left may be stale, and the evidence is gone once they exit. So

* a pending trial pod of this scheduler nominated to a node where such victims terminate gets
  a preemptor hold there (FitGpp preempts only for trial pods);
* so does a pending pod of this scheduler that carries the record of the preempt verb's
  decision for it (annotation ``cellfit.io/preemptor-hold``, ``records.py``, written by the
  replica that answered: FitGpp's victims for a trial pod, or HiveD's reclaim for a guaranteed
  pod), on the node it names, while one of the victims it names still
  terminates there or once every one of them is gone: kube-scheduler clears the nomination
  when an attempt meets cellfit down, and its attempts reach cellfit only once the victims have
  exited, so the record is what is left of the preemption after a restart. A hold rebuilt so
  follows a later record (another replica's later decision); one decided here stays. Its
  victims still there are handed to the driver (``watch_victims``) as the verb hands over the
  victims it chose, so that kube-scheduler is made to retry the pod once the watch has seen
  them go (the requeue signal, scheduler/cluster/nudge.py);
* each such victim, best-effort, of a Job FitGpp has preempted (``cellfit.io/preemptions``
  above zero), gets its Job a resume hold on its node, as the decision did;
* so does each victim a record's ``resumes`` names that has exited already, while that record's
  preemptor is pending;
* and each victim the Job's own record names (annotation ``cellfit.io/resume-holds``,
  ``resume_records.py``), whatever became of the victim and of the preemptor: the preemptor's
  binding empties its record, and an exited victim leaves nothing, so the replica that decided
  writes each victim whose Job it gave a hold on the Job, which outlives both, and the replica
  where a hold ends (a pod of the Job its bind verb bound, once the watch shows it bound, or the
  hold gave up: :attr:`RoomHolds.on_resume_ended`) takes the victim off. A victim the record
  named and no longer names ends its Job's hold here too (it ended on that replica). A victim
  the record names that the watch has not shown (the Jobs' list came before the pods') is
  counted gone, and leaving once shown.

Each victim gives its Job one hold in a process, whichever of these shows it first (a victim
this process chose came with its hold).

A rebuilt hold is an ordinary hold: its clock starts when it first keeps a pod off, and it gives
up ``hold_seconds`` later. Every hold on a node that is gone ends (:meth:`RoomHolds.node_gone`;
the engine tells it the node's deletion, and, once the nodes are listed, a node the list lacks). A preemptor hold that ended here (it lapsed, or HiveD booked cells
for the pod) is not rebuilt on its node while the process lives, neither from the nomination nor
from the record it stood for (another replica's later preemption for the pod, recorded on it, is,
on another node or on that one again); a restart can rebuild it from the
nomination only while its victims still terminate, so within their grace period, and from the
record until the pod is bound (its binding empties the record, or leaves it for gang recovery
alone, ``bound_records.py``: a bound pod's record rebuilds nothing) or deleted, or until a hold
standing for the record ends without a binding: it lapsed, or its wait for stuck victims ran out
(:attr:`RoomHolds.on_record_ended`: the driver takes that record off the pod, if the pod still
carries exactly it). A hold that gave way to HiveD's booking leaves the record to the preempt
verb that booked, which records HiveD's choice over it. Every replica's hold that stands for a
record follows it once the watch has shown it on the pod: the record taken off (another
replica's hold for it ended so), the hold ends here too and is not rebuilt on its node for that
record; replaced by a later decision, the hold follows that one. A hold rebuilt from the nomination
before the record's write reached the watch takes the record up when it does (and books the pod's
cells), and follows it from then on. A standby's hold rebuilt from the record, or the
deciding replica's own, so never keeps the room after a failover once the record is gone.

Pure: the driver feeds pod and Job changes; time comes from the ``clock`` it passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import AbstractSet, Callable, Mapping, Protocol, runtime_checkable

from msgspec import structs

from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.pods import PodStore
from scheduler.core.model import TERMINAL_PHASES, PodInfo
from scheduler.core.resources import ZERO, Resources
from scheduler.errors import InvalidAnnotation
from scheduler.preemption import records
from scheduler.preemption.errors import InvalidPreemptionSettings
from scheduler.preemption.model import JobClass, job_class_or_best_effort, may_claim_cells
from scheduler.preemption.records import PreemptorRecord

Clock = Callable[[], float]


@runtime_checkable
class BooksPreemptorCells(Protocol):
    """A placement engine that books a preemptor's cells on its node once its victims have left
    (HiveD: its VC's quota waits for it, scheduler/cells/preemptor_claims.py), until its hold
    ends without a binding."""

    def book_for_preemptor(self, pod: PodInfo, *, node: str, victims: AbstractSet[str]) -> None: ...

    def preemptor_hold_ended(self, pod_uid: str) -> None: ...


@dataclass(slots=True)
class _Displacement:
    """Pods of one Job preempted on one node whose successors are not bound yet."""

    pods: int
    keeping_since: float | None = None  # clock reading of the first pod kept off, this spell
    gone: int = 0  # of those pods, the ones that have exited (their successors are due)
    kept_any: bool = False  # it has kept a pod off: its end without a binding frees room a parked pod waits for
    idle_since: float | None = None  # clock reading since which every one is gone and none waits
    victims: list[str] = field(default_factory=list)  # UIDs of those pods, where known


@dataclass(slots=True)
class _Resumed:
    """A pod whose binding ended a hold: ``confirmed`` once the watch shows it bound (a
    binding cellfit announced may still fail and give the hold back)."""

    job: str
    node: str
    confirmed: bool
    victim: str | None = None  # the preempted pod whose hold the binding ended, where known


@dataclass(slots=True)
class _PreemptorHold:
    """Room a node keeps for the pending pod whose victims FitGpp chose there."""

    node: str
    seen: PodInfo  # the preemptor as FitGpp was given it
    order: int  # when FitGpp decided it, among all preemptor holds: the older goes first
    keeping_since: float | None = None  # as in _Displacement
    watched: bool = False  # the watch has shown the preemptor since: the pods' record is newer than seen
    waiting_until: float | None = None  # clock reading past which the preemptor waits no more for pods leaving its node
    rebuilt: bool = False  # from what the pods show (PreemptionEvidence), not decided by this process
    record: str | None = None  # the pod's record of the decision (records.py) this hold stands for, if any
    # The watch has shown the pod carrying ``record``: from then on the hold follows it (ends when
    # the pod no longer carries it). A decision's own record is written after the answer, so an
    # event before the write lands shows the pod without it.
    record_seen: bool = False
    room_kept_since: float | None = None  # clock reading of the first ask after its victims left
    kept_any: bool = False  # as in _Displacement


@dataclass(frozen=True, slots=True)
class Hold:
    """Room a node keeps for the pending pods of one preempted Job (``kind`` "resume"), or for
    the pod pods there were preempted for (``kind`` "preemptor"); for inspection."""

    node: str
    job: str  # namespace/name (a preemptor without a Job: its own namespace/name)
    requests: Resources
    pods: tuple[str, ...]  # namespace/name of the pods it is kept for
    kind: str = "resume"


@dataclass(frozen=True, slots=True)
class Keep:
    """Why one node keeps a pod off, and which holds do it."""

    reason: str
    jobs: tuple[str, ...]  # Job UIDs of the resume holds
    preemptors: tuple[str, ...] = ()  # pod UIDs of the preemptor holds


@dataclass(slots=True)
class RoomHolds:
    """Which nodes keep room for preemptors and resumed pods, and which pods they keep off.

    ``hold_seconds``: how long a hold may keep pods off, from the first pod it kept off
    (seconds, > 0); ``None`` (or no ``clock``): until the pod it keeps room for is bound.
    ``pods``: the pods' one record (``core/pods.py``), kept by whoever built these holds with it;
    without one the holds keep their own from the events they are given.
    ``on_record_ended``: told the preemptor and the record of its decision (``records.py``) when
    a preemptor hold that stands for a record ends without the pod's binding (it lapsed, or its
    wait for pods leaving its node ran out), so that its driver clears the record off the pod and
    a restart does not keep the room again; called under the caller's lock, so it must not wait.
    ``cells``: the placement engine that books a preemptor's cells for the hold that stands for
    its record (HiveD: its VC's quota, not only the node's room), told when such a hold is made
    or rebuilt and when it ends without a binding.
    ``on_resume_ended``: told a Job's UID and the UIDs of its preempted pods whose resume holds
    ended here, by a binding this process made (once the watch shows it) or by giving up, so that
    its driver takes them off the Job's record (``resume_records.py``) and a restart does not keep
    the room again; called under the caller's lock, so it must not wait.
    ``on_kept_off_ended``: told ``(kind, holder, node, why)`` when a hold that has kept a pod off
    ends without the pod it keeps room for bound (``kind`` "resume": ``holder`` is the Job's UID;
    "preemptor": the pod's UID; ``why``: ``lapsed``, ``ended elsewhere``, ``deleted``, ``node gone``): kube-scheduler
    parked the pods it kept off, and no cluster event tells it the room is free (user26: a node
    idle ~70 s); its driver sends the requeue signal. Called under the caller's lock.
    """

    hold_seconds: float | None = None
    clock: Clock | None = None
    pods: PodStore | None = None
    _displaced: dict[str, dict[str, _Displacement]] = field(default_factory=dict)  # Job UID -> node ->
    _pending: dict[str, set[str]] = field(default_factory=dict)  # Job UID -> its pending pods' UIDs
    _job_of_pending: dict[str, str] = field(default_factory=dict)  # pod UID -> Job UID
    _resumed: dict[str, _Resumed] = field(default_factory=dict)  # pod UID ->
    _preemptors: dict[str, _PreemptorHold] = field(default_factory=dict)  # preemptor UID ->
    _binding_preemptors: dict[str, _PreemptorHold] = field(default_factory=dict)  # ended by a binding not confirmed yet
    # Holds that lapsed or gave way -> their node and the record they stood for (None: a
    # nomination): never rebuilt there for that record or a nomination (a preemption elsewhere
    # may be, and a later decision recorded for the same node)
    _ended_preemptors: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    kept_off: int = 0  # nodes kept from a pod, all filters together
    lapsed: int = 0  # holds (a Job on a node) given up after hold_seconds
    _decided: int = 0  # preemptor holds made so far (their order)
    on_record_ended: Callable[[PodInfo, str], None] | None = None
    cells: BooksPreemptorCells | None = None
    on_resume_ended: Callable[[str, tuple[str, ...]], None] | None = None
    on_kept_off_ended: Callable[[str, str, str, str], None] | None = None
    _store: PodStore = field(init=False)
    _records_pods: bool = field(init=False)

    def __post_init__(self) -> None:
        self._records_pods = self.pods is None
        self._store = self.pods if self.pods is not None else PodStore()
        seconds = self.hold_seconds
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0):
            raise InvalidPreemptionSettings(f"{seconds!r} is not a positive number of seconds", field="resume_hold_seconds")

    # ------------------------------------------------------------------ changes

    def displaced(self, *, job_uid: str, node_name: str, victim_uid: str | None = None) -> None:
        """FitGpp preempted one pod of the Job on ``node_name`` (``victim_uid``, where known)."""
        record = self._displaced.setdefault(job_uid, {}).setdefault(node_name, _Displacement(pods=0))
        record.pods += 1
        if victim_uid is not None:
            record.victims.append(victim_uid)

    def victim_gone(self, *, job_uid: str, node_name: str) -> None:
        """A pod FitGpp preempted on ``node_name`` has exited: its Job's next pod is due."""
        record = self._displaced.get(job_uid, {}).get(node_name)
        if record is not None:
            record.gone += 1

    def resume_ended_elsewhere(self, *, job_uid: str, victim_uid: str) -> None:
        """The hold the Job has for its preempted pod ``victim_uid`` ended on another replica (its
        record no longer names it: a pod of the Job that replica bound, or the hold gave up
        there): it ends here too, as that replica's did."""
        nodes = self._displaced.get(job_uid, {})
        for node, record in nodes.items():
            if victim_uid in record.victims:
                record.victims.remove(victim_uid)
                record.pods -= 1
                # As _end_one counts it on the replica where it ended: the binding that ended it
                # came of a victim that had exited, so one fewer is gone (review27 R7: kept, a
                # standby counted a victim still leaving as gone and its hold idled out early).
                record.gone = min(max(record.gone - 1, 0), record.pods)
                if record.pods <= 0:
                    del nodes[node]
                    if not nodes:
                        del self._displaced[job_uid]
                    self._kept_off_ended(record, "resume", job_uid, node, why="ended elsewhere")
                return

    def victim_back(self, *, job_uid: str, node_name: str) -> None:
        """A pod counted gone by :meth:`victim_gone` is there after all (the Job was read before
        the pods after a restart): its Job's next pod is not due until it exits."""
        record = self._displaced.get(job_uid, {}).get(node_name)
        if record is not None:
            record.gone = max(record.gone - 1, 0)

    def preempting(self, preemptor: PodInfo, *, node_name: str, record: str | None = None) -> None:
        """FitGpp preempted pods on ``node_name`` for ``preemptor`` (a hold it had on another
        node ends: kube-scheduler nominates a pod to one node); ``record``: the decision as the
        pod is given it to carry (``records.py``)."""
        self._decided += 1
        watched = self._store.get(preemptor.uid)
        # A record equal to the one the pod carries is written as no change, of which the watch
        # tells nothing: the hold follows it from now.
        carried = record is not None and watched is not None and watched.annotations.get(ANNOTATION_PREEMPTOR_HOLD) == record
        self._preemptors[preemptor.uid] = _PreemptorHold(node=node_name, seen=preemptor, order=self._decided, record=record,
                                                         record_seen=carried)
        self._binding_preemptors.pop(preemptor.uid, None)
        self._ended_preemptors.pop(preemptor.uid, None)
        self._book_cells(preemptor, node_name=node_name, record=record)

    def rebuild_preemptor(self, preemptor: PodInfo, *, node_name: str, record: str | None = None) -> bool:
        """The watch shows ``preemptor`` waiting for victims of this scheduler's preemption on
        ``node_name`` (:class:`PreemptionEvidence`; ``record``: the pod's record it read that
        from, None for a nomination): keep the room for it as :meth:`preempting`
        did before a restart, unless it has a hold, or had one on that node that ended here for
        the same record or a nomination (another replica's later preemption, elsewhere or on that
        node again, recorded on the pod, is kept). A hold rebuilt so moves to the node the pods
        show now (another replica's later decision, recorded on the pod); one this process decided
        stays where it decided it. A hold on that node that stands for no record (rebuilt from
        the nomination before the record's write reached the watch) takes the record up: it
        follows it from now (:meth:`_follow_record`) and books the pod's cells as a hold rebuilt
        from it would. Whether a hold was rebuilt, moved or took up a record now."""
        uid = preemptor.uid
        if uid in self._binding_preemptors:
            return False
        ended = self._ended_preemptors.get(uid)
        if ended is not None and ended[0] == node_name and (record is None or record == ended[1]):
            return False
        claim = self._preemptors.get(uid)
        if claim is not None and claim.node == node_name and claim.record is None and record is not None:
            claim.record = record
            claim.record_seen = True
            self._book_cells(preemptor, node_name=node_name, record=record)
            return True
        if claim is not None and (not claim.rebuilt or claim.node == node_name):
            return False
        self._decided += 1
        self._preemptors[uid] = _PreemptorHold(node=node_name, seen=preemptor, order=self._decided, watched=True, rebuilt=True,
                                               record=record, record_seen=record is not None)
        self._book_cells(preemptor, node_name=node_name, record=record)
        return True

    def nominated_node(self, preemptor_uid: str) -> str | None:
        """The node FitGpp last preempted pods on for this pod, while its hold lasts (the node
        kube-scheduler nominated it to)."""
        claim = self._preemptors.get(preemptor_uid)
        return claim.node if claim is not None else None

    def keeps_waiting(self, preemptor_uid: str, *, grace_seconds: Callable[[], float]) -> bool:
        """Whether the preemptor, asked about again while pods still leave its node (enough for
        it), should wait for them rather than have FitGpp take more victims, whichever nodes it
        was offered. It waits at most ``grace_seconds()`` (the longest grace period among the
        pods leaving there) and ``hold_seconds`` more, from the first time it was asked; past
        that the pods are stuck (a finalizer), and its hold gives up, counted as lapsed.
        Without a clock or ``hold_seconds`` it waits while its hold lasts."""
        claim = self._preemptors.get(preemptor_uid)
        if claim is None:
            return False
        if self.clock is None or self.hold_seconds is None:
            return True
        now = self.clock()
        if claim.waiting_until is None:
            claim.waiting_until = now + grace_seconds() + self.hold_seconds
        if now <= claim.waiting_until:
            return True
        self._lapse_preemptor(preemptor_uid)
        return False

    def keeps_room(self, preemptor_uid: str, *, seconds: float) -> bool:
        """Whether the preemptor, asked about again after its victims have left while its node
        still has its room, should get no victim elsewhere: for ``seconds`` from the first such
        ask (kube-scheduler's cache dropping the victims a moment after cellfit's watch did), then
        no longer, whatever kept kube-scheduler off the node (a taint FitGpp cannot see). The hold
        itself stays. Without a clock, while the hold lasts."""
        claim = self._preemptors.get(preemptor_uid)
        if claim is None:
            return False
        if self.clock is None:
            return True
        now = self.clock()
        if claim.room_kept_since is None:
            claim.room_kept_since = now
        return now - claim.room_kept_since < seconds

    def placed_elsewhere(self, preemptor_uid: str) -> None:
        """The pod's room is kept otherwise now (HiveD booked cells for it): its hold ends. Its
        record is not cleared: the preempt verb that booked the cells records HiveD's choice on
        the pod at once, replacing it (a clear written before it could take off a record equal to
        the new one), and a restarted replica keeps no hold for a pod HiveD booked cells for."""
        claim = self._preemptors.pop(preemptor_uid, None)
        if claim is not None:
            self._ended_preemptors[preemptor_uid] = (claim.node, claim.record)

    def apply_pod(self, pod: PodInfo) -> None:
        """Record a pod's latest state (every pod the watch shows, whatever its Job)."""
        if self._records_pods:
            self._store.record(pod)  # which ends an assumed pending state (PodStore.record)
        self._apply(pod)

    def _apply(self, pod: PodInfo) -> None:
        self._apply_preemptor(pod)
        if pod.owner is None or pod.owner.kind != "Job":
            return
        job = pod.owner.uid
        resumed = self._resumed.get(pod.uid)
        if _waiting(pod):
            assumed = self._store.assumed(pod.uid)
            # Else an event older than the binding cellfit made: the pod waits for no room.
            if resumed is None and (assumed is None or assumed.node_name is None):
                self._wait(job, pod.uid)
            return
        was_pending = self._forget(pod.uid)
        if resumed is not None and not resumed.confirmed and pod.node_name is not None:
            self._resume_ended(resumed.job, (resumed.victim,) if resumed.victim is not None else ())
        if pod.node_name is None or pod.phase in TERMINAL_PHASES:
            self._resumed.pop(pod.uid, None)  # nothing left to confirm or give back
            return
        if resumed is not None:
            resumed.confirmed = True
        elif was_pending:  # bound by someone else: a hold of its Job ends all the same
            self._end_one(job, pod.node_name, pod_uid=pod.uid, confirmed=True)

    def bound(self, pod: PodInfo, node_name: str) -> None:
        """This scheduler is binding the pod (the watch has not said so yet)."""
        claim = self._preemptors.pop(pod.uid, None)
        if claim is not None:
            self._binding_preemptors[pod.uid] = claim
        self._room_taken(pod, node_name)
        if pod.owner is None or pod.owner.kind != "Job" or pod.uid in self._resumed:
            return
        self._forget(pod.uid)
        self._end_one(pod.owner.uid, node_name, pod_uid=pod.uid, confirmed=False)

    def unbound(self, pod: PodInfo) -> None:
        """The binding announced by :meth:`bound` failed: the pod waits again, and so does the
        hold its binding ended. A binding the watch has confirmed stays."""
        claim = self._binding_preemptors.pop(pod.uid, None)
        if claim is not None:
            self._preemptors[pod.uid] = claim
        resumed = self._resumed.get(pod.uid)
        if resumed is None:
            # bound() took a Job's pod off its pending pods, and a pending event since was older
            # than the binding: it waits again, unless the watch shows it bound, ended or leaving.
            watched = self._store.get(pod.uid)
            if pod.owner is not None and pod.owner.kind == "Job" and (watched is None or _waiting(watched)):
                if watched is None:  # never watched (the bind verb read it from the API)
                    self._store.assume(structs.replace(pod, node_name=None, phase="Pending"))
                self._wait(pod.owner.uid, pod.uid)
            return
        if resumed.confirmed:
            return
        del self._resumed[pod.uid]
        self.displaced(job_uid=resumed.job, node_name=resumed.node, victim_uid=resumed.victim)
        waiting = structs.replace(pod, node_name=None, phase="Pending")
        if self._store.get(pod.uid) is None:  # never watched (the bind verb read it from the API)
            self._store.assume(waiting)
        self._apply(waiting)

    def _wait(self, job: str, pod_uid: str) -> None:
        """The Job's pod is pending: a hold of the Job keeps room for it."""
        self._pending.setdefault(job, set()).add(pod_uid)
        self._job_of_pending[pod_uid] = job

    def delete_pod(self, pod_uid: str) -> None:
        claim = self._preemptors.pop(pod_uid, None)
        if claim is not None:
            self._kept_off_ended(claim, "preemptor", pod_uid, claim.node, why="deleted")
        self._ended_preemptors.pop(pod_uid, None)
        self._binding_preemptors.pop(pod_uid, None)
        self._resumed.pop(pod_uid, None)
        self._forget(pod_uid)
        if self._records_pods:
            self._store.forget(pod_uid)

    def node_gone(self, node_name: str) -> None:
        """The node was deleted (or, once the nodes are listed, is not there): every hold on it
        ends, as no pod of its Job or preemptor can land there. Each resume hold is taken off its
        Job's record (:attr:`on_resume_ended`), so that no restart rebuilds it; a preemptor hold
        gives up as one that lapsed (its record cleared, its cells' booking ended) and is not
        rebuilt there; the pods either kept off are requeued (:attr:`on_kept_off_ended`). Before
        this, a Job's record naming a deleted node kept its hold for ever: it kept no pod off, so
        it never lapsed, and the Job's pending pod kept it waited for."""
        for job in [job for job, nodes in self._displaced.items() if node_name in nodes]:
            nodes = self._displaced[job]
            record = nodes.pop(node_name)
            if not nodes:
                del self._displaced[job]
            self._resume_ended(job, tuple(record.victims))
            self._kept_off_ended(record, "resume", job, node_name, why="node gone")
        for uid in [uid for uid, claim in self._preemptors.items() if claim.node == node_name]:
            self._give_up_preemptor(uid, why="node gone")

    def holds_for(self, *, job_uid: str, victim_uid: str) -> bool:
        """Whether the Job still has a resume hold for its preempted pod ``victim_uid``."""
        return any(victim_uid in record.victims for record in self._displaced.get(job_uid, {}).values())

    def held_nodes(self) -> set[str]:
        """The nodes any hold keeps room on."""
        nodes = {node for held in self._displaced.values() for node in held}
        return nodes | {claim.node for claim in self._preemptors.values()}

    def delete_job(self, job_uid: str) -> None:
        for node, record in self._displaced.pop(job_uid, {}).items():
            self._kept_off_ended(record, "resume", job_uid, node, why="deleted")
        for uid in self._pending.pop(job_uid, set()):
            self._job_of_pending.pop(uid, None)
            self._store.drop_assumed(uid, bound=False)
        for uid in [uid for uid, resumed in self._resumed.items() if resumed.job == job_uid]:
            del self._resumed[uid]

    # ------------------------------------------------------------------ decisions

    @property
    def active(self) -> bool:
        """Whether any pod has room kept for it (a cheap test before :meth:`kept_from`)."""
        return bool(self._displaced or self._preemptors)

    def kept_from(self, pod: PodInfo, *, free_on: Callable[[str], Resources | None]) -> dict[str, Keep]:
        """The nodes that keep ``pod`` off. ``free_on`` gives a node's free resources now
        (``None``: a node it does not know). Nothing is counted until :meth:`kept_off_nodes`."""
        if not self.active:
            return {}
        self._lapse()
        candidates: dict[str, list[tuple[str, PodInfo, bool]]] = {}  # node -> (holder, held pod, preemptor?)
        for uid, claim in self._preemptors_yielded_to(pod):
            candidates.setdefault(claim.node, []).append((uid, self._preemptor(uid, claim), True))
        if not (pod.owner is not None and pod.owner.uid in self._displaced) and not _is_trial(pod):
            for job, node, held in self._assignments():
                if _yields_to(pod, held):
                    candidates.setdefault(node, []).append((job, held, False))
        keeps: dict[str, Keep] = {}
        for node, held_pods in candidates.items():
            free = free_on(node)  # once per node: holds are grouped by node above
            if free is None or not pod.requests.fits_in(free):
                continue  # the pod cannot go there anyway: the placement engine says why
            kept = ZERO
            chosen: list[tuple[str, PodInfo, bool]] = []
            for entry in held_pods:  # preemptors first: they go before every resumed pod
                if (kept + entry[1].requests).fits_in(free):
                    kept = kept + entry[1].requests
                    chosen.append(entry)
            if not chosen:  # nothing held fits now: no room to keep, and a new spell starts later
                for holder, _, preemptor in held_pods:
                    self._record(holder, node, preemptor=preemptor).keeping_since = None
                continue
            if kept.fits_in(free - pod.requests):
                continue
            keeps[node] = Keep(
                reason=_keep_reason([held.key for _, held, p in chosen if p], [held.key for _, held, p in chosen if not p]),
                jobs=tuple(dict.fromkeys(holder for holder, _, p in chosen if not p)),
                preemptors=tuple(holder for holder, _, p in chosen if p),
            )
        return keeps

    def preemptor_room(self, pod: PodInfo) -> dict[str, Resources]:
        """Per node, the room held there for preemptors ``pod`` yields to: FitGpp must not
        promise it to ``pod`` again (kube-scheduler counts nominated pods the same way)."""
        room: dict[str, Resources] = {}
        for uid, claim in self._preemptors_yielded_to(pod):
            room[claim.node] = room.get(claim.node, ZERO) + self._preemptor(uid, claim).requests
        return room

    def kept_off_nodes(self, keeps: Mapping[str, Keep]) -> None:
        """``keeps`` (from :meth:`kept_from`) were offered and kept the pod off: count them and
        start their holds' clocks."""
        self.kept_off += len(keeps)
        for node, keep in keeps.items():
            for job in keep.jobs:
                if (displaced := self._displaced.get(job, {}).get(node)) is not None:
                    displaced.kept_any = True
            for uid in keep.preemptors:
                if (kept := self._preemptors.get(uid)) is not None:
                    kept.kept_any = True
        if self.clock is None:
            return
        now = self.clock()
        for node, keep in keeps.items():
            for job in keep.jobs:
                record = self._displaced.get(job, {}).get(node)
                if record is not None and record.keeping_since is None:
                    record.keeping_since = now
            for uid in keep.preemptors:
                claim = self._preemptors.get(uid)
                if claim is not None and claim.keeping_since is None:
                    claim.keeping_since = now

    def holds(self) -> list[Hold]:
        """Every preemptor's room, and every Job's room on every node that has a pod to keep it for."""
        self._lapse()
        grouped: dict[tuple[str, str], list[PodInfo]] = {}
        for job, node, held in self._assignments():
            grouped.setdefault((node, job), []).append(held)
        preemptors = [(claim.node, self._preemptor(uid, claim)) for uid, claim in self._preemptors.items()]
        found = [
            Hold(node=node, job=_job_key(preemptor), requests=preemptor.requests, pods=(preemptor.key,), kind="preemptor")
            for node, preemptor in preemptors
        ] + [
            Hold(node=node, job=_job_key(pods[0]), requests=_total(pods), pods=tuple(p.key for p in pods))
            for (node, _), pods in grouped.items()
        ]
        return sorted(found, key=lambda hold: (hold.node, hold.kind != "preemptor", hold.job, hold.pods))

    def stats(self) -> Mapping[str, int]:
        found = self.holds()
        preemptor = sum(1 for hold in found if hold.kind == "preemptor")
        return {
            "resumeHolds": len(found) - preemptor,
            "preemptorHolds": preemptor,
            "resumeHoldKeptOff": self.kept_off,
            "resumeHoldsLapsed": self.lapsed,
        }

    # ------------------------------------------------------------------ internals

    def _assignments(self) -> list[tuple[str, str, PodInfo]]:
        """(Job, node, pending pod): a Job's pending pods, in UID order, fill its holds in
        :func:`_in_victim_order`."""
        out: list[tuple[str, str, PodInfo]] = []
        for job, nodes in self._displaced.items():
            pending = self._pending.get(job)
            if not pending:
                continue
            waiting = [pod for pod in map(self._pending_pod, sorted(pending)) if pod is not None]
            for node in _in_victim_order(nodes):
                record = nodes[node]
                taken, waiting = waiting[: record.pods], waiting[record.pods :]
                out.extend((job, node, held) for held in taken)
        return out

    def _preemptors_yielded_to(self, pod: PodInfo) -> list[tuple[str, _PreemptorHold]]:
        """The preemptor holds ``pod`` must leave room for: of a priority no lower than its own,
        of its VC or with it opportunistic, and, of equal priority, older than a hold of its
        own (two preemptors each yielding to the other would keep both off the node)."""
        if not self._preemptors:
            return []
        own = self._preemptors.get(pod.uid)
        found = []
        for uid, claim in self._preemptors.items():
            preemptor = self._preemptor(uid, claim)
            if uid == pod.uid or not _yields_to(pod, preemptor):
                continue
            if own is not None and pod.priority == preemptor.priority and own.order < claim.order:
                continue
            found.append((uid, claim))
        return found

    def _apply_preemptor(self, pod: PodInfo) -> None:
        """A preemptor the watch shows bound, finished or leaving holds no room any more (one
        still pending is read from the pods, up to date), nor one that no longer carries the
        record its hold stands for (:meth:`_follow_record`)."""
        if pod.node_name is not None or pod.phase in TERMINAL_PHASES or pod.terminating:
            claim = self._preemptors.pop(pod.uid, None)
            self._binding_preemptors.pop(pod.uid, None)
            if claim is not None and pod.node_name is None:  # leaving, or ended, unbound
                self._kept_off_ended(claim, "preemptor", pod.uid, claim.node, why="deleted")
            return
        claim = self._preemptors.get(pod.uid)
        if claim is not None:
            claim.watched = True
            self._follow_record(pod, claim)

    def _follow_record(self, pod: PodInfo, claim: _PreemptorHold) -> None:
        """A hold standing for a record the watch has shown on the pod ends once the pending pod
        carries it no more: taken off, the hold it stood for ended without a binding on the
        replica where it kept pods off (it lapsed, or its wait for stuck victims ran out;
        scheduler/cluster/preemptor_records.py), and a standby that rebuilt it, or the replica
        that decided it, would keep the node's room again after a failover with no record left
        to say why; so it is not rebuilt on that node either, as one that lapsed here. Replaced
        by another replica's later decision, the hold the pod's record rebuilds follows that one
        (:meth:`rebuild_preemptor`). Its record is not this hold's to clear any more."""
        if claim.record is None:
            return
        carried = pod.annotations.get(ANNOTATION_PREEMPTOR_HOLD)
        if carried == claim.record:
            claim.record_seen = True
            return
        if not claim.record_seen:
            return  # the decision's own record is not written yet, or the event is older than the write
        del self._preemptors[pod.uid]
        if not carried:
            self._ended_preemptors[pod.uid] = (claim.node, claim.record)
            self._kept_off_ended(claim, "preemptor", pod.uid, claim.node, why="ended elsewhere")
        if self.cells is not None:
            self.cells.preemptor_hold_ended(pod.uid)

    def _book_cells(self, preemptor: PodInfo, *, node_name: str, record: str | None) -> None:
        """Have the placement engine book the preemptor's cells once the victims its record
        names have left (a hold without a record, rebuilt from a nomination, books none)."""
        if self.cells is None or record is None:
            return
        try:
            decided = records.decode(record)
        except InvalidAnnotation:
            return  # not the pod's to keep: PreemptionEvidence reads no hold from it either
        if decided is not None:
            self.cells.book_for_preemptor(preemptor, node=node_name, victims=frozenset(decided.victims))

    def _preemptor(self, uid: str, claim: _PreemptorHold) -> PodInfo:
        """The preemptor's latest state: as FitGpp was given it, until the watch shows it again
        (the record may hold an older state than the one FitGpp decided for)."""
        return (self._store.get(uid) if claim.watched else None) or claim.seen

    def _pending_pod(self, uid: str) -> PodInfo | None:
        return self._store.current(uid)

    def _record(self, holder: str, node: str, *, preemptor: bool) -> _Displacement | _PreemptorHold:
        return self._preemptors[holder] if preemptor else self._displaced[holder][node]

    def _forget(self, pod_uid: str) -> bool:
        self._store.drop_assumed(pod_uid, bound=False)
        job = self._job_of_pending.pop(pod_uid, None)
        if job is None:
            return False
        pending = self._pending[job]
        pending.discard(pod_uid)
        if not pending:
            del self._pending[job]
        return True

    def _room_taken(self, pod: PodInfo, node_name: str) -> None:
        """A pod that goes before the held ones (a trial pod, say) took room on their node:
        their holds had no room to keep, so the time they keep pods off starts again."""
        for job, node, held in self._assignments():
            if node == node_name and (_is_trial(pod) or not _yields_to(pod, held)):
                self._displaced[job][node].keeping_since = None

    def _end_one(self, job: str, node_name: str, *, pod_uid: str, confirmed: bool) -> None:
        """A pod of ``job`` was bound to ``node_name``: one of its holds ends, the one on that
        node if it has one, else the first in :func:`_in_victim_order`."""
        nodes = self._displaced.get(job)
        if not nodes:
            return
        node = node_name if node_name in nodes else _in_victim_order(nodes)[0]
        record = nodes[node]
        record.pods -= 1
        record.gone = max(record.gone - 1, 0)
        # The smallest UID: every replica holding the same victims ends the same one's hold.
        victim = min(record.victims) if record.victims else None
        if victim is not None:
            record.victims.remove(victim)
        if record.pods <= 0:
            del nodes[node]
            if not nodes:
                del self._displaced[job]
        self._resumed[pod_uid] = _Resumed(job=job, node=node, confirmed=confirmed, victim=victim)

    def _lapse(self) -> None:
        if self.clock is None or self.hold_seconds is None:
            return
        now = self.clock()
        for uid in [u for u, c in self._preemptors.items() if c.keeping_since is not None and now - c.keeping_since > self.hold_seconds]:
            self._lapse_preemptor(uid)
        for job in list(self._displaced):
            nodes = self._displaced[job]
            for node in [n for n, r in nodes.items() if self._expired(r, waited_for=job in self._pending, now=now)]:
                record = nodes.pop(node)
                self._resume_ended(job, tuple(record.victims))
                self.lapsed += 1
                self._kept_off_ended(record, "resume", job, node, why="lapsed")
            if not nodes:
                del self._displaced[job]

    def expire(self) -> None:
        """The holds past their time given up now (they are otherwise looked at when a filter
        asks or the holds are listed: kube-scheduler, having parked the pods they kept off, may
        ask nothing until something requeues them). Its driver calls it now and then."""
        if self.active:
            self._lapse()

    def _kept_off_ended(self, hold: _Displacement | _PreemptorHold, kind: str, holder: str, node: str, *, why: str) -> None:
        if hold.kept_any and self.on_kept_off_ended is not None:
            self.on_kept_off_ended(kind, holder, node, why)

    def _resume_ended(self, job: str, victims: tuple[str, ...]) -> None:
        if victims and self.on_resume_ended is not None:
            self.on_resume_ended(job, victims)

    def _lapse_preemptor(self, uid: str) -> None:
        self.lapsed += 1
        self._give_up_preemptor(uid, why="lapsed")

    def _give_up_preemptor(self, uid: str, *, why: str) -> None:
        """The preemptor's hold gives up: not rebuilt on its node while this process lives, and
        its record told (:attr:`on_record_ended`), so that no restart rebuilds it either."""
        claim = self._preemptors.pop(uid)
        self._ended_preemptors[uid] = (claim.node, claim.record)
        self._kept_off_ended(claim, "preemptor", uid, claim.node, why=why)
        if self.cells is not None:
            self.cells.preemptor_hold_ended(uid)
        if claim.record is not None and self.on_record_ended is not None:
            self.on_record_ended(self._store.get(uid) or claim.seen, claim.record)

    def _expired(self, record: _Displacement, *, waited_for: bool, now: float) -> bool:
        """Whether a hold has kept pods off for ``hold_seconds``, or has waited that long, its
        victims gone, for a pod its Job never made (a Job the preemption failed, or finished)."""
        assert self.hold_seconds is not None
        if waited_for or record.gone < record.pods:
            record.idle_since = None
        elif record.idle_since is None:
            record.idle_since = now
        idle = record.idle_since is not None and now - record.idle_since > self.hold_seconds
        kept_long = record.keeping_since is not None and now - record.keeping_since > self.hold_seconds
        return idle or kept_long


def _keep_reason(preemptors: list[str], resumed: list[str]) -> str:
    parts = []
    if preemptors:
        parts.append(f"its free resources are kept for {_listed(preemptors)}, for which FitGpp preempted pods there "
                     "(kube-scheduler nominated it to this node)")
    if resumed:
        lead = "and for" if preemptors else "its free resources are kept for"
        parts.append(f"{lead} {_listed(resumed)}, of a best-effort Job preempted there and now resuming "
                     "(FitGpp resumes preempted jobs first)")
    return " ".join(parts)


def _listed(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _is_trial(pod: PodInfo) -> bool:
    """Trial pods go before every best-effort pod, resumed or not, whatever their priority."""
    return job_class_or_best_effort(pod.labels) is JobClass.TRIAL


def _yields_to(pod: PodInfo, held: PodInfo) -> bool:
    """Whether ``pod`` must leave room for the held pod ``held``: the held pod could claim the
    cells ``pod`` would take there."""
    return pod.priority <= held.priority and may_claim_cells(held, pod)


def _job_key(pod: PodInfo) -> str:
    return f"{pod.namespace}/{pod.owner.name}" if pod.owner is not None else pod.key


def _total(pods: list[PodInfo]) -> Resources:
    total = ZERO
    for pod in pods:
        total = total + pod.requests
    return total


def _waiting(pod: PodInfo) -> bool:
    """Pending: not bound, not ended, not leaving."""
    return pod.node_name is None and pod.phase not in TERMINAL_PHASES and not pod.terminating


@dataclass(frozen=True, slots=True)
class WaitingPreemptor:
    """A pending pod the pods show waiting for its preemption's victims to leave ``node``
    (:meth:`PreemptionEvidence.preemptors_waiting`)."""

    pod: PodInfo
    node: str
    record: str | None  # the pod's record (records.py) this was read from; None: its nomination
    victims: tuple[str, ...]  # UIDs of its victims the watch still shows
    # Of the victims its record names whose Job resumes (records.py ``resumes``), those gone, by
    # UID -> their Job's UID: nothing else is left of them to rebuild their Jobs' resume holds from
    resumed: Mapping[str, str] = field(default_factory=dict)
    # The Jobs of the gangs its record says FitGpp took whole (records.py ``gangs``): under HiveD
    # a restart recovers their slots from a member still running, which no longer are theirs
    gangs: tuple[str, ...] = ()


@dataclass(slots=True)
class PreemptionEvidence:
    """What the pods show of this scheduler's preemptions in progress (module docstring, "After
    a restart"): its victims still terminating, by node, its trial pods nominated to a node, and
    those that carry the record of FitGpp's decision for them (``records.py``).
    ``scheduler_name``: the kube-scheduler profile cellfit serves; ``present``: whether the
    watch shows a pod, by UID (bound pods are listed before pending ones)."""

    scheduler_name: str
    present: Callable[[str], bool]
    _victims_on: dict[str, set[str]] = field(default_factory=dict)  # node -> terminating victims' UIDs
    _victim_node: dict[str, str] = field(default_factory=dict)  # victim UID -> node
    _nominated: dict[str, PodInfo] = field(default_factory=dict)  # preemptor UID -> the pod, nominated
    _recorded: dict[str, tuple[PodInfo, PreemptorRecord]] = field(default_factory=dict)  # preemptor UID -> the pod, its record

    def apply_pod(self, pod: PodInfo) -> None:
        self.delete_pod(pod.uid)
        if self.is_victim(pod):
            assert pod.node_name is not None  # is_victim: bound
            self._victims_on.setdefault(pod.node_name, set()).add(pod.uid)
            self._victim_node[pod.uid] = pod.node_name
            return
        if self._nomination(pod) is not None:
            self._nominated[pod.uid] = pod
        record = self.record_of(pod)
        if record is not None:
            self._recorded[pod.uid] = (pod, record)

    def delete_pod(self, pod_uid: str) -> None:
        self._nominated.pop(pod_uid, None)
        self._recorded.pop(pod_uid, None)
        node = self._victim_node.pop(pod_uid, None)
        if node is not None:
            victims = self._victims_on[node]
            victims.discard(pod_uid)
            if not victims:
                del self._victims_on[node]

    def is_victim(self, pod: PodInfo) -> bool:
        """A pod on its way out because this scheduler preempted it (kube-scheduler's
        ``PodTerminatingByPreemption``, for this scheduler's preemptions only)."""
        disruption = pod.disruption
        return (
            pod.terminating
            and pod.holds_resources
            and disruption is not None
            and disruption.by_preemption
            and disruption.message.startswith(f"{self.scheduler_name}:")
        )

    def preemptors_waiting(self) -> list[WaitingPreemptor]:
        """Each pending trial pod whose recorded preemption (the node FitGpp chose,
        ``records.py``) is in progress (:meth:`_in_progress`), and each other one nominated to a
        node where victims still leave (kube-scheduler clears the nomination when an attempt
        meets cellfit down; the record stays)."""
        found: dict[str, WaitingPreemptor] = {}
        for pod, record in self._recorded.values():
            if self._in_progress(record):
                present = tuple(uid for uid in record.victims if self.present(uid))
                resumed = {uid: job for uid, job in record.resumes.items() if not self.present(uid)}
                found[pod.uid] = WaitingPreemptor(pod=pod, node=record.node, record=pod.annotations[ANNOTATION_PREEMPTOR_HOLD],
                                                  victims=present, resumed=resumed, gangs=record.gangs)
        for pod in self._nominated.values():
            node = self._nomination(pod)
            if pod.uid not in found and node is not None and node in self._victims_on:
                found[pod.uid] = WaitingPreemptor(pod=pod, node=node, record=None, victims=tuple(sorted(self._victims_on[node])))
        return list(found.values())

    def record_of(self, pod: PodInfo) -> PreemptorRecord | None:
        """The preemption recorded on a pending pod of this scheduler (a trial pod's by FitGpp, a
        guaranteed pod's by HiveD's reclaim); None for any other pod, and for a record that does
        not read (only cellfit writes it, the chart's state policy refuses anyone else: one that
        does not read comes from another version, and the pod is as one without a record, its
        nomination still trusted)."""
        if pod.scheduler_name != self.scheduler_name or not _waiting(pod):
            return None
        try:
            return records.decode(pod.annotations.get(ANNOTATION_PREEMPTOR_HOLD, ""))
        except InvalidAnnotation:
            return None

    def _in_progress(self, record: PreemptorRecord) -> bool:
        """Whether the recorded preemption still keeps the node for its preemptor: one of its
        victims still leaves that node, preempted by this scheduler, or every one of them is gone
        (exited: kube-scheduler's attempt reaches the extender, and so clears the nomination when
        cellfit is down, only once its cache no longer counts the victims). Not while one of them
        runs on, not deleted yet (cellfit restarted between its answer and kube-scheduler's
        deletion: the hold comes back once the watch shows it leaving), or leaves another node."""
        if any(self._victim_node.get(uid) == record.node for uid in record.victims):
            return True
        return not any(self.present(uid) for uid in record.victims)

    def _nomination(self, pod: PodInfo) -> str | None:
        """The node a pending trial pod of this scheduler is nominated to; None for any other pod."""
        if pod.scheduler_name != self.scheduler_name or not _waiting(pod) or not _is_trial(pod):
            return None
        return pod.nominated_node_name


def _in_victim_order(nodes: Mapping[str, _Displacement]) -> list[str]:
    """A Job's hold nodes by their smallest victim UID (then name): an order every replica
    holding the same victims knows alike. The order the preemptions came in is the deciding
    replica's alone; a replica that rebuilt the holds from the Job's record
    (``cellfit.io/resume-holds``) would end, and fill, other holds than the leader."""
    return sorted(nodes, key=lambda node: (min(nodes[node].victims, default=""), node))
