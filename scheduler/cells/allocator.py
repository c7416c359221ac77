"""HiveD's cell allocator: VCs bound lazily onto physical cells, guaranteed and opportunistic
bookings of GPUs, gangs, bad nodes, VC reconfiguration and recovery.

Vocabulary:

* A VC owns ``quota[cell type]`` cells. A *VC cell* (a root) is a physical cell bound to the VC by
  the buddy allocator (``BOUND``) or pinned to it in the configuration (``PINNED``). Roots are
  bound when a pod first needs one and released when their last guaranteed pod leaves.
* A *booking* is one pod's GPUs (or one slot of a gang, before its pod exists). Guaranteed
  bookings hold GPUs inside their VC's roots; opportunistic bookings hold idle GPUs anywhere.
  A guaranteed booking may overlap opportunistic ones: those pods are its *victims* until they
  are gone.
* A request for ``n`` GPUs at level ``T`` needs ``n`` GPUs inside one level-``T`` cell. Inside a
  VC the placement ignores opportunistic pods altogether, so that a VC decides exactly as its
  private cluster would (sharing safety); opportunistic pods only break ties.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from operator import attrgetter
from typing import AbstractSet, Callable, Iterable, Literal, Mapping, Sequence

from scheduler.cells.buckets import Buckets
from scheduler.cells.buddy import BuddyAllocator, derived_capacity
from scheduler.cells.config import CellTypeSpec, PhysicalCellSpec, VirtualClusterSpec
from scheduler.cells.fewest_victims import MAX_CANDIDATES, Shape, equal_picks, equal_spots, victim_cost
from scheduler.cells.idle_index import IdleNodeIndex
from scheduler.cells.request import CellRequest, GangSpec, Priority
from scheduler.cells.search import View, best_spot, contains, pick_gpus
from scheduler.cells.topology import Cell, CellState, Chain, Topology

MAX_ANOMALIES = 200


# How a booking holds its GPUs: as their guaranteed owner (in a VC cell of its VC) or as their
# opportunistic owner (preemptible by a guaranteed booking).
Hold = Literal["guaranteed", "opportunistic"]


class Unplaceable(Exception):
    """A request cannot be placed now. ``resolvable`` is true when preemption could help;
    the message is the one-line reason users see."""

    def __init__(self, reason: str, *, resolvable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.resolvable = resolvable


@dataclass(eq=False)
class Group:
    """A gang: ``size`` slots booked all at once; pods take free slots as they arrive."""

    key: str
    name: str
    vc: str
    priority: Priority
    size: int
    gpus: int
    cell_type: str  # the level every slot was placed at
    slots: list[Booking] = field(default_factory=list)

    def members(self) -> list[str]:
        return [s.pod_uid for s in self.slots if s.pod_uid is not None]


@dataclass(eq=False, slots=True)
class Booking:
    id: int
    vc: str
    priority: Priority
    # "guaranteed": the GPUs carry this booking as their guaranteed owner; "opportunistic": as
    # their opportunistic owner (opportunistic pods, and guaranteed pods recovered outside any
    # legal VC cell).
    holds: Hold
    chain: Chain
    level: int
    root: Cell | None
    gpus: tuple[Cell, ...]
    pod_uid: str | None = None
    pod_key: str | None = None
    group: Group | None = None

    @property
    def node(self) -> str | None:
        return self.gpus[0].node if self.gpus else None

    @property
    def cell_type(self) -> str:
        return self.chain.type_at(self.level)

    @property
    def gpu_indices(self) -> list[int]:
        return sorted(g.gpu_index for g in self.gpus)


class LeafChange(Enum):
    """What happens to a booking's GPUs (see :meth:`CellAllocator._change_leaves`)."""

    BOOK_GUARANTEED = "book-guaranteed"
    BOOK_OPPORTUNISTIC = "book-opportunistic"
    CLEAR_GUARANTEED = "clear-guaranteed"
    CLEAR_OPPORTUNISTIC = "clear-opportunistic"
    BAD = "bad"
    HEALTHY = "healthy"


# Enum members as module constants: a global read is several times cheaper than an Enum
# attribute in CPython 3.11, and these are read on every placement.
_FREE, _INSIDE, _SPLIT = CellState.FREE, CellState.INSIDE, CellState.SPLIT
_BOUND, _PINNED = CellState.BOUND, CellState.PINNED
_PRIO_GUARANTEED, _PRIO_OPPORTUNISTIC = Priority.GUARANTEED, Priority.OPPORTUNISTIC
_VIEW_GUARANTEED, _VIEW_IDLE = View.GUARANTEED, View.IDLE
_BOOK_GUARANTEED, _BOOK_OPPORTUNISTIC = LeafChange.BOOK_GUARANTEED, LeafChange.BOOK_OPPORTUNISTIC
_CLEAR_GUARANTEED, _CLEAR_OPPORTUNISTIC = LeafChange.CLEAR_GUARANTEED, LeafChange.CLEAR_OPPORTUNISTIC
_BAD, _HEALTHY = LeafChange.BAD, LeafChange.HEALTHY


# Spot and Target are created on every decision: plain slotted classes (a frozen dataclass's
# __init__ costs four times as much). Treat them as immutable.
@dataclass(slots=True)
class Spot:
    """A planned placement: GPUs, and for a guaranteed one the VC cell holding them."""

    chain: Chain
    level: int
    gpus: tuple[Cell, ...]
    root: Cell | None = None
    new_root: bool = False


@dataclass(slots=True)
class Target:
    """One way to serve a request: in ``chain``, GPUs inside one level-``level`` cell."""

    chain: Chain
    level: int


class VcState:
    def __init__(self, name: str, topology: Topology) -> None:
        self.name = name
        self.defined = True
        self.quota: dict[str, int] = {}
        self.pinned: list[Cell] = []
        self.bound: dict[str, dict[Cell, None]] = {}  # cell type -> bound roots (not pinned)
        # Roots new pods may use, keyed by their guaranteed-view free GPUs (best fit). A root
        # that is over quota after a shrink is *draining*: left out of here until it empties.
        self.usable: dict[str, Buckets[Cell]] = {}
        self.draining: set[Cell] = set()
        self._topology = topology

    def owned_types(self) -> set[str]:
        return {t for t, n in self.quota.items() if n > 0} | {c.cell_type for c in self.pinned}

    def unbound(self, cell_type: str) -> int:
        return self.quota.get(cell_type, 0) - len(self.bound.get(cell_type, ()))


