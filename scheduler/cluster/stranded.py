"""Guaranteed pods kube-scheduler never brings to cellfit's filter, and the cells booked for them.

kube-scheduler calls its extenders only with the nodes its own filters passed, and preempts only
pods of lower priority. A guaranteed pod whose VC's cells opportunistic pods of equal or higher
priority fill finds every node full of GPUs, so cellfit never sees it: no booking, nothing for
the reclaim (scheduler/cluster/reclaim.py) to act on. Here the leader finds such pods in the
pending pods kube-scheduler marked unschedulable, and books their cells itself on a node
kube-scheduler will accept them on once the opportunistic pods are gone:

- its node selector, node affinity, taints and cordon (scheduler/kube/node_rules.py);
- it fits there as kube-scheduler's NodeResourcesFit counts: its cores and memory, and one pod
  more against the node's allocatable ``pods`` (a missing one is 0), beside the pods that stay
  (every pod holding resources on the node, terminating ones too, or whose booked cells are
  there, but the opportunistic ones; after booking, all but the booking's own victims) and the
  pending pods kube-scheduler nominated to the node (``status.nominatedNodeName``) of equal or
  higher priority, the GPUs of those nominated pods too (HiveD's cells place the others');
- no opportunistic pod there stays for good: one of another scheduler (cellfit may not delete
  it) whose priority is not lower (kube-scheduler will not preempt it) keeps the node out, and
  a booking with such a victim is given back;
- its ``preemptionPolicy`` is not Never (kube-scheduler preempts nobody for such a pod); such a
  pod is told so (a CellsNotReclaimed Event) only when reclaiming opportunistic pods is what would
  place it, not while it waits behind guaranteed use alone.

Cells booked here whose victims are gone while kube-scheduler still finds the pod unschedulable
after it has surely retried it (``afterSeconds``, at least 330 s) are given back: kube-scheduler refuses the node for what these rules do not
check, and the log says so; nothing more is booked for the pod while it stays unschedulable.

The pending pods kube-scheduler marked unschedulable are read from the term's
:class:`~scheduler.cluster.pending.PendingPods` (listed once a term, then followed by a watch of
them alone, shared with the requeue nudge); given none, each round lists them.

Every replica serves its own kube-scheduler, and the one that leads may call a replica that is
not this leader: the booking is recorded on the pod (annotation ``cellfit.io/reclaim-booking``,
:class:`ReclaimRecords`) before any victim is deleted, and every replica's engine keeps the cells
it names for the pod while the pod is pending and the record is there. Giving the cells back
clears the record (retried each round until it is gone); a new leader takes over the give-back
of the pods it finds recorded.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Literal, Mapping, Protocol, Sequence

from scheduler.cells.expiry import REASON as EXPIRY_REASON
from scheduler.cells.capabilities import GuaranteeKeeping, WaitingGuarantee
from scheduler.cells.planning import Unplaceable
from scheduler.constants import ANNOTATION_RECLAIM_BOOKING, LABEL_PRIORITY, PRIORITY_OPPORTUNISTIC
from scheduler.cluster.exchange.objects import pod_status_path
from scheduler.cluster.pending import PendingPods, marked_unschedulable
from scheduler.core.model import TERMINAL_PHASES, PodInfo
from scheduler.core.resources import ZERO, Resources, resources_from_quantities, whole_units
from scheduler.errors import CellfitError, KubernetesApiError
from scheduler.kube import node_rules

log = logging.getLogger(__name__)

_NODES_PATH = "/api/v1/nodes?resourceVersion=0"
NEVER_PREEMPT = "Never"
# Events on a stranded pod: why nothing is reclaimed for it; its booking given back (the reason
# the booking sweep's releases carry too).
NOT_RECLAIMED = "CellsNotReclaimed"
BOOKING_RELEASED = EXPIRY_REASON
# How long a round waits for the pending pods' first list (the reclaim's period): a round whose
# list has not come is skipped, as one whose list failed.
FIRST_LIST_WAIT_SECONDS = 5.0
# What kube-scheduler may refuse a booked node for that the rules here do not check: a pod asking
# for a host port or a resource other than cores, memory, GPUs and ephemeral storage is never
# booked (node_rules.unmodelled), so what is left is this.
UNCHECKED = ("such as its ephemeral storage, the required anti-affinity of the pods already there, or a change to "
             "the node since it was listed")
# kube-scheduler retries a pod it parked as unschedulable after at most 5 minutes
# (podMaxInUnschedulablePodsDuration) and a flush period of 30 s, whatever else moves it: a pod
# still unschedulable that long after its cells were freed is refused them, not merely not retried.
KUBE_SCHEDULER_RETRY_SECONDS = 330.0


class PodPatch(Protocol):
    """A pod's annotation written (scheduler.cluster.api.KubernetesApi)."""

    def write_path(
        self, method: Literal["POST", "PUT", "PATCH"], path: str, body: Any, *, content_type: str = "application/json"
    ) -> bytes: ...


