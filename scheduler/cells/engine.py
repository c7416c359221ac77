"""``HivedEngine``: HiveD behind the :class:`~scheduler.core.engine.SchedulingEngine` protocol.

How kube-scheduler's cycle maps onto HiveD:

* ``filter`` decides the placement and returns only the node it lies on. A single pod's placement
  is recomputed each time (deterministically); it is *booked* only at ``reserve`` (bind), or
  earlier when it needs opportunistic pods preempted, so that the cells it waits for are not
  handed to someone else meanwhile. A gang books all its slots on its first pod's filter.
* ``select_victims`` narrows kube-scheduler's candidates to the opportunistic pods whose GPUs the
  booking needs.
* ``reserve`` returns the bind-info and GPU-index annotations; ``apply_pod`` of a bound pod with a
  bind-info re-creates exactly that booking after a restart.

Pods without GPUs are not HiveD's concern: every offered node passes, score 0, no annotations.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from typing import AbstractSet, Any, Callable, Final, Iterable, Mapping, NamedTuple, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.cells import bindinfo, inspection
from scheduler.cells.allocator import CellAllocator
from scheduler.cells.booking import Booking, Group
from scheduler.cells.capabilities import WaitingGuarantee
from scheduler.cells.planning import QuotaExhausted, Spot, Target, Unplaceable
from scheduler.cells.gangs import give_back_gang
from scheduler.cells.preemptor_claims import PreemptorClaims, keeps_quota
from scheduler.cells.quota_leaving import quota_leaving_reason
from scheduler.cells.virtual_clusters import VcState
from scheduler.cells.check import CellsCheck, check_config, describe, stable_cell_types
from scheduler.cells.expiry import BookingExpiry, BookingLimits, BookingReleased
from scheduler.cells.config import (
    CellsConfig,
    VirtualCellSpec,
    VirtualClusterSpec,
    field_path,
    parse_cells_schema,
    virtual_cluster_problems,
)
from scheduler.cells.discovery import legacy_names
from scheduler.cells.feasibility import feasibility_problems
from scheduler.cells.freeing import FreeingCell, JustFreed, freeing_cell, vcs_freed_by
from scheduler.cells.membership import CellsChanged, NodeMembership
from scheduler.cells.offered import OfferedNodes
from scheduler.cells.node_troubles import DELETED, NodeTroubles, bad_node_cause
from scheduler.cells.request import CellRequest, Priority, RequestProblem, parse_request
from scheduler.cells.topology import Cell, CellState, Topology
from scheduler.constants import ANNOTATION_BIND_INFO, ANNOTATION_GPU_INDICES, ANNOTATION_RECLAIM_BOOKING, MAX_EXTENDER_PRIORITY
from scheduler.core.engine import FilterDecision, Placement, Scores, Verdicts
from scheduler.core.model import TERMINAL_PHASES, JobInfo, NodeInfo, PodInfo
from scheduler.core.nodeindex import NodeIndex, Positions, Slots
from scheduler.errors import ConfigError, InvalidAnnotation, SchedulingConflict, UnknownNode

log = logging.getLogger(__name__)


MAX_CHANGES: Final = 200


class _Decision(NamedTuple):
    """Where a pod goes: ``booking`` when cells are already held for it (gang slot, or a hold
    while victims terminate), else ``spot``, the placement to book at ``reserve``. (A NamedTuple:
    made on every filter, and cheaper to build than a frozen dataclass.)"""

    node: str
    booking: Booking | None
    victims: list[Booking]
    spot: Spot | None = None
    # Why HiveD preempts although a cell of the pod's VC was being freed: the pods leaving it
    # overstayed (expiry.py), said with the filter's reason.
    overstayed: str | None = None


class _SlotCells(NamedTuple):
    """The node-level cell of each slot of the node index, as of its ``generation``; one entry
    more, ``None``/``False``, that :data:`~scheduler.core.nodeindex.UNKNOWN` (-1) indexes."""

    generation: int
    by_slot: list[Cell | None]
    is_cell: npt.NDArray[np.bool_]
    slot_of: dict[str, int]  # the node index's, as a dict: OfferedNodes asks it in C


_NO_POSITIONS: Final[Positions] = np.zeros(0, dtype=np.int64)
_INSIDE, _BOUND, _PINNED = CellState.INSIDE, CellState.BOUND, CellState.PINNED  # read per victim (preemption_helps)


def _without_cells(node_name: str) -> str:
    return f"node {node_name} has no HiveD GPU cells"


def _unresolvable_groups(inside: int, *, resolvable: bool) -> int:
    """How many reasons :meth:`HivedEngine._verdicts` gives unresolvable nodes with cells
    (``inside`` of them): the nodes without cells are named after them, as they always were."""
    return 0 if resolvable or inside == 0 else 1


class _Context:
    __slots__ = ("request", "vc", "targets")

    def __init__(self, request: CellRequest, vc: VcState | None, targets: list[Target]) -> None:
        self.request = request
        self.vc = vc
        self.targets = targets


class HivedEngine:
    """HiveD virtual clusters as a scheduling engine. Not thread-safe (callers serialise)."""

    def __init__(
        self,
        checked: CellsCheck,
        *,
        discovered_from: Sequence[NodeInfo] = (),
        rack_label: str | None = None,
        on_change: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``discovered_from``: with a discovered topology, the nodes it was discovered from
        (the cells then follow nodes that join and leave). ``on_change`` hears, one line
        each, how the cells changed at runtime (the extender logs it). ``clock``: seconds, the
        driver's (monotonic live, virtual in the simulator), for what waits a few seconds."""
        if checked.topology is None:
            raise ConfigError("topology: none configured and no nodes to discover it from")
        self.checked = checked
        self.summary = checked.summary
        self.topology = Topology(checked.topology)
        self.allocator = CellAllocator(self.topology, checked.virtual_clusters)
        # Bookings that lose their reason are released (expiry.py); the driver sweeps.
        self.expiry = BookingExpiry(self.allocator, booking_limits(checked.config))
        self.default_vc = checked.default_vc
        self._nodes: dict[str, NodeInfo] = {}
        # Every cell node and every Node applied, so that a driver's slots name the nodes
        # without cells too (FitGpp keeps pods off them); the cells by slot follow it.
        self.node_index = NodeIndex()
        self._slot_cells: _SlotCells | None = None
        self._index_nodes()
        self._strays: set[str] = set()  # GPU nodes outside the topology, reported once
        self.node_troubles = NodeTroubles()  # why each bad node is bad; VCs told once per node
        # Pods whose reservation is the booking they held before it (their preemption's): a
        # failed bind leaves it to them, as it was.
        self._reserved_as_booked: set[str] = set()
        # Pods the watch has shown bound and not finished: a bind failure told after that (its
        # answer lost although the API server made it) must not release the GPUs they run on.
        self._seen_bound: set[str] = set()
        # Pending pods' reclaim records (annotation cellfit.io/reclaim-booking) as last applied:
        # pod UID -> the text, and what it recorded (None: ignored). A record is applied once
        # per text, so that this engine's own later decisions for the pod (its filter moving a
        # hold to cells freed since) are not undone by the next watch event.
        self._reclaim_records: dict[str, tuple[str, bindinfo.BindInfo | None]] = {}
        # Pending pods' victims that book_reclaim counted as leaving (pod UID -> those it marked
        # first): cancel_reclaim takes the marks back, as nobody deletes them then.
        self._reclaim_marks: dict[str, list[str]] = {}
        # Cells FitGpp's preemptors get once their victims have left (preemptor_claims.py).
        self._claims = PreemptorClaims()
        # Guaranteed pods gone a moment ago while leaving: their VC's next pod waits for those
        # cells rather than reclaim elsewhere while kube-scheduler's cache still counts them.
        self._just_freed = JustFreed(clock=clock)
        # The nodes kube-scheduler's own filters passed the gang pod its last filter refused
        # (pod UID, the cell nodes offered; None: all): its preempt verb follows in the same
        # scheduling cycle, offered only nodes with victims, and counts their free cells too.
        self._gang_offered: tuple[str, AbstractSet[str] | None] | None = None
        self._on_change = on_change
        # Runtime changes to the cells, newest last (also passed to on_change).
        self.changes: deque[str] = deque(maxlen=MAX_CHANGES)
        self.membership: NodeMembership | None = None
        if checked.config.topology is None:
            self.membership = NodeMembership(
                self.allocator, discovered_from, rack_label=rack_label, owner_vc=checked.default_vc
            )
        # VCs naming cell types the discovered cells lack: not served, their pods told why.
        self.allocator.virtual_clusters.unserved.update(checked.unserved)
        # Discovered cells: the VC fields written with an old unsized cell-type name that still
        # means one type (field -> (that name, the type)), and those already said to be ambiguous
        # since a node of another size joined (a restart would leave their VCs unserved).
        self._old_names: dict[str, tuple[str, str]] = {}
        self._old_names_said: set[str] = set()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_config(
        cls,
        data: Mapping[str, Any] | CellsConfig,
        *,
        nodes: Sequence[NodeInfo] | None = None,
        rack_label: str | None = None,
        prefix: str = "",
        on_change: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> HivedEngine:
        """Build from the HiveD config section. Without a ``topology`` the cells are discovered
        from ``nodes`` and follow the nodes that join and leave afterwards; ``engine.summary``
        says what was found (for the startup log), ``on_change`` hears what changed later."""
        engine = cls(
            check_config(data, nodes=nodes, rack_label=rack_label, prefix=prefix),
            discovered_from=nodes or (),
            rack_label=rack_label,
            on_change=on_change,
            clock=clock,
        )
        engine._remember_old_names(engine.checked.config.virtual_clusters, prefix=prefix)
        for node in nodes or ():
            engine.apply_node(node)
        return engine

    @classmethod
    def from_nodes(
        cls, nodes: Sequence[NodeInfo], *, rack_label: str | None = None, on_change: Callable[[str], None] | None = None
    ) -> HivedEngine:
        """No HiveD configuration at all: discovered cells, one VC ``default`` owning them."""
        return cls.from_config({}, nodes=nodes, rack_label=rack_label, on_change=on_change)

    def reconfigure(self, data: Mapping[str, Any] | CellsConfig, *, prefix: str = "") -> None:
        """Apply changed virtual clusters at runtime (the topology must be unchanged: a new
        topology needs a new engine, rebuilt from the pods' bind-info). A shrink never evicts:
        the VC's surplus cells drain as their pods finish."""
        config = parse_cells_schema(data, prefix=prefix)
        if config.topology is not None and config.topology != self.topology.config:
            raise ConfigError(f"{prefix + '.' if prefix else ''}topology: changes need a restart of the scheduler")
        vcs = dict(config.virtual_clusters)
        if not vcs and self.default_vc is not None:
            # Still the implicit default VC: only the booking limits can have changed.
            self.expiry.limits = booking_limits(config)
            return
        if not vcs:
            raise ConfigError(f"{prefix + '.' if prefix else ''}virtualClusters: cannot switch to the implicit default VC at runtime")
        # Discovered or configured, the running topology is what the new VCs must fit.
        problems: list[str] = []
        written = vcs
        if self.membership is not None:  # discovered: old unsized names mean what they meant at startup
            vcs, _, problems = stable_cell_types(vcs, self.topology.config, prefix=prefix)
        problems = problems or virtual_cluster_problems(vcs, self.topology.config, prefix=prefix) or feasibility_problems(
            self.topology, vcs, prefix=prefix
        )
        if problems:
            raise ConfigError("\n".join(problems))
        try:
            self.allocator.configure(vcs)
        except ValueError as error:
            raise ConfigError(f"{prefix + '.' if prefix else ''}virtualClusters: {error}") from None
        self.expiry.limits = booking_limits(config)
        self.allocator.virtual_clusters.unserved.clear()  # every VC checked: all are served
        self._remember_old_names(written, prefix=prefix)
        self.default_vc = None
        if self.membership is not None:
            self.membership.owner_vc = None  # the configured VCs own what they say, no more
        self.expiry.vcs_removed(bound=self._seen_bound)
        self._released()
        self._refresh_summary()

    def request_problem(self, request: CellRequest) -> tuple[RequestProblem, Unplaceable] | None:
        """Why the running configuration could never place ``request``, with the allocator's own
        lookups, the ones filter makes: its virtual cluster does not exist
        (``"virtual-cluster"``), or no cell of its type (or any cell) can ever hold its GPUs
        (``"cells"``). None when it could, or while no GPU cells are known yet (discovery). The
        caller holds the engine's lock: a reload may change the virtual clusters."""
        allocator = self.allocator
        try:
            vc = allocator.vc_state(request, self.default_vc)
        except Unplaceable as error:
            return "virtual-cluster", error
        if not allocator.buddies:
            return None
        try:
            allocator.targets(request, vc)
        except Unplaceable as error:
            return "cells", error
        return None

    # ------------------------------------------------------------------ helpers

    def _context(self, pod: PodInfo) -> _Context:
        """Parse and resolve the pod's request; raises Unplaceable / InvalidAnnotation."""
        request = parse_request(pod)
        if not self.allocator.buddies:
            raise Unplaceable("the cluster has no GPU cells")
        # Opportunistic pods need a VC too: it is whom their GPUs are accounted to.
        vc = self.allocator.vc_state(request, self.default_vc)
        return _Context(request, vc, self.allocator.targets(request, vc))

    def _index_nodes(self) -> None:
        """The node index holds the cell nodes and the Nodes applied, no other (cells left)."""
        index, cells = self.node_index, self.topology.nodes
        for name in [name for name in index.names if name is not None and name not in cells and name not in self._nodes]:
            index.remove(name)
        for name in cells:
            index.add(name)
        self._slot_cells = None

    def _cells_by_slot(self) -> _SlotCells:
        """The node-level cell of each slot, rebuilt when the index or the cells changed."""
        index = self.node_index
        table = self._slot_cells
        if table is None or table.generation != index.generation:
            cells = self.topology.nodes
            # One entry past the last slot, for UNKNOWN (-1): offered slots index it directly.
            by_slot = [None if name is None else cells.get(name) for name in index.names] + [None]
            table = _SlotCells(index.generation, by_slot, np.array([cell is not None for cell in by_slot], dtype=bool),
                               {name: slot for slot, name in enumerate(index.names) if name is not None})
            self._slot_cells = table
        return table

    def _offered(self, offered: Slots) -> tuple[AbstractSet[str] | None, Positions]:
        """The cell nodes among the ``offered`` slots (``None`` when every one is offered, the
        usual case), and the positions of offered nodes that are no cell node. In bulk: with
        5,000+ nodes per call, a Python step per node would cost more than the decision."""
        table = self._cells_by_slot()
        seen = np.zeros(len(table.is_cell), dtype=bool)
        seen[offered] = True  # UNKNOWN (-1) marks the entry past the last slot; duplicates count once
        seen &= table.is_cell
        inside = int(np.count_nonzero(seen))
        # Every offered node a cell node (no name twice), the usual case: no positions to find.
        outside_at = _NO_POSITIONS if inside == len(offered) else np.flatnonzero(~table.is_cell[offered])
        if inside == len(self.topology.nodes):
            return None, outside_at
        # The plan asks whether nodes are offered, of hundreds of them where its walk passes
        # nodes not offered. Most slots offered (1,000 nodes, 42%): read from the mask
        # (offered.py), not from a set of the hundreds of names hashed for it per filter. Fewer
        # (5,000 nodes, 10%): a set of their names is cheap to build, and small enough to stay
        # in cache while the walk asks it, where the mask's lookup in all 5,000 names would not
        # (the burst's filter 1.1x with the mask).
        if inside * 4 >= len(seen):
            return OfferedNodes(names=self.node_index.names, slot_of=table.slot_of.get, mask=seen.tobytes(), count=inside), outside_at
        names = self.node_index.names
        return frozenset([names[slot] for slot in np.flatnonzero(seen).tolist()]), outside_at  # type: ignore[misc]

    def _allowed_names(self, node_names: Iterable[str]) -> AbstractSet[str] | None:
        """As :meth:`_offered` for a few names (the preempt verb's candidates)."""
        cells = self.topology.nodes
        allowed = frozenset(name for name in node_names if name in cells)
        return None if len(allowed) == len(cells) else allowed

    @staticmethod
    def _in(node: str | None, allowed: AbstractSet[str] | None) -> bool:
        return node is not None and (allowed is None or node in allowed)

    @staticmethod
    def _listed(victims: list[Booking]) -> str:
        """The first five victims by name, and how many more."""
        names = ", ".join(v.pod_key or f"slot {v.id}" for v in victims[:5])
        return names + (f" and {len(victims) - 5} more" if len(victims) > 5 else "")

    def _victim_reason(self, booking: Booking, victims: list[Booking]) -> str:
        if not self.expiry.leaving(victims):  # nothing preempted them yet, nor may (user26 #4)
            return (f"opportunistic pods {self._listed(victims)} hold the cells HiveD chose for this pod on node {booking.node}: "
                    "preempting them would free them for it")
        return f"waiting for preemption of opportunistic pods {self._listed(victims)} on node {booking.node}"

    def _decide(
        self, pod: PodInfo, ctx: _Context, allowed: AbstractSet[str] | None, *, preempt_on: AbstractSet[str] | None = None
    ) -> _Decision:
        """Raises :class:`Unplaceable` when the pod cannot be placed on the allowed nodes.
        ``preempt_on``: the preempt verb's candidate nodes (a gang's pod takes a slot whose
        victims are there, see :meth:`_best_slot`)."""
        alloc = self.allocator
        request = ctx.request
        existing = alloc.by_pod.get(pod.uid)
        if existing is not None:
            offered = self._in(existing.node, allowed)
            victims = alloc.victims(existing)
            kept = not offered and bool(victims) and self.expiry.keeps(existing, victims)
            if offered or kept:
                spot = self._instead_of_hold(existing, ctx, allowed) if victims else None
                if spot is not None:
                    alloc.release(existing)
                    return _Decision(spot.gpus[0].node or "", None, [], spot)
                if kept:
                    # kube-scheduler leaves the node out while it still counts the victims
                    # leaving it; the cells they free are this pod's (expiry.py bounds the wait).
                    raise Unplaceable(self._leaving_reason(existing, victims))
                return _Decision(existing.node or "", existing, victims)
            claim = self._claims.get(pod.uid)
            if claim is not None and claim.booking == existing.id:
                return self._move_claimed(ctx, existing, allowed)
            if existing.group is None:
                alloc.release(existing)
            else:
                self._unassign(existing)
        if request.priority is Priority.OPPORTUNISTIC and self._just_freed:
            allowed = self._without_kept(allowed)
        if request.gang is not None:
            return self._decide_gang(pod, ctx, allowed, preempt_on=preempt_on)
        spot = alloc.plan(request, ctx.vc, ctx.targets, allowed=allowed)
        node = spot.gpus[0].node or ""
        if any(g.opportunistic_owner is not None for g in spot.gpus) and request.priority is Priority.GUARANTEED:
            freeing = self._preempts_for_nothing(ctx, spot)
            if freeing is not None:
                self._awaits(ctx, pod, freeing.cell.node)
                raise Unplaceable(self._freeing_reason(ctx, freeing))
            freed = self._freed_wait(ctx, pod=pod)
            if freed is not None:
                raise Unplaceable(freed)
            # Hold the cells while the victims terminate, so nobody else takes them meanwhile.
            booking = self._book(spot, ctx, pod)
            self.expiry.booked_for(pod.uid)
            return _Decision(node, booking, alloc.victims(booking), overstayed=self._overstayed_reason(ctx))
        return _Decision(node, None, [], spot)

    def _preempts_for_nothing(self, ctx: _Context, spot: Spot) -> FreeingCell | None:
        """The cell of the pod's VC that pods leaving are freeing (freeing.py) when ``spot``
        would preempt an opportunistic pod not leaving yet: the pod waits for that cell instead.
        None when there is none, or when every victim of ``spot`` is leaving already (its
        cells are held for the pod while they go, as before)."""
        if not self.expiry.any_leaving:
            return None
        leaving = self._leaving_booking
        if all(gpu.opportunistic_owner is None or leaving(gpu.opportunistic_owner) for gpu in spot.gpus):
            return None
        return self._freeing(ctx)

    def _freeing(self, ctx: _Context) -> FreeingCell | None:
        """A cell of the pod's VC that pods leaving are freeing for it (freeing.py), or None."""
        if ctx.vc is None or not self.expiry.any_leaving:
            return None
        return freeing_cell(ctx.vc, ctx.targets, ctx.request.gpus, leaving=self._freeing_booking)

    def _freed_wait(self, ctx: _Context, *, pod: PodInfo | None = None) -> str | None:
        """Why the pod preempts nobody: a pod of its VC left a node a moment ago (freeing.py
        ``JustFreed``) and HiveD would place the pod there now without a victim; kube-scheduler,
        whose cache may still count the pod gone there, offers it that node once it has dropped
        it. None when there is no such node. ``pod``, told so, becomes the node's waiter (no
        opportunistic pod is placed there meanwhile)."""
        if not self._just_freed or ctx.vc is None:
            return None
        nodes = self._just_freed.nodes_of(ctx.vc.name)
        if not nodes:
            return None
        try:
            spot = self.allocator.plan(ctx.request, ctx.vc, ctx.targets, allowed=frozenset(nodes))
        except Unplaceable:
            return None
        if any(gpu.opportunistic_owner is not None for gpu in spot.gpus):
            return None
        node = spot.gpus[0].node or ""
        if pod is not None:
            self._awaits(ctx, pod, node)
        gone = nodes.get(node, [])
        pods = ", ".join(gone[:5]) + (f" and {len(gone) - 5} more" if len(gone) > 5 else "")
        return (f"HiveD waits for the cells of virtual cluster {ctx.vc.name!r} on node {node}, which pods of it freed just now "
                f"({pods}): kube-scheduler places this pod there once its cache shows them gone; no opportunistic pod is "
                f"preempted for it meanwhile (for {self._just_freed.seconds:g} s)")

    def _awaits(self, ctx: _Context, pod: PodInfo, node: str | None) -> None:
        """``pod``, a guaranteed pod of ``ctx``'s VC, was told to wait for ``node``'s cells."""
        if ctx.vc is not None and node is not None:
            self._just_freed.awaited_by(vc=ctx.vc.name, node=node, pod_uid=pod.uid, pod_key=pod.key)

    def _without_kept(self, allowed: AbstractSet[str] | None) -> AbstractSet[str] | None:
        """``allowed`` less the nodes whose cells freed just now a guaranteed pod waits for
        (JustFreed.kept): an opportunistic pod placed there would be reclaimed for it at once.
        Raises :class:`Unplaceable` saying so when no node is left."""
        kept = self._just_freed.kept()
        if not kept:
            return allowed
        left = (set(self.topology.nodes) if allowed is None else set(allowed)) - kept.keys()
        if left:
            return frozenset(left)
        node, (vc, waiter) = next(iter(kept.items()))
        raise Unplaceable(
            f"HiveD keeps the cells virtual cluster {vc!r} freed just now on node {node} for its guaranteed pod {waiter}, "
            f"which waits for them (for {self._just_freed.seconds:g} s): an opportunistic pod placed there would be "
            "preempted for it at once"
        )

    def _leaving_booking(self, booking_id: int) -> bool:
        booking = self.allocator.bookings.get(booking_id)
        return booking is not None and self.expiry.is_leaving(booking.pod_uid)

    def _freeing_booking(self, booking_id: int) -> bool:
        """Whether the booking's pod is leaving within its time (expiry.py ``is_freeing``)."""
        booking = self.allocator.bookings.get(booking_id)
        return booking is not None and self.expiry.is_freeing(booking.pod_uid)

    def _overstayed_reason(self, ctx: _Context) -> str | None:
        """What the pod would have waited for but for pods that overstayed leaving: a cell of its
        VC that those pods, gone, would free (freeing.py). None when there is none."""
        if ctx.vc is None or not self.expiry.any_overstayed:
            return None
        found = freeing_cell(ctx.vc, ctx.targets, ctx.request.gpus, leaving=self._leaving_booking)
        if found is None:
            return None
        bookings = self.allocator.bookings
        late = [b for i in found.leaving if (b := bookings.get(i)) is not None and self.expiry.overstayed(b.pod_uid)]
        if not late:
            return None
        margin = self.expiry.limits.victim_exit_margin_seconds
        return (f"HiveD no longer waits for cell {found.cell.id} of virtual cluster {ctx.vc.name!r} on node {found.cell.node}: "
                f"the pods leaving it have overstayed their grace period and {margin:g} s, cells.victimExitMarginSeconds "
                f"({self._listed(late)})")

    def _freeing_reason(self, ctx: _Context, freeing: FreeingCell) -> str:
        bookings = self.allocator.bookings
        leaving = [bookings[i] for i in freeing.leaving if i in bookings]
        vc = ctx.vc.name if ctx.vc is not None else ctx.request.vc
        return (f"HiveD waits for cell {freeing.cell.id} of virtual cluster {vc!r} on node {freeing.cell.node}, which pods "
                f"leaving free ({self._listed(leaving)}): no opportunistic pod is preempted for this pod while its "
                "virtual cluster's own cells are being freed")

    def _leaving_reason(self, booking: Booking, victims: list[Booking]) -> str:
        """Why a pod waits for a booking kept while its victims leave (expiry.py)."""
        leaving = self._listed(self.expiry.leaving(victims))
        held = "this pod's cells" if booking.pod_uid is not None or booking.group is None else f"the cells of a slot of gang {booking.group.name}"
        return f"HiveD keeps {held} on node {booking.node}: waiting for the opportunistic pods there ({leaving}) to leave"

    def _instead_of_hold(self, hold: Booking, ctx: _Context, allowed: AbstractSet[str] | None) -> Spot | None:
        """Where a pod whose cells are held while their victims terminate can go now without
        preempting anyone (a cell of its VC freed since), planned with the hold in place; None
        when nowhere, and the hold stays (it is never moved to another spot with victims: the
        preemption under way is for its victims)."""
        if hold.group is not None or ctx.request.gang is not None:
            return None
        try:
            spot = self.allocator.plan(ctx.request, ctx.vc, ctx.targets, allowed=allowed)
        except Unplaceable:
            return None
        return None if self.allocator.planner.preempts(spot) else spot

    def _book(self, spot: Spot, ctx: _Context, pod: PodInfo) -> Booking:
        vc_name = ctx.vc.name if ctx.vc is not None else (ctx.request.vc or "")
        return self.allocator.book(spot, vc=vc_name, priority=ctx.request.priority, pod_uid=pod.uid, pod_key=pod.key)

    def _decide_gang(
        self, pod: PodInfo, ctx: _Context, allowed: AbstractSet[str] | None, *, preempt_on: AbstractSet[str] | None = None
    ) -> _Decision:
        alloc = self.allocator
        request = ctx.request
        gang = request.gang
        assert gang is not None
        problem = self.expiry.gang_problem(gang)
        if problem is not None:
            raise Unplaceable(f"gang {gang.name}: {problem}")
        group = alloc.groups.get(gang.key)
        if group is None:
            group = alloc.plan_group(request, gang, ctx.vc, ctx.targets, allowed=allowed)
            self.expiry.gang_changed(gang.key)
        elif group.gpus != request.gpus:
            raise Unplaceable(f"pods of gang {gang.name} request different GPU counts ({group.gpus} and {request.gpus})")
        free_slots = [s for s in group.slots if s.pod_uid is None]
        slot = self._best_slot(free_slots, allowed, preempt_on=preempt_on)
        if slot is None and (free_slots or len(group.slots) < group.size):
            # Every free slot is on a node kube-scheduler no longer offers (e.g. its CPU filled
            # up): move one slot to where this pod can go. Or the gang gave back the slots of
            # pods that did not come in time (expiry.py), and this one has come since. A slot
            # kept while its victims leave is not moved: the pod waits for it.
            movable = self._movable_slots(free_slots)
            if free_slots and not movable and len(group.slots) >= group.size:
                raise Unplaceable(self._leaving_reason(free_slots[0], alloc.victims(free_slots[0])))
            slot = self._new_slot(ctx, group, movable[0] if movable else None, allowed)
        if slot is None:
            raise Unplaceable(
                f"gang {gang.name} already has all {group.size} slots taken by other pods "
                f"(annotation cellfit.io/gang-size is {gang.size})"
            )
        alloc.assign(slot, pod.uid, pod.key)
        self.expiry.booked_for(pod.uid)
        return _Decision(slot.node or "", slot, alloc.victims(slot))

    def _new_slot(self, ctx: _Context, group: Group, moved: Booking | None, allowed: AbstractSet[str] | None) -> Booking:
        """A slot of ``group`` booked on the ``allowed`` nodes, in place of its free slot
        ``moved`` (None: one more). The moved slot's cells are the gang's: where the VC's
        quota is all in use (by the gang's own slots, say) the slot is given back first and
        planned anew, and booked again on its node when the allowed nodes take it nowhere.
        Before, its quota refused the move: the gang's second pod, offered the free node, was
        told "quota exhausted", and its slot's opportunistic pod elsewhere was reclaimed instead
        (user26 H2). Raises :class:`Unplaceable`."""
        alloc = self.allocator
        request = ctx.request
        vc_name = ctx.vc.name if ctx.vc is not None else (request.vc or "")
        try:
            spot = alloc.plan(request, ctx.vc, ctx.targets, allowed=allowed)
        except QuotaExhausted:
            if moved is None or moved.node is None:
                raise
            node = moved.node
            alloc.release(moved)  # the group's last slot: it is registered again below
            moved = None
            try:
                spot = alloc.plan(request, ctx.vc, ctx.targets, allowed=allowed)
            except Unplaceable:
                spot = alloc.plan(request, ctx.vc, ctx.targets, allowed=frozenset({node}))  # the cells just given back
                group.slots.append(alloc.book(spot, vc=vc_name, priority=request.priority, pod_uid=None, pod_key=None, group=group))
                alloc.groups.setdefault(group.key, group)
                raise
        slot = alloc.book(spot, vc=vc_name, priority=request.priority, pod_uid=None, pod_key=None, group=group)
        group.slots.append(slot)
        alloc.groups.setdefault(group.key, group)
        if moved is not None:
            alloc.release(moved)
        return slot

    def _movable_slots(self, free_slots: list[Booking]) -> list[Booking]:
        """The free slots a gang may move to an offered node: those not kept while their
        victims leave (expiry.py)."""
        expiry = self.expiry
        alloc = self.allocator
        return [slot for slot in free_slots if not (victims := alloc.victims(slot)) or not expiry.keeps(slot, victims)]

    def _unassign(self, booking: Booking) -> None:
        """The pod left its booking (a gang slot then waits for another pod of the gang)."""
        group = booking.group
        self.allocator.unassign(booking)
        if group is not None:
            self.expiry.gang_changed(group.key)

    def _best_slot(
        self, slots: list[Booking], allowed: AbstractSet[str] | None, *, preempt_on: AbstractSet[str] | None = None
    ) -> Booking | None:
        """The free slot a gang's pod takes on the ``allowed`` nodes: one needing no victim
        first. For the preempt verb (``preempt_on``, its candidate nodes), one whose victims
        are on a candidate node first: kube-scheduler nominates a pod only where it deletes
        victims, and the gang's free slots are left to its other pods, which the filter places
        there (the gang preempts the same pods whichever of its pods each slot goes to)."""
        usable = [s for s in slots if self._in(s.node, allowed)]
        if not usable:
            return None
        victims = self.allocator.victims
        if preempt_on is not None:
            return min(usable, key=lambda s: (not (s.node in preempt_on and victims(s)), s.id))
        return min(usable, key=lambda s: (len(victims(s)) > 0, s.id))

    # ------------------------------------------------------------------ decisions

    def has_booking(self, pod: PodInfo) -> bool:
        """Whether cells are set aside for the pod already: its own booking (held while its
        victims terminate) or its gang's planned slots."""
        if pod.uid in self.allocator.by_pod:
            return True
        try:
            gang = parse_request(pod).gang
        except InvalidAnnotation:
            return False
        return gang is not None and gang.key in self.allocator.groups

    def filter(self, pod: PodInfo, offered: Slots) -> FilterDecision:
        if pod.requests.gpus == 0:
            return FilterDecision(feasible=np.arange(len(offered), dtype=np.int64))
        allowed, outside_at = self._offered(offered)
        outside = len(outside_at)
        offered_count = len(offered)
        if self._claims:
            self._settle_claims()
        self._gang_offered = None
        ctx: _Context | None = None
        try:
            ctx = self._context(pod)
            decided = self._decide(pod, ctx, allowed)
        except (Unplaceable, InvalidAnnotation) as error:
            reason = self._refusal(error)
            resolvable = isinstance(error, Unplaceable) and error.resolvable
            inside = offered_count - outside
            if ctx is not None and ctx.request.gang is not None:
                # Read by the preempt verb after this call, when the node index may have changed.
                self._gang_offered = (pod.uid, allowed.snapshot() if isinstance(allowed, OfferedNodes) else allowed)
            if isinstance(error, Unplaceable) and error.resolvable_on and not resolvable:
                return self._partly_resolvable(offered, outside_at, reason, error.resolvable_on)
            return FilterDecision(
                explain=lambda: self._verdicts(offered_count, outside_at, reason, resolvable=resolvable),
                failed_count=inside if resolvable else 0,
                unresolvable_count=outside + (0 if resolvable else inside),
                named_at=outside_at,
                by_name=_without_cells,
                named_after=_unresolvable_groups(inside, resolvable=resolvable),
            )
        node = decided.node
        # Every other node gets the same sentence; kube-scheduler reads them only when no node
        # is left, so they are built only if asked for.
        placed = f"HiveD placed this pod's GPUs on node {node}"
        if not self._in(node, allowed):
            return FilterDecision(
                explain=lambda: self._verdicts(offered_count, outside_at, placed, resolvable=False),
                failed_count=0,
                unresolvable_count=offered_count,
                named_at=outside_at,
                by_name=_without_cells,
                named_after=_unresolvable_groups(offered_count - outside, resolvable=False),
            )
        chosen_at = np.flatnonzero(offered == self.node_index.get(node))  # once, unless offered twice
        at = int(chosen_at[0])
        failed: Verdicts = {}
        if decided.victims:
            assert decided.booking is not None
            reason = self._victim_reason(decided.booking, decided.victims)
            if decided.overstayed is not None:
                reason = f"{reason}; {decided.overstayed}"
            failed[reason] = np.array([at], dtype=np.int64)
        others = np.concatenate([outside_at, chosen_at])  # the chosen node has its verdict, however often offered

        def explain() -> tuple[Verdicts, Verdicts]:
            _, unresolvable = self._verdicts(offered_count, others, placed, resolvable=False)
            return failed, unresolvable

        return FilterDecision(
            feasible=np.zeros(0, dtype=np.int64) if failed else np.array([at], dtype=np.int64),
            explain=explain,
            failed_count=1 if failed else 0,
            unresolvable_count=offered_count - 1,
            named_at=outside_at,
            by_name=_without_cells,
            named_after=_unresolvable_groups(offered_count - len(others), resolvable=False),
        )

    def _partly_resolvable(self, offered: Slots, outside_at: Positions, reason: str, nodes: AbstractSet[str]) -> FilterDecision:
        """A refusal where preemption may help on the offered ``nodes`` only (a gang's pods fit
        there in part, the rest wanting cells reclaimed elsewhere): kube-scheduler keeps them
        for its preemption, the other offered cell nodes are unresolvable, with one ``reason``."""
        index = self.node_index
        slots = [slot for slot in (index.get(name) for name in nodes) if slot is not None]
        failed_at = np.flatnonzero(np.isin(offered, np.array(slots, dtype=np.int64)))
        rest = np.ones(len(offered), dtype=bool)
        rest[failed_at] = False
        rest[outside_at] = False
        unresolvable_at = np.flatnonzero(rest)

        def explain() -> tuple[Verdicts, Verdicts]:
            return ({reason: failed_at} if len(failed_at) else {}), ({reason: unresolvable_at} if len(unresolvable_at) else {})

        return FilterDecision(
            explain=explain,
            failed_count=len(failed_at),
            unresolvable_count=len(offered) - len(failed_at),
            named_at=outside_at,
            by_name=_without_cells,
            named_after=1 if len(unresolvable_at) else 0,
        )

    @staticmethod
    def _verdicts(offered: int, outside_at: Positions, reason: str, *, resolvable: bool) -> tuple[Verdicts, Verdicts]:
        """(failed, unresolvable): ``reason`` for every one of the ``offered`` positions but
        those without cells (``outside_at``, whose reason names the node: ``named_at``), in
        the first dict if preemption may help."""
        inside = np.ones(offered, dtype=bool)
        inside[outside_at] = False
        verdicts = {reason: np.flatnonzero(inside)} if offered > len(outside_at) else {}
        return (verdicts, {}) if resolvable else ({}, verdicts)

    def prioritize(self, pod: PodInfo, offered: Slots) -> Scores:
        gpus = pod.requests.gpus
        if gpus == 0:
            return np.zeros(len(offered), dtype=np.int64)
        chosen: str | None = None
        existing = self.allocator.by_pod.get(pod.uid)
        if existing is not None:
            chosen = existing.node
        else:
            try:
                ctx = self._context(pod)
                if ctx.request.gang is None:
                    spot = self.allocator.plan(ctx.request, ctx.vc, ctx.targets, allowed=self._offered(offered)[0])
                    chosen = spot.gpus[0].node
            except (Unplaceable, InvalidAnnotation):
                chosen = None
        cells = self._cells_by_slot().by_slot
        chosen_slot = self.node_index.get(chosen) if chosen is not None else None
        return np.fromiter(
            (MAX_EXTENDER_PRIORITY if slot == chosen_slot else self._packing_score(cells[slot], gpus) for slot in offered.tolist()),
            dtype=np.int64,
            count=len(offered),
        )

    @staticmethod
    def _packing_score(node: Cell | None, gpus: int) -> int:
        """1..9 for a node with ``gpus`` idle GPUs: higher the more of the node is in use, +2
        when the cell above it (the rack) is already broken, so that whole nodes and whole racks
        stay free for large requests; 0 for a node that cannot take the GPUs (or no cell)."""
        if node is None or node.idle_gpus < gpus:
            return 0
        score = 1 + round(5 * (1 - node.idle_gpus / node.total))
        parent = node.parent
        if parent is not None and parent.idle_gpus < parent.total:
            score += 2 + round(1 - parent.idle_gpus / parent.total)
        return min(MAX_EXTENDER_PRIORITY - 1, score)

    def select_victims(
        self,
        pod: PodInfo,
        candidates: Mapping[str, Sequence[str]],
        victim_pods: Mapping[str, PodInfo],
    ) -> dict[str, list[str]]:
        if pod.requests.gpus == 0:
            return {}
        if self._claims:
            self._settle_claims()
            claim = self._claims.get(pod.uid)
            if claim is not None and claim.booking is not None:
                # FitGpp's preemptor whose victims have left has its cells booked on their node:
                # planning it over other nodes would move the booking onto an opportunistic pod
                # there and reclaim it for nothing (user24b NEW-1). Its hold's lapse ends the claim.
                return {}
        offered, self._gang_offered = self._gang_offered, None
        try:
            ctx = self._context(pod)
            allowed = self._allowed_names(candidates)
            if ctx.request.gang is not None:
                # kube-scheduler offers only nodes where it deletes victims; the nodes its own
                # filters passed the pod in this cycle's filter hold the gang's free cells, which
                # its slots take before any victim's (user26 H2).
                if offered is not None and offered[0] == pod.uid and allowed is not None:
                    allowed = None if offered[1] is None else self._allowed_names(itertools.chain(allowed, offered[1]))
                decided = self._decide(pod, ctx, allowed, preempt_on=frozenset(candidates))
            else:
                decided = self._decide(pod, ctx, allowed)
        except (Unplaceable, InvalidAnnotation):
            return {}
        if decided.booking is None or not decided.victims or decided.node not in candidates:
            return {}
        # kube-scheduler deletes pods: a gang slot whose pod has left has none to delete.
        uids = [v.pod_uid for v in decided.victims if v.pod_uid is not None]
        self.expiry.victims_leaving(uids)
        return {decided.node: uids} if uids else {}

    def preemption_helps(self, preemptor: PodInfo) -> Callable[[PodInfo], bool] | None:
        """Whether preempting a pod can free GPUs HiveD would give ``preemptor`` (FitGpp's
        candidates, scheduler/preemption/engine.py). A guaranteed pod gets GPUs only inside a
        cell of its request's level (a target: chain and level) within its VC's cells, so a
        victim helps if it is its VC's own guaranteed pod, or an opportunistic pod with a GPU in
        a target's chain that lies in a cell of the target's level or above that the VC holds
        (bound or pinned), or in free space where the VC may still bind such a cell (quota of a
        type at the target's level or above, up to the highest free cell around the GPU, left
        unbound). Not: a pod on another chain (an A100 node for a V100-only VC), nor one in a
        cell smaller than the request (a VC's 2-GPU switch for an 8-GPU pod) or another VC's,
        nor an opportunistic pod on a cell the VC is draining (held over its quota after a shrink
        or a cell exchange: no pod of the VC is placed there while it drains). The VC's own
        guaranteed pod on a draining cell helps only when it is that cell's last guaranteed pod
        and the VC has quota left unbound of a type of that chain at the request's level or
        above, below the draining cell's: its leaving unbinds the cell (bookkeeping.release),
        which returns to the free pool where the VC may bind such a cell. Nor any pod at all
        while a cell of the VC is being freed for the pod by pods leaving (freeing.py: the
        preemption would be for nothing; FitGpp then answers the wait, ``freeing_wait``).
        Where HiveD's exact choice is not known cheaply it errs towards allowing: which free
        cell the buddy allocator would take, Theorem 1's check on splitting one. None: any pod
        may help (an opportunistic preemptor, which takes idle GPUs anywhere; a pod HiveD does
        not place). A pod HiveD holds no booking for is left to the tenancy rule."""
        if preemptor.requests.gpus == 0:
            return None
        try:
            ctx = self._context(preemptor)
        except (Unplaceable, InvalidAnnotation):
            return None
        vc = ctx.vc
        if ctx.request.priority is not Priority.GUARANTEED or vc is None:
            return None
        level_in = {target.chain: target.level for target in ctx.targets}
        chain_of_type = self.topology.chain_of_type
        by_pod = self.allocator.by_pod
        draining = vc.draining
        # The VC's own cells being freed already: no opportunistic pod is to go for this pod.
        waits = self._freeing(ctx) is not None or self._freed_wait(ctx) is not None

        def room(gpu: Cell) -> bool:
            """Whether freeing ``gpu`` can add to a cell the preemptor could get."""
            chain = gpu.chain
            level = level_in.get(chain)
            if level is None:
                return False  # a chain none of its targets is in
            cell = gpu  # up to the cell enclosing it in the buddy allocator: free, bound or pinned
            while cell.buddy_state() is _INSIDE:
                parent = cell.parent
                if parent is None:
                    return True  # outside the buddy allocator's cells: not known, allowed
                cell = parent
            state = cell.state
            if state is _BOUND or state is _PINNED:
                # No pod of the VC is placed in a draining cell: freeing GPUs there gives nothing.
                return cell.vc == vc.name and cell.level >= level and cell not in draining
            # free: a cell of a type the VC may still bind, at the request's level or above,
            # that holds the GPU (one no higher than the free cell around it)
            return any(
                vc.unbound(cell_type) > 0 and chain_of_type.get(cell_type) is chain
                for cell_type in chain.types[level - 1 : cell.level]
            )

        def unbinds_for(root: Cell, gpus: int) -> bool:
            """Whether a guaranteed booking of ``gpus`` on the draining ``root`` is its last, and
            the VC may bind a cell of that chain in it once it is unbound: quota of a type at the
            request's level or above, below the root's, left unbound."""
            level = level_in.get(root.chain)
            if level is None or root.guaranteed_used > gpus:
                return False
            return any(vc.unbound(cell_type) > 0 for cell_type in root.chain.types[level - 1 : root.level - 1])

        def helps(victim: PodInfo) -> bool:
            if waits:
                return False
            booking = by_pod.get(victim.uid)
            if booking is None:
                return True
            if booking.priority is Priority.GUARANTEED:
                if booking.vc != vc.name:
                    return False
                root = booking.root
                return root is None or root not in draining or unbinds_for(root, len(booking.gpus))
            return any(room(gpu) for gpu in booking.gpus)

        return helps

    def freeing_wait(self, pod: PodInfo) -> str | None:
        """The filter's sentence while no pod is preempted for ``pod`` because a cell of its VC
        is being freed by pods leaving (freeing.py), for the preempt verb's refusal (FitGpp's
        ``WaitsForFreedCells``, which then chooses no victim at all, the VC's own best-effort
        pods included); None when the pod does not wait so (not a
        guaranteed GPU pod, cells booked for it already, nothing of its VC being freed)."""
        if pod.requests.gpus == 0 or not (self.expiry.any_leaving or self._just_freed) or pod.uid in self.allocator.by_pod:
            return None
        try:
            ctx = self._context(pod)
        except (Unplaceable, InvalidAnnotation):
            return None
        if ctx.request.priority is not Priority.GUARANTEED:
            return None
        freeing = self._freeing(ctx)
        if freeing is None:
            return self._freed_wait(ctx, pod=pod)
        self._awaits(ctx, pod, freeing.cell.node)
        return self._freeing_reason(ctx, freeing)

    def request_refusal(self, pod: PodInfo) -> str | None:
        """HiveD's refusal of a GPU pod whose request does not resolve (its virtual cluster
        unknown, a cellfit annotation that does not read, no cell type or cell that could hold
        its GPUs), as its filter says it, for the preempt verb's refusal (FitGpp's
        ``ExplainsRefusals``): no reclaim was looked for. Also a guaranteed pod of no gang,
        without cells, whose VC's quota is all in use (its filter's "quota exhausted", with
        who holds it): where kube-scheduler's own filters turned every node away, the refusal
        is all cellfit says (user26 #1). None when the request resolves and quota is left, or
        for a pod asking no GPU."""
        if pod.requests.gpus == 0:
            return None
        try:
            ctx = self._context(pod)
        except (Unplaceable, InvalidAnnotation) as error:
            return self._refusal(error)
        if ctx.request.priority is not Priority.GUARANTEED or ctx.request.gang is not None or pod.uid in self.allocator.by_pod:
            return None
        try:
            self.allocator.plan(ctx.request, ctx.vc, ctx.targets, allowed=None)  # plans only: books nothing
        except QuotaExhausted as error:
            holders = self.allocator.planner.quota_holders(error)
            return self._refusal(error).replace(error.reason, f"{error.reason}, held by {holders}" if holders else error.reason, 1)
        except Unplaceable:
            pass
        return None

    def reclaim_victims(
        self, pod: PodInfo, candidates: Mapping[str, Sequence[str]], victim_pods: Mapping[str, PodInfo]
    ) -> dict[str, list[str]]:
        """HiveD's victims are always a reclaim: opportunistic pods on cells owed to the pod's VC
        (FitGppEngine lets these go first, whatever the pod's job class)."""
        return self.select_victims(pod, candidates, victim_pods)

    def reserve(self, pod: PodInfo, node_name: str) -> Placement:
        if node_name not in self.topology.nodes and node_name not in self._nodes:
            raise UnknownNode(node_name)
        if pod.requests.gpus == 0:
            return Placement(pod_uid=pod.uid, node_name=node_name)
        if node_name not in self.topology.nodes:
            raise SchedulingConflict(f"node {node_name} has no HiveD GPU cells")
        if self._claims:
            self._settle_claims()
        held = self.allocator.by_pod.get(pod.uid)
        try:
            ctx = self._context(pod)
            decided = self._decide(pod, ctx, frozenset({node_name}))
        except (Unplaceable, InvalidAnnotation) as error:
            raise SchedulingConflict(self._refusal(error)) from None
        if held is not None and decided.booking is held and held.group is None:
            self._reserved_as_booked.add(pod.uid)
        else:
            self._reserved_as_booked.discard(pod.uid)
        if decided.node != node_name:
            raise SchedulingConflict(f"HiveD placed this pod's GPUs on node {decided.node}, not {node_name}")
        booking = decided.booking
        if booking is None:
            assert decided.spot is not None
            booking = self._book(decided.spot, ctx, pod)
            self.expiry.booked_for(pod.uid)
        victims = self.allocator.victims(booking)
        if victims:
            raise SchedulingConflict(self._victim_reason(booking, victims))
        return Placement(
            pod_uid=pod.uid,
            node_name=node_name,
            annotations={
                ANNOTATION_BIND_INFO: bindinfo.encode(booking),
                ANNOTATION_GPU_INDICES: bindinfo.gpu_indices_annotation(booking),
            },
        )

    def unreserve(self, pod_uid: str) -> None:
        # A bind that failed leaves the pod as it was before the reservation: the cells its
        # preemption booked stay booked for its retry (their victims may be gone already; the
        # next opportunistic pod must not take them), and cells the reservation booked go, as
        # if the pod were gone (a gang slot stays booked for the gang's other pods, as when a
        # member pod is deleted). A booking kept whose pod never returns expires (expiry.py).
        # The pod, pending again, still waits for the cells it was told to wait for (JustFreed):
        # they stay kept from opportunistic pods for its retry (review28 #2).
        if pod_uid in self._reserved_as_booked:
            self._reserved_as_booked.discard(pod_uid)
            return
        if pod_uid in self._seen_bound:
            return
        self._gone(pod_uid)

    # ------------------------------------------------------------------ cluster state

    def apply_node(self, node: NodeInfo) -> None:
        self._nodes[node.name] = node
        self.node_index.add(node.name)
        membership = self.membership
        if membership is not None and node.allocatable.gpus > 0 and not membership.is_member(node.name):
            # Discovered cells: a new GPU node (or a late device plugin, or a deleted node that
            # came back) joins them now, unless its GPU count is beyond belief.
            problem = membership.join_problem(node)
            if problem is None:
                self._changed(membership.join(node))
                self._warn_old_names()
            elif node.name not in self._strays:
                self._strays.add(node.name)  # said once, until it joins or is deleted
                self.allocator.note(problem)
                self._tell(problem)
        cell = self.topology.nodes.get(node.name)
        if cell is None:
            if node.allocatable.gpus > 0 and node.name not in self._strays:
                self._strays.add(node.name)  # node status updates arrive every few seconds
                self.allocator.note(
                    f"node {node.name} has {node.allocatable.gpus} GPUs but is in no HiveD cell "
                    "(add it to the topology, or restart to rediscover)"
                )
            return
        # A node that lost GPUs is treated as bad as a whole: which GPU failed is not on the
        # Node object, and a pod placed on a missing GPU would never start. So is a node that
        # was deleted but still holds pods (it leaves the cells once they have finished).
        deleted = membership is not None and not membership.is_member(node.name)
        bad = (not node.ready) or node.unschedulable or node.allocatable.gpus < cell.total or deleted
        self.allocator.set_node_bad(node.name, bad)
        self.node_troubles.node_seen(self.allocator, node.name, bad_node_cause(node, cell=cell, member=not deleted))

    def delete_node(self, node_name: str) -> None:
        self._nodes.pop(node_name, None)
        self._strays.discard(node_name)
        if node_name not in self.topology.nodes:
            self.node_index.remove(node_name)
            return
        self.allocator.set_node_bad(node_name, True)
        if self.membership is not None:
            self._changed(self.membership.leave(node_name))
        # After the cells follow it: a discovered node that left them (scaled down) is no VC's
        # trouble; a configured cell's node deleted is.
        self.node_troubles.node_seen(self.allocator, node_name, DELETED)

    def _remember_old_names(self, vcs: Mapping[str, VirtualClusterSpec], *, prefix: str) -> None:
        """Discovered cells: remember the fields of ``vcs`` (as written) that name a cell type by
        its old unsized name, taken while the product has one node size."""
        if self.membership is None:
            return
        aliases = legacy_names(self.topology.config.cell_types).aliases
        self._old_names = {}
        for vc, spec in vcs.items():
            where = field_path(("virtualClusters", vc), prefix=prefix)
            for i, cell in enumerate(spec.cells):
                if cell.cell_type in aliases:
                    self._old_names[f"{spec.cells_path(where, i)}.cellType"] = (cell.cell_type, aliases[cell.cell_type])
        self._old_names_said &= self._old_names.keys()

    def _warn_old_names(self) -> None:
        """A node joined: say, once per field, each old unsized name a node of another size of
        its product has made ambiguous. It still means its type here, but a restart refuses it and
        leaves the VC unserved."""
        if not self._old_names.keys() - self._old_names_said:
            return
        ambiguous = legacy_names(self.topology.config.cell_types).ambiguous
        for where, (old, stable) in self._old_names.items():
            if where in self._old_names_said or old not in ambiguous:
                continue
            self._old_names_said.add(where)
            others = ", ".join(repr(t) for t in ambiguous[old] if t != stable)
            log.warning("cells configuration: a name to change", extra={"problem": (
                f"{where}: {old!r} still means {stable!r} here, but nodes of another size of its GPU product joined "
                f"({others}), and it names nothing after a restart (its virtual cluster is then not served): write {stable!r}")})

    def _changed(self, changed: CellsChanged) -> None:
        """The cells changed at runtime: refresh what depends on the node set, and tell."""
        if not changed:
            return
        self._index_nodes()
        self._strays.difference_update(self.topology.nodes)
        for node_name in changed.rebuilt:
            info = self._nodes.get(node_name)
            if info is not None and node_name in self.topology.nodes:
                self.apply_node(info)  # a new cell is healthy; the node may be NotReady or cordoned
        self._refresh_summary()
        for message in changed.messages:
            self._tell(message)

    def _tell(self, message: str) -> None:
        self.changes.append(message)
        if self._on_change is not None:
            self._on_change(message)

    def _refresh_summary(self) -> None:
        """The one-line summary (startup log, /v1/inspect/engine) after a runtime change."""
        self.summary = describe(
            self.topology.config,
            self._virtual_cluster_specs(),
            discovered=self.membership is not None,
            nodes_without_gpus=sum(1 for n in self._nodes.values() if n.allocatable.gpus == 0),
            unserved=self.allocator.virtual_clusters.unserved,
        )

    def _virtual_cluster_specs(self) -> dict[str, VirtualClusterSpec]:
        return {
            name: VirtualClusterSpec(
                cells=tuple(VirtualCellSpec(cell_type=t, count=n) for t, n in vc.quota.items()),
                pinned_cells=tuple(c.pinned_id for c in vc.pinned if c.pinned_id is not None),
            )
            for name, vc in self.allocator.vcs.items()
            if vc.defined
        }

    def _released(self) -> None:
        """Pods left: a discovered cluster may now apply changes that waited for their cells."""
        if self.membership is not None:
            self._changed(self.membership.released())

    def apply_pod(self, pod: PodInfo) -> None:
        if pod.requests.gpus == 0:
            return
        existing = self.allocator.by_pod.get(pod.uid)
        if pod.phase in TERMINAL_PHASES:
            self.delete_pod(pod.uid)  # finished holds nothing, as gone (a leaving VC pod's cells: JustFreed)
            return
        self.expiry.pod_seen(pod)
        if not pod.holds_resources:
            self._follow_reclaim_record(pod)  # pending: keep whatever filter or the leader's reclaim booked for it
            return
        self._reclaim_records.pop(pod.uid, None)
        self._reclaim_marks.pop(pod.uid, None)
        self._reserved_as_booked.discard(pod.uid)  # bound: no bind of it fails any more
        newly_bound = pod.uid not in self._seen_bound
        self._seen_bound.add(pod.uid)
        self._claims.end(pod.uid)  # bound: the cells booked for it are its own
        if existing is None or existing.node != pod.node_name:
            if existing is not None:
                # Bound somewhere else than HiveD planned (another binder, or a stale booking).
                self._unassign(existing)
            self._recover(pod)
        self._takes_freed_cells(pod, newly_bound=newly_bound)

    def _takes_freed_cells(self, pod: PodInfo, *, newly_bound: bool) -> None:
        """``pod`` is bound, as the watch shows: it waits for no cells, and the cells its VC freed
        just now on its node are taken once no other pod waits for them (JustFreed.bound). Not
        at reserve: a bind that fails leaves them to the pod's retry (review28 #2)."""
        booking = self.allocator.by_pod.get(pod.uid)
        if newly_bound and booking is not None and pod.node_name is not None:
            self._just_freed.bound(vc=booking.vc, node=pod.node_name, pod_uid=pod.uid)
        else:
            self._just_freed.forget_pod(pod.uid)

    def _recover(self, pod: PodInfo) -> None:
        alloc = self.allocator
        node = pod.node_name
        assert node is not None
        raw = pod.annotations.get(ANNOTATION_BIND_INFO)
        info: bindinfo.BindInfo | None = None
        if raw is not None:
            try:
                info = bindinfo.decode(raw)
            except InvalidAnnotation as error:
                alloc.note(f"pod {pod.key}: {error}; recovering it without")
        if info is not None and len(info.gpu_indices) != pod.requests.gpus:
            alloc.note(
                f"pod {pod.key}: its bind-info names {len(info.gpu_indices)} GPUs but it requests "
                f"{pod.requests.gpus}; re-placing it on {node}"
            )
            info = None
        if info is not None and info.node != node:
            alloc.note(f"pod {pod.key}: its bind-info names node {info.node} but it runs on {node}; re-placing it there")
        elif info is not None:
            if self._recover_from_info(pod, info) is not None:
                return
            alloc.note(f"pod {pod.key}: its bind-info no longer fits the cluster state; re-placing it on {node}")
        try:
            request = parse_request(pod)
            vc = alloc.vcs.get(request.vc or self.default_vc or "")
        except InvalidAnnotation:
            request = CellRequest(vc=None, priority=Priority.OPPORTUNISTIC, gpus=pod.requests.gpus, cell_type=None, gang=None)
            vc = None
        if request.gang is not None:
            request = CellRequest(vc=request.vc, priority=request.priority, gpus=request.gpus, cell_type=request.cell_type, gang=None)
        kept = info.gpu_indices if info is not None and info.node == node else ()
        alloc.recover_on_node(request, vc, node, pod_uid=pod.uid, pod_key=pod.key, gpu_indices=kept)

    def _recover_from_info(self, pod: PodInfo, info: bindinfo.BindInfo, *, pending: bool = False) -> Booking | None:
        """``pending``: a pending pod's reclaim record, not a running pod's bind-info
        (recovery.Recovery.recover_exact)."""
        alloc = self.allocator
        # The implicit default VC owns every cell, so no other VC's cell lies around the one a
        # pod's bind-info names: recovery may choose a larger cell of the VC (recovery.py).
        rehome = self.default_vc is not None
        group: Group | None = None
        if info.gang is not None:
            group = alloc.groups.get(info.gang.key)
            if group is None:
                group = Group(
                    key=info.gang.key,
                    name=info.gang.name,
                    vc=info.vc,
                    priority=info.priority,
                    size=info.gang.size,
                    gpus=len(info.gpu_indices),
                    cell_type=info.cell_type,
                )
                alloc.groups[group.key] = group
                self.expiry.gang_changed(group.key)  # its siblings' slots wait for their pods
                for slot in info.gang.slots:
                    booked = alloc.recover_exact(
                        vc_name=info.vc,
                        priority=info.priority,
                        node=slot.node,
                        gpu_indices=slot.gpu_indices,
                        root_id=slot.vc_cell,
                        cell_type=info.cell_type,
                        pod_uid=None,
                        pod_key=None,
                        group=group,
                        rehome=rehome,
                        pending=pending,
                    )
                    if booked is not None:
                        group.slots.append(booked)
                self._trim_gang(group)
            wanted = sorted(info.gpu_indices)
            for booking in group.slots:
                if booking.pod_uid is None and booking.node == info.node and booking.gpu_indices == wanted:
                    alloc.assign(booking, pod.uid, pod.key)
                    return booking
        recovered = alloc.recover_exact(
            vc_name=info.vc,
            priority=info.priority,
            node=info.node,
            gpu_indices=info.gpu_indices,
            root_id=info.vc_cell,
            cell_type=info.cell_type,
            pod_uid=pod.uid,
            pod_key=pod.key,
            group=group,
            rehome=rehome,
            pending=pending,
        )
        if recovered is not None and group is not None:
            group.slots.append(recovered)
            self._trim_gang(group)
        if group is not None and not group.slots:
            alloc.groups.pop(group.key, None)
        return recovered

    def _trim_gang(self, group: Group) -> None:
        """A gang recovered from several pods' bind-info holds at most its size of slots: a pod's
        own slot not in an older sibling's record (a slot moved after that sibling was bound)
        replaces one of the slots without a pod, which would otherwise hold its cells until the
        whole gang is gone."""
        alloc = self.allocator
        while len(group.slots) > group.size:
            podless = [slot for slot in group.slots if slot.pod_uid is None]
            if not podless:
                return
            extra = podless[-1]
            alloc.note(f"gang {group.name}: {len(group.slots)} slots recovered for its {group.size} pods; the slot on {extra.node} without a pod is released")
            alloc.release(extra)

    def delete_pod(self, pod_uid: str) -> None:
        self._just_freed.forget_pod(pod_uid)
        self._gone(pod_uid)

    def _gone(self, pod_uid: str) -> None:
        """The pod holds nothing any more: gone, finished, or its bind failed (``unreserve``)."""
        self._reclaim_marks.pop(pod_uid, None)
        self._reserved_as_booked.discard(pod_uid)
        was_bound = pod_uid in self._seen_bound
        self._seen_bound.discard(pod_uid)
        self._reclaim_records.pop(pod_uid, None)
        self._claims.end(pod_uid)
        # Its cells are freed just now (JustFreed) if it was leaving, or bound and gone without
        # the watch showing it leaving: finished (kube-scheduler's pod informer, as cellfit's
        # cache, lists no finished pod: it sees it deleted) or deleted at once. Either way
        # kube-scheduler's cache drops it a moment after cellfit's watch (review28).
        was_freeing = self.expiry.is_freeing(pod_uid) or was_bound
        self.expiry.pod_gone(pod_uid)
        booking = self.allocator.by_pod.get(pod_uid)
        if booking is not None and was_freeing and booking.group is None and booking.node is not None and booking.pod_key is not None:
            for vc in vcs_freed_by(booking, vcs=self.allocator.vcs):  # before _unassign: it may unbind the VC's cell
                self._just_freed.left(pod_key=booking.pod_key, vc=vc, node=booking.node)
        if booking is not None:
            self._unassign(booking)
            self._released()
            self._victim_left(pod_uid)

    # ------------------------------------------------------------------ Jobs and expiry

    def apply_job(self, job: JobInfo) -> None:
        """The Job's width: a gang larger than it can ever run is refused at filter."""
        self.expiry.job_applied(job)

    def give_back_gang(self, job_uid: str) -> None:
        """The Job's gang was preempted whole: none of its bookings outlives its pods (gangs.py)."""
        if give_back_gang(self.allocator.bookkeeper, job_uid):
            self._released()

    def delete_job(self, job_uid: str) -> None:
        """The Job is gone: its gang's slots without a pod are released (told at the next sweep)."""
        self.expiry.job_deleted(job_uid)
        self._released()

    def expire_bookings(self, now: float) -> list[BookingReleased]:
        """Release the bookings that have waited past their limits for their reason (expiry.py);
        ``now`` in seconds on the caller's monotonic clock, called periodically. What was
        released since the last call, to be told on each pod or Job."""
        released = self.expiry.expire(now)
        for uid, said in self.expiry.take_overstays():
            log.warning(said, extra={"uid": uid})
        if released:
            self._released()
        return released

    @property
    def booking_limits(self) -> BookingLimits:
        return self.expiry.limits

    def watch_pods(self, watched: bool) -> None:
        self.expiry.pods_watched = watched

    def knows_node(self, node_name: str) -> bool:
        return node_name in self._nodes or node_name in self.topology.nodes

    def stats(self) -> Mapping[str, int]:
        alloc = self.allocator
        return {
            "nodes": len(self.topology.nodes),
            "gpus": self.topology.total_gpus(),
            "pods": len(alloc.by_pod),
            "bookings": len(alloc.bookings),
            "gangs": len(alloc.groups),
            "virtualClusters": sum(1 for vc in alloc.vcs.values() if vc.defined),
        }

    # ------------------------------------------------------------------ explanations

    def pending_preemptions(self) -> dict[str, list[str]]:
        """Pod UID of a waiting guaranteed pod -> UIDs of the opportunistic pods it waits for
        (:meth:`waiting_guarantees`, without the cells)."""
        return {waiting.pod_uid: list(waiting.victims) for waiting in self.waiting_guarantees()}

    def waiting_guarantees(self) -> list[WaitingGuarantee]:
        """Each guaranteed pod whose booked cells opportunistic pods still use, with those pods:
        what kube-scheduler's preemption gives back, and what a driver deletes itself where
        kube-scheduler cannot (a victim of equal or higher priority: scheduler/cluster/reclaim.py)."""
        waiting = (self._waiting(booking) for booking in self.allocator.bookings.values() if booking.pod_uid is not None)
        return [entry for entry in waiting if entry is not None]

    def _waiting(self, booking: Booking, pod_uid: str | None = None) -> WaitingGuarantee | None:
        """What the booking's pod (or ``pod_uid``, taking the slot) waits for; None when nothing."""
        pod_uid = pod_uid or booking.pod_uid
        victims = tuple(v.pod_uid for v in self.allocator.victims(booking) if v.pod_uid is not None)
        if not victims or pod_uid is None:
            return None
        cell = booking.root.id if booking.root is not None else booking.cell_type
        return WaitingGuarantee(pod_uid=pod_uid, vc=booking.vc, cell=cell, node=booking.node, victims=victims)

    def booked_nodes(self) -> dict[str, str]:
        """Pod UID -> the node of the cells booked for it, for every pod with cells of its own
        (a pending pod's cores and memory will be wanted there)."""
        return {uid: booking.node for uid, booking in self.allocator.by_pod.items() if booking.node is not None}

    def _stranded_request(self, pod: PodInfo) -> _Context | None:
        """The context of a guaranteed GPU pod without cells of its own (None for any other, and
        for one whose cellfit annotation does not read). Raises :class:`Unplaceable` for a pod
        whose request never resolves (its VC unknown, removed by a reload or not named, more GPUs
        than its cells hold): on purpose, not None, as the leader's reclaim
        (scheduler/cluster/stranded.py) names such a pod once in its log from that reason and goes
        on with the others; None here would skip it without a word."""
        if pod.requests.gpus == 0 or pod.uid in self.allocator.by_pod:
            return None
        try:
            ctx = self._context(pod)
        except InvalidAnnotation:
            return None
        return ctx if ctx.request.priority is Priority.GUARANTEED else None

    def reclaim_candidate(self, pod: PodInfo) -> bool:
        """Whether the pod is a guaranteed GPU pod without cells of its own: one whose cells the
        leader may book when kube-scheduler cannot bring it to the filter (nothing is planned)."""
        return self._stranded_request(pod) is not None

    def book_reclaim(self, pod: PodInfo, *, among: Sequence[str]) -> WaitingGuarantee | None:
        """Book the cells of a guaranteed pod kube-scheduler found no node for on one of the
        nodes ``among`` (those it would accept the pod on, their GPUs aside), as the filter books
        a pod waiting for its victims, and return what it waits for; None, nothing booked for it,
        when it needs no victim there (kube-scheduler's own business) or cannot be placed there.
        A gang's pod takes its slot of the gang's booking, planned whole as the filter plans it;
        a slot that needs no victim is left to the gang."""
        if self._claims:
            self._settle_claims()
        ctx = self._stranded_request(pod)
        if ctx is None:
            return None
        allowed = frozenset(among)
        try:
            if ctx.request.gang is not None:
                decided = self._decide_gang(pod, ctx, allowed)
                if decided.booking is not None and not decided.victims:
                    self._unassign(decided.booking)
                    return None
                return self._reclaiming(decided.booking, marks=pod.uid) if decided.booking is not None else None
            spot = self._reclaim_spot(ctx, allowed)
        except Unplaceable:
            return None
        if spot is None:
            return None
        booking = self._book(spot, ctx, pod)
        self.expiry.booked_for(pod.uid)
        return self._reclaiming(booking, marks=pod.uid)

    def _reclaim_spot(self, ctx: _Context, allowed: AbstractSet[str]) -> Spot | None:
        """Where a single stranded pod's cells would be booked among ``allowed``: None when it
        needs no victim there, or waits for cells of its VC being freed (freeing.py). Raises
        :class:`Unplaceable`."""
        spot = self.allocator.plan(ctx.request, ctx.vc, ctx.targets, allowed=allowed)
        if not self.allocator.planner.preempts(spot) or self._preempts_for_nothing(ctx, spot) is not None:
            return None
        if ctx.request.priority is Priority.GUARANTEED and self._freed_wait(ctx) is not None:
            return None
        return spot

    def reclaim_need(self, pod: PodInfo, *, among: Sequence[str]) -> WaitingGuarantee | None:
        """What :meth:`book_reclaim` would book for the pod among the nodes ``among`` and wait
        for, without booking anything or counting any pod as leaving: the leader asks before it
        books (scheduler/cluster/stranded.py). None when it would book nothing. Exact for a
        single pod and for a gang's pod that would take a free slot its gang holds there; a gang
        pod whose slot would be planned (no slot booked for the gang there yet) is answered with
        its gang's first slot, planned alone (its booking may choose another: the leader checks
        the booking's own answer too). Raises :class:`Unplaceable` as :meth:`book_reclaim` does."""
        ctx = self._stranded_request(pod)
        if ctx is None:
            return None
        allowed = frozenset(among)
        gang = ctx.request.gang
        try:
            if gang is not None:
                held = self._gang_slot(ctx, allowed)
                if held is not None:
                    return self._waiting(held, pod.uid)
                spot: Spot | None = self.allocator.plan(ctx.request, ctx.vc, ctx.targets, allowed=allowed)
                if spot is not None and not self.allocator.planner.preempts(spot):
                    spot = None
            else:
                spot = self._reclaim_spot(ctx, allowed)
        except Unplaceable:
            return None
        if spot is None or ctx.vc is None:
            return None
        bookings = self.allocator.bookings
        owners = sorted({gpu.opportunistic_owner for gpu in spot.gpus if gpu.opportunistic_owner is not None})
        victims = tuple(uid for i in owners if i in bookings and (uid := bookings[i].pod_uid) is not None)
        if not victims:
            return None
        cell = spot.root.id if spot.root is not None else spot.chain.type_at(spot.level)
        return WaitingGuarantee(pod_uid=pod.uid, vc=ctx.vc.name, cell=cell, node=spot.gpus[0].node, victims=victims)

    def _gang_slot(self, ctx: _Context, allowed: AbstractSet[str]) -> Booking | None:
        """The free slot of the pod's gang on the ``allowed`` nodes its filter would take,
        without taking it; None when the gang has none there. Raises :class:`Unplaceable` where
        :meth:`_decide_gang` refuses the pod."""
        gang = ctx.request.gang
        assert gang is not None
        problem = self.expiry.gang_problem(gang)
        if problem is not None:
            raise Unplaceable(f"gang {gang.name}: {problem}")
        group = self.allocator.groups.get(gang.key)
        if group is None:
            return None
        if group.gpus != ctx.request.gpus:
            raise Unplaceable(f"pods of gang {gang.name} request different GPU counts ({group.gpus} and {ctx.request.gpus})")
        return self._best_slot([slot for slot in group.slots if slot.pod_uid is None], allowed)

    def _reclaiming(self, booking: Booking, *, marks: str | None = None) -> WaitingGuarantee | None:
        """What the booking waits for, its victims counted as leaving: the leader's reclaim
        deletes them (or gives the booking back). ``marks``: the pod whose :meth:`cancel_reclaim`
        takes back the marks made here."""
        waiting = self._waiting(booking)
        if waiting is not None:
            marked = self.expiry.victims_leaving(waiting.victims)
            if marks is not None and marked:
                self._reclaim_marks[marks] = marked
        return waiting

    def cancel_reclaim(self, pod_uid: str) -> None:
        """Give back what :meth:`book_reclaim` booked for the pod (its driver found the node
        would not take the pod after all); the pod is as if never booked (a gang's slot stays
        for the gang while another of its pods holds one), and the victims it marked leaving
        are not, unless the watch has shown them terminating since."""
        self.expiry.victims_staying(self._reclaim_marks.pop(pod_uid, ()))
        booking = self.allocator.by_pod.get(pod_uid)
        if booking is not None:
            self._unassign(booking)
            self._released()

    def reclaim_record(self, pod_uid: str) -> str | None:
        """The cells booked for the pod, as its annotation ``cellfit.io/reclaim-booking`` records
        them (bind-info's format); None when it has none. The leader writes it on the pod before
        deleting a victim, and every replica's engine keeps those cells for the pod
        (:meth:`apply_pod`), whichever replica's filter kube-scheduler calls."""
        booking = self.allocator.by_pod.get(pod_uid)
        return bindinfo.encode(booking) if booking is not None and booking.node is not None else None

    def _follow_reclaim_record(self, pod: PodInfo) -> None:
        """A pending pod as the watch shows it: its reclaim record applied when it appears or
        changes, and its cells given back when it goes."""
        text = pod.annotations.get(ANNOTATION_RECLAIM_BOOKING)
        applied = self._reclaim_records.get(pod.uid)
        if text == (applied[0] if applied is not None else None):
            return
        if applied is not None:
            del self._reclaim_records[pod.uid]
            if applied[1] is not None and self._holds_recorded(pod.uid, applied[1]):
                self.cancel_reclaim(pod.uid)
        if text is not None:
            self._reclaim_records[pod.uid] = (text, self._keep_recorded(pod, text))

    def _holds_recorded(self, pod_uid: str, info: bindinfo.BindInfo) -> bool:
        """Whether the pod's booking is on exactly the GPUs its record names."""
        booking = self.allocator.by_pod.get(pod_uid)
        return booking is not None and booking.node == info.node and booking.gpu_indices == sorted(info.gpu_indices)

    def _keep_recorded(self, pod: PodInfo, text: str) -> bindinfo.BindInfo | None:
        """Book the cells a reclaim record names for the pending pod (the leader is deleting
        their victims): exactly those GPUs, in place of whatever this engine held for the pod.
        None, and the reason told, when the record does not read, is not the pod's, or no
        longer fits; nothing is booked then."""
        try:
            info = bindinfo.decode(text)
        except InvalidAnnotation as error:
            self._ignore_record(pod, f"does not read ({str(error).removeprefix(f'{error.field}: ')})")
            return None
        if self._holds_recorded(pod.uid, info):
            self._reclaiming(self.allocator.by_pod[pod.uid])
            return info  # booked here already (on the leader, by its reclaim)
        problem = self._record_problem(pod, info)
        if problem is not None:
            self._ignore_record(pod, problem)
            return None
        existing = self.allocator.by_pod.get(pod.uid)
        if existing is not None:
            self._unassign(existing)
        booking = self._recover_from_info(pod, info, pending=True)
        if booking is None:
            self._released()
            self._ignore_record(pod, f"names GPUs {list(info.gpu_indices)} of node {info.node} in cell {info.vc_cell}, "
                                     "which no longer fit (another guaranteed pod holds them, or the cell is not its VC's to bind)")
            return None
        self.expiry.booked_for(pod.uid)
        self._reclaiming(booking)
        return info

    def _record_problem(self, pod: PodInfo, info: bindinfo.BindInfo) -> str | None:
        """Why a reclaim record that reads is not the pod's to keep, or None."""
        if info.node not in self.topology.nodes:
            return f"names node {info.node!r}, which has no HiveD cells"
        if info.priority is not Priority.GUARANTEED:
            return f"names priority {info.priority.value!r}: only guaranteed pods have cells reclaimed"
        if len(info.gpu_indices) != pod.requests.gpus:
            return f"names {len(info.gpu_indices)} GPUs but the pod requests {pod.requests.gpus}"
        try:
            request = parse_request(pod)
        except InvalidAnnotation as error:
            return f"is not kept: the pod's own request does not read ({error})"
        vc = request.vc or self.default_vc
        if info.vc != vc or request.priority is not Priority.GUARANTEED:
            return f"names virtual cluster {info.vc!r} for a {request.priority.value} pod of {vc!r}"
        gang = request.gang
        if (info.gang is None) != (gang is None) or (gang is not None and info.gang is not None and info.gang.key != gang.key):
            return "names a gang the pod is not in" if info.gang is not None else "names no gang, but the pod is in one"
        return None

    def _ignore_record(self, pod: PodInfo, why: str) -> None:
        message = f"pod {pod.key}: annotation {ANNOTATION_RECLAIM_BOOKING} {why}; ignored, no cells kept for it here"
        self.allocator.note(message)
        self._tell(message)

    # ------------------------------------------------------------------ FitGpp's preemptors

    def book_for_preemptor(self, pod: PodInfo, *, node: str, victims: AbstractSet[str]) -> None:
        """FitGpp preempted ``victims`` (pod UIDs) on ``node`` for the pending ``pod`` (or a
        restart rebuilt that decision from the pod's record): once they have left, the pod's cells
        there are booked for it, so its VC's quota waits for it (preemptor_claims.py). Nothing for
        a pod HiveD holds cells for already, or a node without cells."""
        if pod.requests.gpus == 0:
            return
        booking, claim = self.allocator.by_pod.get(pod.uid), self._claims.get(pod.uid)
        if booking is not None and (claim is None or claim.booking != booking.id):
            return  # HiveD holds cells for it otherwise (its filter's or the leader's reclaim booking)
        if node not in self.topology.nodes:
            self.preemptor_hold_ended(pod.uid)  # its preemption moved off the cells: what they kept goes back
            return
        # A claim on another node (FitGpp preempted for it again elsewhere, its room there no
        # longer kept): the cells booked there go back.
        replaced = self._claims.claim(pod, node=node, victims=victims)
        if replaced is not None:
            self._give_back_claimed(pod.uid, replaced.booking)

    def pods_listed(self) -> None:
        """The watch has applied a whole list of the pods (a restart's first relist recovers every
        binding): what waited for the bindings is judged now (node_troubles.py)."""
        self.node_troubles.pods_recovered(self.allocator)

    def books_cells_for(self, pod: PodInfo) -> bool:
        """Whether FitGpp's preemptor ``pod`` gets its cells booked once its victims have left
        (preemptor_claims.py): a guaranteed pod of no gang asking GPUs, whose VC's quota is to
        wait for it. Others (opportunistic, a gang's pod, which books its slots itself) have the
        node's room kept only."""
        if pod.requests.gpus == 0:
            return False
        try:
            return keeps_quota(parse_request(pod))
        except InvalidAnnotation:
            return False

    def cells_booked_for(self, pod_uid: str) -> str | None:
        """The node whose cells are booked for FitGpp's preemptor ``pod_uid`` because its victims
        there have left (its claim's booking, not moved since), or None (FitGppEngine's
        ``KeepsPreemptorCells``: the preempt verb then takes no second victim for it)."""
        if not self._claims:
            return None
        self._settle_claims()
        claim = self._claims.get(pod_uid)
        booking = self.allocator.by_pod.get(pod_uid)
        if claim is None or booking is None or claim.booking != booking.id or self.allocator.victims(booking):
            return None
        return booking.node

    def preemptor_hold_ended(self, pod_uid: str) -> None:
        """The pod's preemptor hold ended without a binding (it lapsed, its wait for victims
        stuck leaving ran out, or its record was taken off): the cells booked for it go back."""
        claim = self._claims.end(pod_uid)
        if claim is not None:
            self._give_back_claimed(pod_uid, claim.booking)

    def _give_back_claimed(self, pod_uid: str, booking_id: int | None) -> None:
        booking = self.allocator.by_pod.get(pod_uid)
        if booking is None or booking.id != booking_id or pod_uid in self._seen_bound:
            return
        self._reserved_as_booked.discard(pod_uid)
        self._unassign(booking)
        self._released()

    def _victim_left(self, pod_uid: str) -> None:
        """A pod released its cells: a preemptor it was a victim of gets its own in the same step."""
        if self._claims:
            self._settle_claims(released=pod_uid)

    def _settle_claims(self, *, released: str | None = None) -> None:
        """Book the cells of each claim whose victims have all left (``released``: only the
        claims naming that pod). A claim whose pod no longer fits its node ends, noted."""
        alloc = self.allocator
        for claim in self._claims.due(alloc.by_pod, released=released):
            pod = claim.pod
            if pod.uid in alloc.by_pod:
                self._claims.end(pod.uid)  # HiveD booked cells for it otherwise (its reclaim)
                continue
            try:
                ctx = self._context(pod)
                if not keeps_quota(ctx.request):
                    self._claims.end(pod.uid)
                    continue
                spot = alloc.plan(ctx.request, ctx.vc, ctx.targets, allowed=frozenset({claim.node}))
            except (Unplaceable, InvalidAnnotation) as error:
                self._claims.end(pod.uid)
                alloc.note(f"pod {pod.key}: no cells booked for it on node {claim.node}, where FitGpp preempted pods for it: "
                           f"{error.reason if isinstance(error, Unplaceable) else error}")
                continue
            claim.booking = self._book(spot, ctx, pod).id
            self.expiry.booked_for(pod.uid)

    def _move_claimed(self, ctx: _Context, held: Booking, allowed: AbstractSet[str] | None) -> _Decision:
        """The cells booked for FitGpp's preemptor on a node kube-scheduler does not offer it
        (its cache may count the victims there a moment longer than the watch did): the pod goes
        where the offered nodes take it, its booking moved there in the same step, so its VC's
        quota stays its own until it binds; where they take it nowhere, its booking stays."""
        alloc = self.allocator
        assert held.pod_uid is not None and held.pod_key is not None and held.node is not None
        claim = self._claims.get(held.pod_uid)
        assert claim is not None
        alloc.release(held)
        try:
            spot = alloc.plan(ctx.request, ctx.vc, ctx.targets, allowed=allowed)
        except Unplaceable:
            spot = alloc.plan(ctx.request, ctx.vc, ctx.targets, allowed=frozenset({held.node}))  # the cells just given back
            claim.booking = self._book(spot, ctx, claim.pod).id
            raise
        booking = self._book(spot, ctx, claim.pod)
        claim.booking = booking.id
        return _Decision(booking.node or "", booking, alloc.victims(booking))

    def _refusal(self, error: Unplaceable | InvalidAnnotation) -> str:
        """The reason a pod is refused; a quota held by pods that are leaving says so
        (quota_leaving.py), and a quota exhausted names the preemptors whose cells of the VC
        are booked for them."""
        if not isinstance(error, Unplaceable):
            return str(error)
        if not isinstance(error, QuotaExhausted):
            return error.reason
        if self.expiry.any_leaving:
            leaving = quota_leaving_reason(error, bookings=self.allocator.bookings, leaving=self._leaving_booking,
                                           terminating=self.expiry.is_terminating)
            if leaving is not None:
                return leaving
        if not self._claims:
            return error.reason
        booked = self._claims.booked_in(error.vc.name, self.allocator.bookings)
        if not booked:
            return error.reason
        their = "its victims leave" if len(booked) == 1 else "their victims leave"
        return f"{error.reason}; cells booked for {', '.join(booked)} while {their}"

    def inspect_virtual_clusters(self) -> dict[str, Any]:
        return inspection.virtual_clusters(self.allocator, troubles=self.node_troubles.causes)

    def inspect_virtual_cluster(self, name: str) -> dict[str, Any] | None:
        """``None`` for an unknown VC (the HTTP layer answers 404)."""
        return inspection.virtual_cluster(self.allocator, name, troubles=self.node_troubles.causes, leaving=self._freeing_booking)

    def inspect_guarantees(
        self, *, except_pods: AbstractSet[str] = frozenset(), within: AbstractSet[str] | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        """Each VC's cells for AlloX admission, on the nodes ``within`` (``inspection.guarantees``)."""
        return inspection.guarantees(self.allocator, except_pods=except_pods, within=within)

    def inspect_cells(self, *, node: str | None = None, gpus: bool = True) -> dict[str, Any]:
        return inspection.cells(self.allocator, node=node, gpus=gpus)

    def metrics(self) -> dict[str, Any]:
        return inspection.metrics(self.allocator)


def booking_limits(config: CellsConfig) -> BookingLimits:
    """The booking limits a cells section sets."""
    return BookingLimits(
        unseen_pod_grace_seconds=config.unseen_pod_grace_seconds,
        gang_booking_timeout_seconds=config.gang_booking_timeout_seconds,
        victim_exit_margin_seconds=config.victim_exit_margin_seconds,
    )
