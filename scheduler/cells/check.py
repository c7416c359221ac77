"""The full configuration check behind ``cellfit check-config`` and engine construction:
schema, structure, and feasibility of the VC assignment, with every problem naming its field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from scheduler.cells.config import (
    CellsConfig,
    TopologyConfig,
    VirtualCellSpec,
    VirtualClusterSpec,
    parse_cells_config,
    virtual_cluster_problems,
)
from scheduler.cells.discovery import describe_topology, discover_topology
from scheduler.cells.feasibility import feasibility_problems, initial_free
from scheduler.cells.topology import Topology
from scheduler.constants import DEFAULT_VIRTUAL_CLUSTER
from scheduler.core.model import NodeInfo
from scheduler.errors import ConfigError


@dataclass(frozen=True, slots=True)
class CellsCheck:
    """A configuration that passed every check. ``topology`` is ``None`` only when it is to be
    discovered and no nodes were given (an offline ``check-config``)."""

    config: CellsConfig
    topology: TopologyConfig | None
    virtual_clusters: Mapping[str, VirtualClusterSpec]
    default_vc: str | None  # the VC of pods without a VC label (only when no VCs are configured)
    summary: str


def default_virtual_clusters(topology: Topology) -> dict[str, VirtualClusterSpec]:
    """With no VCs configured, one VC named ``default`` owns every cell (a plain shared cluster):
    exactly the pool's free cells at time zero, plus every pinned cell."""
    cells: list[VirtualCellSpec] = []
    for chain in topology.used_chains:
        for level, count in enumerate(initial_free(topology, chain), start=1):
            if count:
                cells.append(VirtualCellSpec(cell_type=chain.type_at(level), count=count))
    pinned = tuple(sorted(topology.pinned))
    return {DEFAULT_VIRTUAL_CLUSTER: VirtualClusterSpec(cells=tuple(cells), pinned_cells=pinned)}


def check_config(
    data: Mapping[str, Any] | CellsConfig,
    *,
    nodes: Sequence[NodeInfo] | None = None,
    rack_label: str | None = None,
    prefix: str = "",
) -> CellsCheck:
    """Validate a HiveD configuration section; raise :class:`ConfigError` with one
    ``path: message`` line per problem. ``prefix`` is the section's path in the service config
    (e.g. ``"cells"``) so messages name the field as the operator wrote it. When the topology is
    omitted it is discovered from ``nodes`` (if given)."""
    config = parse_cells_config(data, prefix=prefix)
    topology = config.topology
    discovered = topology is None
    if topology is None and nodes is not None:
        topology = discover_topology(nodes, rack_label=rack_label)
    if topology is None:
        return CellsCheck(
            config=config,
            topology=None,
            virtual_clusters=config.virtual_clusters,
            default_vc=None if config.virtual_clusters else DEFAULT_VIRTUAL_CLUSTER,
            summary="topology: discovered from the cluster's nodes at startup (not checked offline)",
        )
    compiled = Topology(topology)
    vcs = dict(config.virtual_clusters) or default_virtual_clusters(compiled)
    default_vc = None if config.virtual_clusters else DEFAULT_VIRTUAL_CLUSTER
    problems: list[str] = []
    if discovered:
        problems += virtual_cluster_problems(vcs, topology, prefix=prefix)
    if not problems:
        problems += feasibility_problems(compiled, vcs, prefix=prefix)
    if problems:
        raise ConfigError("\n".join(problems))
    without_gpus = sum(1 for n in nodes or () if n.allocatable.gpus == 0)
    summary = describe(topology, vcs, discovered=discovered, nodes_without_gpus=without_gpus)
    return CellsCheck(config=config, topology=topology, virtual_clusters=vcs, default_vc=default_vc, summary=summary)


def describe(
    topology: TopologyConfig, vcs: Mapping[str, VirtualClusterSpec], *, discovered: bool, nodes_without_gpus: int = 0
) -> str:
    """The one-line summary of the cells and VCs, for the startup log and the inspect API."""
    source = "discovered" if discovered else "configured"
    vc_text = ", ".join(
        f"{name} ({', '.join(f'{c.count} {c.cell_type}' for c in spec.cells) or 'no cells'}"
        + (f", pinned {', '.join(spec.pinned_cells)}" if spec.pinned_cells else "")
        + ")"
        for name, spec in vcs.items()
    )
    return f"topology ({source}): {describe_topology(topology, nodes_without_gpus=nodes_without_gpus)}; virtual clusters: {vc_text}"
