"""The HiveD gauges computed by walking every cell, as ``inspection.metrics`` did before it read
counts kept up to date (and with one row per cell type name and one ratio per node type, as it
gives them now): the reference the property test compares those counts with, and the baseline of
tests/benchmarks/bench_cell_metrics.py."""

from __future__ import annotations

from typing import Any

from scheduler.cells.allocator import CellAllocator
from scheduler.cells.inspection import _cell_types
from scheduler.cells.topology import CellState


def metrics_by_walk(alloc: CellAllocator) -> dict[str, Any]:
    """``inspection.metrics`` (which says what each gauge counts) by a walk over every cell."""
    vc_rows = []
    for name in sorted(alloc.vcs):
        vc = alloc.vcs[name]
        for cell_type in _cell_types(alloc, vc):
            roots = list(vc.bound.get(cell_type, {})) + [c for c in vc.pinned if c.cell_type == cell_type]
            healthy = [c for c in roots if c.bad == 0]
            vc_rows.append(
                {
                    "vc": name,
                    "cellType": cell_type,
                    "used": sum(1 for c in healthy if c.guaranteed_used > 0),
                    "free": max(vc.unbound(cell_type), 0) + sum(1 for c in healthy if c.guaranteed_used == 0 and c.opportunistic_used == 0),
                    "opportunistic": sum(1 for c in healthy if c.guaranteed_used == 0 and c.opportunistic_used > 0),
                    "bad": sum(1 for c in roots if c.bad > 0),
                }
            )
    per_type: dict[str, dict[str, int]] = {}
    for cell in alloc.topology.all_cells():
        row = per_type.setdefault(cell.cell_type, {"used": 0, "free": 0, "opportunistic": 0, "bad": 0})
        if cell.state in (CellState.BOUND, CellState.PINNED):
            row["used"] += 1
        elif cell.buddy_state() is CellState.FREE:
            row["free"] += 1
        if cell.opportunistic_used:
            row["opportunistic"] += 1
        if cell.bad:
            row["bad"] += 1
    physical: dict[str, dict[str, Any]] = {}  # one row per type name, whichever chains hold it
    for chain in alloc.topology.used_chains:
        for level in range(chain.top, 0, -1):
            cell_type = chain.type_at(level)
            physical.setdefault(cell_type, {"cellType": cell_type, "level": level, **per_type.get(cell_type, {"used": 0, "free": 0, "opportunistic": 0, "bad": 0})})
    node_types = {chain.type_at(chain.node_level): [0, 0] for chain in alloc.topology.used_chains}  # nodes, blocked
    for node in alloc.topology.nodes.values():
        counts = node_types[node.cell_type]
        counts[0] += 1
        counts[1] += node.idle_gpus < node.total
    total_nodes = len(alloc.topology.nodes)
    return {
        "virtualClusters": vc_rows,
        "physical": list(physical.values()),
        "fragmentation": {node_type: blocked / nodes if nodes else 0.0 for node_type, (nodes, blocked) in node_types.items()},
        "fragmentationTotal": sum(blocked for _, blocked in node_types.values()) / total_nodes if total_nodes else 0.0,
    }
