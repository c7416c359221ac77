"""Which nodes are in a discovered cluster's cells, kept in step with the cluster's Nodes.

With no hand-written topology, cellfit discovers the cells from the Nodes it lists at startup
(``discovery``). Nodes keep coming and going afterwards: a new GPU node (or one whose device
plugin starts late), a node deleted for good. :class:`NodeMembership` keeps the running cells
equal to what a restart would discover from the same nodes, as far as that can be done without
disturbing a running pod:

* The target is always :func:`discover_layout` of the member nodes, as each node was when it
  joined (labels edited later change nothing until a restart, as before).
* The difference between the running top-level cells and the target splits into independent
  *changes*: cells that share nodes go together (four standalone nodes that now form a rack,
  a rack that dissolves because one of its nodes left; a name never changes: it carries the
  node size whatever other nodes exist). A change is applied when every cell it removes is *idle* (free in
  the buddy allocator, no pod on any GPU): cells that hold pods are never rebuilt under them.
  It waits otherwise, and is retried when those cells become idle (the engine reports releases)
  or at the next node event.
* A node that joins while its change has to wait joins at once as a standalone node cell of
  its product and size, so it is usable immediately; a later change may regroup it.
* A node deleted while pods hold its GPUs stays, marked bad (no new placements, the pods are
  not disturbed), and leaves once idle.
* The implicit ``default`` VC owns every discovered cell, so its quota follows: +1 per cell
  added, -1 per cell removed (Theorem 1's invariant is untouched: f_k and r_k move together).
  With configured VCs the quotas stay as written: new cells join the pool (opportunistic pods
  use them at once, a reconfiguration can hand them out), and a cell only leaves if the VCs'
  guarantee still holds without it; otherwise it stays, bad.

HiveD itself (the paper's §3 and its Kubernetes scheduler) takes the physical cluster from its
configuration only: a node outside it is ignored, a node that disappears is a bad node whose
cells stay bound, and the cluster's shape changes through a reconfiguration and restart that
keeps running pods' cells (work-preserving). Discovery has no configuration to edit, so this
module applies the same reconfiguration live, cell by cell, with the same rule that running
pods keep their cells.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from scheduler.cells.allocator import CellAllocator
from scheduler.cells.buddy import invariant_holds
from scheduler.cells.config import CellTypeSpec, PhysicalCellSpec, cell_type_problems
from scheduler.cells.discovery import DiscoveredCell, discover_layout, gpu_count_problem, node_type_for
from scheduler.cells.topology import Cell
from scheduler.core.groups import DisjointSets
from scheduler.core.model import NodeInfo


@dataclass(frozen=True, slots=True)
class CellsChanged:
    """What one event changed: a line per change (for the log), and the nodes whose cells were
    built anew (healthy: the caller re-applies what it knows of them, NotReady or cordoned)."""

    messages: tuple[str, ...] = ()
    rebuilt: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.messages)

    def __add__(self, other: CellsChanged) -> CellsChanged:
        return CellsChanged(self.messages + other.messages, self.rebuilt + other.rebuilt)


@dataclass(slots=True)
class _Change:
    """Top-level cells to remove and to add together (they share nodes)."""

    removed: list[Cell] = field(default_factory=list)
    added: list[DiscoveredCell] = field(default_factory=list)


def _top(cell: Cell) -> Cell:
    while cell.parent is not None:
        cell = cell.parent
    return cell


def _shape(cell: Cell) -> tuple[str, str, tuple[str, ...]]:
    return cell.cell_type, cell.id, tuple(n.node or "" for n in cell.node_cells)


class NodeMembership:
    """The discovered cells of a running engine, following node arrivals and deletions."""

    def __init__(
        self,
        allocator: CellAllocator,
        nodes: Iterable[NodeInfo],
        *,
        rack_label: str | None,
        owner_vc: str | None,
    ) -> None:
        self._allocator = allocator
        self._topology = allocator.topology
        self._rack_label = rack_label
        # The VC whose quota is "every discovered cell" (the implicit default), or None.
        self.owner_vc = owner_vc
        # The member nodes, as each was when it joined: the input of the target layout.
        self._members: dict[str, NodeInfo] = {n.name: n for n in nodes if n.name in self._topology.nodes}
        # Per change that waits only for cells to empty: the nodes of those cells.
        self._waiting: list[frozenset[str]] = []

    def is_member(self, name: str) -> bool:
        return name in self._members

    # ------------------------------------------------------------------ events

    def join_problem(self, node: NodeInfo) -> str | None:
        """Why ``node`` may not join the cells (an implausible GPU count); ``None`` when it may."""
        return gpu_count_problem(node, discovered_gpus=self._topology.total_gpus())

    def join(self, node: NodeInfo) -> CellsChanged:
        """A GPU node outside the cells appeared (:meth:`join_problem` has none for it)."""
        self._members[node.name] = node
        changed = self.settle()
        if node.name not in self._topology.nodes:
            changed += CellsChanged((self._join_standalone(node),), (node.name,))
        return changed

    def leave(self, name: str) -> CellsChanged:
        """A member node was deleted."""
        if self._members.pop(name, None) is None:
            return CellsChanged()
        changed = self.settle()
        cell = self._topology.nodes.get(name)
        if cell is not None:
            message = (
                f"node {name} was deleted while pods still hold GPUs in its cell {_top(cell).id}: "
                "it takes no new pods and leaves the cells once they have finished"
            )
            changed += CellsChanged((message,))
        return changed

    def released(self) -> CellsChanged:
        """Pods left: apply the changes that were waiting for their cells, if any now can."""
        if not self._waiting:
            return CellsChanged()
        nodes, idle = self._topology.nodes, self._allocator.is_idle
        if any(all(idle(_top(nodes[n])) for n in names if n in nodes) for names in self._waiting):
            return self.settle()
        return CellsChanged()

    # ------------------------------------------------------------------ reconciliation

    def settle(self) -> CellsChanged:
        """Apply every change between the running cells and the target layout whose removed
        cells are idle; remember the nodes the others wait for."""
        layout = discover_layout(
            list(self._members.values()), rack_label=self._rack_label, running=self._topology.config.cell_types
        )
        current = {_shape(c): c for c in self._topology.top_cells}
        wanted = {(d.cell_type, d.cell_id, d.nodes): d for d in layout.cells}
        changes = self._changes(
            [c for shape, c in current.items() if shape not in wanted],
            [d for shape, d in wanted.items() if shape not in current],
        )
        messages: list[str] = []
        rebuilt: list[str] = []
        self._waiting = []
        for change in changes:
            busy = [c for c in change.removed if not self._allocator.is_idle(c)]
            if busy:
                self._waiting.append(frozenset(n.node for c in busy for n in c.node_cells if n.node))
            elif self._fits(change, layout.cell_types):
                messages.append(self._apply(change, layout.cell_types))
                rebuilt.extend(n for cell_spec in change.added for n in cell_spec.nodes)
        return CellsChanged(tuple(messages), tuple(rebuilt))

    def _changes(self, removed: list[Cell], added: list[DiscoveredCell]) -> list[_Change]:
        """Group cells that share nodes or a cell id (a union-find), in layout order: a rack
        re-formed from other nodes under the same id replaces the old one in one change."""
        sets = DisjointSets()
        for cell in removed:
            sets.union([f"id:{cell.id}", *(f"node:{n.node}" for n in cell.node_cells)])
        for cell_spec in added:
            sets.union([f"id:{cell_spec.cell_id}", *(f"node:{n}" for n in cell_spec.nodes)])
        grouped: dict[str, _Change] = defaultdict(_Change)
        for cell in removed:
            grouped[sets.find(f"id:{cell.id}")].removed.append(cell)
        for cell_spec in added:
            grouped[sets.find(f"id:{cell_spec.cell_id}")].added.append(cell_spec)
        return list(grouped.values())

    def _types_for(self, cells: Iterable[DiscoveredCell], cell_types: Mapping[str, CellTypeSpec]) -> dict[str, CellTypeSpec]:
        needed: dict[str, CellTypeSpec] = {}
        for cell in cells:
            name = cell.cell_type
            while name in cell_types:
                needed[name] = cell_types[name]
                name = cell_types[name].child_type
        return needed

    def _fits(self, change: _Change, cell_types: Mapping[str, CellTypeSpec]) -> bool:
        """Whether ``change`` (its removed cells idle) can be applied: its cell types agree
        with the running ones, and every VC's guarantee still holds afterwards. A change that
        does not fit waits for a restart (e.g. racks of another size became the most common:
        the running chain keeps its shape)."""
        running = self._topology.config.cell_types
        needed = self._types_for(change.added, cell_types)
        if any(name in running and running[name] != spec for name, spec in needed.items()):
            return False
        if cell_type_problems({**running, **needed}):
            return False
        # The owner VC's quota moves with the cells (f_k and r_k together); configured VCs'
        # quotas stay, so a removal must leave their guarantee intact.
        return self.owner_vc is not None or self._guarantee_holds(change)

    def _guarantee_holds(self, change: _Change) -> bool:
        """Theorem 1's invariant ``r_k - a_k <= f_k + F_k`` still holds once the change is
        applied, on every chain it touches (the owner VC's quota moving with it)."""
        alloc = self._allocator
        chain_of = self._topology.chain_of_type
        delta: dict[str, int] = defaultdict(int)
        for cell in change.removed:
            delta[cell.cell_type] -= 1
        for spec in change.added:
            delta[spec.cell_type] += 1
        owner = alloc.vcs.get(self.owner_vc) if self.owner_vc is not None else None
        for chain, buddy in alloc.buddies.items():
            touched = [t for t in delta if chain_of.get(t) is chain]
            if not touched:
                continue
            free = buddy.free_counts()
            wanted = alloc.demand(chain)
            for cell_type in touched:
                level = chain.level_of(cell_type)
                free[level - 1] += delta[cell_type]
                if owner is not None:
                    bound = len(owner.bound.get(cell_type, ()))
                    quota = owner.quota.get(cell_type, 0)
                    wanted[level - 1] += max(quota + delta[cell_type] - bound, 0) - max(quota - bound, 0)
            if not invariant_holds(free, wanted, chain):
                return False
        return True

    def _apply(self, change: _Change, cell_types: Mapping[str, CellTypeSpec]) -> str:
        alloc = self._allocator
        quota: dict[str, int] = defaultdict(int)
        for cell in change.removed:
            alloc.remove_top_cell(cell)
            quota[cell.cell_type] -= 1
        needed = self._types_for(change.added, cell_types)
        for cell_spec in change.added:
            alloc.add_top_cell(_physical_spec(cell_spec), needed)
            quota[cell_spec.cell_type] += 1
        self._grow_owner(quota)
        before = ", ".join(f"{c.id} ({c.cell_type})" for c in change.removed)
        after = ", ".join(_describe_cell(c, cell_types) for c in change.added)
        if not change.removed:
            return f"cells added: {after}{self._owner_text(quota)}"
        if not change.added:
            return f"cells removed (their nodes were deleted): {before}{self._owner_text(quota)}"
        return f"cells regrouped as a restart would discover them: {before} -> {after}{self._owner_text(quota)}"

    def _join_standalone(self, node: NodeInfo) -> str:
        """The node's change waits: it joins now as a standalone node cell of its product and
        size (that type's existing chain, else a new one), so it is usable at once."""
        node_type, spec = node_type_for(node, self._topology.config.cell_types)
        self._allocator.add_top_cell(PhysicalCellSpec(cell_type=node_type, node_name=node.name), {node_type: spec})
        self._grow_owner({node_type: 1})
        return (
            f"cells added: {node.name} ({node_type}, {spec.child_count} GPUs) as a standalone node; "
            f"a restart would place it otherwise, which waits for cells that hold pods{self._owner_text({node_type: 1})}"
        )

    def _grow_owner(self, quota: Mapping[str, int]) -> None:
        if self.owner_vc is not None and any(quota.values()):
            self._allocator.resize_quota(self.owner_vc, quota)

    def _owner_text(self, quota: Mapping[str, int]) -> str:
        if self.owner_vc is None:
            return " (not assigned to any virtual cluster: the configured ones are unchanged)"
        vc = self._allocator.vcs.get(self.owner_vc)
        if vc is None:
            return ""
        owned = ", ".join(f"{vc.quota.get(t, 0)} {t}" for t in sorted(quota) if quota[t])
        return f"; virtual cluster {self.owner_vc!r} now owns {owned}" if owned else ""


def _physical_spec(cell: DiscoveredCell) -> PhysicalCellSpec:
    if cell.rack:
        return PhysicalCellSpec(cell_type=cell.cell_type, cell_id=cell.cell_id, cell_children=tuple(PhysicalCellSpec(node_name=n) for n in cell.nodes))
    return PhysicalCellSpec(cell_type=cell.cell_type, node_name=cell.nodes[0])


def _describe_cell(cell: DiscoveredCell, cell_types: Mapping[str, CellTypeSpec]) -> str:
    gpus = 1
    name = cell.cell_type
    while name in cell_types:
        gpus *= cell_types[name].child_count
        name = cell_types[name].child_type
    if cell.rack:
        return f"{cell.cell_id} ({cell.cell_type} of nodes {', '.join(cell.nodes)}, {gpus} GPUs)"
    return f"{cell.cell_id} ({cell.cell_type}, {gpus} GPUs)"
