"""The HiveD gauges computed by walking every cell, as ``inspection.metrics`` did before it read
counts kept up to date: the reference the property test compares those counts with, and the
baseline of tests/benchmarks/bench_cell_metrics.py."""

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
            vc_rows.append(
                {
                    "vc": name,
                    "cellType": cell_type,
                    "used": sum(1 for c in roots if c.guaranteed_used > 0),
                    "free": max(vc.unbound(cell_type), 0) + sum(1 for c in roots if c.state is CellState.PINNED and c.guaranteed_used == 0),
                    "opportunistic": sum(1 for c in roots if c.opportunistic_used > 0),
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
    physical = []
    for chain in alloc.topology.used_chains:
        for level in range(chain.top, 0, -1):
            cell_type = chain.type_at(level)
            physical.append({"cellType": cell_type, "level": level, **per_type.get(cell_type, {"used": 0, "free": 0, "opportunistic": 0, "bad": 0})})
    fragmentation: dict[str, float] = {}
    blocked_all = 0
    for chain in alloc.topology.used_chains:
        nodes = [n for n in alloc.topology.nodes.values() if n.chain is chain]
        blocked = sum(1 for n in nodes if n.idle_gpus < n.total)
        blocked_all += blocked
        fragmentation[chain.type_at(chain.node_level)] = blocked / len(nodes) if nodes else 0.0
    total_nodes = len(alloc.topology.nodes)
    return {
        "virtualClusters": vc_rows,
        "physical": physical,
        "fragmentation": fragmentation,
        "fragmentationTotal": blocked_all / total_nodes if total_nodes else 0.0,
    }
