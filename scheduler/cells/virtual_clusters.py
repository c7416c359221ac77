"""The virtual clusters' side of HiveD: each VC's quota, pinned cells and bound VC cells, and
the free space they are bound from (the buddy allocator per chain, Algorithm 1).

Vocabulary: a VC owns ``quota[cell type]`` cells. A *VC cell* (a root) is a physical cell bound
to the VC by the buddy allocator (``BOUND``) or pinned to it in the configuration (``PINNED``).
Roots are bound when a pod first needs one and released when their last guaranteed pod leaves.
A VC that shrinks below what it holds keeps its busy cells until their pods finish: they are
*draining* meanwhile. Cells join and leave the cluster here too (discovered nodes), since what
joins goes into the free space.
"""

from __future__ import annotations

from functools import partial
from typing import Callable, Mapping, Sequence

from scheduler.cells.buckets import Buckets
from scheduler.cells.buddy import BuddyAllocator, derived_capacity
from scheduler.cells.config import CellTypeSpec, PhysicalCellSpec, VirtualClusterSpec
from scheduler.cells.idle_index import IdleNodeIndex
from scheduler.cells.topology import Cell, CellState, Chain, Topology

# Enum members as module constants: a global read is several times cheaper than an Enum
# attribute in CPython 3.11.
_FREE, _BOUND, _PINNED = CellState.FREE, CellState.BOUND, CellState.PINNED


class VcCellCounts:
    """A VC's cells of one cell type (bound and pinned) as its gauges count them, each cell in
    one state, the first that holds: ``bad`` (a bad GPU), ``used`` (guaranteed GPUs),
    ``opportunistic`` (opportunistic GPUs only), ``idle`` (no pod). A partition: a used cell on
    a cordoned node was counted used and bad, 2 cells of a quota of 1 (user25 #9)."""

    __slots__ = ("bad", "used", "opportunistic", "idle")

    def __init__(self) -> None:
        self.bad = 0
        self.used = 0
        self.opportunistic = 0
        self.idle = 0

    def add(self, *, bad: int, guaranteed: int, opportunistic: int, sign: int) -> None:
        """A cell with these counters joins (``sign`` 1) or leaves (-1) its state."""
        if bad:
            self.bad += sign
        elif guaranteed:
            self.used += sign
        elif opportunistic:
            self.opportunistic += sign
        else:
            self.idle += sign


class VcState:
    def __init__(self, name: str) -> None:
        self.name = name
        self.defined = True
        self.quota: dict[str, int] = {}
        self.pinned: list[Cell] = []
        self.bound: dict[str, dict[Cell, None]] = {}  # cell type -> bound roots (not pinned)
        # Roots new pods may use, keyed by their guaranteed-view free GPUs (best fit). A root
        # that is over quota after a shrink is *draining*: left out of here until it empties.
        self.usable: dict[str, Buckets[Cell]] = {}
        self.draining: set[Cell] = set()
        # Per cell type, kept exact as VC cells join, leave and change (the ledger recounts
        # them), so that a metrics scrape does not walk the VC cells under the engine lock.
        self.counts: dict[str, VcCellCounts] = {}

    def count(self, cells: Sequence[Cell], sign: int) -> None:
        """``cells``, of one cell type, became (+1) or stopped being (-1) this VC's cells."""
        cell_type = cells[0].cell_type
        counts = self.counts.get(cell_type)
        if counts is None:
            counts = self.counts[cell_type] = VcCellCounts()
        for cell in cells:
            counts.add(bad=cell.bad, guaranteed=cell.guaranteed_used, opportunistic=cell.opportunistic_used, sign=sign)

    def recount(self, cell: Cell, *, guaranteed_before: int, opportunistic_before: int, bad_before: int) -> None:
        """One of this VC's cells had these counters before its last change."""
        if (cell.guaranteed_used > 0) is (guaranteed_before > 0) and (cell.opportunistic_used > 0) is (opportunistic_before > 0) \
                and (cell.bad > 0) is (bad_before > 0):
            return
        counts = self.counts[cell.cell_type]  # made when the cell joined the VC
        counts.add(bad=bad_before, guaranteed=guaranteed_before, opportunistic=opportunistic_before, sign=-1)
        counts.add(bad=cell.bad, guaranteed=cell.guaranteed_used, opportunistic=cell.opportunistic_used, sign=1)

    def owned_types(self) -> set[str]:
        return {t for t, n in self.quota.items() if n > 0} | {c.cell_type for c in self.pinned}

    def unbound(self, cell_type: str) -> int:
        return self.quota.get(cell_type, 0) - len(self.bound.get(cell_type, ()))