class StrandedApi(PodPatch, Protocol):
    """The API calls this makes (scheduler.cluster.api.KubernetesApi); the pending pods' list
    only when it is given no view of them."""

    def list_pending_pods(self, scheduler_name: str) -> bytes: ...

    def list_path(self, path: str) -> bytes: ...

    def create_event(self, *, namespace: str, pod_name: str, pod_uid: str, reason: str, message: str, warning: bool = False) -> None: ...


class PodLookup(Protocol):
    """A pod by UID, as the watch shows it (scheduler.core.pods.PodStore)."""

    def get(self, uid: str) -> PodInfo | None: ...


class PodIndex(PodLookup, Protocol):
    """The pods as the watch shows them (scheduler.core.pods.PodStore)."""

    def pods(self) -> Iterator[PodInfo]: ...


class ReclaimRecords:
    """The cells the leader's reclaim booked for a pending pod, recorded on the pod (annotation
    ``cellfit.io/reclaim-booking``, the engine's ``reclaim_record``) so that every replica's engine
    keeps them for it, rewritten when they move and cleared when they are given back (the
    leader's round, scheduler/cluster/reclaim.py). Each write is guarded by the pod's
    UID (a pod re-created under the name is left alone), and goes through the pod's status
    subresource, which takes a pod's labels and annotations too: the one power over pods'
    objects cellfit's ClusterRole holds beyond deleting them (its DisruptionTarget condition),
    rather than patching the whole pod, spec included. What was written is remembered until the
    watch shows it, so a watch that lags the write costs no second write."""

    def __init__(self, *, api: PodPatch) -> None:
        self._api = api
        self._written: dict[str, str | None] = {}  # pod UID -> the record written, not yet watched

    def carried(self, pod: PodInfo) -> str | None:
        """The record the pod carries: as written here and not yet watched, else as watched."""
        return self._written[pod.uid] if pod.uid in self._written else pod.annotations.get(ANNOTATION_RECLAIM_BOOKING)

    def carrying(self, pods: PodIndex) -> list[PodInfo]:
        """The pending pods, not being deleted, that carry a record (:meth:`carried`): those the
        leader's round keeps in line with the engine's booking. Under the engine lock."""
        return [pod for pod in pods.pods()
                if pod.node_name is None and not pod.terminating and pod.phase not in TERMINAL_PHASES and self.carried(pod) is not None]

    def write(self, pod: PodInfo, record: str | None, *, quiet: bool = False) -> bool:
        """Make the pod carry ``record`` (None: none); whether it does, as watched or written now.
        A failure is logged, naming the pod (``quiet``: at DEBUG, its caller warned of it before)."""
        if self.carried(pod) == record:
            return True
        body = {"metadata": {"uid": pod.uid, "annotations": {ANNOTATION_RECLAIM_BOOKING: record}}}
        try:
            self._api.write_path("PATCH", pod_status_path(pod.namespace, pod.name), body, content_type="application/merge-patch+json")
        except CellfitError as error:
            if record is None and isinstance(error, KubernetesApiError) and error.status == 404:
                return True  # the pod is gone, and its record with it
            (log.debug if quiet else log.warning)(
                "the reclaim's booking was not recorded on the pod: nothing is deleted for it until it is"
                if record is not None else "the reclaim's record of cells given back was not cleared from the pod: retried",
                extra={"pod": pod.key, "annotation": ANNOTATION_RECLAIM_BOOKING, "reason": str(error)})
            return False
        self._written[pod.uid] = record
        return True

    def forget_shown(self, pods: PodLookup) -> None:
        """Forget what was written on pods the watch shows with it, or no longer shows: the
        watch is the record's word from then on. Under the engine lock."""
        self._written = {uid: record for uid, record in self._written.items()
                         if (pod := pods.get(uid)) is not None and pod.annotations.get(ANNOTATION_RECLAIM_BOOKING) != record}


