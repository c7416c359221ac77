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

Phases 1 to 3 run in C where the optional extension ``scheduler.matching._transport`` was built
(see its header): the same steps in the same order, so the same assignment, without NumPy's
cost per call on a plan's few hundred rows and handful of groups. Where it cannot be sure of
that (a NaN, a shortest path over more than ``_PYTHON_DIJKSTRA_NODES`` nodes or with two ways to
a node) it declines and :class:`_Grouped` below runs, as it does without the extension.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Sequence

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

if TYPE_CHECKING:
    from scheduler.matching.positions import KindOrder

try:
    from scheduler.matching import _transport as _built
except ImportError:  # pragma: no cover - the package was installed without its C extension
    # mypy types _built as the module (_transport.pyi, so its calls are checked); every use tests for None.
    _built = None  # type: ignore[assignment]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NATIVE: Final = _built is not None  # the extension was built
native = _built  # the extension in use: None runs phases 2 and 3 in NumPy (the tests compare both)
# The certificate's test in C, where the extension was built from a source that has it.
certifying = native if native is not None and hasattr(native, "certificate") else None
# A plan of Algorithm 2 from its rows to its queues in one call (contended_plan), where the
# extension was built from a source that has it; None: the steps one by one (the tests compare both).
planning = native if native is not None and hasattr(native, "contended_plan") else None
# solve_groups' answers (see _transport.c).
_SOLVED, _NONE = 0, 1

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
    cost: FloatArray | None, capacity: IntArray, *, max_augmentations: int, groups: Groups | None = None
) -> IntArray | None:
    """The class of every row in a minimum-cost assignment that puts at most ``capacity[c]``
    rows in class ``c``; ``None`` when phase 3 would take more than ``max_augmentations`` steps,
    rounding makes the shortest paths unreliable, or no assignment exists (the caller then
    solves another way). ``groups`` (optional) says which classes differ by a constant; without
    it each class is a group of its own. ``cost`` None: the rows × classes costs are never
    written out, ``groups`` stands for them (every class then needs a capacity of at least one).
    """
    if cost is None:
        if groups is None:
            raise ValueError("assign_to_classes needs the cost matrix or the groups")
        rows, classes = groups.group_cost.shape[0], groups.group.shape[0]
        assign = _cheapest_classes(groups)
    else:
        rows, classes = cost.shape
        assign = np.argmin(cost, axis=1).astype(np.int64)
    load = np.bincount(assign, minlength=classes).astype(np.int64)
    if not np.any(load > capacity):
        return assign
    if groups is None:
        assert cost is not None
        groups = Groups(group=np.arange(classes, dtype=np.int64), offset=np.zeros(classes), group_cost=cost)
    found = _units(groups, capacity)
    if not found.units:
        return None
    grouped = _assign_to_groups(groups.group_cost[:, found.ids], found, max_augmentations=max_augmentations)
    return None if grouped is None else _filled(grouped, found)


def can_fold() -> bool:
    """Whether :func:`folded_match` can answer: the extension in use has ``fold_match``."""
    return native is not None and hasattr(native, "fold_match")