class CellAllocator:
    """All mutable HiveD state. Deterministic: every choice is ordered by configuration order
    and insertion order, never by hashing or time."""

    def __init__(self, topology: Topology, virtual_clusters: Mapping[str, VirtualClusterSpec]) -> None:
        self.topology = topology
        self.buddies: dict[Chain, BuddyAllocator] = {}
        # r_k - a_k per chain, as the callable BuddyAllocator.find asks for (made once, not per search)
        self._demand_of: dict[Chain, Callable[[], list[int]]] = {}
        for chain in topology.used_chains:
            self.buddies[chain] = BuddyAllocator(chain, [c for c in topology.top_cells if c.chain is chain])
            self._demand_of[chain] = partial(self.demand, chain)
        self.idle_nodes = IdleNodeIndex(topology)
        self.vcs: dict[str, VcState] = {}
        self.bookings: dict[int, Booking] = {}
        self.by_pod: dict[str, Booking] = {}
        self.groups: dict[str, Group] = {}
        self.anomalies: deque[str] = deque(maxlen=MAX_ANOMALIES)
        self._next_id = 1
        self._targets: dict[tuple[str | None, Priority, int, str | None], list[Target]] = {}
        self._capacity: dict[tuple[VcState, Chain, int, int], int] = {}
        self.configure(virtual_clusters)

    # ================================================================== configuration

    def configure(self, virtual_clusters: Mapping[str, VirtualClusterSpec]) -> None:
        """Apply (new) VC quotas. Running pods are never touched: a VC that shrinks below what it
        holds keeps its busy cells until their pods finish (they are *draining* meanwhile), and a
        removed VC lingers, quota-less, until its last pod is gone. Validation and feasibility are
        the caller's job. Raises ``ValueError`` (changing nothing) when a pinned cell would
        change hands while pods of its current VC still run in it."""
        self._forget_memos()
        wanted_owner = {pin: name for name, spec in virtual_clusters.items() for pin in spec.pinned_cells}
        for pin, cell in sorted(self.topology.pinned.items()):
            if cell.vc is not None and cell.guaranteed_used and wanted_owner.get(pin) != cell.vc:
                raise ValueError(
                    f"pinned cell {pin!r} still runs pods of virtual cluster {cell.vc!r}; "
                    "re-assign it once they have finished"
                )
        for name, spec in virtual_clusters.items():
            vc = self.vcs.get(name)
            if vc is None:
                vc = self.vcs[name] = VcState(name, self.topology)
            vc.defined = True
            vc.quota = {c.cell_type: c.count for c in spec.cells}
            wanted = [self.topology.pinned[p] for p in spec.pinned_cells]
            for cell in list(vc.pinned):
                if cell not in wanted:
                    self._unpin(vc, cell)
            for cell in wanted:
                if cell not in vc.pinned:
                    self._pin(vc, cell)
        for name, vc in list(self.vcs.items()):
            if name not in virtual_clusters:
                vc.defined = False
                vc.quota = {}
                for cell in list(vc.pinned):
                    self._unpin(vc, cell)
        for vc in list(self.vcs.values()):
            for cell_type in list(vc.bound):
                self._refresh_draining(vc, cell_type)
            self._forget_if_idle(vc)

    def _pin(self, vc: VcState, cell: Cell) -> None:
        if cell.vc is not None and cell.vc != vc.name:
            owner = self.vcs[cell.vc]
            if cell.guaranteed_used:
                raise ValueError(f"pinned cell {cell.pinned_id!r} still runs pods of virtual cluster {owner.name!r}")
            owner.pinned.remove(cell)
            owner.usable[cell.cell_type].remove(cell, cell.guaranteed_free)
            self._set_owned(cell, -1)
        vc.pinned.append(cell)
        cell.vc = vc.name
        cell.state = _PINNED
        vc.usable.setdefault(cell.cell_type, Buckets()).add(cell, cell.guaranteed_free)
        self._set_owned(cell, +1)

    def _unpin(self, vc: VcState, cell: Cell) -> None:
        if cell.guaranteed_used:
            raise ValueError(f"pinned cell {cell.pinned_id!r} still runs pods of virtual cluster {vc.name!r}")
        vc.pinned.remove(cell)
        vc.usable[cell.cell_type].remove(cell, cell.guaranteed_free)
        self._set_owned(cell, -1)
        # An unpinned cell stays out of the buddy pool: the pool's feasibility was proven with it
        # pinned. It becomes a quota-less cell that only opportunistic pods use until restart.
        cell.vc = None

    # ================================================================== growth and shrinkage

    def add_top_cell(self, spec: PhysicalCellSpec, cell_types: Mapping[str, CellTypeSpec]) -> Cell:
        """A new top-level cell (a node, or a rack of nodes, that joined the cluster): built into
        the topology and put into the free space, owned by no VC yet (the caller grows a quota,
        or not). Theorem 1's invariant is unaffected: f_k grows, and so does r_k if a quota does."""
        cell = self.topology.add_top_cell(spec, cell_types)
        chain = cell.chain
        buddy = self.buddies.get(chain)
        if buddy is None:
            buddy = self.buddies[chain] = BuddyAllocator(chain, [])
            self._demand_of[chain] = partial(self.demand, chain)
        buddy.seed(cell)
        for node in cell.node_cells:
            self.idle_nodes.add_node(node)
        self._forget_memos()  # a new chain or a larger cell may serve requests
        return cell

    def is_idle(self, cell: Cell) -> bool:
        """No booking on any of its GPUs, and no VC cell on or inside it: it can leave."""
        return cell.buddy_state() is _FREE and cell.guaranteed_used == 0 and cell.opportunistic_used == 0

    def remove_top_cell(self, cell: Cell) -> None:
        """Take an idle top-level cell out of the cluster for good (its nodes were deleted).
        The caller shrinks the quota it was counted in, if any."""
        if cell.parent is not None or not self.is_idle(cell):
            raise ValueError(f"cell {cell.id} is not an idle top-level cell")
        self.buddies[cell.chain].withdraw(cell)
        for node in cell.node_cells:
            self.idle_nodes.remove_node(node)
        self.topology.remove_top_cell(cell)
        self._forget_memos()

    def resize_quota(self, vc_name: str, deltas: Mapping[str, int]) -> None:
        """Add ``deltas`` to a VC's quota per cell type (the implicit default VC following the
        discovered cells). A smaller quota never evicts: surplus cells drain."""
        vc = self.vcs[vc_name]
        for cell_type, delta in deltas.items():
            count = vc.quota.get(cell_type, 0) + delta
            if count > 0:
                vc.quota[cell_type] = count
            else:
                vc.quota.pop(cell_type, None)
            if cell_type in vc.bound:
                self._refresh_draining(vc, cell_type)
        self._forget_memos()

    def _forget_memos(self) -> None:
        """What :meth:`targets` and :meth:`gang_capacity` remember depends on the quotas, the
        pinned cells and the chains: forget it when one of them changes."""
        self._targets.clear()
        self._capacity.clear()

    def _forget_if_idle(self, vc: VcState) -> None:
        if not vc.defined and not any(vc.bound.values()) and not vc.pinned:
            del self.vcs[vc.name]

    def _refresh_draining(self, vc: VcState, cell_type: str) -> None:
        """Keep the fullest ``quota`` roots usable and let the rest drain."""
        keep = max(vc.quota.get(cell_type, 0), 0)
        bound = vc.bound.get(cell_type, {})
        if len(bound) <= keep and not vc.draining:
            return  # the common case: within quota, nothing draining
        roots = list(bound)
        ranked = sorted(roots, key=lambda c: (-c.guaranteed_used, c.id))
        usable = vc.usable.setdefault(cell_type, Buckets())
        for i, root in enumerate(ranked):
            should_drain = i >= keep
            if should_drain and root not in vc.draining:
                usable.remove(root, root.guaranteed_free)
                vc.draining.add(root)
            elif not should_drain and root in vc.draining:
                vc.draining.discard(root)
                usable.add(root, root.guaranteed_free)

    # ================================================================== counters and indexes

    def _change_leaves(self, leaves: Sequence[Cell], change: LeafChange, booking_id: int = 0) -> None:
        """Apply ``change`` to GPUs and propagate the counter deltas up the tree, one level at a
        time so that every ancestor is updated once however many of its GPUs changed, moving
        cells between the indexes whose keys changed. This is the inner loop of every booking
        and release: one function, no per-cell calls, no closures."""
        book_guaranteed, book_opportunistic = change is _BOOK_GUARANTEED, change is _BOOK_OPPORTUNISTIC
        clear_guaranteed, clear_opportunistic = change is _CLEAR_GUARANTEED, change is _CLEAR_OPPORTUNISTIC
        bad = change is _BAD
        # Deltas per cell: [bad, guaranteed_used, opportunistic_used, idle_gpus, guaranteed_free].
        level: dict[Cell, list[int]] = {}  # cells whose deltas are still to be applied
        above: dict[Cell, list[int]] = {}  # their parents, deltas summed
        for leaf in leaves:
            bad_before, guaranteed_before, opportunistic_before = leaf.is_bad, leaf.guaranteed_owner is not None, leaf.opportunistic_owner is not None
            if book_guaranteed:
                leaf.guaranteed_owner = booking_id
            elif book_opportunistic:
                leaf.opportunistic_owner = booking_id
            elif clear_guaranteed:
                if leaf.guaranteed_owner == booking_id:
                    leaf.guaranteed_owner = None
            elif clear_opportunistic:
                if leaf.opportunistic_owner == booking_id:
                    leaf.opportunistic_owner = None
            else:
                leaf.is_bad = bad
            bad_after, guaranteed_after, opportunistic_after = leaf.is_bad, leaf.guaranteed_owner is not None, leaf.opportunistic_owner is not None
            if bad_before == bad_after and guaranteed_before == guaranteed_after and opportunistic_before == opportunistic_after:
                continue
            d_bad, d_guaranteed, d_opportunistic = bad_after - bad_before, guaranteed_after - guaranteed_before, opportunistic_after - opportunistic_before
            d_idle = (not (bad_after or guaranteed_after or opportunistic_after)) - (not (bad_before or guaranteed_before or opportunistic_before))
            d_guaranteed_free = (not (bad_after or guaranteed_after)) - (not (bad_before or guaranteed_before))
            parent = leaf.parent
            if leaf.state is not _INSIDE or parent is None or parent.state is _SPLIT or parent.child_index is not None:
                # A GPU that is a VC cell, free on its own, or under a wide cell: the general
                # path below moves it in its indexes.
                level[leaf] = [d_bad, d_guaranteed, d_opportunistic, d_idle, d_guaranteed_free]
                continue
            leaf.bad += d_bad
            leaf.guaranteed_used += d_guaranteed
            leaf.opportunistic_used += d_opportunistic
            leaf.idle_gpus += d_idle
            leaf.guaranteed_free += d_guaranteed_free
            acc = above.get(parent)
            if acc is None:
                above[parent] = [d_bad, d_guaranteed, d_opportunistic, d_idle, d_guaranteed_free]
            else:
                acc[0] += d_bad
                acc[1] += d_guaranteed
                acc[2] += d_opportunistic
                acc[3] += d_idle
                acc[4] += d_guaranteed_free
        idle_nodes = self.idle_nodes
        vcs = self.vcs
        while True:
            for cell, d in level.items():
                d_bad, d_guaranteed, d_opportunistic, d_idle, d_guaranteed_free = d
                parent = cell.parent
                if d_guaranteed:
                    cell.guaranteed_used += d_guaranteed
                if d_idle:
                    old_idle = cell.idle_gpus
                    cell.idle_gpus = old_idle + d_idle
                    if cell.node_cell is cell:
                        idle_nodes.idle_changed(cell, old_idle)
                if d_guaranteed_free:
                    old_free = cell.guaranteed_free
                    new_free = cell.guaranteed_free = old_free + d_guaranteed_free
                    if parent is not None and parent.child_index is not None:
                        parent.child_index.move(cell, old_free, new_free)
                    if cell.vc is not None and (cell.state is _BOUND or cell.state is _PINNED):
                        vc = vcs.get(cell.vc)
                        if vc is not None and cell not in vc.draining:
                            vc.usable[cell.cell_type].move(cell, old_free, new_free)
                if d_bad or d_opportunistic:
                    cell.bad += d_bad
                    cell.opportunistic_used += d_opportunistic
                    state = cell.state
                    if state is _FREE or (state is _INSIDE and parent is not None and parent.state is _SPLIT):
                        self.buddies[cell.chain].reclassify(cell)
                if parent is not None:
                    acc = above.get(parent)
                    if acc is None:
                        above[parent] = d  # this level is done with d: hand it up as is
                    else:
                        acc[0] += d_bad
                        acc[1] += d_guaranteed
                        acc[2] += d_opportunistic
                        acc[3] += d_idle
                        acc[4] += d_guaranteed_free
            if not above:
                return
            level, above = above, {}

    def _change_whole_node(self, leaves: Sequence[Cell], booking_id: int, *, book: bool) -> bool:
        """:meth:`_change_leaves` for a guaranteed booking of every GPU of a healthy node without
        opportunistic pods (an 8-GPU pod, each slot of a gang of them), in far fewer steps (see
        :meth:`_change_whole_nodes`). Returns False, having changed nothing, when the booking is
        not of that shape."""
        node = leaves[0].node_cell if leaves else None
        total = len(leaves)
        if node is None or node.total != total or node.opportunistic_used or node.bad or node.guaranteed_used != (0 if book else total):
            return False
        if not book:
            for leaf in leaves:  # make sure they are all this booking's before writing anything
                if leaf.node_cell is not node or leaf.guaranteed_owner != booking_id:
                    return False
        # The node's counters (no guaranteed, opportunistic or bad GPU) prove its GPUs untouched
        # when booking, and a booking's GPUs are distinct GPUs of one node.
        self._change_whole_nodes((node,), (booking_id,), book=book)
        return True

    def _change_whole_nodes(self, nodes: Sequence[Cell], booking_ids: Sequence[int], *, book: bool) -> None:
        """Book (``book``) or clear every GPU of each of ``nodes`` for the guaranteed booking at
        the same position of ``booking_ids``, exactly as :meth:`_change_leaves` would one node
        after another; the caller has checked that each node is healthy, without opportunistic
        pods, and wholly free (or wholly that booking's). The counters of the GPUs and of the
        cells inside a node are known outright, and an ancestor shared by several nodes takes
        their summed delta once (a rack holding a gang's 8 slots: one index move, not 8).

        Cells inside a node are never VC cells, free cells or wide cells here: the booking's VC
        cell holds all of the node, so it is the node or above."""
        level: dict[Cell, int] = {}  # cells whose deltas (GPUs booked) are still to be applied
        for node, booking_id in zip(nodes, booking_ids):
            if book:
                for leaf in node.leaves:
                    leaf.guaranteed_owner = booking_id
                    leaf.guaranteed_used = 1
                    leaf.idle_gpus = leaf.guaranteed_free = 0
                for cell in node.inner:
                    cell.guaranteed_used = cell.total
                    cell.idle_gpus = cell.guaranteed_free = 0
                level[node] = node.total
            else:
                for leaf in node.leaves:
                    leaf.guaranteed_owner = None
                    leaf.guaranteed_used = 0
                    leaf.idle_gpus = leaf.guaranteed_free = 1
                for cell in node.inner:
                    cell.guaranteed_used = 0
                    cell.idle_gpus = cell.guaranteed_free = cell.total
                level[node] = -node.total
        idle_nodes = self.idle_nodes
        vcs = self.vcs
        while level:
            above: dict[Cell, int] = {}
            for cell, booked in level.items():
                parent = cell.parent
                cell.guaranteed_used += booked
                old_idle = cell.idle_gpus
                cell.idle_gpus = old_idle - booked
                if cell.node_cell is cell:
                    idle_nodes.idle_changed(cell, old_idle)
                old_free = cell.guaranteed_free
                new_free = cell.guaranteed_free = old_free - booked
                if cell.vc is not None and (cell.state is _BOUND or cell.state is _PINNED):
                    vc = vcs.get(cell.vc)
                    if vc is not None and cell not in vc.draining:
                        vc.usable[cell.cell_type].move(cell, old_free, new_free)
                if parent is not None:
                    if parent.child_index is not None:
                        parent.child_index.move(cell, old_free, new_free)
                    # Re-inserted, not updated: cells of a level are moved in the order of their
                    # last change, so that an index holding several of them ends in the order
                    # node-by-node bookings would leave it (a moved cell goes last in its bucket).
                    above[parent] = above.pop(parent, 0) + booked
            level = above

    def _set_owned(self, root: Cell, delta: int) -> None:
        self.idle_nodes.cover(root, delta)

    def set_node_bad(self, node_name: str, bad: bool) -> bool:
        """Mark a node's GPUs bad or healthy; returns whether anything changed. Bookings on the
        node are kept: a bad cell only stops *new* placements."""
        node = self.topology.nodes.get(node_name)
        if node is None or all(leaf.is_bad == bad for leaf in node.leaves):
            return False

        self._change_leaves(node.leaves, _BAD if bad else _HEALTHY)
        return True

    # ================================================================== VC roots

    def _bind(self, vc: VcState, root: Cell) -> None:
        self.buddies[root.chain].take(root)
        self._adopt(vc, (root,))

    def _adopt(self, vc: VcState, roots: Sequence[Cell]) -> None:
        """Make ``roots``, cells of one type the buddy allocator has just handed out, VC cells
        of ``vc``. Draining is refreshed once, after all of them: several roots at once only
        ever come within the quota and with nothing draining (see :meth:`_book_whole_nodes`)."""
        cell_type = roots[0].cell_type
        bound = vc.bound.get(cell_type)
        if bound is None:
            bound = vc.bound[cell_type] = {}
        usable = vc.usable.get(cell_type)
        if usable is None:
            usable = vc.usable[cell_type] = Buckets()
        name = vc.name
        cover = self.idle_nodes.cover
        for root in roots:
            root.vc = name
            bound[root] = None
            if root.guaranteed_free:  # a full cell (an 8-GPU pod's node) is not kept in the index
                usable.add(root, root.guaranteed_free)
            cover(root, +1)
        if vc.draining or len(bound) > vc.quota.get(cell_type, 0):
            self._refresh_draining(vc, cell_type)

    def _unbind(self, root: Cell) -> None:
        assert root.vc is not None
        vc = self.vcs[root.vc]
        del vc.bound[root.cell_type][root]
        if root in vc.draining:
            vc.draining.discard(root)
        else:
            vc.usable[root.cell_type].remove(root, root.guaranteed_free)
        self._set_owned(root, -1)
        root.vc = None
        self.buddies[root.chain].give(root)
        self._refresh_draining(vc, root.cell_type)
        self._forget_if_idle(vc)

    def root_of(self, cell: Cell) -> Cell | None:
        current: Cell | None = cell
        while current is not None:
            if current.state is _BOUND or current.state is _PINNED:
                return current
            current = current.parent
        return None

    def demand(self, chain: Chain) -> list[int]:
        """r_k - a_k per level of ``chain`` (index 0 is level 1): cells VCs may still bind."""
        wanted = [0] * chain.top
        for vc in self.vcs.values():
            for cell_type, count in vc.quota.items():
                if self.topology.chain_of_type[cell_type] is chain:
                    level = chain.level_of(cell_type)
                    wanted[level - 1] += max(count - len(vc.bound.get(cell_type, ())), 0)
        return wanted

    def invariant(self, chain: Chain) -> list[tuple[int, int, int]]:
        """(r_k - a_k, f_k, F_k) per level, for Theorem 1's ``r_k - a_k <= f_k + F_k``."""
        free = self.buddies[chain].free_counts()
        wanted = self.demand(chain)
        capacity = derived_capacity(free, wanted, chain)
        return [(wanted[k], free[k], capacity[k]) for k in range(chain.top)]

    # ================================================================== resolving requests

    def vc_state(self, request: CellRequest, default_vc: str | None) -> VcState | None:
        name = request.vc or default_vc
        if name is None:
            raise Unplaceable("the pod has no cellfit.io/virtual-cluster label")
        vc = self.vcs.get(name)
        if vc is None or not vc.defined:
            known = ", ".join(sorted(n for n, v in self.vcs.items() if v.defined)) or "none"
            raise Unplaceable(f"unknown virtual cluster {name!r} (known: {known})")
        return vc

    def targets(self, request: CellRequest, vc: VcState | None) -> list[Target]:
        """The (chain, level) pairs that can serve the request, in search order; raises
        :class:`Unplaceable` with the reason when there are none. Memoised: they depend only
        on the request's shape, the VC's quota and the chains, and every pod asks."""
        key = (vc.name if vc is not None else None, request.priority, request.gpus, request.cell_type)
        cached = self._targets.get(key)
        if cached is None:
            cached = self._targets[key] = self._find_targets(request, vc)
        return cached

    def _find_targets(self, request: CellRequest, vc: VcState | None) -> list[Target]:
        n = request.gpus
        guaranteed = request.priority is _PRIO_GUARANTEED
        owned = vc.owned_types() if (vc is not None and guaranteed) else None
        if request.cell_type is not None:
            chain = self.topology.chain_of_type.get(request.cell_type)
            if chain is None or chain not in self.buddies:
                raise Unplaceable(f"unknown cell type {request.cell_type!r} in annotation cellfit.io/cell-type")
            level = chain.level_of(request.cell_type)
            if level > chain.node_level:
                raise Unplaceable(
                    f"cell type {request.cell_type!r} is above the node level; a pod's GPUs are on one node "
                    f"(use {chain.type_at(chain.node_level)!r} or lower)"
                )
            if n > chain.gpus[level - 1]:
                raise Unplaceable(f"the pod requests {n} GPUs but a {request.cell_type!r} cell holds {chain.gpus[level - 1]}")
            if owned is not None and not any(chain.level_of(t) >= level for t in owned if self.topology.chain_of_type[t] is chain):
                assert vc is not None
                raise Unplaceable(f"virtual cluster {vc.name!r} owns no cell of type {request.cell_type!r} or larger")
            return [Target(chain, level)]
        largest = max(self.buddies, key=lambda c: (c.gpus[c.node_level - 1], -c.order))
        if n > largest.gpus[largest.node_level - 1]:
            raise Unplaceable(
                f"the pod requests {n} GPUs, more than any node-level cell holds "
                f"(largest: {largest.type_at(largest.node_level)!r} with {largest.gpus[largest.node_level - 1]})"
            )
        found: list[Target] = []
        for chain in self.topology.used_chains:
            smallest = chain.smallest_level_for(n)
            if smallest is None:
                continue
            if owned is not None and not any(
                self.topology.chain_of_type[t] is chain and chain.level_of(t) >= smallest for t in owned
            ):
                continue
            found.append(Target(chain, smallest))
        if not found:
            assert vc is not None
            sizes = sorted(
                {(self.topology.chain_of_type[t].gpus[self.topology.chain_of_type[t].level_of(t) - 1], t) for t in owned or ()}
            )
            largest_owned = f"largest: {sizes[-1][1]!r} with {sizes[-1][0]} GPUs" if sizes else "it owns no cells"
            raise Unplaceable(f"the pod requests {n} GPUs, more than any cell virtual cluster {vc.name!r} owns ({largest_owned})")
        return found

    def gang_capacity(self, vc: VcState, target: Target, gpus: int) -> int:
        """How many pods of ``gpus`` GPUs at ``target`` the VC's whole guarantee could hold.
        Memoised: every gang asks."""
        chain, level = target.chain, target.level
        key = (vc, chain, level, gpus)
        pods = self._capacity.get(key)
        if pods is None:
            pods = self._capacity[key] = self._count_capacity(vc, chain, level, gpus)
        return pods

    def _count_capacity(self, vc: VcState, chain: Chain, level: int, gpus: int) -> int:
        per_cell = chain.gpus[level - 1] // gpus
        pods = 0
        counts: dict[str, int] = dict(vc.quota)
        for cell in vc.pinned:
            counts[cell.cell_type] = counts.get(cell.cell_type, 0) + 1
        for cell_type, count in counts.items():
            if self.topology.chain_of_type[cell_type] is not chain:
                continue
            k = chain.level_of(cell_type)
            if k >= level:
                pods += count * (chain.gpus[k - 1] // chain.gpus[level - 1]) * per_cell
        return pods

    # ================================================================== planning (no mutation)

    def plan(
        self,
        request: CellRequest,
        vc: VcState | None,
        targets: Sequence[Target],
        *,
        allowed: AbstractSet[str] | None,
        view: View | None = None,
    ) -> Spot:
        """The placement a single pod of ``request`` would get; raises :class:`Unplaceable`."""
        if request.priority is _PRIO_GUARANTEED:
            assert vc is not None
            spot = self._plan_guaranteed(vc, targets, request.gpus, allowed, view or _VIEW_GUARANTEED)
            if view is not _VIEW_IDLE and self._preempts(spot):
                return self._fewest_victims(vc, spot, allowed)
            return spot
        return self._plan_opportunistic(targets, request.gpus, allowed)

    @staticmethod
    def _preempts(spot: Spot) -> bool:
        """Whether booking ``spot`` would preempt opportunistic pods (its node's count first:
        the usual answer, no, costs one read)."""
        node = spot.gpus[0].node_cell if spot.gpus else None
        return node is not None and node.opportunistic_used > 0 and any(gpu.opportunistic_owner is not None for gpu in spot.gpus)

    def _fewest_victims(self, vc: VcState, spot: Spot, allowed: AbstractSet[str] | None) -> Spot:
        """Among the placements equal to ``spot`` for the VC (fewest_victims.py), the one whose
        GPUs carry the fewest opportunistic pods, then the fewest GPUs of them; ``spot`` itself
        on a tie. The candidates are the images of ``spot`` inside the VC cells shaped like its
        own (a VC cell already bound), or inside the free cells of the level the buddy
        allocator took its new VC cell from."""
        root = spot.root
        assert root is not None
        placed = spot.gpus[0]
        while placed.level < spot.level:
            assert placed.parent is not None
            placed = placed.parent
        if spot.new_root:
            top = root
            while top.buddy_state() is not _FREE:
                assert top.parent is not None
                top = top.parent
            others: Iterable[Cell] = self.buddies[spot.chain].free_cells(top.level)
        else:
            top = root
            others = vc.usable[root.cell_type].first_with(root.guaranteed_free, len(self.topology.cells_by_id))
        path = [placed]
        while path[-1] is not top:
            parent = path[-1].parent
            assert parent is not None
            path.append(parent)
        path.reverse()
        memo: dict[Cell, Shape] = {}
        bookings = self.bookings

        def size_of(booking_id: int) -> int | None:
            booking = bookings.get(booking_id)
            return len(booking.gpus) if booking is not None and booking.pod_uid is not None else None

        best_gpus, best_cost = spot.gpus, victim_cost(spot.gpus, size_of)
        best_cell = placed
        tried = 0
        tops = [top, *(cell for cell in others if cell is not top)]
        for image in equal_spots(tops, path, memo):
            if allowed is not None and image.node not in allowed:
                continue
            for gpus in equal_picks(placed, spot.gpus, image, memo):
                tried += 1
                cost = victim_cost(gpus, size_of)
                if cost < best_cost:
                    best_gpus, best_cost, best_cell = tuple(gpus), cost, image
                if best_cost == (0, 0) or tried >= MAX_CANDIDATES:
                    break
            if best_cost == (0, 0) or tried >= MAX_CANDIDATES:
                break
        if best_cell is placed and best_gpus is spot.gpus:
            return spot
        new_root = best_cell
        while new_root.level < root.level:
            assert new_root.parent is not None
            new_root = new_root.parent
        return Spot(spot.chain, spot.level, tuple(sorted(best_gpus, key=attrgetter("gpu_index"))), new_root, spot.new_root)

    def _plan_guaranteed(
        self, vc: VcState, targets: Sequence[Target], n: int, allowed: AbstractSet[str] | None, view: View
    ) -> Spot:
        # 1. inside the VC's cells already bound (packing: fullest level-k root first)
        usable = vc.usable
        idle_view = view is _VIEW_IDLE
        for target in targets:
            chain, target_level = target.chain, target.level
            for cell_type in chain.types[target_level - 1 :]:
                index = usable.get(cell_type)
                if not index:
                    continue
                for root in index.at_least(n):
                    if idle_view and root.idle_gpus < n:
                        continue
                    spot = best_spot(root, target_level, n, view, allowed)
                    if spot is not None:
                        return Spot(chain, target_level, tuple(pick_gpus(spot, n, view)), root, False)
        # 2. a new VC cell, bound by the buddy allocator; legal only within the quota
        quota_left: list[str] = []
        quota, bound = vc.quota, vc.bound
        for target in targets:
            chain, target_level = target.chain, target.level
            for level in range(target_level, chain.top + 1):
                cell_type = chain.types[level - 1]
                if quota.get(cell_type, 0) - len(bound.get(cell_type, ())) <= 0:
                    continue  # VcState.unbound, inlined: every level of every search asks
                quota_left.append(cell_type)
                spots: dict[Cell, Cell] = {}  # what accept found, so it is not searched twice

                def accept(cell: Cell, _level: int = target_level, _spots: dict[Cell, Cell] = spots) -> bool:
                    spot = best_spot(cell, _level, n, view, allowed)
                    if spot is None:
                        return False
                    _spots[cell] = spot
                    return True

                fresh = self.buddies[chain].find(level, accept, self._demand_of[chain])
                if fresh is not None:
                    spot = spots.get(fresh) or best_spot(fresh, target_level, n, view, allowed)
                    assert spot is not None
                    return Spot(chain, target_level, tuple(pick_gpus(spot, n, view)), fresh, True)
        first = targets[0]
        wanted = first.chain.type_at(first.level)
        if not quota_left:
            raise Unplaceable(
                f"virtual cluster {vc.name!r} quota exhausted at level {wanted!r}: "
                f"none of its cells of type {wanted!r} or larger has {n} free GPUs in one {wanted!r}, "
                "and it has no unbound cell left"
            )
        offered = "" if allowed is None else " among the offered nodes"
        raise Unplaceable(
            f"no free cell of type {' or '.join(repr(t) for t in quota_left)}{offered} can take {n} GPUs "
            f"in one {wanted!r} (bad nodes or nodes kube-scheduler filtered out)"
        )

    def _plan_opportunistic(self, targets: Sequence[Target], n: int, allowed: AbstractSet[str] | None) -> Spot:
        for target in targets:
            if allowed is not None and len(allowed) * 8 < len(self.topology.nodes):
                # A few offered nodes (a nodeSelector): rank them directly instead of walking
                # the whole index past nodes kube-scheduler did not offer.
                offered_cells = [self.topology.nodes[name] for name in allowed if name in self.topology.nodes]
                ranked = sorted(
                    (c for c in offered_cells if c.chain is target.chain and c.idle_gpus >= n),
                    key=lambda c: (self.idle_nodes.held(c), c.idle_gpus, c.id),
                )
                candidates: Iterable[Cell] = ranked
            else:
                candidates = self.idle_nodes.candidates(target.chain, n)
            for node in candidates:
                if allowed is not None and node.node not in allowed:
                    continue
                spot = best_spot(node, target.level, n, _VIEW_IDLE, None)
                if spot is not None:
                    return Spot(target.chain, target.level, tuple(pick_gpus(spot, n, _VIEW_IDLE)))
        wanted = targets[0].chain.type_at(targets[0].level)
        offered = "" if allowed is None else " on the offered nodes"
        raise Unplaceable(f"no idle {n} GPUs in one {wanted!r} cell{offered} for an opportunistic pod")

    # ================================================================== booking

    def book(
        self,
        spot: Spot,
        *,
        vc: str,
        priority: Priority,
        pod_uid: str | None,
        pod_key: str | None,
        group: Group | None = None,
        holds: Hold | None = None,
    ) -> Booking:
        holds = holds or ("guaranteed" if priority is _PRIO_GUARANTEED and spot.root is not None else "opportunistic")
        booking = self._new_booking(vc, priority, holds, spot.chain, spot.level, spot.root, spot.gpus, pod_uid, pod_key, group)
        if holds == "guaranteed":
            node = booking.gpus[0].node_cell if booking.gpus else None
            overlapped = [leaf.opportunistic_owner for leaf in booking.gpus if leaf.opportunistic_owner is not None] if node is None or node.opportunistic_used else ()
            if not self._change_whole_node(booking.gpus, booking.id, book=True):
                self._change_leaves(booking.gpus, _BOOK_GUARANTEED, booking.id)
        else:
            self._change_leaves(booking.gpus, _BOOK_OPPORTUNISTIC, booking.id)
        if spot.new_root:
            # Bound after the GPUs are booked, so that the new VC cell enters the VC's index and
            # the idle index with its final counts (a whole node: not at all) instead of being
            # added and moved at once.
            assert spot.root is not None
            self._bind(self.vcs[vc], spot.root)
        if holds == "guaranteed" and overlapped:
            # An opportunistic gang slot nobody runs in yet has no pod to preempt: drop it.
            for other_id in sorted(set(overlapped)):
                other = self.bookings.get(other_id)
                if other is not None and other.pod_uid is None:
                    self.release(other)
        return booking

    def _new_booking(
        self,
        vc: str,
        priority: Priority,
        holds: Hold,
        chain: Chain,
        level: int,
        root: Cell | None,
        gpus: tuple[Cell, ...],
        pod_uid: str | None,
        pod_key: str | None,
        group: Group | None,
    ) -> Booking:
        """A booking registered under the next id; its GPUs are the caller's to change."""
        # Positional: the same fields as Booking declares them, cheaper than keywords here.
        booking = Booking(self._next_id, vc, priority, holds, chain, level, root, gpus, pod_uid, pod_key, group)
        self._next_id += 1
        self.bookings[booking.id] = booking
        if pod_uid is not None:
            self.by_pod[pod_uid] = booking
        return booking

    def release(self, booking: Booking) -> None:
        if self.bookings.pop(booking.id, None) is None:
            return
        if booking.pod_uid is not None and self.by_pod.get(booking.pod_uid) is booking:
            del self.by_pod[booking.pod_uid]
        if booking.holds == "guaranteed":
            if not self._change_whole_node(booking.gpus, booking.id, book=False):
                self._change_leaves(booking.gpus, _CLEAR_GUARANTEED, booking.id)
            root = booking.root
            if root is not None and root.state is _BOUND and root.guaranteed_used == 0:
                self._unbind(root)
            elif root is not None and root.vc is not None:
                vc = self.vcs.get(root.vc)
                if vc is not None and root.state is _BOUND:
                    self._refresh_draining(vc, root.cell_type)
        else:
            self._change_leaves(booking.gpus, _CLEAR_OPPORTUNISTIC, booking.id)
        if booking.group is not None and booking in booking.group.slots:
            booking.group.slots.remove(booking)
            if not booking.group.slots and self.groups.get(booking.group.key) is booking.group:
                del self.groups[booking.group.key]

    def victims(self, booking: Booking) -> list[Booking]:
        """Opportunistic bookings whose GPUs this guaranteed booking needs, in a stable order."""
        if booking.holds != "guaranteed" or not booking.gpus:
            return []
        node = booking.gpus[0].node_cell  # a booking's GPUs are on one node
        if node is not None and not node.opportunistic_used:
            return []  # asked for every free gang slot on each gang pod's filter: skip reading the GPUs
        ids = sorted({leaf.opportunistic_owner for leaf in booking.gpus if leaf.opportunistic_owner is not None})
        return [self.bookings[i] for i in ids if i in self.bookings]

    def assign(self, booking: Booking, pod_uid: str, pod_key: str) -> None:
        previous = self.by_pod.get(pod_uid)
        if previous is not None and previous is not booking:
            self.unassign(previous)
        booking.pod_uid = pod_uid
        booking.pod_key = pod_key
        self.by_pod[pod_uid] = booking

    def unassign(self, booking: Booking) -> None:
        """The pod left its booking. A gang slot stays booked for the gang while any of the
        gang's pods still holds a slot; a lone booking is released."""
        if booking.pod_uid is not None and self.by_pod.get(booking.pod_uid) is booking:
            del self.by_pod[booking.pod_uid]
        booking.pod_uid = None
        booking.pod_key = None
        group = booking.group
        if group is None:
            self.release(booking)
            return
        if not group.members():
            for slot in list(group.slots):
                self.release(slot)
            self.groups.pop(group.key, None)

    # ================================================================== gangs

    def plan_group(
        self,
        request: CellRequest,
        gang: GangSpec,
        vc: VcState | None,
        targets: Sequence[Target],
        *,
        allowed: AbstractSet[str] | None,
    ) -> Group:
        """Book every slot of a gang, or nothing (raises :class:`Unplaceable`)."""
        vc_name = vc.name if vc is not None else (request.vc or "")
        if request.priority is _PRIO_GUARANTEED:
            assert vc is not None
            capacity = max(self.gang_capacity(vc, t, request.gpus) for t in targets)
            if gang.size > capacity:
                raise Unplaceable(
                    f"gang {gang.name} needs {gang.size} pods x {request.gpus} GPUs but virtual cluster "
                    f"{vc.name!r} can hold at most {capacity} such pods even when idle"
                )
        group = Group(
            key=gang.key,
            name=gang.name,
            vc=vc_name,
            priority=request.priority,
            size=gang.size,
            gpus=request.gpus,
            cell_type=targets[0].chain.type_at(targets[0].level),
        )
        guaranteed_vc = vc if request.priority is _PRIO_GUARANTEED else None
        target_of: dict[Chain, Target] = {}
        for target in targets:
            target_of.setdefault(target.chain, target)
        listed: Cell | None = None  # the previous slot's VC cell, if bound straight off a free list
        slots = group.slots
        try:
            while len(slots) < gang.size:
                spot = None
                if guaranteed_vc is not None and slots:
                    previous = slots[-1]
                    if previous.root is not None and previous.root.guaranteed_free >= request.gpus:
                        spot = self._plan_in_last_root(guaranteed_vc, previous, target_of, request.gpus, allowed)
                        if spot is not None and self._preempts(spot):
                            spot = None  # the full plan weighs its victims against its equals
                    if spot is None and listed is not None:
                        spot = self._plan_next_listed(guaranteed_vc, listed, target_of, request.gpus, allowed)
                if spot is None:
                    spot = self.plan(request, vc, targets, allowed=allowed)
                root = spot.root
                # Free on a list of its own level: a top-level FREE cell, or a child of a split one.
                off_list = spot.new_root and root is not None and (
                    root.state is _FREE or (root.state is _INSIDE and root.parent is not None and root.parent.state is _SPLIT)
                )
                if guaranteed_vc is not None and allowed is None:
                    last_off_list = self._book_whole_nodes(guaranteed_vc, group, spot, off_list, target_of, gang.size - len(slots))
                    if last_off_list is not None:
                        listed = slots[-1].root if last_off_list else None
                        continue
                listed = root if off_list else None
                slots.append(
                    self.book(spot, vc=vc_name, priority=request.priority, pod_uid=None, pod_key=None, group=group)
                )
        except Unplaceable as failure:
            for slot in list(group.slots):
                self.release(slot)
            raise Unplaceable(
                f"gang {gang.name} ({gang.size} pods x {request.gpus} GPUs) cannot be placed all at once: {failure.reason}",
                resolvable=failure.resolvable,
            ) from None
        group.cell_type = group.slots[0].cell_type if group.slots else group.cell_type
        self.groups[gang.key] = group
        return group

    def _book_whole_nodes(
        self, vc: VcState, group: Group, spot: Spot, off_list: bool, target_of: Mapping[Chain, Target], count: int
    ) -> bool | None:
        """Book the planned slot ``spot`` and up to ``count - 1`` slots after it at once where
        each slot takes a whole clean node (8-GPU pods on 8-GPU nodes), exactly where and how
        slot-by-slot booking would put them, with the work the slots share done once (see
        :meth:`_change_whole_nodes`, :meth:`_adopt`). ``off_list``: ``spot`` binds a VC cell
        straight off the free list of its level. Returns whether the last slot booked did so
        too, or ``None`` when ``spot`` is not of that kind (nothing is booked then).

        Which nodes, not a heuristic: a search per slot would take these one after another.
        Inside a wide VC cell of nodes (the spot's, bound before or by this slot)
        :meth:`_plan_in_last_root` takes the first node of the cell's index with every GPU
        free, which is where best fit put the spot itself; booking it takes it out of the index
        and moves no other entry, so the next slot takes the next such node. When the spot binds
        a fresh node, its search found no VC cell able to take it and nothing for the targets
        before its own, and booking it changes neither (see :meth:`_plan_next_listed`); at the
        node level it took the first clean free node, or split a free cell when there was none
        (a clean free node always holds the request). Either way the clean free nodes are then
        the ones after it on the list, or the split's, and with quota left Algorithm 1 takes
        the first of them: the node level is the lowest with a free cell, so there is no
        deviation to check. Binding it changes nothing else on the list, nor any draining (none
        is allowed here). A node with opportunistic pods ends the run: its slot needs the
        general booking, which evicts.

        GPUs are booked before the new VC cells are registered, as :meth:`book` does for one:
        with no draining and the quota respected, a registration moves nothing the later slots'
        bookings move, and a new cell enters the VC's index where its last move would have put
        it (last in the bucket of its final free count)."""
        root = spot.root
        chain = spot.chain
        node_level = chain.node_level
        n = group.gpus
        target = target_of.get(chain)
        if root is None or target is None or target.level != node_level or n != chain.gpus[node_level - 1]:
            return None
        anchor = spot.gpus[0].node_cell
        if anchor is None or anchor.opportunistic_used or anchor.guaranteed_free != n:
            return None
        nodes: list[Cell]
        fresh_nodes = False  # every slot binds its own node
        if root.level == node_level + 1 and root.child_index is not None:
            # A root from the VC's index is the VC's and usable; a new one is once bound (as
            # draining cannot change then).
            if spot.new_root and vc.draining:
                return None
            nodes = root.child_index.first_with(n, count)
            if not nodes or nodes[0] is not anchor:
                return None
        elif root is anchor and spot.new_root and not vc.draining:
            cell_type = root.cell_type
            left = vc.quota.get(cell_type, 0) - len(vc.bound.get(cell_type, ()))
            buddy = self.buddies[chain]
            buddy.take(anchor)  # what follows it on the list is what the next slots take
            nodes = [anchor, *buddy.first_clean_cells(node_level, max(min(count, left) - 1, 0))]
            fresh_nodes = True
        else:
            return None
        ids = []
        slots = group.slots
        new_booking = self._new_booking
        vc_name, priority = vc.name, group.priority
        for node in nodes:
            if node.opportunistic_used or node.guaranteed_free != n:
                break
            booking = new_booking(
                vc_name, priority, "guaranteed", chain, node_level, node if fresh_nodes else root, node.leaves, None, None, group
            )
            slots.append(booking)
            ids.append(booking.id)
        del nodes[len(ids) :]
        self._change_whole_nodes(nodes, ids, book=True)
        if fresh_nodes:
            buddy = self.buddies[chain]
            for node in nodes[1:]:
                buddy.take(node)
            self._adopt(vc, nodes)
        elif spot.new_root:
            self._bind(vc, root)
        return off_list if len(nodes) == 1 else fresh_nodes

    @staticmethod
    def _plan_in_last_root(
        vc: VcState, previous: Booking, target_of: Mapping[Chain, Target], n: int, allowed: AbstractSet[str] | None
    ) -> Spot | None:
        """The next gang slot where :meth:`plan` would put it, found without the search when it
        goes into the VC cell that took the previous slot. Exact, not a heuristic: the previous
        slot's search found every VC cell it tried before that one unable to hold the request (or
        bound that one fresh after all of them failed). Booking the slot changed nothing outside
        that cell, and only lowered its free count, which moves it earlier in best-fit order; so
        the same search for this slot tries that cell first among those that can succeed."""
        root = previous.root
        if root is None or root.vc != vc.name or root in vc.draining or root.guaranteed_free < n:
            return None
        if root.state is not _BOUND and root.state is not _PINNED:
            return None
        target = target_of.get(root.chain)
        if target is None or target.level > root.level:
            return None
        spot = best_spot(root, target.level, n, _VIEW_GUARANTEED, allowed)
        if spot is None:
            return None
        return Spot(target.chain, target.level, tuple(pick_gpus(spot, n, _VIEW_GUARANTEED)), root, False)

    def _plan_next_listed(
        self, vc: VcState, previous: Cell, target_of: Mapping[Chain, Target], n: int, allowed: AbstractSet[str] | None
    ) -> Spot | None:
        """The next gang slot where :meth:`plan` would put it, when the previous slot bound a new
        VC cell straight off the free list of its level L and that cell cannot take this slot
        (:meth:`_plan_in_last_root` said no). Exact, not a heuristic: the previous slot's search
        found no VC cell able to take it and nothing at the levels and targets before L, and
        binding a level-L cell off the list changes neither (other cells are untouched, and f_L
        and r_L - a_L both drop by one, which leaves every deviation check of Theorem 1's
        invariant as it was). So the search comes to level L again, where Algorithm 1 takes the
        first acceptable clean cell of the level's free list; only that is done here. ``None``
        (the full search runs) when the level has no free cell, no quota left, or no clean
        acceptable cell."""
        chain, level = previous.chain, previous.level
        target = target_of.get(chain)
        buddy = self.buddies.get(chain)
        if target is None or target.level > level or buddy is None:
            return None
        cell_type = previous.cell_type
        if vc.quota.get(cell_type, 0) - len(vc.bound.get(cell_type, ())) <= 0:
            return None
        target_level = target.level
        if target_level == level and allowed is None:
            # The request fills whole cells of the free list's level (an 8-GPU pod, a node):
            # a clean free cell holds it whole, so the first one is the answer.
            clean = buddy.first_clean_cells(level, 1)
            if not clean or clean[0].guaranteed_free < n:
                return None
            return Spot(chain, target_level, tuple(pick_gpus(clean[0], n, _VIEW_GUARANTEED)), clean[0], True)
        found = buddy.first_clean(level, lambda cell: best_spot(cell, target_level, n, _VIEW_GUARANTEED, allowed))
        if found is None:
            return None
        cell, spot = found
        return Spot(chain, target_level, tuple(pick_gpus(spot, n, _VIEW_GUARANTEED)), cell, True)

    # ================================================================== recovery

    def recover_exact(
        self,
        *,
        vc_name: str,
        priority: Priority,
        node: str,
        gpu_indices: Sequence[int],
        root_id: str | None,
        cell_type: str | None,
        pod_uid: str | None,
        pod_key: str | None,
        group: Group | None,
    ) -> Booking | None:
        """Re-create a booking exactly as a bind-info describes it; ``None`` when that is no
        longer consistent (unknown cells, GPUs another guaranteed pod holds, a VC cell that is
        now someone else's). Quotas are not checked: the pod is already running."""
        node_cell = self.topology.nodes.get(node)
        if node_cell is None or not gpu_indices:
            return None
        by_index = {leaf.gpu_index: leaf for leaf in node_cell.leaves}
        if any(i not in by_index for i in gpu_indices) or len(set(gpu_indices)) != len(gpu_indices):
            return None
        gpus = tuple(by_index[i] for i in sorted(gpu_indices))
        chain = node_cell.chain
        level = chain.node_level
        if cell_type is not None and self.topology.chain_of_type.get(cell_type) is chain:
            level = min(chain.level_of(cell_type), chain.node_level)
        if priority is _PRIO_OPPORTUNISTIC:
            if any(g.opportunistic_owner is not None for g in gpus):
                return None
            spot = Spot(chain, level, gpus)
            return self.book(spot, vc=vc_name, priority=priority, pod_uid=pod_uid, pod_key=pod_key, group=group)
        if any(g.guaranteed_owner is not None for g in gpus):
            return None
        vc = self.vcs.get(vc_name)
        if vc is None:
            # The VC was removed from the configuration while the pod ran: keep its cells until
            # the pod is gone, under a quota-less VC.
            vc = self.vcs[vc_name] = VcState(vc_name, self.topology)
            vc.defined = False
        if root_id and root_id not in self.topology.cells_by_id:
            # The VC cell is gone: the discovered cells changed shape since the bind (a rack
            # that dissolved). Keep the pod on exactly its GPUs, in the VC cell that now holds them.
            home = self._home_for(vc, gpus)
            if home is not None:
                self.note(f"pod {pod_key}: its VC cell {root_id} no longer exists; recovered in {home.id}")
            root_id = home.id if home is not None else None
        root = self.topology.cells_by_id.get(root_id) if root_id else None
        if root is None or any(not contains(root, g) for g in gpus):
            return None
        if root.state is _BOUND or root.state is _PINNED:
            if root.vc != vc_name:
                return None
            spot = Spot(chain, level, gpus, root, False)
        elif self.buddies[chain].is_takeable(root) if chain in self.buddies else False:
            spot = Spot(chain, level, gpus, root, True)
        else:
            return None
        return self.book(spot, vc=vc_name, priority=priority, pod_uid=pod_uid, pod_key=pod_key, group=group)

    def _home_for(self, vc: VcState, gpus: Sequence[Cell]) -> Cell | None:
        """The VC cell a running pod's ``gpus`` can be recovered in: the VC's cell holding them,
        or else the lowest free cell holding them of a type the VC owns; ``None`` if neither."""
        cell: Cell | None = gpus[0]
        while cell is not None and not all(contains(cell, g) for g in gpus):
            cell = cell.parent
        owned = vc.owned_types()
        buddy = self.buddies.get(gpus[0].chain)
        while cell is not None:
            if cell.state is _BOUND or cell.state is _PINNED:
                return cell if cell.vc == vc.name else None
            if cell.cell_type in owned and buddy is not None and buddy.is_takeable(cell):
                return cell
            cell = cell.parent
        return None

    def recover_on_node(
        self,
        request: CellRequest,
        vc: VcState | None,
        node: str,
        *,
        pod_uid: str,
        pod_key: str,
        gpu_indices: Sequence[int] = (),
    ) -> Booking | None:
        """The best consistent booking for a pod found running on ``node`` without (usable)
        bind-info: inside its VC if a legal cell is there, else on idle GPUs of the node, held
        like an opportunistic pod so nothing is ever double-allocated. ``gpu_indices`` (from a
        bind-info that no longer fits) are kept when they are still untracked: they are the
        GPUs the pod's containers were given."""
        node_cell = self.topology.nodes.get(node)
        if node_cell is None or request.gpus == 0:
            return None
        vc_name = vc.name if vc else (request.vc or "")
        by_index = {leaf.gpu_index: leaf for leaf in node_cell.leaves}
        kept = [by_index.get(i) for i in sorted(set(gpu_indices))]
        if len(kept) == request.gpus and all(g is not None and g.guaranteed_owner is None and g.opportunistic_owner is None for g in kept):
            gpus = tuple(g for g in kept if g is not None)
            home = self._home_for(vc, gpus) if vc is not None and request.priority is _PRIO_GUARANTEED else None
            level = node_cell.chain.node_level
            if home is None:
                if request.priority is _PRIO_GUARANTEED:
                    self.note(f"pod {pod_key} on {node} has no consistent HiveD placement; its GPUs are tracked outside any VC cell")
                return self.book(Spot(node_cell.chain, level, gpus), vc=vc_name, priority=request.priority, pod_uid=pod_uid, pod_key=pod_key, holds="opportunistic")
            spot = Spot(node_cell.chain, level, gpus, home, home.state is not _BOUND and home.state is not _PINNED)
            return self.book(spot, vc=vc_name, priority=request.priority, pod_uid=pod_uid, pod_key=pod_key)
        allowed = frozenset({node})
        try:
            targets = self.targets(request, vc)
            spot = self.plan(request, vc, [t for t in targets if t.chain is node_cell.chain] or targets, allowed=allowed, view=_VIEW_IDLE)
            if spot.gpus and spot.gpus[0].node == node:
                return self.book(spot, vc=vc.name if vc else (request.vc or ""), priority=request.priority, pod_uid=pod_uid, pod_key=pod_key)
        except Unplaceable:
            pass
        idle = [leaf for leaf in node_cell.leaves if leaf.guaranteed_owner is None and leaf.opportunistic_owner is None]
        if len(idle) < request.gpus:
            self.note(f"pod {pod_key} runs on {node} but the node has only {len(idle)} untracked GPUs for its {request.gpus}")
            return None
        self.note(f"pod {pod_key} on {node} has no consistent HiveD placement; its GPUs are tracked outside any VC cell")
        spot = Spot(node_cell.chain, node_cell.chain.node_level, tuple(idle[: request.gpus]))
        return self.book(
            spot, vc=vc.name if vc else (request.vc or ""), priority=request.priority, pod_uid=pod_uid, pod_key=pod_key, holds="opportunistic"
        )

    def note(self, message: str) -> None:
        self.anomalies.append(message)
