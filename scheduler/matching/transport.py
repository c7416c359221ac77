"""Min-cost assignment of jobs to *classes* of identical slots, for when Q has few distinct columns.

Idle machines of one kind are interchangeable, so their slots at one position are identical
columns of Q: 1,000 idle GPUs make 1,000 equal columns. ``linear_sum_assignment`` handles them
but slowly when jobs compete for them (long augmenting paths through equal columns). Folding
each set of identical columns into one column with a capacity gives a transportation problem
with few columns, solved here exactly by successive shortest paths:

1. put every job in its cheapest class, ignoring capacities. Every job sits at its own minimum,
   so moving any set of jobs around a cycle of classes cannot lower the cost: no negative cycle.
2. while a class holds more jobs than it has slots, send one job's worth of excess along the
   cheapest chain of moves (job ``j`` from class ``c`` to ``c'`` costs ``Q[j,c'] − Q[j,c]``) to a
   class with a free slot. Augmenting along shortest paths keeps the no-negative-cycle property
   (the successive-shortest-path theorem for pseudoflows), so the final, feasible assignment is
   optimal.

Each augmentation costs O(n·C + C³); the caller bounds how many it allows and otherwise falls back
to ``linear_sum_assignment``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def assign_to_classes(cost: FloatArray, capacity: IntArray, *, max_augmentations: int) -> IntArray | None:
    """The class of every row in a minimum-cost assignment that puts at most ``capacity[c]``
    rows in class ``c``; ``None`` when that would take more than ``max_augmentations`` steps or
    rounding makes the shortest paths unreliable (the caller then solves another way).

    Every row must have a finite entry and ``capacity`` must admit a feasible assignment.
    """
    rows, classes = cost.shape
    assign: IntArray = np.argmin(cost, axis=1).astype(np.int64)
    load = np.bincount(assign, minlength=classes).astype(np.int64)
    excess = int(np.maximum(load - capacity, 0).sum())
    if excess == 0:
        return assign
    if excess > max_augmentations:
        return None
    everyone = np.arange(rows)
    scale = float(np.max(np.abs(cost[everyone, assign]))) + 1.0
    tolerance = 1e-12 * scale
    for _ in range(excess):
        moves, movers = _move_costs(cost, assign, classes)
        path = _shortest_path(moves, sources=load > capacity, sinks=load < capacity, tolerance=tolerance)
        if path is None:
            return None
        for origin, destination in zip(path, path[1:]):
            assign[movers(origin, destination)] = destination
        load[path[0]] -= 1
        load[path[-1]] += 1
    return assign


def _move_costs(cost: FloatArray, assign: IntArray, classes: int) -> tuple[FloatArray, "_Movers"]:
    """``moves[c, c']``: the cheapest way to move one job of class ``c`` to ``c'``."""
    own = cost[np.arange(cost.shape[0]), assign]
    order = np.argsort(assign, kind="stable")
    grouped = cost[order] - own[order, np.newaxis]
    counts = np.bincount(assign, minlength=classes)
    present = np.flatnonzero(counts)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    moves = np.full((classes, classes), np.inf)
    moves[present] = np.minimum.reduceat(grouped, starts[present], axis=0)
    np.fill_diagonal(moves, np.inf)
    return moves, _Movers(grouped=grouped, order=order, starts=starts, counts=counts)


class _Movers:
    """Which job realises ``moves[c, c']`` (computed only for the few edges of a path)."""

    def __init__(self, *, grouped: FloatArray, order: IntArray, starts: IntArray, counts: IntArray) -> None:
        self._grouped = grouped
        self._order = order
        self._starts = starts
        self._counts = counts

    def __call__(self, origin: int, destination: int) -> int:
        start = int(self._starts[origin])
        block = self._grouped[start : start + int(self._counts[origin]), destination]
        return int(self._order[start + int(np.argmin(block))])


def _shortest_path(
    moves: FloatArray, *, sources: npt.NDArray[np.bool_], sinks: npt.NDArray[np.bool_], tolerance: float
) -> list[int] | None:
    """Bellman–Ford from every over-full class at once (edge weights may be negative after earlier
    augmentations, but there is no negative cycle); the path to the nearest class with room."""
    classes = moves.shape[0]
    distance = np.where(sources, 0.0, np.inf)
    previous = np.full(classes, -1, dtype=np.int64)
    columns = np.arange(classes)
    for _ in range(classes):
        through = distance[:, np.newaxis] + moves
        best_from = np.argmin(through, axis=0)
        best = through[best_from, columns]
        better = best < distance - tolerance
        if not better.any():
            break
        distance = np.where(better, best, distance)
        previous = np.where(better, best_from, previous)
    else:
        return None  # still improving after |C| rounds: only rounding can do that
    reachable = np.where(sinks, distance, np.inf)
    target = int(np.argmin(reachable))
    if not np.isfinite(reachable[target]):
        return None
    path = [target]
    while previous[path[-1]] >= 0:
        path.append(int(previous[path[-1]]))
        if len(path) > classes:
            return None
    if not sources[path[-1]]:
        return None
    path.reverse()
    return path