def planned(*, times: FloatArray, rows: IntArray, machine_kind: IntArray, delay: FloatArray, orders: Sequence[KindOrder]) -> tuple[IntArray, IntArray, bool] | None:
    """:func:`~scheduler.matching.solve.contended_plan` of the problem of ``rows`` (of
    ``times``, every job's) on the machines (``machine_kind``, ``delay``, their kind orders
    ``orders``) in one call of the extension (``contended_plan``): the rows' times, the bound,
    its slots, :func:`folded_match` with the certificate and the queues after it, the same steps
    as those calls: each machine's queue (``bounds``), the queued indices of ``rows`` and the
    certificate's answer. None where the extension has no such call, a buffer is not its kind,
    or a step would leave its way (the caller then takes the steps one by one)."""
    if planning is None or len(orders) != times.shape[1] or rows.dtype != np.int64 or not rows.flags.c_contiguous:
        return None
    if not (_native_buffers(machine_kind, delay) and times.dtype == np.float64 and times.ndim == 2 and times.flags.c_contiguous):
        return None
    if not orders:
        return None
    members = np.concatenate([order.members for order in orders])
    omega = np.concatenate([order.omega for order in orders])
    earlier = np.concatenate([order.earlier for order in orders])
    earlier_or_equal = np.concatenate([order.earlier_or_equal for order in orders])
    if not (_native_buffers(members, omega) and earlier.dtype == np.int64 and earlier_or_equal.dtype == np.int64):
        return None
    # Summed in Python: NumPy's cumsum of a short list costs ~10 µs a solve, ~0.5 ms a burst's pass.
    kind_bounds = np.array([0, *itertools.accumulate(order.members.shape[0] for order in orders)], dtype=np.int64)
    bounds = np.empty(machine_kind.shape[0] + 1, dtype=np.int64)
    queued = np.empty(rows.shape[0], dtype=np.int64)
    certain = np.full(1, -1, dtype=np.int64)
    if not planning.contended_plan(times, rows, machine_kind, delay, members, omega, earlier, earlier_or_equal, kind_bounds, bounds, queued,
                                   certain):
        return None
    return queued, bounds, bool(certain[0])


def folded_match(*, slot_machine: IntArray, slot_position: IntArray, machine_kind: IntArray, delay: FloatArray, times: FloatArray,
                 members: IntArray, omega: FloatArray, certain: IntArray | None = None) -> tuple[IntArray, IntArray] | None:
    """:func:`~scheduler.matching.solve.match`'s rows and slots on the bounded slots
    (``slot_machine``, ``slot_position``) folded to classes, with every step from the slots'
    classes to the rows' slots in one call of the extension (``fold_match``): the same integers
    and floating-point operations as ``slot_classes``, ``_groups``, :func:`assign_to_classes`
    and ``_slots_to_rows``, the classes sorted by (kind, wait) read off the kind orders laid
    end to end (``members``, ``omega``). None where the extension is not built (or built from
    an older ``_transport.c``), a buffer is not its kind, or it leaves the answer to NumPy's
    way (a NaN, phase 3 over its budget or declined, kind orders not those of ``delay``).

    ``certain`` (int64, one; -1 on the way in): where the extension has ``fold_certified``,
    whether the matching is certainly the only optimum over the groups, as
    :func:`~scheduler.matching.solve.contended_plan`'s test answers it from the folded matrix
    (:func:`only_optimum`), worked out in the same call: 1 or 0, left -1 where not."""
    extension = native
    if certain is not None:
        certain[0] = -1
    fold = getattr(extension, "fold_match", None)
    certifying_fold = getattr(extension, "fold_certified", None) if certain is not None else None
    arrays = (slot_machine, slot_position, machine_kind, members)
    if fold is None or not all(a.dtype == np.int64 and a.ndim == 1 and a.flags.c_contiguous for a in arrays):
        return None
    if not (_native_buffers(machine_kind, delay) and _native_buffers(members, omega) and times.dtype == np.float64 and times.ndim == 2
            and times.flags.c_contiguous):
        return None
    rows = np.empty(times.shape[0], dtype=np.int64)
    columns = np.empty(times.shape[0], dtype=np.int64)
    if certifying_fold is not None and certain is not None and certain.dtype == np.int64 and certain.shape == (1,):
        written = certifying_fold(slot_machine, slot_position, machine_kind, delay, times, members, omega, rows, columns, certain)
    else:
        written = fold(slot_machine, slot_position, machine_kind, delay, times, members, omega, rows, columns)
    return (rows, columns) if written else None


def _assign_to_groups(cost: FloatArray, found: _Units, *, max_augmentations: int) -> IntArray | None:
    """Phases 2 and 3: each row's group (an index of ``found``'s groups; ``cost`` is rows ×
    those groups), or None where :func:`assign_to_classes` declines. In C where the extension
    takes it, else in NumPy: the same answer either way."""
    if native is not None and cost.dtype == np.float64 and found.flat.dtype == np.float64:
        assign = np.empty(cost.shape[0], dtype=np.int64)
        status = native.solve_groups(np.ascontiguousarray(cost), found.flat, found.bounds, assign, max_augmentations)
        if status == _SOLVED:
            return assign
        if status == _NONE:
            return None
    problem = _Grouped(cost=cost, units=found.units)
    if not problem.feasible():
        return None
    problem.raise_prices()
    if not problem.shortest_paths(max_augmentations=max_augmentations):
        return None
    return problem.assign