def unschedulable(raw_pod_list: bytes) -> list[node_rules.ConstrainedPod]:
    """The pods of a PodList that kube-scheduler found unschedulable and are not being deleted."""
    return [pod for pod in node_rules.pods_of(raw_pod_list) if marked_unschedulable(pod)]


def opportunistic(pod: PodInfo) -> bool:
    return pod.labels.get(LABEL_PRIORITY) == PRIORITY_OPPORTUNISTIC


def reclaimable(pod: PodInfo, *, scheduler_name: str) -> bool:
    """An opportunistic pod of cellfit's profile, not terminating already: one the reclaim may delete."""
    return opportunistic(pod) and pod.scheduler_name == scheduler_name and not pod.terminating


def immovable(victim: PodInfo | None, *, waiting: PodInfo, scheduler_name: str) -> bool:
    """Whether a victim stays on the waiting pod's cells for good: cellfit may not delete it
    (not :func:`reclaimable`) and kube-scheduler will not preempt it (priority not lower)."""
    return (victim is not None and not victim.terminating and not reclaimable(victim, scheduler_name=scheduler_name)
            and victim.priority >= waiting.priority)


@dataclass(frozen=True)
class Load:
    """What pods ask of a node: their requests, and how many they are (kube-scheduler's
    NodeResourcesFit counts every pod on a node against its allocatable ``pods``)."""

    requests: Resources = ZERO
    pods: int = 0

    @classmethod
    def of(cls, pods: Iterable[PodInfo]) -> Load:
        requests, count = ZERO, 0
        for pod in pods:
            requests, count = requests + pod.requests, count + 1
        return cls(requests=requests, pods=count)

    def __add__(self, other: Load) -> Load:
        return Load(requests=self.requests + other.requests, pods=self.pods + other.pods)

    def __sub__(self, other: Load) -> Load:
        return Load(requests=self.requests - other.requests, pods=self.pods - other.pods)


@dataclass
class NodeUse:
    """What the pods holding resources on one node ask of it, the opportunistic ones' share, the
    highest priority of the opportunistic GPU pods there that the reclaim may not delete, and the
    pending pods kube-scheduler nominated to the node (not counted in ``held``)."""

    held: Load = Load()
    opportunistic: Load = Load()
    kept_priority: int | None = None
    nominated: list[PodInfo] = field(default_factory=list)


def node_use(pods: Iterable[PodInfo], *, booked: Mapping[str, str], scheduler_name: str) -> dict[str, NodeUse]:
    """Each node's use: the pods bound there, the pending pods whose cells are ``booked`` there
    (pod UID -> node), which kube-scheduler will bind there, and the pending pods nominated there."""
    use: dict[str, NodeUse] = {}
    for pod in pods:
        node = _node_of(pod, booked=booked)
        if node is not None:
            entry = use.setdefault(node, NodeUse())
            entry.held = entry.held + Load.of((pod,))
            if opportunistic(pod):
                entry.opportunistic = entry.opportunistic + Load.of((pod,))
                if pod.requests.gpus and not pod.terminating and not reclaimable(pod, scheduler_name=scheduler_name):
                    entry.kept_priority = max(pod.priority, entry.kept_priority if entry.kept_priority is not None else pod.priority)
        nominated = _nominated_node(pod)
        if nominated is not None and nominated != node:  # a pod booked where it is nominated counts once
            use.setdefault(nominated, NodeUse()).nominated.append(pod)
    return use


