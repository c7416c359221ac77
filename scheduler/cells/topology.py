"""The compiled physical cluster: chains of cell types and the tree of physical cells.

A *chain* is one linear hierarchy of cell types (leaf GPU -> ... -> node -> ... -> top). Every
cell type belongs to exactly one chain, so a cell type alone names a level. Cells are mutable
objects with ``__slots__``: the allocator keeps per-cell counters on them because walking a
dozen ancestors and bumping integers is what makes an allocation cost microseconds, not
milliseconds, on a 65,536-GPU cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterator, Mapping

from scheduler.cells.buckets import Buckets
from scheduler.cells.config import CellTypeSpec, PhysicalCellSpec, TopologyConfig, chains_of
from scheduler.errors import ConfigError


@dataclass(frozen=True, slots=True, eq=False)
class Chain:
    """Levels are 1-based: level 1 is one GPU, ``top`` is the chain's highest cell type."""

    name: str  # the top cell type
    types: tuple[str, ...]  # types[k - 1] is the level-k type
    child_counts: tuple[int, ...]  # child_counts[k - 1]: level-(k-1) children of a level-k cell (0 for GPUs)
    gpus: tuple[int, ...]  # gpus[k - 1]: GPUs in a level-k cell
    node_level: int
    order: int  # position among chains, for deterministic iteration

    @property
    def top(self) -> int:
        return len(self.types)

    def level_of(self, cell_type: str) -> int:
        return self.types.index(cell_type) + 1

    def type_at(self, level: int) -> str:
        return self.types[level - 1]

    def smallest_level_for(self, gpus: int) -> int | None:
        """The lowest level whose cells hold ``gpus`` GPUs, capped at the node (a pod lives on one node)."""
        for level in range(1, self.node_level + 1):
            if self.gpus[level - 1] >= gpus:
                return level
        return None

    def __repr__(self) -> str:
        return f"Chain({self.name})"


# Cells with more children than this (racks of many nodes) index their children by free GPUs, so
# that a best-fit descent does not sort hundreds of children per request.
WIDE = 16


class CellState(Enum):
    """A cell's place in the buddy allocator. Cells inside a FREE, BOUND or PINNED cell have no
    state of their own (INSIDE): only the highest free cell is on a free list (Algorithm 1).

    A free child of a SPLIT cell also keeps INSIDE in ``Cell.state``: it is free by position, so
    that splitting or merging a 256-node rack writes nothing to its 256 children.
    :meth:`Cell.buddy_state` gives the resolved state (FREE for such a child)."""

    INSIDE = "inside"
    FREE = "free"
    SPLIT = "split"
    BOUND = "bound"
    PINNED = "pinned"