@dataclass(frozen=True, slots=True)
class _Units:
    """The groups that have a slot (``ids``), and their units group after group, each group's
    by offset then class order: ``unit_class[bounds[g]:bounds[g+1]]`` are group ``g``'s units'
    classes, ``units[g]`` their offsets (ascending)."""

    ids: IntArray
    unit_class: IntArray
    bounds: IntArray
    units: list[FloatArray]
    flat: FloatArray  # the units' offsets, group after group (``units`` are its slices)


def _units(groups: Groups, capacity: IntArray) -> _Units:
    kept = (capacity > 0).nonzero()[0]  # classes without a slot take no part
    group_ids, group = distinct(groups.group[kept])
    # Each group's classes by offset, then class order (one sort instead of one pass per group).
    classes = kept[np.lexsort((groups.offset[kept], group))]
    unit_class = np.repeat(classes, capacity[classes])
    per_group = np.bincount(group, weights=capacity[kept], minlength=group_ids.shape[0]).astype(np.int64)
    bounds = np.zeros(per_group.shape[0] + 1, dtype=np.int64)
    np.cumsum(per_group, out=bounds[1:])
    offsets = groups.offset[unit_class]
    units = [offsets[begin:end] for begin, end in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    return _Units(ids=group_ids, unit_class=unit_class, bounds=bounds, units=units, flat=offsets)


def _native_buffers(group: IntArray, offset: FloatArray) -> bool:
    """Whether a group per class and an offset per class are the extension's kind of buffers:
    one contiguous row each, of int64 and of float64."""
    return (group.dtype == np.int64 and group.ndim == 1 and group.flags.c_contiguous and offset.dtype == np.float64
            and offset.ndim == 1 and offset.flags.c_contiguous)


def distinct(values: IntArray) -> tuple[IntArray, IntArray]:
    """``np.unique(values, return_inverse=True)`` for small non-negative integers (group ids),
    by counting rather than sorting: the values present, ascending, and each one's index."""
    present = np.bincount(values) > 0
    index = present.cumsum() - 1
    return present.nonzero()[0].astype(np.int64), index[values].astype(np.int64)


def _filled(assign: IntArray, units: _Units) -> IntArray:
    """Each row's class: the rows of a group (``assign``, an index of ``units``' groups), in
    row order, fill its cheapest units (a group has a unit for each of its rows)."""
    order = np.argsort(assign, kind="stable")
    ordered = assign[order]
    rank = np.arange(ordered.shape[0]) - np.searchsorted(ordered, ordered, side="left")
    result = np.empty(assign.shape[0], dtype=np.int64)
    result[order] = units.unit_class[units.bounds[ordered] + rank]
    return result


def certified(groups: Groups, capacity: IntArray, assign: IntArray) -> IntArray | None:
    """Each row's class as :func:`assign_to_classes` would give it, when ``assign`` (each row's
    group, an id of ``groups.group``) is the only optimal assignment of rows to groups; None
    when that is not certain (the caller then solves): :func:`only_optimum`'s test."""
    found = _certificate(groups, capacity, assign)
    return None if found is None else _filled(*found)


def only_optimum(groups: Groups, capacity: IntArray, assign: IntArray) -> bool:
    """Whether ``assign`` (each row's group, an id of ``groups.group``) is certainly the only
    optimal assignment of rows to groups: :func:`certified` without its classes, which a
    caller asking only that (Algorithm 2's carried plans) does not read."""
    return _certificate(groups, capacity, assign) is not None


def _certificate(groups: Groups, capacity: IntArray, assign: IntArray) -> tuple[IntArray, _Units] | None:
    """Each row's group as an index of the groups with a unit, and those units, when
    ``assign`` is certainly the only optimal assignment of rows to groups; None otherwise.

    The residual graph of the assignment (the groups and a sink, as in phase 3, without
    potentials): moving one of ``a``'s rows to ``b`` costs at least the cheapest such move,
    ``b`` takes a row into its next unused unit, ``a`` gives one back from its last used unit.
    Any other assignment differs from this one by cycles of that graph, and the cycles that
    move no row (a unit swapped for another of the group, never cheaper) change no row's group.
    So when every cycle that moves a row costs more than rounding could account for — the
    cheapest move from ``a`` to ``b`` plus the shortest way back from ``b`` to ``a`` (Floyd–
    Warshall over the groups: with a negative cycle, one that moves a row, that sum is negative
    too) — every other assignment costs more: ``assign`` is the optimum, and every exact
    solve of the same problem finds it. Its rows then fill each group's cheapest units as
    :func:`assign_to_classes` fills them (:func:`_filled`). O(rows·G + G³) in NumPy, no phase run.
    """
    rows = groups.group_cost.shape[0]
    found = _units(groups, capacity)
    group_ids, units = found.ids, found.units
    count = group_ids.shape[0]
    if count == 0 or assign.shape[0] != rows:
        return None
    local = np.searchsorted(group_ids, assign)
    if bool((local >= count).any()) or bool((group_ids[np.minimum(local, count - 1)] != assign).any()):
        return None  # a row in a group without a slot
    if (certifying is not None and groups.group_cost.dtype == np.float64 and groups.group_cost.ndim == 2 and local.dtype == np.int64
            and _native_buffers(group_ids, found.flat) and found.bounds.dtype == np.int64):
        # The same steps in C (_transport.c's certificate), one call for a dozen NumPy steps
        # over the rows x groups; the costs laid out row by row (solve's groups gather the
        # times' columns, column by column: a copy of rows x groups, a few microseconds).
        certain = certifying.certificate(np.ascontiguousarray(groups.group_cost), group_ids, local, found.flat, found.bounds)
        return (local, found) if certain else None
    cost = groups.group_cost[:, group_ids]
    mine = cost[np.arange(rows), local]
    if not bool(np.isfinite(mine).all()):
        return None
    load = np.bincount(local, minlength=count)
    sizes = np.array([u.shape[0] for u in units], dtype=np.int64)
    if bool((load > sizes).any()):
        return None
    following = np.array([float(u[m]) if m < u.shape[0] else math.inf for u, m in zip(units, load.tolist())])
    back = np.array([-float(u[m - 1]) if m else math.inf for u, m in zip(units, load.tolist())])
    # The cheapest move from each group to every other, over its rows.
    order = np.argsort(local, kind="stable")
    present = np.flatnonzero(load)
    starts = (np.cumsum(load) - load)[present]
    with np.errstate(invalid="ignore"):
        moves = cost[order] - mine[order, np.newaxis]
    if bool(np.isnan(moves).any()):
        return None
    cheapest = np.full((count, count), np.inf)
    cheapest[present] = np.minimum.reduceat(moves, starts, axis=0)
    np.fill_diagonal(cheapest, np.inf)
    nodes = count + 1
    distance = np.full((nodes, nodes), np.inf)
    distance[:count, :count] = cheapest
    distance[:count, count] = following
    distance[count, :count] = back
    np.fill_diagonal(distance, 0.0)
    for k in range(nodes):
        np.minimum(distance, distance[:, k, np.newaxis] + distance[np.newaxis, k, :], out=distance)
    offsets = groups.offset[found.unit_class]
    scale = float(np.max(np.abs(cost), where=np.isfinite(cost), initial=0.0)) + float(np.max(np.abs(offsets), initial=0.0)) + 1.0
    with np.errstate(invalid="ignore"):
        cycles = cheapest + distance[:count, :count].T
    if bool(np.isnan(cycles).any()) or float(cycles.min(initial=math.inf)) <= 1e-9 * scale:
        return None
    return local, found


# Phase 3's shortest paths are found in Python over graphs of at most this many nodes (groups and
# the sink; a dense Dijkstra, O(n²) steps of a few hundred ns), by scipy beyond: building its
# sparse graph and calling it cost ~0.1 ms a path, what the handful of groups of a plan needs.
_PYTHON_DIJKSTRA_NODES = 40
_NO_PREDECESSOR = -9999  # scipy's mark for a source or a node not reached


def _shortest_paths(graph: FloatArray, sources: IntArray) -> tuple[FloatArray, IntArray]:
    """``dijkstra(_sparse(graph), indices=sources, min_only=True, return_predecessors=True)``'s
    distances and predecessors: in Python where the graph is small and no node's distance is
    reached from two nodes, else scipy's."""
    if graph.shape[0] <= _PYTHON_DIJKSTRA_NODES:
        found = _dense_dijkstra(graph, sources)
        if found is not None:
            return found
    distance, previous, _ = dijkstra(_sparse(graph), indices=sources, min_only=True, return_predecessors=True)
    return distance, previous


def _dense_dijkstra(graph: FloatArray, sources: IntArray) -> tuple[FloatArray, IntArray] | None:
    """Distances from the nearest of ``sources`` over ``graph`` (a finite entry, zero included,
    is an edge), and each node's predecessor (``_NO_PREDECESSOR`` for a source or a node not
    reached); None where some node's distance is reached from two nodes.

    scipy's Dijkstra takes a node's predecessor from the first scanned node that strictly
    lowers its distance, so where two nodes give the same least distance, which one it keeps
    depends on its heap. Where one node alone gives it, every Dijkstra keeps that one, and the
    distances, each the same sum along the same path, are the same floating-point numbers:
    the answer is scipy's. The sums are checked over every edge, not only the ones scanned."""
    nodes = graph.shape[0]
    finite = np.isfinite(graph)
    weights = np.where(finite, graph, math.inf).tolist()
    distance = [math.inf] * nodes
    previous = [_NO_PREDECESSOR] * nodes
    source_list = sources.tolist()
    for source in source_list:
        distance[source] = 0.0
    unscanned = set(range(nodes))
    while unscanned:
        node = min(unscanned, key=distance.__getitem__)
        reached = distance[node]
        if reached == math.inf:
            break
        unscanned.discard(node)
        row = weights[node]
        for other in unscanned:
            through = reached + row[other]
            if through < distance[other]:
                distance[other] = through
                previous[other] = node
    distances = np.array(distance)
    with np.errstate(invalid="ignore"):
        # Every node's distance through each node, against its own: one match per node reached.
        matches = (distances[:, np.newaxis] + np.where(finite, graph, math.inf) == distances[np.newaxis, :]).sum(axis=0)
    matches[source_list] = 1
    if bool((matches[np.isfinite(distances)] != 1).any()):
        return None
    return distances, np.array(previous, dtype=np.int32)


def _sparse(graph: FloatArray) -> csr_matrix:
    """The finite entries of a dense graph as a sparse one, zeros kept as edges (what
    ``csgraph_from_dense(graph, null_value=inf)`` gives, without its masked arrays)."""
    finite = np.isfinite(graph)
    indptr = np.zeros(graph.shape[0] + 1, dtype=np.int32)  # scipy's index type: nothing to convert
    np.cumsum(finite.sum(axis=1), out=indptr[1:])
    return csr_matrix((graph[finite], finite.nonzero()[1].astype(np.int32), indptr), shape=graph.shape)


def _cheapest_classes(groups: Groups) -> IntArray:
    """``argmin`` over the classes of ``group_cost[:, group] + offset`` (ties: the first class),
    without writing that rows × classes matrix: a group's cheapest class is the same for every
    row (its least offset, then its first class), so the rows pick among the groups' cheapest
    classes, taken in class order so that a tie falls to the first class as ``argmin`` has it.
    The sums are the same floating-point operations as the written-out matrix's, so equal."""
    if native is not None and _native_buffers(groups.group, groups.offset) and groups.group_cost.dtype == np.float64:
        # In C where it is sure of the same answer (no NaN): no rows × groups sum written out.
        written = np.empty(groups.group_cost.shape[0], dtype=np.int64)
        if native.cheapest_classes(groups.group, groups.offset, np.ascontiguousarray(groups.group_cost), written):
            return written
    classes = groups.group.shape[0]
    count = groups.group_cost.shape[1]
    order = np.lexsort((groups.offset, groups.group))  # stable: then class order
    starts = np.searchsorted(groups.group[order], np.arange(count), side="left")
    present = starts < classes
    present[present] = groups.group[order[starts[present]]] == np.flatnonzero(present)
    best = order[starts[present]]  # each group's cheapest class
    which = np.flatnonzero(present)
    by_class = np.argsort(best, kind="stable")
    total = groups.group_cost[:, which[by_class]] + groups.offset[best[by_class]]
    chosen: IntArray = best[by_class][np.argmin(total, axis=1)].astype(np.int64)
    chosen[~np.isfinite(total).any(axis=1)] = 0  # as argmin has a row with no finite cost
    return chosen


class _Grouped:
    """Phases 2 and 3 over groups: ``cost`` is rows × groups, ``units[g]`` the offsets of group
    ``g``'s slots, ascending."""

    def __init__(self, *, cost: FloatArray, units: list[FloatArray]) -> None:
        self.cost = cost
        self.units = units
        # The units group after group in one array (each group's ascending), for counts over
        # every group at once.
        sizes = np.fromiter(map(len, units), dtype=np.int64, count=len(units))
        self._flat = np.concatenate(units) if units else np.zeros(0)
        self._owner = np.repeat(np.arange(len(units), dtype=np.int64), sizes)
        self._first = sizes.cumsum() - sizes
        self._sizes = sizes
        self.price = self._flat[self._first] if units else np.zeros(0)
        self.assign: IntArray = np.argmin(cost + self.price, axis=1).astype(np.int64)

    def feasible(self) -> bool:
        total = int(self._sizes.sum())
        return total >= self.cost.shape[0] and bool(np.all(np.isfinite(self.cost.min(axis=1))))

    def _priced_units(self) -> IntArray:
        """How many units of each group cost at most its price (each group's units ascending:
        what ``searchsorted(units, price, side="right")`` gives, for every group at once)."""
        return np.bincount(self._owner[self._flat <= self.price[self._owner]], minlength=self._sizes.shape[0]).astype(np.int64)

    def raise_prices(self) -> None:
        """Phase 2."""
        cost, price, assign = self.cost, self.price, self.assign
        # Each group's jobs and priced units, kept up to date through the sweep: most groups
        # are not over, and telling so without a pass over the rows is what makes a sweep cheap
        # with hundreds of groups (busy machines freeing at many times).
        load = np.bincount(assign, minlength=price.shape[0]).astype(np.int64)
        priced = self._priced_units()
        best, stalled = int(np.maximum(load - priced, 0).sum()), 0
        count = price.shape[0]
        for _ in range(_MAX_SWEEPS):
            if best == 0 or stalled >= _STALLED_SWEEPS:
                return
            g = -1
            # ndarray methods rather than their np.* wrappers: each visit is a few dozen small
            # NumPy calls, and the wrappers' Python added about a tenth to them.
            while g + 1 < count:
                # The next group over, in group order, as the sweep has left them so far.
                later = load[g + 1 :] > priced[g + 1 :]
                step = int(later.argmax())
                if not later[step]:
                    break
                g += 1 + step
                units = self.units[g]
                jobs = (assign == g).nonzero()[0]
                others = cost[jobs]
                mine = others[:, g].copy()
                others += price
                others[:, g] = np.inf
                alternative = others.argmin(axis=1)
                margin = others.min(axis=1)  # the value at ``alternative``
                margin -= mine
                order = (-margin).argsort(kind="stable")  # the jobs keenest on g first, then row order
                margins = margin[order]
                # m jobs stay when the m-th keenest still prefers g at the m-th cheapest unit.
                room = min(units.shape[0], margins.shape[0])
                fits = margins[:room] >= units[:room]
                staying = int(fits.argmin()) if room else 0
                if room and fits[staying]:
                    staying = room  # every one of them fits
                # As Python floats: a dozen scalar steps per visit, each slower on NumPy scalars.
                floor = max(float(units[staying - 1]) if staying else -math.inf,
                            float(margins[staying]) if staying < margins.shape[0] else -math.inf)
                if not math.isfinite(floor):
                    return  # jobs with nowhere else to go: phase 3 sorts it out (or declines)
                raised = max(float(price[g]), floor)
                price[g] = raised
                priced[g] = units.searchsorted(raised, side="right")
                leaving = order[staying:]
                moved = alternative[leaving]
                assign[jobs[leaving]] = moved
                load[g] -= leaving.shape[0]
                load += np.bincount(moved, minlength=count)
            over = int(np.maximum(load - priced, 0).sum())
            stalled = 0 if over < best else stalled + 1
            best = min(best, over)

    def _refresh_all(self, cheapest: FloatArray, mover: IntArray) -> bool:
        """Every group's cheapest move to every other group, and who makes it (the first such
        job in row order), in one pass over the rows; False (nothing written) when a row's
        costs make a NaN, for the per-group pass to handle."""
        cost, assign = self.cost, self.assign
        rows, groups = cost.shape
        order = assign.argsort(kind="stable")  # by group, rows ascending within one
        with np.errstate(invalid="ignore"):
            ordered = cost[order] - cost[order, assign[order]][:, np.newaxis]
        if np.isnan(ordered).any():
            return False
        counts = np.bincount(assign, minlength=groups)
        present = np.flatnonzero(counts)
        starts = (np.cumsum(counts) - counts)[present]
        least = np.minimum.reduceat(ordered, starts, axis=0)
        first = np.where(ordered == np.repeat(least, counts[present], axis=0), np.arange(rows)[:, np.newaxis], rows)
        cheapest[present] = least
        mover[present] = order[np.minimum.reduceat(first, starts, axis=0)]
        cheapest[np.arange(groups), np.arange(groups)] = np.inf
        return True

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
        scale = float(np.abs(cost).max(where=np.isfinite(cost), initial=0.0)) + float(np.max(np.abs(price))) + 1.0
        tolerance = 1e-9 * scale
        # cheapest[a, b]: the cheapest move of one of a's jobs to b, and who makes it.
        cheapest = np.full((groups, groups), np.inf)
        mover = np.full((groups, groups), -1, dtype=np.int64)

        def refresh(g: int) -> None:
            jobs = (assign == g).nonzero()[0]
            if jobs.size == 0:
                cheapest[g], mover[g] = np.inf, -1
                return
            moves = cost[jobs] - cost[jobs, g, np.newaxis]
            best = moves.argmin(axis=0)
            cheapest[g] = moves[best, np.arange(groups)]
            mover[g] = jobs[best]
            cheapest[g, g] = np.inf

        if not self._refresh_all(cheapest, mover):
            for g in range(groups):
                refresh(g)
        sink = groups
        graph = np.full((groups + 1, groups + 1), np.inf)
        for augmentation in range(excess):
            reduced = cheapest + price[np.newaxis, :] - price[:, np.newaxis]
            finite = np.isfinite(reduced)
            if finite.any() and float(reduced[finite].min()) < -tolerance:
                return False
            graph[:groups, :groups] = np.maximum(reduced, 0.0)
            following = np.where(used < self._sizes, self._flat[self._first + np.minimum(used, self._sizes - 1)], np.inf)
            to_sink = following - price
            if float(np.min(to_sink)) < -tolerance:
                return False
            graph[:groups, sink] = np.maximum(to_sink, 0.0)
            sources = np.flatnonzero(load > used)
            distance, previous = _shortest_paths(graph, sources)
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
            if augmentation + 1 < excess:  # the cheapest moves serve the next path only
                for g in set(path[:-1]) | set(path[1:]):
                    refresh(g)
            load[path[0]] -= 1
            load[path[-1]] += 1
            used[path[-1]] += 1
        return True