def _nominated_node(pod: PodInfo) -> str | None:
    """The node kube-scheduler's preemption nominated the pending pod to (its room held there)."""
    return pod.nominated_node_name if pod.node_name is None and pod.phase not in TERMINAL_PHASES else None


def nominated_load(entry: NodeUse, *, waiting: PodInfo) -> Load:
    """What the pods nominated to the node ask of it when kube-scheduler filters it for
    ``waiting``: those of equal or higher priority, the pod itself aside (its addGENominatedPods)."""
    return Load.of(p for p in entry.nominated if p.uid != waiting.uid and p.priority >= waiting.priority)


def _node_of(pod: PodInfo, *, booked: Mapping[str, str]) -> str | None:
    """The node whose resources the pod holds, or will once bound there (its booked cells')."""
    if pod.holds_resources:
        return pod.node_name
    return None if pod.phase in TERMINAL_PHASES else booked.get(pod.uid)


def may_empty(entry: NodeUse, *, waiting: PodInfo) -> bool:
    """Whether no opportunistic pod on the node would stay for good (:func:`immovable`)."""
    return entry.kept_priority is None or entry.kept_priority < waiting.priority


@dataclass(frozen=True)
class SizedNode:
    """A node as listed, with its allocatable resources and pod count read once per list."""

    node: node_rules.TaintedNode
    allocatable: Resources
    pods: int


def _cores_and_memory(resources: Resources) -> Resources:
    # HiveD's cells place the GPUs of the pods on the node (see room_for for the nominated ones').
    return Resources(cpu_millis=resources.cpu_millis, memory_bytes=resources.memory_bytes)


def fits(pod: PodInfo, *, node: SizedNode, staying: Load) -> bool:
    """Whether the pod's cores and memory fit on the node beside ``staying``, and one pod more
    within the node's pod limit (kube-scheduler's NodeResourcesFit: "Too many pods")."""
    need = staying + Load.of((pod,))
    return _cores_and_memory(need.requests).fits_in(_cores_and_memory(node.allocatable)) and need.pods <= node.pods


def room_for(pod: PodInfo, *, node: SizedNode, entry: NodeUse, leaving: Load) -> bool:
    """Whether kube-scheduler's NodeResourcesFit takes the pod on the node once ``leaving`` is
    gone, counting the pods nominated there as it does. Their GPUs too: HiveD books the pod's
    cells among those only opportunistic pods hold, which a nominated pod it has not booked
    there waits for as well, so those, the GPUs of the pods that stay for good (every pod but
    the opportunistic ones) and the pod's must fit in the node's."""
    nominated = nominated_load(entry, waiting=pod)
    kept_gpus = (entry.held - entry.opportunistic).requests.gpus
    return (fits(pod, node=node, staying=entry.held - leaving + nominated)
            and kept_gpus + nominated.requests.gpus + pod.requests.gpus <= node.allocatable.gpus)


def sized(node: node_rules.TaintedNode, *, gpu_resource: str) -> SizedNode | None:
    """The node with its allocatable resources and pods; None when it has no allocatable
    resources or one is malformed. A missing ``pods`` is 0, as kube-scheduler reads it: no pod fits."""
    quantities = node.status.allocatable if node.status is not None else None
    if not quantities:
        return None
    field_path = f"node {node.metadata.name} status.allocatable"
    pods = quantities.get("pods")
    try:
        return SizedNode(node=node, allocatable=resources_from_quantities(quantities, gpu_resource=gpu_resource, field=field_path),
                         pods=whole_units(pods, field=f"{field_path}.pods") if pods is not None else 0)
    except CellfitError:
        return None