class Cell:
    """A physical cell. Leaves (level 1) are GPUs and carry their owners; every cell carries
    counters over its subtree, kept exact by the allocator on every change."""

    # Slots are laid out in this order: what every booking reads and writes comes first, so
    # that touching a cell costs one or two cache lines (the tree has ~100,000 cells, so most
    # touches miss the cache).
    __slots__ = (
        # counters over the subtree
        "guaranteed_used",  # GPUs booked by guaranteed pods
        "idle_gpus",  # healthy GPUs with no pod at all
        "guaranteed_free",  # healthy GPUs not booked by a guaranteed pod (opportunistic ones are preemptible)
        "opportunistic_used",  # GPUs used by opportunistic pods
        "bad",  # bad GPUs (node NotReady or cordoned)
        # leaf-only
        "guaranteed_owner",  # booking id of the guaranteed booking on this GPU
        "opportunistic_owner",  # booking id of the opportunistic booking on this GPU
        "is_bad",
        # the tree and buddy / VC state
        "parent",
        "state",
        "node_cell",
        "vc",  # for a BOUND or PINNED cell: the VC owning it
        "level",
        "total",
        "children",
        "ordinal",
        "node",
        "inner",  # node cells only: the cells between the node and its GPUs
        "leaves",
        "chain",
        "cell_type",
        "id",
        "gpu_index",
        "node_cells",
        "pinned_id",
    )

    def __init__(self, *, cell_id: str, chain: Chain, level: int, parent: Cell | None, ordinal: int) -> None:
        self.id = cell_id
        self.chain = chain
        self.level = level
        self.cell_type = chain.type_at(level)
        self.parent = parent
        self.children: tuple[Cell, ...] = ()
        self.ordinal = ordinal
        self.node: str | None = None
        self.node_cell: Cell | None = None
        self.gpu_index = -1
        self.leaves: tuple[Cell, ...] = ()
        self.node_cells: tuple[Cell, ...] = ()
        self.inner: tuple[Cell, ...] = ()
        self.total = chain.gpus[level - 1]
        self.bad = 0
        self.guaranteed_used = 0
        self.opportunistic_used = 0
        self.idle_gpus = self.total
        self.guaranteed_free = self.total
        self.state = CellState.INSIDE
        self.vc: str | None = None
        self.pinned_id: str | None = None
        self.is_bad = False
        self.guaranteed_owner: int | None = None
        self.opportunistic_owner: int | None = None

    def __repr__(self) -> str:
        return f"Cell({self.id})"

    def ancestors(self) -> Iterator[Cell]:
        cell = self.parent
        while cell is not None:
            yield cell
            cell = cell.parent

    def walk(self) -> Iterator[Cell]:
        """Pre-order over the subtree."""
        stack = [self]
        while stack:
            cell = stack.pop()
            yield cell
            stack.extend(reversed(cell.children))

    def buddy_state(self) -> CellState:
        """The state with "free by position" resolved: INSIDE under a SPLIT parent is FREE."""
        state = self.state
        if state is CellState.INSIDE and self.parent is not None and self.parent.state is CellState.SPLIT:
            return CellState.FREE
        return state

    @property
    def is_leaf(self) -> bool:
        return self.level == 1

    @property
    def above_node(self) -> bool:
        return self.level > self.chain.node_level


class ChildIndex(Buckets[Cell]):
    """A wide cell's children keyed by guaranteed-view free GPUs, and, where they are node cells,
    by node name (``by_node``; empty otherwise): a search offered a few nodes goes straight to
    them (:func:`scheduler.cells.search.best_spot`). The children never change after the build."""

    __slots__ = ("by_node",)

    def __init__(self, children: tuple[Cell, ...]) -> None:
        super().__init__()
        self.by_node: dict[str, Cell] = {c.node: c for c in children if c.node is not None and c.node_cell is c}
        for child in children:
            self.add(child, child.guaranteed_free)


class CellCensus:
    """Counts over the whole tree that the metrics gauges read, kept exact where the cells
    change (the ledger on every counter change, the topology as cells join and leave), so that
    a scrape reads them in O(cell types + chains) instead of walking ~100,000 cells under the
    engine lock."""

    __slots__ = ("opportunistic", "bad", "nodes", "blocked_nodes")

    def __init__(self) -> None:
        self.opportunistic: dict[str, int] = {}  # cell type -> cells with an opportunistic GPU
        self.bad: dict[str, int] = {}  # cell type -> cells with a bad GPU
        self.nodes: dict[Chain, int] = {}  # node-level cells per chain
        self.blocked_nodes: dict[Chain, int] = {}  # node-level cells with fewer idle GPUs than GPUs

    def flip_opportunistic(self, cell_type: str, delta: int) -> None:
        self.opportunistic[cell_type] = self.opportunistic.get(cell_type, 0) + delta

    def flip_bad(self, cell_type: str, delta: int) -> None:
        self.bad[cell_type] = self.bad.get(cell_type, 0) + delta

    def count_node(self, chain: Chain, delta: int) -> None:
        self.nodes[chain] = self.nodes.get(chain, 0) + delta
        self.blocked_nodes.setdefault(chain, 0)  # there from a chain's first node: the ledger adds to it

    def forget(self, cell: Cell) -> None:
        """A cell leaves the tree: its share of every count goes with it."""
        if cell.opportunistic_used:
            self.flip_opportunistic(cell.cell_type, -1)
        if cell.bad:
            self.flip_bad(cell.cell_type, -1)
        if cell.node_cell is cell:
            self.count_node(cell.chain, -1)
            if cell.idle_gpus < cell.total:
                self.blocked_nodes[cell.chain] -= 1


