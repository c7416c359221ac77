"""A node-level cell hierarchy built from the cluster's Nodes, for clusters with no hand-written
topology.

Nodes are grouped by GPU product (``nvidia.com/gpu.product``) and GPU count (allocatable
``nvidia.com/gpu``): each group is one chain ``<base>`` (one GPU) -> ``<base>-NODE``, where
``<base>`` is ``<product>-<n>GPU``, always: a name says the node size whatever other nodes exist,
so a VC written for 8-GPU A100 nodes names the same cells after 2-GPU A100 nodes join, live and
after a restart. (Before, the size was added only once a product came in a second size, and the
names changed under the configuration: :func:`legacy_names` still accepts those unsized names
where the product has one size.) Nothing below the node is assumed (PCIe topology is not on the
Node object). With a rack label, the most common rack size of a group becomes a ``<base>-RACK``
level; nodes in racks of another size, or without the label, stay standalone node cells (HiveD
needs every rack of a type to be the same size). Nodes without GPUs are not part of any cell.

A node's GPU count is its device plugin's word, and cells are objects, one per GPU and more: a
Node that reports 10^9 GPUs (a plugin's mistake, or a Node written to harm) would take the
extender's memory with it. So discovery takes a node of at most :data:`MAX_NODE_GPUS` GPUs, and
nodes (by name) only while the cells hold at most :data:`~scheduler.cells.config.MAX_GPUS`, the
bound of a configured topology; the others are left out, and said so (:func:`gpu_count_problem`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Final, Mapping, Sequence

from scheduler.cells.config import MAX_GPUS, CellTypeSpec, PhysicalCellSpec, TopologyConfig
from scheduler.constants import LABEL_GPU_PRODUCT
from scheduler.core.model import NodeInfo

UNKNOWN_PRODUCT: Final = "gpu"
# No node has this many GPUs (a 72-GPU rack spreads them over 18 nodes), and its cells fit well
# inside the memory of a small extender.
MAX_NODE_GPUS: Final = 1024
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def _product(node: NodeInfo) -> str:
    raw = node.labels.get(LABEL_GPU_PRODUCT, "").strip()
    return _UNSAFE.sub("-", raw).strip("-") or UNKNOWN_PRODUCT


@dataclass(frozen=True, slots=True)
class DiscoveredCell:
    """One top-level cell as discovery lays it out: a standalone node, or a rack of nodes."""

    cell_type: str
    cell_id: str  # the node name for a standalone node
    nodes: tuple[str, ...]
    rack: bool


@dataclass(frozen=True, slots=True)
class DiscoveredLayout:
    """What :func:`discover_topology` builds, as plain values: the cell types and the top-level
    cells in file order. Cheap to compute and compare, so that a running engine can ask what a
    restart would build after a node came or went."""

    cell_types: dict[str, CellTypeSpec]
    cells: tuple[DiscoveredCell, ...]
    left_out: tuple[str, ...] = ()  # why each GPU node left out is (gpu_count_problem)

    def to_config(self) -> TopologyConfig:
        physical = tuple(
            PhysicalCellSpec(cell_type=c.cell_type, cell_id=c.cell_id, cell_children=tuple(PhysicalCellSpec(node_name=n) for n in c.nodes))
            if c.rack
            else PhysicalCellSpec(cell_type=c.cell_type, node_name=c.nodes[0])
            for c in self.cells
        )
        return TopologyConfig(cell_types=self.cell_types, physical_cells=physical)


def discover_layout(
    nodes: Sequence[NodeInfo], *, rack_label: str | None = None, running: Mapping[str, CellTypeSpec] | None = None
) -> DiscoveredLayout:
    """The cell types and top-level cells for ``nodes``; deterministic for a given node set
    (sorted by name, whatever order the watch delivered them in).

    ``running``: the cell types of a running cluster, whose rack sizes are kept (racks keep their
    size even if another size became the most common): cells can be added beside running ones but
    a running cell type never changes. Names never depend on other nodes (:func:`base_name`), so
    the running names are the ones a restart gives."""
    groups: dict[tuple[str, int], list[NodeInfo]] = defaultdict(list)
    left_out: list[str] = []
    discovered_gpus = 0
    for node in sorted(nodes, key=lambda n: n.name):
        if node.allocatable.gpus <= 0:
            continue
        problem = gpu_count_problem(node, discovered_gpus=discovered_gpus)
        if problem is not None:
            left_out.append(problem)
            continue
        discovered_gpus += node.allocatable.gpus
        groups[(_product(node), node.allocatable.gpus)].append(node)
    cell_types: dict[str, CellTypeSpec] = {}
    cells: list[DiscoveredCell] = []
    for (product, gpus), members in sorted(groups.items()):
        base = base_name(product, gpus)
        node_type = f"{base}-NODE"
        cell_types[node_type] = CellTypeSpec(child_type=base, child_count=gpus, is_node_level=True)
        racks: dict[str, list[NodeInfo]] = defaultdict(list)
        standalone: list[NodeInfo] = []
        for node in members:
            value = node.labels.get(rack_label) if rack_label else None
            (racks[value] if value else standalone).append(node)
        running_rack = running.get(f"{base}-RACK") if running is not None else None
        rack_size = running_rack.child_count if running_rack is not None else _common_size(racks)
        if rack_size:
            rack_type = f"{base}-RACK"
            cell_types[rack_type] = CellTypeSpec(child_type=node_type, child_count=rack_size)
            for value in sorted(racks):
                if len(racks[value]) != rack_size:
                    standalone.extend(racks[value])
                    continue
                names = tuple(n.name for n in racks[value])
                cells.append(DiscoveredCell(cell_type=rack_type, cell_id=f"{rack_type}@{value}", nodes=names, rack=True))
        else:
            standalone.extend(n for rack in racks.values() for n in rack)
        for node in sorted(standalone, key=lambda n: n.name):
            cells.append(DiscoveredCell(cell_type=node_type, cell_id=node.name, nodes=(node.name,), rack=False))
    return DiscoveredLayout(cell_types=cell_types, cells=tuple(cells), left_out=tuple(left_out))


def gpu_count_problem(node: NodeInfo, *, discovered_gpus: int) -> str | None:
    """Why ``node`` may not join discovered cells that hold ``discovered_gpus`` GPUs already:
    more GPUs than a node may have, or more than the cells may hold; ``None`` when it may."""
    gpus = node.allocatable.gpus
    if gpus > MAX_NODE_GPUS:
        return (
            f"node {node.name}: status.allocatable reports {gpus:,} GPUs, more than the {MAX_NODE_GPUS:,} a node may "
            "have; it is left out of the cells (check its device plugin)"
        )
    if discovered_gpus + gpus > MAX_GPUS:
        return (
            f"node {node.name}: its {gpus:,} GPUs would take the discovered cells past {MAX_GPUS:,} GPUs, the most "
            "they may hold; it is left out of the cells"
        )
    return None


def discover_topology(nodes: Sequence[NodeInfo], *, rack_label: str | None = None) -> TopologyConfig:
    """Build cell types and physical cells from ``nodes``; deterministic for a given node set
    (sorted by name, whatever order the watch delivered them in)."""
    return discover_layout(nodes, rack_label=rack_label).to_config()


def base_name(product: str, gpus: int) -> str:
    """The GPU type of ``product`` in nodes of ``gpus`` GPUs, ``<product>-<gpus>GPU``, which its
    node and rack types extend (``-NODE``, ``-RACK``). It names the size always, not only once a
    second size of the product appears: a name must not depend on which other nodes exist, or
    a configuration valid today names no cell after the next restart."""
    return f"{product}-{gpus}GPU"


def node_type_for(node: NodeInfo, cell_types: Mapping[str, CellTypeSpec]) -> tuple[str, CellTypeSpec]:
    """The node-level cell type a node of this product and GPU count joins as a standalone cell
    of a running cluster: ``<product>-<n>GPU-NODE``, the running one if the cells have it."""
    base = base_name(_product(node), node.allocatable.gpus)
    spec = cell_types.get(f"{base}-NODE")
    if spec is None:
        spec = CellTypeSpec(child_type=base, child_count=node.allocatable.gpus, is_node_level=True)
    return f"{base}-NODE", spec


_SIZED: Final = re.compile(r"^.+-[1-9][0-9]*GPU(-NODE|-RACK)?$")


def is_discovered_name(cell_type: str) -> bool:
    """Whether ``cell_type`` has the form of a discovered cell type's name (``<product>-<n>GPU``,
    ``-NODE``, ``-RACK``): what ``cellfit check-config`` can say of a VC offline."""
    return _SIZED.match(cell_type) is not None


_SIZED_NODE: Final = re.compile(r"^(?P<product>.+)-(?P<gpus>[1-9][0-9]*)GPU-NODE$")
_LEVELS: Final = ("", "-NODE", "-RACK")  # a discovered chain's types: <base>, <base>-NODE, <base>-RACK


@dataclass(frozen=True, slots=True)
class LegacyNames:
    """The names discovery gave before it always named the node size: ``<product>``,
    ``<product>-NODE`` and ``<product>-RACK``, which configurations written then still use.

    ``aliases``: such a name -> the discovered type it means, where the product comes in one
    node size (``A100-NODE`` -> ``A100-8GPU-NODE``). ``ambiguous``: such a name -> the types it
    could mean, where the product comes in several (the admin must choose)."""

    aliases: Mapping[str, str]
    ambiguous: Mapping[str, tuple[str, ...]]

    def resolve(self, name: str) -> tuple[str, str | None]:
        """``(the type name to use, what to tell the admin)``: the name itself and ``None`` when
        it is no legacy name; the stable name and a warning for an alias; the name itself and a
        refusal (``ambiguous: ...``) when it could mean several types."""
        stable = self.aliases.get(name)
        if stable is not None:
            return stable, (
                f"{name!r} is the name discovery gave before cell-type names carried the node size; "
                f"it means {stable!r} while the cluster has one node size of its GPU product, and names "
                f"nothing once another size joins: write {stable!r}"
            )
        choices = self.ambiguous.get(name)
        if choices is not None:
            return name, (
                f"{name!r} is ambiguous: the cluster has its GPU product in {len(choices)} node sizes, and "
                f"discovered cell-type names carry the size: write one of {', '.join(repr(c) for c in choices)}"
            )
        return name, None


    def stable_id(self, cell_id: str) -> str:
        """A cell id written under the old names (a pod's bind-info from before the upgrade) as the
        same cell is named now: a rack ``<type>@<label>``, a GPU ``<node>/<type>#<i>``; a node's
        id is its name either way."""
        if "@" in cell_id:
            cell_type, rest = cell_id.split("@", 1)
            return f"{self.aliases[cell_type]}@{rest}" if cell_type in self.aliases else cell_id
        node, slash, inside = cell_id.partition("/")
        cell_type, hash_sign, ordinal = inside.rpartition("#")
        if slash and hash_sign and cell_type in self.aliases:
            return f"{node}/{self.aliases[cell_type]}#{ordinal}"
        return cell_id


def legacy_names(cell_types: Mapping[str, CellTypeSpec]) -> LegacyNames:
    """The unsized names of discovered ``cell_types`` (see :class:`LegacyNames`); a name that is
    itself a cell type is never an alias."""
    sizes: dict[str, list[str]] = defaultdict(list)  # product -> its bases, smallest node first
    for name, spec in cell_types.items():
        match = _SIZED_NODE.match(name)
        if match is not None and spec.is_node_level and spec.child_type == base_name(match["product"], int(match["gpus"])):
            sizes[match["product"]].append(spec.child_type)
    aliases: dict[str, str] = {}
    ambiguous: dict[str, tuple[str, ...]] = {}
    for product, bases in sizes.items():
        bases.sort(key=lambda b: cell_types[f"{b}-NODE"].child_count)
        for level in _LEVELS:
            legacy = f"{product}{level}"
            meant = tuple(f"{b}{level}" for b in bases if level == "" or f"{b}{level}" in cell_types)
            if legacy in cell_types or not meant:
                continue
            if len(bases) == 1:
                aliases[legacy] = meant[0]
            else:
                ambiguous[legacy] = meant
    return LegacyNames(aliases=aliases, ambiguous=ambiguous)


def _common_size(racks: dict[str, list[NodeInfo]]) -> int:
    """The most common rack size (ties: the larger); 0 when racks would add nothing."""
    if not racks:
        return 0
    counts = Counter(len(members) for members in racks.values())
    size, _ = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    return size if size > 1 else 0


def describe_topology(topology: TopologyConfig, *, nodes_without_gpus: int = 0) -> str:
    """One line per hierarchy, e.g. ``A100-NODE (8 GPUs): 24 nodes, 3 A100-RACK of 8, 2 standalone``."""
    if not topology.physical_cells:
        return "no GPU nodes: HiveD has no cells" + (f" ({_nodes(nodes_without_gpus)} without GPUs)" if nodes_without_gpus else "")
    lines: list[str] = []
    node_types = [name for name, spec in topology.cell_types.items() if spec.is_node_level]
    for node_type in node_types:
        gpus = _gpus(topology, node_type)
        tops = Counter(
            cell.cell_type for cell in topology.physical_cells if cell.cell_type and _chain_has(topology, cell.cell_type, node_type)
        )
        nodes = sum(_nodes_in(cell) for cell in topology.physical_cells if _chain_has(topology, cell.cell_type, node_type))
        parts = [_nodes(nodes)]
        for cell_type, count in sorted(tops.items(), key=lambda kv: (-_gpus(topology, kv[0]), kv[0])):
            if cell_type == node_type:
                parts.append(f"{count} standalone")
            else:
                parts.append(f"{count} {cell_type} of {_nodes(_gpus(topology, cell_type) // gpus)}")
        lines.append(f"{node_type} ({gpus} GPUs each): {', '.join(parts)}")
    if nodes_without_gpus:
        verb = "is" if nodes_without_gpus == 1 else "are"
        lines.append(f"{_nodes(nodes_without_gpus)} without GPUs {verb} not part of any cell")
    return "; ".join(lines)


def _nodes(count: int) -> str:
    """``1 node``, ``24 nodes``: what ``cellfit check-config`` and the startup log count."""
    return f"{count} node" if count == 1 else f"{count} nodes"


def _gpus(topology: TopologyConfig, cell_type: str) -> int:
    spec = topology.cell_types.get(cell_type)
    if spec is None:
        return 1
    return spec.child_count * _gpus(topology, spec.child_type)


def _chain_has(topology: TopologyConfig, top: str | None, cell_type: str) -> bool:
    current = top
    while current is not None and current in topology.cell_types:
        if current == cell_type:
            return True
        current = topology.cell_types[current].child_type
    return False


def _nodes_in(cell: PhysicalCellSpec) -> int:
    if cell.node_name is not None:
        return 1
    return sum(_nodes_in(child) for child in cell.cell_children)