@dataclass(frozen=True)
class Booked:
    """Cells booked for a stranded pod."""

    pod: PodInfo
    waiting: WaitingGuarantee


class StrandedGuarantees:
    """Finds the stranded guaranteed pods and books their cells (one call per round, on the
    leader). ``after_seconds``: how long kube-scheduler has had a pod unschedulable, as this
    leader saw it, before its cells are planned among the nodes it may use (a pod HiveD places
    there without victims is kube-scheduler's business: nothing is booked); a pod with nothing
    booked is tried again after as long. ``pending``: the term's view of the pending pods, which
    its owner starts and stops (None: each round lists them)."""

    def __init__(
        self, *, api: StrandedApi, engine: GuaranteeKeeping, pods: PodIndex, lock: threading.RLock, scheduler_name: str,
        gpu_resource: str, after_seconds: float, pending: PendingPods | None = None,
    ) -> None:
        if pending is not None and not pending.constrained:
            raise ValueError("the reclaim reads the pending pods' specs: its view must be built with constrained=True")
        self._api = api
        self._pending = pending
        self._engine = engine
        self._pods = pods
        self._lock = lock
        self._scheduler_name = scheduler_name
        self._gpu_resource = gpu_resource
        self._after_seconds = after_seconds
        self._since: dict[str, float] = {}  # pod UID -> when this leader first saw it unschedulable
        self._next_try: dict[str, float] = {}  # pod UID -> not tried again before
        self._told: set[str] = set()  # pods the log has said why they are left as they are
        self._told_unplaceable: set[str] = set()  # pods the log has said HiveD can never place as written
        # Pods whose cells this leader booked -> since when their victims have been gone (None: not yet)
        self._booked: dict[str, float | None] = {}
        # Pods kube-scheduler still refused once their cells were free: they need what the rules
        # do not see, and another booking would delete for nothing again
        self._refused: set[str] = set()
        self._node_list: Sequence[SizedNode] | None = None
        self._nodes_listed_at = 0.0
        self.records = ReclaimRecords(api=api)
        # Pods whose cells were given back and whose record is still to be cleared
        self._clearing: set[str] = set()

    def book(self, *, now: float) -> list[Booked]:
        """One look: the cells booked now."""
        pending = self._unschedulable()
        self._since = {p.metadata.uid: self._since.get(p.metadata.uid, now) for p in pending}
        self._next_try = {uid: at for uid, at in self._next_try.items() if uid in self._since and at > now}
        self._told &= self._since.keys()
        self._told_unplaceable &= self._since.keys()
        self._give_back_unused(now=now)
        self.clear_given_back()
        due = [p for p in pending if now - self._since[p.metadata.uid] >= self._after_seconds
               and p.metadata.uid not in self._next_try and p.metadata.uid not in self._refused]
        for pod in due:
            # A queue of pods waiting for their own VC's quota is looked at once per wait, not
            # every round, and the lock is taken per pod: the verbs wait for one plan at most.
            self._next_try[pod.metadata.uid] = now + self._after_seconds
        due = [p for p in due if self._candidate(p)]
        if not due:
            return []
        nodes = self._nodes(now=now)
        with self._lock:
            # Once per round, not per pod: at 5,000 nodes the pods are tens of thousands.
            use = node_use(self._pods.pods(), booked=self._engine.booked_nodes(), scheduler_name=self._scheduler_name)
        allowed: dict[bytes, list[SizedNode]] = {}  # a Job's pods share their constraints
        booked = []
        for pod in due:
            constraints = node_rules.placement_key(pod.spec)
            if constraints not in allowed:
                allowed[constraints] = [sized for sized in nodes if node_rules.why_not(pod.spec, sized.node) is None]
            done = self._book_one(pod, allowed[constraints], use)
            if done is not None and self._recorded(done):
                booked.append(done)
                self._booked[done.pod.uid] = None
        return booked

    def _unschedulable(self) -> Sequence[node_rules.ConstrainedPod]:
        """The pending pods kube-scheduler marked unschedulable now. Raises
        :class:`~scheduler.errors.KubernetesApiError` when they are not read (the round is skipped)."""
        if self._pending is None:
            return unschedulable(self._api.list_pending_pods(self._scheduler_name))
        pods = self._pending.marked_unschedulable(wait=FIRST_LIST_WAIT_SECONDS)
        if pods is None:  # the view's reflector logs why, and retries
            raise KubernetesApiError("the pending pods are not listed yet")
        return pods

    def _recorded(self, booked: Booked) -> bool:
        """Record the booking on the pod, for every replica's engine, before any victim is
        deleted; a booking that could not be recorded is given back (tried again after
        ``after_seconds``), so that no replica keeps cells the others do not."""
        with self._lock:
            record = self._engine.reclaim_record(booked.pod.uid)
        if record is not None and self.records.write(booked.pod, record):
            return True
        with self._lock:
            self._engine.cancel_reclaim(booked.pod.uid)
        return False

    def _give_back_unused(self, *, now: float) -> None:
        """Give back the cells booked here for a pod that kube-scheduler has still found
        unschedulable once it has surely retried it since their victims went (``after_seconds``,
        and at least :data:`KUBE_SCHEDULER_RETRY_SECONDS`): it refuses the node for what the rules
        do not check, and the cells would stay booked for nothing. The pod is planned
        afresh no more while it stays unschedulable: its cells would fill again and be reclaimed
        again for nothing, on that node or the next."""
        self._booked = {uid: since for uid, since in self._booked.items() if uid in self._since}
        self._refused &= self._since.keys()
        given_back: list[tuple[PodInfo, str]] = []
        with self._lock:
            booked = self._engine.booked_nodes()
            self._adopt_recorded(booked)
            if not self._booked:
                return
            waiting = {w.pod_uid for w in self._engine.waiting_guarantees()}
            for uid, since in list(self._booked.items()):
                if uid not in booked:
                    del self._booked[uid]
                elif uid in waiting or since is None:
                    self._booked[uid] = None if uid in waiting else now
                elif now - since >= max(self._after_seconds, KUBE_SCHEDULER_RETRY_SECONDS):
                    del self._booked[uid]
                    self._engine.cancel_reclaim(uid)
                    self._refused.add(uid)
                    info = self._pods.get(uid)
                    log.warning("cells booked for a stranded guaranteed pod are given back: their opportunistic pods are gone, "
                                "and kube-scheduler still finds the pod unschedulable, so it refuses the node for what cellfit "
                                f"does not check ({UNCHECKED}); no more is reclaimed for it while it stays unschedulable",
                                extra={"pod": info.key if info is not None else uid, "node": booked[uid]})
                    if info is not None:
                        given_back.append((info, booked[uid]))
                        self._clearing.add(uid)
        for info, node in given_back:  # written outside the engine lock: an API call
            self._event(namespace=info.namespace, name=info.name, uid=info.uid, reason=BOOKING_RELEASED,
                        message=f"cellfit released the cells it booked for this pod on node {node}: the opportunistic pods on "
                                f"them are gone and kube-scheduler still finds the pod unschedulable, so it refuses that node "
                                f"for what cellfit does not check ({UNCHECKED}); nothing more is reclaimed "
                                f"for it while it stays unschedulable")

    def _adopt_recorded(self, booked: Mapping[str, str]) -> None:
        """Take over the give-back of the unschedulable pods whose cells are booked and recorded
        on them: a former leader's bookings (every replica keeps them from the record), or this
        leader's from an earlier wait. Under the engine lock."""
        for uid in self._since.keys() - self._booked.keys():
            info = self._pods.get(uid)
            if uid in booked and uid not in self._refused and info is not None and ANNOTATION_RECLAIM_BOOKING in info.annotations:
                self._booked[uid] = None

    def clear_given_back(self) -> None:
        """Clear the record of the pods whose cells were given back (retried each round until
        it is gone, or the pod is: bound, deleted, or booked again)."""
        if not self._clearing:
            return
        with self._lock:
            pending = [info for uid in self._clearing if (info := self._pods.get(uid)) is not None and info.node_name is None]
            rebooked = self._engine.booked_nodes().keys()
        self._clearing = {info.uid for info in pending if info.uid not in rebooked and not self.records.write(info, None)}

    def _candidate(self, pod: node_rules.ConstrainedPod) -> bool:
        """Whether the pod is one whose cells the reclaim may book. One HiveD can never place as
        written (its VC unknown or removed by a reload, no VC label, more GPUs than its cells
        hold) is not: it is named once and skipped, so that it stops no other pod's reclaim."""
        with self._lock:
            info = self._pods.get(pod.metadata.uid)
            if info is None or info.node_name is not None or info.terminating:
                return False
            try:
                return self._engine.reclaim_candidate(info)
            except Unplaceable as error:
                self._tell_unplaceable_once(pod, error)
                return False

    def _tell_unplaceable_once(self, pod: node_rules.ConstrainedPod, error: Unplaceable) -> None:
        """Name a pod HiveD can never place as written in the log, once while it stays
        unschedulable (a round comes every ``reclaim.periodSeconds``). No Event: its owner hears
        the reason from the validating webhook when the pod is created and in the filter's
        FailedScheduling, and an operator's reload that removed its VC is the operator's word."""
        if pod.metadata.uid in self._told_unplaceable:
            return
        self._told_unplaceable.add(pod.metadata.uid)
        log.warning("a pending GPU pod HiveD can never place as written is left out of the reclaim; the other pods' "
                    "reclaim goes on", extra={"pod": f"{pod.metadata.namespace}/{pod.metadata.name}", "reason": error.reason})

    def _nodes(self, *, now: float) -> Sequence[SizedNode]:
        """The nodes with their allocatable resources, listed at most once per ``after_seconds``
        (a 5,000-node list is megabytes); a node without readable allocatable resources is left out."""
        if self._node_list is None or now - self._nodes_listed_at >= self._after_seconds:
            self._node_list = [size for node in node_rules.nodes_of(self._api.list_path(_NODES_PATH))
                               if (size := sized(node, gpu_resource=self._gpu_resource)) is not None]
            self._nodes_listed_at = now
        return self._node_list

    def _tell_once(self, pod: node_rules.ConstrainedPod, why: str, *, extra: dict[str, str]) -> None:
        """Why a pod is left as it is, said once while it stays unschedulable: in the leader's
        log, and to the pod's owner in a Warning Event on the pod."""
        if pod.metadata.uid in self._told:
            return
        self._told.add(pod.metadata.uid)
        log.warning("a guaranteed pod waits for cells opportunistic pods hold, and cellfit does not reclaim them: " + why, extra=extra)
        self._event(namespace=pod.metadata.namespace, name=pod.metadata.name, uid=pod.metadata.uid, reason=NOT_RECLAIMED,
                    message=f"cellfit does not reclaim its virtual cluster's cells from the opportunistic pods on them for this "
                            f"pod: {why}")

    def _event(self, *, namespace: str, name: str, uid: str, reason: str, message: str) -> None:
        try:
            self._api.create_event(namespace=namespace, pod_name=name, pod_uid=uid, reason=reason, message=message, warning=True)
        except CellfitError as error:
            log.warning("stranded pod event not written", extra={"pod": f"{namespace}/{name}", "reason": str(error)})

    def _book_one(self, pod: node_rules.ConstrainedPod, candidates: Sequence[SizedNode], use: dict[str, NodeUse]) -> Booked | None:
        """Book the pod's cells on one of ``candidates`` (the nodes its constraints allow); ``use``
        gains its requests on the booked node. What a booking would need is asked first, which
        changes nothing in the engine: a pod refused here leaves no booking and no pod counted
        as leaving behind it."""
        key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        # A pod whose preemptionPolicy is Never is never reclaimed for; it is told so only when
        # reclaiming opportunistic pods is what would place it (HiveD would book it cells they
        # hold), not while it waits behind guaranteed use alone. Once told, it is not planned
        # again while it waits.
        never = pod.spec.preemptionPolicy == NEVER_PREEMPT
        if never and pod.metadata.uid in self._told:
            return None
        unmodelled = None if never else node_rules.unmodelled(pod.spec, gpu_resource=self._gpu_resource)
        if unmodelled is not None:
            self._tell_once(pod, f"cellfit cannot check where kube-scheduler would place it, for its {unmodelled}",
                            extra={"pod": key, "constraint": unmodelled})
            return None
        sizes = {candidate.node.metadata.name: candidate for candidate in candidates}
        with self._lock:
            info = self._pods.get(pod.metadata.uid)
            if info is None or info.node_name is not None or info.terminating:
                return None
            # A node where an opportunistic pod nobody will remove sits is left out whole: its
            # cells may be the ones HiveD would book.
            among = [name for name, size in sizes.items()
                     if may_empty(entry := use.get(name, NodeUse()), waiting=info)
                     and room_for(info, node=size, entry=entry, leaving=entry.opportunistic)]
            if never and not any(use.get(name, NodeUse()).opportunistic.pods for name in among):
                return None  # no opportunistic pod where it may go: nothing to reclaim, no need to plan
            try:
                need = self._engine.reclaim_need(info, among=among)
                if need is None or self._not_to_book(info, need, sizes, use, key=key):
                    return None
                waiting = None if never else self._engine.book_reclaim(info, among=among)
            except Unplaceable as error:  # a reload since _candidate removed its VC, or cells
                self._tell_unplaceable_once(pod, error)
                return None
            if waiting is not None and waiting != need and self._not_to_book(info, waiting, sizes, use, key=key):
                self._engine.cancel_reclaim(info.uid)  # a gang's slot, booked elsewhere than asked
                return None
            if waiting is not None:
                entry = use.setdefault(waiting.node or "", NodeUse())
                entry.held = entry.held + Load.of((info,))
                # Booked where it is nominated, it counts there once (as node_use counts it).
                entry.nominated = [other for other in entry.nominated if other.uid != info.uid]
        if never:  # told outside the engine lock: an API call
            self._tell_once(pod, "its preemptionPolicy is Never (kube-scheduler deletes nobody for it either)", extra={"pod": key})
            return None
        if waiting is None:
            return None
        log.info("cells booked for a guaranteed pod kube-scheduler could not bring to cellfit: every node it may use is full of "
                 "opportunistic pods", extra={"pod": key, "vc": waiting.vc, "cell": waiting.cell, "node": waiting.node,
                                              "victims": len(waiting.victims)})
        return Booked(pod=info, waiting=waiting)

    def _not_to_book(self, pod: PodInfo, waiting: WaitingGuarantee, sizes: Mapping[str, SizedNode], use: Mapping[str, NodeUse], *,
                 key: str) -> bool:
        """Whether the cells ``waiting`` names are not to be booked for the pod (the log says
        why): a pod on them stays for good, or the pod would not fit on their node beside the
        pods that stay and those kube-scheduler nominated there. Under the engine lock."""
        node = waiting.node or ""
        victims = [self._pods.get(uid) for uid in waiting.victims]
        if any(immovable(victim, waiting=pod, scheduler_name=self._scheduler_name) for victim in victims):
            log.info("no cells booked for a stranded guaranteed pod: a pod on them is neither cellfit's to delete nor of "
                     "lower priority", extra={"pod": key, "node": node})
            return True
        leaving = Load.of(v for v in victims if v is not None and v.holds_resources)
        if node not in sizes or not room_for(pod, node=sizes[node], entry=use.get(node, NodeUse()), leaving=leaving):
            log.info("no cells booked for a stranded guaranteed pod: its cores, memory or GPUs, or a pod slot, would not fit "
                     "beside the pods that stay on the node and those kube-scheduler nominated there", extra={"pod": key, "node": node})
            return True
        return False
