"""What each HiveD virtual cluster may still use of its guarantee, for AlloX admission: its cells
as :class:`~scheduler.matching.capacity.GuaranteeCell` values, read from the allocator's own
view (``HivedEngine.inspect_guarantees``), not from a copy of its state.

- a VC cell bound (or pinned) and not draining: its GPUs less those held by guaranteed pods
  and the bad ones; the GPUs of running AlloX Jobs' pods (which admission counts as busy
  machines of their own) are already left out of the held ones by the engine's view;
- a cell of the quota not bound yet: all its GPUs (the buddy allocator binds one when a pod
  needs it; Theorem 1 keeps one free);
- a draining cell (over the quota after a shrink) takes no new pod: nothing.

Opportunistic pods are not subtracted: a guaranteed pod of the VC preempts them. Pure: plain
values in, values out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import AbstractSet, Any, Callable, Collection, Iterable, Mapping, Sequence

from scheduler.constants import LABEL_PRIORITY, LABEL_VIRTUAL_CLUSTER, PRIORITY_OPPORTUNISTIC
from scheduler.core.model import TERMINAL_PHASES, PodInfo
from scheduler.core.resources import ZERO, Resources
from scheduler.matching.admission import GpuRoom, WaitingJob, gpu_shortfall, gpu_slots_for, pool_kind
from scheduler.matching.capacity import GuaranteeCell, NodeResources, guaranteed_gpu_machines
from scheduler.matching.model import KIND_GPU, Demand
from scheduler.preemption.holds import Hold

GIB = 2**30  # memory in admission's units (NodeResources, Demand)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReclaimableRoom:
    """What a VC's cell holds for its pods on one node once HiveD reclaims it from the
    opportunistic pods there: ``gpus`` the VC's GPUs free there (those the pods hold included),
    ``reclaimable`` of them the pods hold, and the cores and memory (GiB) the pods ask, which
    free with them (none where their requests are not known)."""

    node: str
    gpus: int
    reclaimable: int
    cpu: float = 0.0
    memory: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class VcCell(GuaranteeCell):
    """A VC's cell as the engine's view tells it: of its ``free`` GPUs, ``reclaimable`` are held
    by opportunistic pods (of any VC), which HiveD preempts for the VC's guaranteed pods, so no
    node shows them free though they are the VC's (user25 #2); ``nodes``: that room node by node
    (a pod binds on one node, not on a cell spanning several)."""

    reclaimable: int = 0
    nodes: tuple[ReclaimableRoom, ...] = ()


# The requests of a pod by UID (the cluster snapshot's), None where not known.
PodRequests = Callable[[str], Resources | None]


def guarantee_cells(rows: Sequence[Mapping[str, Any]], *, requests: PodRequests | None = None) -> list[GuaranteeCell]:
    """One VC's cells from its rows of the engine's view (``gpus``, ``guaranteed``, ``bad``,
    ``draining``, ``opportunistic``, and for a row opportunistic pods hold GPUs of, ``nodes``:
    each node's room and the pods there, whose cores and memory ``requests`` tells)."""
    cells: list[GuaranteeCell] = []
    for row in rows:
        if row["draining"]:
            continue
        total, bad = int(row["gpus"]), int(row["bad"])
        free = max(min(total - int(row["guaranteed"]) - bad, total - bad), 0)
        reclaimable = min(int(row.get("opportunistic", 0)), free)
        if not reclaimable:
            cells.append(GuaranteeCell(gpus=total, free=free))
            continue
        nodes = tuple(_room_on(entry, requests) for entry in row.get("nodes", ()))
        cells.append(VcCell(gpus=total, free=free, reclaimable=reclaimable, nodes=nodes))
    return cells


def _room_on(entry: Mapping[str, Any], requests: PodRequests | None) -> ReclaimableRoom:
    asked = [found for uid in entry.get("pods", ()) if requests is not None and (found := requests(str(uid))) is not None]
    return ReclaimableRoom(node=str(entry["node"]), gpus=int(entry["gpus"]), reclaimable=int(entry["opportunistic"]),
                           cpu=sum(r.cpu_millis for r in asked) / 1000, memory=sum(max(r.memory_bytes, 0) for r in asked) / GIB)


def guarantees(view: Mapping[str, Sequence[Mapping[str, Any]]], *, requests: PodRequests | None = None) -> dict[str, list[GuaranteeCell]]:
    """Every VC's cells (the implicit ``default`` VC included), by name; ``requests``: the
    opportunistic pods' on them (their cores and memory free when HiveD reclaims the cells)."""
    return {str(name): guarantee_cells(rows, requests=requests) for name, rows in view.items()}


def gpus_per_pod(
    jobs: Sequence[WaitingJob], *, free: Sequence[NodeResources], cells: Mapping[str, Sequence[GuaranteeCell]] | None = None
) -> dict[str, int]:
    """Per virtual cluster, the most GPUs one of its queued GPU configurations asks for: a GPU
    machine of that VC must hold any of them (``gpu_slots_for``, as a CPU slot holds the largest
    CPU configuration). A configuration no node of ``free`` holds (``gpu_shortfall``: more GPUs
    than any has free, or more cores or memory than any with its GPUs free) sizes nothing: one
    user's 16 GPUs a pod on nodes of 8 would leave the VC no GPU machine; unless one of the VC's
    ``cells`` opportunistic pods hold (:class:`VcCell`) has its GPUs free once HiveD reclaims
    them: no node shows those free, and sized by the nodes alone a VC whose cells are full of
    them got machines of 1 GPU, a 4-GPU Job took one, and AlloX started more 4-GPU Jobs than its
    guarantee holds (their pods then wait, NotBound, and are suspended again). Such a cell is
    judged node by node, by everything the configuration asks: on one of ``free``'s nodes, the
    VC's GPUs there, and the node's free cores and memory with what the opportunistic pods there
    ask, which free with them (:class:`ReclaimableRoom`). A VC absent: 1."""
    pools = {job.pool: 0 for job in jobs if job.pool is not None}
    sizes = {kind.split("@", 1)[1]: size for kind, size in gpu_slots_for(jobs, free_nodes=free, gpu_pools=pools).items()}
    for vc, room in _reclaimable_room(cells or {}, free=free).items():
        for job in jobs:
            demand = job.demand.get(KIND_GPU)
            if (job.pool == vc and demand is not None and KIND_GPU in job.seconds and sizes.get(vc, 1) < demand.gpu
                    and not gpu_shortfall(demand, room=room)):
                sizes[vc] = int(demand.gpu)
    return sizes


def _reclaimable_room(cells: Mapping[str, Sequence[GuaranteeCell]], *, free: Sequence[NodeResources]) -> dict[str, GpuRoom]:
    """Per VC, what one pod of it has on each of ``free``'s nodes its cells opportunistic pods
    hold lie on (:func:`gpu_room`'s form): the VC's GPUs there, and the node's free cores and
    memory with the pods' own; VCs without such a cell absent."""
    by_name = {node.name: node for node in free}
    room: dict[str, GpuRoom] = {}
    for vc, vc_cells in cells.items():
        found = frozenset(
            (entry.gpus, node.cpu + entry.cpu, node.memory + entry.memory)
            for cell in vc_cells if isinstance(cell, VcCell) and cell.reclaimable > 0
            for entry in cell.nodes if entry.gpus > 0 and (node := by_name.get(entry.node)) is not None
        )
        if found:
            room[vc] = found
    return room


@dataclass(frozen=True, slots=True, kw_only=True)
class VcMachines:
    """What AlloX admission takes of HiveD's VCs in a pass: per VC the GPUs one of its machines
    holds (``sizes``), the same per machine kind (``decide(gpu_slots=)``) and how many machines
    it has (``decide(gpu_pools=)``)."""

    sizes: Mapping[str, int]
    gpu_slots: Mapping[str, int]
    gpu_pools: Mapping[str, int]


def vc_machines(
    jobs: Sequence[WaitingJob], *, free: Sequence[NodeResources], cells: Mapping[str, Sequence[GuaranteeCell]]
) -> VcMachines:
    """The VCs' GPU machines for ``jobs`` queued, sized on ``free``'s nodes and the VCs' ``cells``
    (:func:`gpus_per_pod`, :func:`pool_machines`): one rule for the live controller and the
    simulator, so that both hand ``decide`` the same machines."""
    sizes = gpus_per_pod(jobs, free=free, cells=cells)
    return VcMachines(sizes=sizes, gpu_slots={pool_kind(vc): size for vc, size in sizes.items()},
                      gpu_pools=pool_machines(cells, free=free, sizes=sizes))


def pool_machines(
    cells: Mapping[str, Sequence[GuaranteeCell]], *, free: Sequence[NodeResources], sizes: Mapping[str, int]
) -> dict[str, int]:
    """Each VC's GPU machines for :func:`scheduler.matching.admission.decide` (``gpu_pools``):
    what its free guarantee on AlloX's nodes holds (``guaranteed_gpu_machines`` of ``sizes``,
    :func:`gpus_per_pod`), and no more than those nodes have GPUs ``free`` (running AlloX Jobs'
    included) plus the GPUs of its cells opportunistic pods hold (:class:`VcCell`), which its
    AlloX pods, guaranteed, reclaim: several VCs' guarantees may count one free GPU (the implicit
    default VC owns every GPU)."""
    def cap(vc: str) -> int:
        size = max(sizes.get(vc, 1), 1)
        # Node by node: a pod binds on one node, so GPUs free on one and reclaimable on another
        # hold no pod of ``size`` together.
        reclaimable: dict[str, int] = {}
        for cell in cells.get(vc, ()):
            if isinstance(cell, VcCell):
                for entry in cell.nodes:
                    reclaimable[entry.node] = reclaimable.get(entry.node, 0) + entry.reclaimable
        return sum((node.gpu + reclaimable.get(node.name, 0)) // size for node in free)

    return {vc: min(count, cap(vc)) for vc, count in guaranteed_gpu_machines(cells, gpus_per_pod=sizes).items()}


# ------------------------------------------------------------------ room kept for pods AlloX did not start


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptRoom:
    """Room a node keeps for a pending pod AlloX did not start: what it asks, and under HiveD
    the VC whose free guarantee it still takes (None: no VC label, opportunistic, which uses
    none, or HiveD booked its cells already, which its view of the guarantee counts)."""

    node: str
    requests: Resources
    virtual_cluster: str | None


def kept_room(*, holds: Sequence[Hold], pods: Iterable[PodInfo], except_owners: AbstractSet[str] = frozenset(),
              default_vc: str | None = None, booked: AbstractSet[str] = frozenset()) -> list[KeptRoom]:
    """The room AlloX must not count free (user24, F7: AlloX started a Job on the GPUs a FitGpp
    resume hold kept for a preempted Job's resumed pod; the resumed pod won and the Job stayed
    Pending): each hold's room (``RoomHolds.holds()``: resume and preemptor holds, for each
    pending pod it is kept for), and each pending pod kube-scheduler nominated to a node, which
    it keeps room for against pods of no higher priority, that no hold counts already. Pods of
    ``except_owners`` (the Jobs AlloX started, counted as busy machines of their own) keep none.
    A held pod's VC is its label's (``default_vc`` without one), read from ``pods``; a pod whose
    UID is in ``booked`` (HiveD's bookings: a preemptor's claim) takes no more of it."""
    pending = {pod.key: pod for pod in pods if pod.node_name is None and pod.phase not in TERMINAL_PHASES
               and not (pod.owner is not None and pod.owner.uid in except_owners)}
    kept: list[KeptRoom] = []
    counted: set[str] = set()
    for hold in holds:
        for key in hold.pods:
            pod = pending.get(key)
            if pod is None or key in counted:
                continue  # bound meanwhile, gone, one of AlloX's own, or counted by another hold
            counted.add(key)
            kept.append(KeptRoom(node=hold.node, requests=pod.requests, virtual_cluster=_guarantee_of(pod, default_vc, booked)))
    for key, pod in pending.items():
        if pod.nominated_node_name and key not in counted:
            kept.append(KeptRoom(node=pod.nominated_node_name, requests=pod.requests,
                                 virtual_cluster=_guarantee_of(pod, default_vc, booked)))
    return kept


def _guarantee_of(pod: PodInfo, default_vc: str | None, booked: AbstractSet[str]) -> str | None:
    """The VC whose free guarantee ``pod`` still takes: none for an opportunistic pod (it runs on
    idle cells), nor for one HiveD booked cells for."""
    if pod.labels.get(LABEL_PRIORITY) == PRIORITY_OPPORTUNISTIC or pod.uid in booked:
        return None
    return pod.labels.get(LABEL_VIRTUAL_CLUSTER) or default_vc


def free_less_kept(free: Mapping[str, Resources], kept: Sequence[KeptRoom]) -> dict[str, Resources]:
    """Each node's free resources less the room kept there (none below zero)."""
    left = dict(free)
    for room in kept:
        has = left.get(room.node)
        if has is None:
            continue  # a node outside AlloX's
        left[room.node] = (has - room.requests).elementwise_max(ZERO)
    return left


def guarantees_less_kept(
    cells: Mapping[str, Sequence[GuaranteeCell]], kept: Sequence[KeptRoom], *, nodes: Collection[str] | None = None
) -> dict[str, list[GuaranteeCell]]:
    """Each VC's cells less the GPUs kept for its pending pods (:func:`kept_room`): taken from
    its freest cells first, as the held pod's cell is not known here; what is kept for a VC with
    no free GPU left, or for none, takes nothing. ``nodes``: the nodes ``cells`` lie on (AlloX's):
    room kept on another node (another pool's, or one deleted since its hold was made) takes the
    VC's cells there, none of these. A resume hold rebuilt from a Job's record on a node deleted
    since took two of AlloX's four GPUs in e2e's full run (its Job's pod left pending for ever)."""
    wanted: dict[str, int] = {}
    for room in kept:
        if nodes is not None and room.node not in nodes:
            continue
        if room.virtual_cluster is not None and room.requests.gpus > 0:
            wanted[room.virtual_cluster] = wanted.get(room.virtual_cluster, 0) + room.requests.gpus
    left = {vc: list(vc_cells) for vc, vc_cells in cells.items()}
    for vc, gpus in wanted.items():
        vc_cells = left.get(vc)
        if not vc_cells:
            continue
        for index in sorted(range(len(vc_cells)), key=lambda i: -vc_cells[i].free):
            if gpus <= 0:
                break
            taken = min(vc_cells[index].free, gpus)
            vc_cells[index] = replace(vc_cells[index], free=vc_cells[index].free - taken)
            gpus -= taken
    return left


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuPodsAsk:
    """What the pods asking GPUs ask (bound or pending, not finished), each pod's requests whole:
    :meth:`per_gpu` reads what AlloX keeps beside each free GPU from them. Pods asking alike are
    one entry (a gang's pods, a sweep's)."""

    requests: frozenset[Resources] = frozenset()

    def per_gpu(self, *, nodes: Sequence[Resources]) -> Demand:
        """The most cores and the most memory (GiB) per GPU one of these pods asks, each the most
        over the pods one node of ``nodes`` (each one's allocatable) holds: a pod no node holds
        never runs there (kube-scheduler leaves it Pending for ever, saying why), and one pod of
        1 GPU and 1 TiB (a typo for 1 Gi, a pod for another pool) made AlloX keep 1 TiB beside
        every free GPU, and start no CPU run on nodes of 512 GiB free (review25). No node
        known: every pod counts. Nothing when none holds one."""
        shapes = set(nodes)  # nodes alike are one: pods x kinds of node, not pods x nodes
        held = [asked for asked in self.requests if not shapes or any(asked.fits_in(shape) for shape in shapes)]
        return Demand(
            cpu=max((asked.cpu_millis / 1000 / asked.gpus for asked in held), default=0.0),
            memory=max((asked.memory_bytes / GIB / asked.gpus for asked in held), default=0.0),
        )


def asked_per_gpu(pods: Iterable[PodInfo]) -> GpuPodsAsk:
    """What each pod asking GPUs asks (bound or pending, not finished; AlloX's own Jobs' pods
    too, whose running GPU configurations admission keeps room for anyway): AlloX keeps the most
    cores and memory per GPU of those a node holds (:meth:`GpuPodsAsk.per_gpu` of its allocatable)
    beside each free GPU of that node before it cuts a node's cores and memory into CPU slots, so a VC's guaranteed pod of
    8 GPUs, 32 cores and 448 GiB still finds its cores and its memory (user24, F17)."""
    return GpuPodsAsk(requests=frozenset(pod.requests for pod in pods if pod.requests.gpus > 0 and pod.phase not in TERMINAL_PHASES))


class AskedLately:
    """The most cores and the most memory (GiB) per GPU asked (:meth:`GpuPodsAsk.per_gpu`) over
    the passes of the last ``window_seconds``: a pod that ends and is replaced (a Job's failed pod
    recreated after the Job controller's back-off, a gang's next pod, a VC's next Job created as
    its last ends) finds its room, and a pod gone longer, or one no node holds any more, keeps
    nothing. Before, the most seen since cellfit started was kept: one pod's ask stood until a
    restart (review25). ``now`` is the wall clock (the placer's): a pass noted after it (the
    clock stepped back, NTP correcting a drifted node) is forgotten, not kept for the step's
    length plus the window (review26); this pass's ask stands, so only a gone pod's is lost early."""

    def __init__(self, *, window_seconds: float) -> None:
        self._window_seconds = window_seconds
        # (when, what was asked then): none outdone in both by a later one, which outlives it.
        self._seen: list[tuple[float, Demand]] = []

    def noted_within(self, now: float) -> bool:
        """Whether a pass of the window is remembered (a kind of node absent for a pass keeps it)."""
        return any(0 <= now - when <= self._window_seconds for when, _ in self._seen)

    def note(self, asked: Demand, *, now: float) -> Demand:
        """Remember this pass's ``asked``; the most of each over the window."""
        self._seen = [
            (when, before)
            for when, before in self._seen
            if 0 <= now - when <= self._window_seconds and not (before.cpu <= asked.cpu and before.memory <= asked.memory)
        ]
        self._seen.append((now, asked))
        return Demand(cpu=max(seen.cpu for _, seen in self._seen), memory=max(seen.memory for _, seen in self._seen))
