"""The full configuration check behind ``cellfit check-config`` and engine construction:
schema, structure, and feasibility of the VC assignment, with every problem naming its field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from scheduler.cells.config import (
    CellsConfig,
    TopologyConfig,
    VirtualCellSpec,
    VirtualClusterSpec,
    field_path,
    parse_cells_config,
    virtual_cluster_problems,
)
from scheduler.cells.discovery import describe_topology, discover_topology, legacy_names
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
    # Configured VCs left out of a discovered cluster's cells, each with why (the fields naming a
    # cell type the cluster has not, or ambiguously): the others are served, their pods told.
    unserved: Mapping[str, str] = field(default_factory=dict)
    # What the admin should change though it works, one ``path: message`` each (a VC naming a
    # discovered cell type by its old unsized name): the extender logs them at startup.
    warnings: tuple[str, ...] = ()


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
    warnings: tuple[str, ...] = ()
    unserved: dict[str, str] = {}
    if discovered:
        vcs, warnings, problems = stable_cell_types(vcs, topology, prefix=prefix)
        problems = _once_per_field(problems, virtual_cluster_problems(vcs, topology, prefix=prefix))
        if config.virtual_clusters:
            unserved, problems = _unserved(vcs, problems, prefix=prefix)
            vcs = {name: spec for name, spec in vcs.items() if name not in unserved}
    if not problems:
        problems += feasibility_problems(compiled, vcs, prefix=prefix)
    if problems:  # an old name the refusal may name by its stable one: the admin sees both
        raise ConfigError("\n".join([*problems, *warnings]))
    without_gpus = sum(1 for n in nodes or () if n.allocatable.gpus == 0)
    summary = describe(topology, vcs, discovered=discovered, nodes_without_gpus=without_gpus, unserved=unserved)
    return CellsCheck(
        config=config, topology=topology, virtual_clusters=vcs, default_vc=default_vc, summary=summary, unserved=unserved,
        warnings=warnings,
    )


def _unserved(
    vcs: Mapping[str, VirtualClusterSpec], problems: list[str], *, prefix: str
) -> tuple[dict[str, str], list[str]]:
    """Split ``problems`` of a discovered cluster's VCs into the VCs not to serve (one of their
    ``cellType`` fields names no discovered cell type, or an old name of several: the node
    pools changed under a file that was valid, and the other tenants keep scheduling) with
    their problems, and the problems that still refuse the configuration."""
    owner: dict[str, str] = {}
    for vc, spec in vcs.items():
        where = field_path(("virtualClusters", vc), prefix=prefix)
        for i in range(len(spec.cells)):
            owner[f"{spec.cells_path(where, i)}.cellType"] = vc
    unserved: dict[str, list[str]] = {}
    refused: list[str] = []
    for problem in problems:
        named = owner.get(problem.split(": ", 1)[0])
        if named is None or "is listed twice" in problem:
            refused.append(problem)
        else:
            unserved.setdefault(named, []).append(problem)
    why = {
        vc: f"{'; '.join(said)} (the configuration names cell types the cluster's discovered cells do not have; fix "
        "cells.virtualClusters and the live reload serves it)"
        for vc, said in unserved.items()
    }
    return why, refused


def stable_cell_types(
    vcs: Mapping[str, VirtualClusterSpec], topology: TopologyConfig, *, prefix: str = ""
) -> tuple[dict[str, VirtualClusterSpec], tuple[str, ...], list[str]]:
    """VCs of a discovered topology with the cell types they name by an old unsized name
    (``A100-NODE``) replaced by the discovered one it means (``A100-8GPU-NODE``, when the
    product comes in one node size): ``(the VCs, a warning per such name, a refusal per name
    that could mean several sizes)``, each naming its field."""
    legacy = legacy_names(topology.cell_types)
    renamed: dict[str, VirtualClusterSpec] = {}
    warnings: list[str] = []
    problems: list[str] = []
    for vc, spec in vcs.items():
        where = field_path(("virtualClusters", vc), prefix=prefix)
        cells: list[VirtualCellSpec] = []
        for i, cell in enumerate(spec.cells):
            stable, said = legacy.resolve(cell.cell_type)
            if said is not None:
                (warnings if stable != cell.cell_type else problems).append(f"{spec.cells_path(where, i)}.cellType: {said}")
            cells.append(cell if stable == cell.cell_type else cell.model_copy(update={"cell_type": stable}))
        renamed[vc] = spec if cells == list(spec.cells) else _with_cells(spec, tuple(cells))
    return renamed, tuple(warnings), problems


def _once_per_field(first: list[str], then: list[str]) -> list[str]:
    """``first`` and the problems of ``then`` about other fields (an ambiguous old name is not
    also an unknown cell type)."""
    fields = {problem.split(": ", 1)[0] for problem in first}
    return first + [problem for problem in then if problem.split(": ", 1)[0] not in fields]


def _with_cells(spec: VirtualClusterSpec, cells: tuple[VirtualCellSpec, ...]) -> VirtualClusterSpec:
    """``spec`` with ``cells``, written as the file wrote it (its fields keep their paths)."""
    copy = spec.model_copy(update={"cells": cells})
    copy._bare = spec._bare
    return copy


def describe(
    topology: TopologyConfig,
    vcs: Mapping[str, VirtualClusterSpec],
    *,
    discovered: bool,
    nodes_without_gpus: int = 0,
    unserved: Mapping[str, str] | None = None,
) -> str:
    """The one-line summary of the cells and VCs, for the startup log and the inspect API."""
    source = "discovered" if discovered else "configured"
    vc_text = ", ".join(
        f"{name} ({', '.join(f'{c.count} {c.cell_type}' for c in spec.cells) or 'no cells'}"
        + (f", pinned {', '.join(spec.pinned_cells)}" if spec.pinned_cells else "")
        + ")"
        for name, spec in vcs.items()
    )
    text = f"topology ({source}): {describe_topology(topology, nodes_without_gpus=nodes_without_gpus)}; virtual clusters: {vc_text or 'none served'}"
    return f"{text}; not served: {', '.join(unserved)}" if unserved else text