class VirtualClusters:
    """The VCs by name and the free space of every chain. ``shape_version`` changes whenever
    quotas, pinned cells or chains do: what the planner memoises per request shape depends on
    them (see :class:`scheduler.cells.planning.Planner`)."""

    def __init__(self, topology: Topology, virtual_clusters: Mapping[str, VirtualClusterSpec]) -> None:
        self.topology = topology
        self.buddies: dict[Chain, BuddyAllocator] = {}
        # r_k - a_k per chain, as the callable BuddyAllocator.find asks for (made once, not per search)
        self.demand_of: dict[Chain, Callable[[], list[int]]] = {}
        for chain in topology.used_chains:
            self.buddies[chain] = BuddyAllocator(chain, [c for c in topology.top_cells if c.chain is chain])
            self.demand_of[chain] = partial(self.demand, chain)
        # Which nodes VC cells overlap: opportunistic pods go to the others first.
        self.idle_nodes = IdleNodeIndex(topology)
        self.vcs: dict[str, VcState] = {}
        # Configured VCs not served (a discovered cluster has no cell of the types they name):
        # name -> why, which their pods are told. Emptied by a reconfiguration, which serves all.
        self.unserved: dict[str, str] = {}
        self.shape_version = 0
        self.configure(virtual_clusters)

    # ================================================================== configuration

    def configure(self, virtual_clusters: Mapping[str, VirtualClusterSpec]) -> None:
        """Apply (new) VC quotas. Running pods are never touched: a VC that shrinks below what it
        holds keeps its busy cells until their pods finish (they are *draining* meanwhile), and a
        removed VC lingers, quota-less, until its last pod is gone. Validation and feasibility are
        the caller's job. Raises ``ValueError`` (changing nothing) when a pinned cell would
        change hands while pods of its current VC still run in it."""
        self.shape_version += 1
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
                vc = self.vcs[name] = VcState(name)
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
                self.refresh_draining(vc, cell_type)
            self.forget_if_idle(vc)

    def _pin(self, vc: VcState, cell: Cell) -> None:
        if cell.vc is not None and cell.vc != vc.name:
            owner = self.vcs[cell.vc]
            if cell.guaranteed_used:
                raise ValueError(f"pinned cell {cell.pinned_id!r} still runs pods of virtual cluster {owner.name!r}")
            owner.pinned.remove(cell)
            owner.count((cell,), -1)
            owner.usable[cell.cell_type].remove(cell, cell.guaranteed_free)
            self.idle_nodes.cover(cell, -1)
        vc.pinned.append(cell)
        cell.vc = vc.name
        cell.state = _PINNED
        vc.count((cell,), +1)
        vc.usable.setdefault(cell.cell_type, Buckets()).add(cell, cell.guaranteed_free)
        self.idle_nodes.cover(cell, +1)

    def _unpin(self, vc: VcState, cell: Cell) -> None:
        if cell.guaranteed_used:
            raise ValueError(f"pinned cell {cell.pinned_id!r} still runs pods of virtual cluster {vc.name!r}")
        vc.pinned.remove(cell)
        vc.count((cell,), -1)
        vc.usable[cell.cell_type].remove(cell, cell.guaranteed_free)
        self.idle_nodes.cover(cell, -1)
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
            self.demand_of[chain] = partial(self.demand, chain)
        buddy.seed(cell)
        for node in cell.node_cells:
            self.idle_nodes.add_node(node)
        self.shape_version += 1  # a new chain or a larger cell may serve requests
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
        self.shape_version += 1

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
                self.refresh_draining(vc, cell_type)
        self.shape_version += 1

    def forget_if_idle(self, vc: VcState) -> None:
        if not vc.defined and not any(vc.bound.values()) and not vc.pinned:
            del self.vcs[vc.name]

    def refresh_draining(self, vc: VcState, cell_type: str) -> None:
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

    # ================================================================== VC cells

    def bind(self, vc: VcState, root: Cell) -> None:
        self.buddies[root.chain].take(root)
        self.adopt(vc, (root,))

    def adopt(self, vc: VcState, roots: Sequence[Cell]) -> None:
        """Make ``roots``, cells of one type the buddy allocator has just handed out, VC cells
        of ``vc``. Draining is refreshed once, after all of them: several roots at once only
        ever come within the quota and with nothing draining (see
        :meth:`scheduler.cells.gangs.GangPlanner._book_whole_nodes`)."""
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
        vc.count(roots, +1)
        if vc.draining or len(bound) > vc.quota.get(cell_type, 0):
            self.refresh_draining(vc, cell_type)

    def unbind(self, root: Cell) -> None:
        assert root.vc is not None
        vc = self.vcs[root.vc]
        del vc.bound[root.cell_type][root]
        vc.count((root,), -1)
        if root in vc.draining:
            vc.draining.discard(root)
        else:
            vc.usable[root.cell_type].remove(root, root.guaranteed_free)
        self.idle_nodes.cover(root, -1)
        root.vc = None
        self.buddies[root.chain].give(root)
        self.refresh_draining(vc, root.cell_type)
        self.forget_if_idle(vc)

    # ================================================================== Theorem 1

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

