"""Min-cost assignment of jobs to *classes* of identical slots, for when Q has few distinct columns.

Idle machines of one kind are interchangeable, so their slots at one position are identical
columns of Q: 1,000 idle GPUs make 1,000 equal columns. ``linear_sum_assignment`` handles them
but slowly when jobs compete for them (long augmenting paths through equal columns). Folding
each set of identical columns into one column with a capacity gives a transportation problem
with few columns. Classes whose costs differ by a constant for every job fold further into a
*group*: in Q, the slots of one kind and one position on machines free at different times
(``cost[j, c] = group_cost[j, g(c)] + offset[c]``, the offset being the machine's wait).
Between a group's classes the jobs have no preference but the offset, so a group is one column
of *units*, one per slot, each costing its offset: ``m`` jobs in a group take its ``m``
cheapest units (a convex cost in ``m``). Solved exactly over groups in three phases:

1. **Greedy.** Every job in its cheapest class, ignoring capacities. Done if nothing overflows.
2. **Prices** (dual ascent). Each group has a price λ (at first its cheapest unit's offset);
   every job sits in a group that is cheapest at the current prices (``group_cost + λ``). A
   group is over when more jobs sit in it than it has units priced at or below λ. Sweeping the
   groups, an over group gets the lowest price at which the jobs that still prefer it fit into
   its units cheaper than λ; the others move to their next-cheapest group. Prices only rise,
   so a group's jobs never leave but when its own price rises, and a group never has a unit
   cheaper than λ unused. This moves jobs in bulk; it stops when nothing is over or a few
   sweeps bring no progress (prices creeping up in small steps).
3. **Successive shortest paths** over the groups and a sink, with the prices as node
   potentials (the reduced costs are >= 0, so Dijkstra applies). The state phase 2 leaves is a
   pseudoflow satisfying the optimality conditions: moving job ``j`` from group ``a`` to ``b``
   costs ``group_cost[j, b] − group_cost[j, a]`` (reduced: ``+ λ_b − λ_a >= 0``, as every job
   sits in a cheapest group); a group reaches the sink through its next unused unit (reduced:
   ``offset − λ >= 0``, as no unit cheaper than λ is left unused) and back through its last used
   one. While a group is over, one job's worth of excess goes along the cheapest chain of moves
   to a group that takes it into its next unit; by the successive-shortest-path theorem the
   final, feasible assignment is optimal. Its jobs then fill the group's cheapest units.

Phase 3 costs O(G²) per augmentation (the cheapest move between two groups is kept per pair and
recomputed only for the groups a path changed, O(|group|·G)); the caller bounds how many it
allows and otherwise falls back to ``linear_sum_assignment``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.sparse.csgraph import csgraph_from_dense, dijkstra

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Phase 2 stops after this many sweeps without fewer jobs over: what is left is phase 3's.
_STALLED_SWEEPS = 2
_MAX_SWEEPS = 64


@dataclass(frozen=True, slots=True)
class Groups:
    """Classes whose costs differ by a per-class constant: ``cost[j, c] == group_cost[j,
    group[c]] + offset[c]`` for every row ``j``."""

    group: IntArray
    offset: FloatArray
    group_cost: FloatArray


def assign_to_classes(
    cost: FloatArray, capacity: IntArray, *, max_augmentations: int, groups: Groups | None = None
) -> IntArray | None:
    """The class of every row in a minimum-cost assignment that puts at most ``capacity[c]``
    rows in class ``c``; ``None`` when phase 3 would take more than ``max_augmentations`` steps,
    rounding makes the shortest paths unreliable, or no assignment exists (the caller then
    solves another way). ``groups`` (optional) says which classes differ by a constant; without
    it each class is a group of its own.
    """
    rows, classes = cost.shape
    assign: IntArray = np.argmin(cost, axis=1).astype(np.int64)
    load = np.bincount(assign, minlength=classes).astype(np.int64)
    if not np.any(load > capacity):
        return assign
    if groups is None:
        groups = Groups(group=np.arange(classes, dtype=np.int64), offset=np.zeros(classes), group_cost=cost)
    kept = np.flatnonzero(capacity > 0)  # classes without a slot take no part
    group_ids, group = np.unique(groups.group[kept], return_inverse=True)
    offset = groups.offset[kept]
    members_of = [kept[group.reshape(-1) == g] for g in range(group_ids.shape[0])]
    for g, members in enumerate(members_of):
        members_of[g] = members[np.argsort(groups.offset[members], kind="stable")]
    units = [np.repeat(groups.offset[m], capacity[m]) for m in members_of]
    problem = _Grouped(cost=groups.group_cost[:, group_ids], units=units)
    if offset.size == 0 or not problem.feasible():
        return None
    problem.raise_prices()
    if not problem.shortest_paths(max_augmentations=max_augmentations):
        return None
    # Each group's jobs (in row order) fill its cheapest units.
    result = np.empty(rows, dtype=np.int64)
    for g, members in enumerate(members_of):
        jobs = np.flatnonzero(problem.assign == g)
        ends = np.cumsum(capacity[members])
        result[jobs] = members[np.searchsorted(ends, np.arange(jobs.shape[0]), side="right")]
    return result


class _Grouped:
    """Phases 2 and 3 over groups: ``cost`` is rows × groups, ``units[g]`` the offsets of group
    ``g``'s slots, ascending."""

    def __init__(self, *, cost: FloatArray, units: list[FloatArray]) -> None:
        self.cost = cost
        self.units = units
        self.price = np.array([u[0] for u in units], dtype=np.float64)
        self.assign: IntArray = np.argmin(cost + self.price, axis=1).astype(np.int64)

    def feasible(self) -> bool:
        total = sum(u.shape[0] for u in self.units)
        return total >= self.cost.shape[0] and bool(np.all(np.isfinite(self.cost.min(axis=1))))

    def _priced_units(self) -> IntArray:
        """How many units of each group cost at most its price."""
        return np.array([np.searchsorted(u, p, side="right") for u, p in zip(self.units, self.price)], dtype=np.int64)

    def _over(self) -> int:
        load = np.bincount(self.assign, minlength=self.price.shape[0])
        return int(np.maximum(load - self._priced_units(), 0).sum())

    def raise_prices(self) -> None:
        """Phase 2."""
        cost, price, assign = self.cost, self.price, self.assign
        best, stalled = self._over(), 0
        for _ in range(_MAX_SWEEPS):
            if best == 0 or stalled >= _STALLED_SWEEPS:
                return
            for g, units in enumerate(self.units):
                jobs = np.flatnonzero(assign == g)
                if jobs.size <= np.searchsorted(units, price[g], side="right"):
                    continue
                others = cost[jobs] + price
                others[:, g] = np.inf
                alternative = np.argmin(others, axis=1)
                margin = others[np.arange(jobs.size), alternative] - cost[jobs, g]
                order = np.argsort(-margin, kind="stable")  # the jobs keenest on g first, then row order
                margins = margin[order]
                # m jobs stay when the m-th keenest still prefers g at the m-th cheapest unit.
                room = min(units.shape[0], margins.shape[0])
                fits = margins[:room] >= units[:room]
                staying = room if bool(fits.all()) else int(np.argmin(fits))
                floor = max(units[staying - 1] if staying else -np.inf, margins[staying] if staying < margins.shape[0] else -np.inf)
                if not np.isfinite(floor):
                    return  # jobs with nowhere else to go: phase 3 sorts it out (or declines)
                price[g] = max(price[g], floor)
                leaving = order[staying:]
                assign[jobs[leaving]] = alternative[leaving]
            over = self._over()
            stalled = 0 if over < best else stalled + 1
            best = min(best, over)

    def shortest_paths(self, *, max_augmentations: int) -> bool:
        """Phase 3; False when it would take more than ``max_augmentations`` steps or rounding
        broke the optimality conditions."""
        cost, price, assign = self.cost, self.price, self.assign
        groups = price.shape[0]
        load = np.bincount(assign, minlength=groups).astype(np.int64)
        used = np.minimum(load, self._priced_units())
        excess = int((load - used).sum())
        if excess == 0:
            return True
        if excess > max_augmentations:
            return False
        scale = float(np.max(np.abs(cost[np.isfinite(cost)]))) + float(np.max(np.abs(price))) + 1.0
        tolerance = 1e-9 * scale
        # cheapest[a, b]: the cheapest move of one of a's jobs to b, and who makes it.
        cheapest = np.full((groups, groups), np.inf)
        mover = np.full((groups, groups), -1, dtype=np.int64)

        def refresh(g: int) -> None:
            jobs = np.flatnonzero(assign == g)
            if jobs.size == 0:
                cheapest[g], mover[g] = np.inf, -1
                return
            moves = cost[jobs] - cost[jobs, g, np.newaxis]
            best = np.argmin(moves, axis=0)
            cheapest[g] = moves[best, np.arange(groups)]
            mover[g] = jobs[best]
            cheapest[g, g] = np.inf

        for g in range(groups):
            refresh(g)
        sink = groups
        graph = np.full((groups + 1, groups + 1), np.inf)
        for _ in range(excess):
            reduced = cheapest + price[np.newaxis, :] - price[:, np.newaxis]
            finite = np.isfinite(reduced)
            if finite.any() and float(reduced[finite].min()) < -tolerance:
                return False
            graph[:groups, :groups] = np.maximum(reduced, 0.0)
            following = np.array([u[k] if k < u.shape[0] else np.inf for u, k in zip(self.units, used)])
            to_sink = following - price
            if float(np.min(to_sink)) < -tolerance:
                return False
            graph[:groups, sink] = np.maximum(to_sink, 0.0)
            sources = np.flatnonzero(load > used)
            distance, previous, _ = dijkstra(csgraph_from_dense(graph, null_value=np.inf), indices=sources,
                                             min_only=True, return_predecessors=True)
            if not np.isfinite(distance[sink]):
                return False
            path = [int(previous[sink])]
            while previous[path[-1]] >= 0:
                path.append(int(previous[path[-1]]))
            path.reverse()
            # Potentials: every group nearer than the sink rises by how much nearer it was.
            price += np.maximum(distance[sink] - distance[:groups], 0.0)
            for origin, destination in zip(path, path[1:]):
                assign[int(mover[origin, destination])] = destination
            for g in set(path[:-1]) | set(path[1:]):
                refresh(g)
            load[path[0]] -= 1
            load[path[-1]] += 1
            used[path[-1]] += 1
        return True
