"""Is a VC assignment feasible: can every VC's cells be mapped one-to-one onto physical cells?

Under hierarchical uniform composability this is exactly Theorem 1's invariant at time zero
(nothing allocated, a_k = 0): ``r_k <= f_k + F_k`` at every level k, where ``r_k`` is the number
of level-k cells all VCs reserve, ``f_k`` the free level-k cells of the pool (top-level cells and
the pieces of cells that hold a pinned cell), and ``F_k`` the level-k cells obtainable by
splitting higher free cells after the higher levels' reservations are served (Eqn. 1). Serving
higher levels first is optimal because a higher cell can always be split into lower ones but
never the reverse, so the check is exact, not just sufficient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from scheduler.cells.buddy import derived_capacity
from scheduler.cells.config import VirtualClusterSpec
from scheduler.cells.topology import Cell, Chain, Topology


@dataclass(frozen=True, slots=True)
class Shortfall:
    chain: Chain
    level: int
    reserved: int
    available: int
    by_vc: tuple[tuple[str, int], ...]

    @property
    def cell_type(self) -> str:
        return self.chain.type_at(self.level)

    def describe(self) -> str:
        who = ", ".join(f"{vc} {n}" for vc, n in self.by_vc)
        return (
            f"over-committed at level {self.cell_type!r} (hierarchy {' > '.join(reversed(self.chain.types))}): "
            f"virtual clusters reserve {self.reserved} such cells ({who}) but the physical cluster can provide "
            f"{self.available} once the larger cells reserved above are set aside"
        )


def initial_free(topology: Topology, chain: Chain) -> list[int]:
    """f_k before any allocation: pinned cells are outside the pool, and a cell holding a pinned
    cell contributes its other pieces at the levels below."""
    holds_pinned: set[Cell] = set()
    for cell in topology.pinned.values():
        holds_pinned.update(cell.ancestors())
    counts = [0] * chain.top
    stack = [c for c in topology.top_cells if c.chain is chain]
    while stack:
        cell = stack.pop()
        if cell.pinned_id is not None:
            continue
        if cell in holds_pinned:
            stack.extend(cell.children)
        else:
            counts[cell.level - 1] += 1
    return counts


def reserved(topology: Topology, chain: Chain, vcs: Mapping[str, VirtualClusterSpec]) -> list[dict[str, int]]:
    """Per level of ``chain``: VC -> cells reserved at that level."""
    table: list[dict[str, int]] = [{} for _ in range(chain.top)]
    for name, spec in vcs.items():
        for cell in spec.cells:
            if cell.count > 0 and topology.chain_of_type.get(cell.cell_type) is chain:
                level = chain.level_of(cell.cell_type)
                table[level - 1][name] = table[level - 1].get(name, 0) + cell.count
    return table


def shortfalls(topology: Topology, vcs: Mapping[str, VirtualClusterSpec]) -> list[Shortfall]:
    """The highest over-committed level of every chain (lower levels follow from it)."""
    found: list[Shortfall] = []
    chains = list(topology.used_chains)
    for spec in vcs.values():
        for cell in spec.cells:
            chain = topology.chain_of_type.get(cell.cell_type)
            if chain is not None and chain not in chains and cell.count > 0:
                chains.append(chain)
    for chain in chains:
        free = initial_free(topology, chain) if chain in topology.used_chains else [0] * chain.top
        table = reserved(topology, chain, vcs)
        demand = [sum(row.values()) for row in table]
        capacity = derived_capacity(free, demand, chain)
        for level in range(chain.top, 0, -1):
            available = free[level - 1] + capacity[level - 1]
            if demand[level - 1] > available:
                by_vc = tuple(sorted(table[level - 1].items(), key=lambda kv: (-kv[1], kv[0])))
                found.append(Shortfall(chain, level, demand[level - 1], available, by_vc))
                break
    return found


def feasibility_problems(topology: Topology, vcs: Mapping[str, VirtualClusterSpec], *, prefix: str = "") -> list[str]:
    path = f"{prefix}.virtualClusters" if prefix else "virtualClusters"
    return [f"{path}: {s.describe()}" for s in shortfalls(topology, vcs)]