class Topology:
    """Chains, the physical cell tree, and lookups by node name, cell id and cell type."""

    def __init__(self, config: TopologyConfig) -> None:
        self.config = config
        shapes = chains_of(config.cell_types)
        self.chains: dict[str, Chain] = {}
        self.chain_of_type: dict[str, Chain] = {}
        for cell_type, shape in shapes.items():
            top = shape.types[-1]
            if top not in self.chains:
                self.chains[top] = _make_chain(top, shape.types, shape.node_level, config.cell_types, len(self.chains))
            self.chain_of_type[cell_type] = self.chains[top]
        self.top_cells: list[Cell] = []
        self.nodes: dict[str, Cell] = {}
        self.cells_by_id: dict[str, Cell] = {}
        self.pinned: dict[str, Cell] = {}
        self.census = CellCensus()
        # Wide cells only (more than WIDE children): their children keyed by guaranteed-view free
        # GPUs, for best fit without sorting. Built with the tree; the ledger moves each child
        # as its count changes and the search reads it.
        self.child_indexes: dict[Cell, ChildIndex] = {}
        for spec in config.physical_cells:
            assert spec.cell_type is not None  # guaranteed by structural validation
            chain = self.chain_of_type[spec.cell_type]
            self.top_cells.append(self._build(spec, chain, chain.level_of(spec.cell_type), None, len(self.top_cells)))
        # Chains in the order their first physical cell appears: search order is deterministic
        # and follows the operator's file.
        used: list[Chain] = []
        for top_cell in self.top_cells:
            if top_cell.chain not in used:
                used.append(top_cell.chain)
        self.used_chains: tuple[Chain, ...] = tuple(used)

    # ------------------------------------------------------------------ growth and shrinkage

    def add_top_cell(self, spec: PhysicalCellSpec, cell_types: Mapping[str, CellTypeSpec]) -> Cell:
        """Build one more top-level cell at runtime (a node that joined a discovered cluster).
        ``cell_types`` may add new chains; types already known must be unchanged. The caller
        (the allocator) puts the cell into the free space."""
        merged = dict(self.config.cell_types)
        for name, type_spec in cell_types.items():
            if merged.setdefault(name, type_spec) != type_spec:
                raise ConfigError(f"topology.cellTypes.{name}: differs from the running topology's")
        assert spec.cell_type is not None
        shapes = chains_of(merged)
        for cell_type, shape in shapes.items():
            top = shape.types[-1]
            if cell_type in self.chain_of_type:
                continue
            if top not in self.chains:
                self.chains[top] = _make_chain(top, shape.types, shape.node_level, merged, len(self.chains))
            self.chain_of_type[cell_type] = self.chains[top]
        chain = self.chain_of_type[spec.cell_type]
        nodes = [spec.node_name] if spec.node_name else [child.node_name for child in spec.cell_children]
        taken = [n for n in nodes if n is None or n in self.nodes or n in self.cells_by_id]
        if taken or (spec.cell_id is not None and spec.cell_id in self.cells_by_id):
            raise ConfigError(f"topology.physicalCells: {spec.cell_id or nodes[0]!r} is already in the topology")
        cell = self._build(spec, chain, chain.level_of(spec.cell_type), None, len(self.top_cells))
        self.top_cells.append(cell)
        if chain not in self.used_chains:
            self.used_chains = (*self.used_chains, chain)
        self.config = TopologyConfig(cell_types=merged, physical_cells=(*self.config.physical_cells, spec))
        return cell

    def remove_top_cell(self, cell: Cell) -> None:
        """Forget a top-level cell and everything in it (its nodes left the cluster). The caller
        (the allocator) has taken it out of the free space. Its chain stays known."""
        index = self.top_cells.index(cell)
        del self.top_cells[index]
        specs = list(self.config.physical_cells)
        del specs[index]
        self.config = TopologyConfig(cell_types=self.config.cell_types, physical_cells=tuple(specs))
        for inner in cell.walk():
            self.census.forget(inner)
            self.child_indexes.pop(inner, None)
            del self.cells_by_id[inner.id]
            if inner.node_cell is inner and inner.node is not None:
                del self.nodes[inner.node]
            if inner.pinned_id is not None:
                self.pinned.pop(inner.pinned_id, None)

    def _build(self, spec: PhysicalCellSpec, chain: Chain, level: int, parent: Cell | None, ordinal: int) -> Cell:
        if level == chain.node_level:
            assert spec.node_name is not None
            cell = self._build_node(spec.node_name, chain, parent, ordinal)
        else:
            cell = Cell(cell_id="", chain=chain, level=level, parent=parent, ordinal=ordinal)
            children = [self._build(child, chain, level - 1, cell, i) for i, child in enumerate(spec.cell_children)]
            cell.children = tuple(children)
            cell.leaves = tuple(leaf for child in children for leaf in child.leaves)
            cell.node_cells = tuple(n for child in children for n in child.node_cells)
            cell.id = spec.cell_id or f"{cell.cell_type}@{cell.node_cells[0].node}"
            if len(children) > WIDE:
                self.child_indexes[cell] = ChildIndex(cell.children)
        if spec.pinned_cell_id is not None:
            cell.pinned_id = spec.pinned_cell_id
            self.pinned[spec.pinned_cell_id] = cell
        self._register(cell)
        return cell

    def _build_node(self, node: str, chain: Chain, parent: Cell | None, ordinal: int) -> Cell:
        cell = Cell(cell_id=node, chain=chain, level=chain.node_level, parent=parent, ordinal=ordinal)
        cell.node = node
        cell.node_cell = cell
        cell.node_cells = (cell,)
        counters: dict[int, int] = {}
        gpu_counter = [0]

        def below(owner: Cell) -> None:
            if owner.level == 1:
                owner.gpu_index = gpu_counter[0]
                gpu_counter[0] += 1
                owner.leaves = (owner,)
                return
            kids = []
            for i in range(chain.child_counts[owner.level - 1]):
                level = owner.level - 1
                ordinal_in_node = counters.get(level, 0)
                counters[level] = ordinal_in_node + 1
                kid = Cell(cell_id=f"{node}/{chain.type_at(level)}#{ordinal_in_node}", chain=chain, level=level, parent=owner, ordinal=i)
                kid.node = node
                kid.node_cell = cell
                below(kid)
                self._register(kid)
                kids.append(kid)
            owner.children = tuple(kids)
            owner.leaves = tuple(leaf for kid in kids for leaf in kid.leaves)

        below(cell)
        inner: list[Cell] = []
        layer = list(cell.children)
        while layer and layer[0].level > 1:
            inner.extend(layer)
            layer = [kid for c in layer for kid in c.children]
        cell.inner = tuple(inner)
        self.nodes[node] = cell
        self.census.count_node(chain, +1)  # a new node has every GPU idle: not blocked
        return cell

    def _register(self, cell: Cell) -> None:
        if cell.id in self.cells_by_id:
            raise ConfigError(f"topology.physicalCells: cell id {cell.id!r} is used twice (set a distinct cellId)")
        self.cells_by_id[cell.id] = cell

    def all_cells(self) -> Iterator[Cell]:
        for top in self.top_cells:
            yield from top.walk()

    def total_gpus(self) -> int:
        return sum(top.total for top in self.top_cells)


def _make_chain(
    top: str, types: tuple[str, ...], node_level: int, cell_types: Mapping[str, CellTypeSpec], order: int
) -> Chain:
    child_counts = [0] + [cell_types[t].child_count for t in types[1:]]
    gpus = [1]
    for count in child_counts[1:]:
        gpus.append(gpus[-1] * count)
    return Chain(
        name=top, types=types, child_counts=tuple(child_counts), gpus=tuple(gpus), node_level=node_level, order=order
    )
