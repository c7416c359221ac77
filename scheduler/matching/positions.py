"""Which (machine, position) slots the matching needs: the paper's Q has n positions on every
machine (n·m·n entries); almost all of them can never appear in an optimal schedule.

Bound (why the slots built here lose nothing)
---------------------------------------------
Write ``ω_i`` for the time machine ``i`` becomes available, ``n_c`` for the number of jobs that
can run on kind ``c``, ``k_i`` for the number of jobs a schedule puts on ``i``, and, among the
machines of ``i``'s kind, ``s_i`` for those available strictly earlier than ``i`` and ``t_i`` for
those available at the same time (``i`` included); ``r_i = s_i + t_i``. A job placed ``k``-th from
the end of machine ``i`` costs ``k·p + ω_i - a`` (§3.1–3.2): it delays itself and the ``k - 1``
jobs behind it. Moving the job that runs first on ``i`` to the front of another machine ``i'``
of the same kind leaves every other job's position-from-the-end unchanged and changes the total
by ``Δ = (k_i' + 1 - k_i)·p + ω_i' - ω_i``. Processing times are ``>= 0``.

*(A) In every optimal schedule, ω_i' < ω_i implies k_i' >= k_i.* Otherwise ``k_i' <= k_i - 1``
and ``Δ <= ω_i' - ω_i < 0``: the move would improve an optimal schedule.

*(B) Some optimal schedule also has k_i' >= k_i - 1 whenever ω_i' <= ω_i.* While some pair has
``k_i' <= k_i - 2``, make the move: ``Δ <= -p <= 0``, so the schedule stays optimal (and keeps (A));
each move lowers ``Σ k_i²`` by at least 2, so the moves stop.

*Claim 1.* In that schedule the kind runs at least ``k_i`` jobs on each of the ``s_i`` earlier
machines (A), ``k_i - 1`` on each of the ``t_i - 1`` others available with ``i`` (B) and ``k_i`` on
``i``, and at most ``n_c``. So ``r_i·k_i - t_i + 1 <= n_c``:

    k_i <= K_i = floor((n_c + t_i - 1) / r_i)

(``ceil(n_c / m_c)`` when all machines of the kind are idle; 0 once ``n_c`` machines are strictly
earlier).

*Claim 2.* If a machine available at ``ω`` is used, every earlier machine of its kind is (A), so
the ``t`` machines available at ``ω`` hold at most ``n_c - s`` jobs and at most that many of them
are non-empty. They are interchangeable, so relabelling them moves the non-empty ones to the
front: only the first ``max(0, n_c - s)`` of each such group are kept.

*Claim 3.* With every job's time on the kind at least ``p > 0``: in every optimal schedule, a
machine ``i'`` of the kind with ``ω_i <= ω_i' < ω_i + (l+1)·p`` runs at least ``k_i - 1 - l``
jobs. Moving the job that runs first on ``i`` (time ``q >= p``) to the front of ``i'`` changes
the total by ``Δ = (k_i' + 1 - k_i)·q + ω_i' - ω_i >= 0``, so ``(k_i - 1 - k_i')·q <= ω_i' - ω_i
< (l+1)·q`` and ``k_i' > k_i - 2 - l``. Counting as in Claim 1, with ``c_il`` such machines at
level ``l``: ``k_i·(1 + s_i) + Σ_l c_il·max(0, k_i - 1 - l) <= n_c``. Machines freeing together
are level 0 (Claim 1's ``t_i``), so this never exceeds Claim 1's bound; where machines free
apart, by less than a few jobs' time (a full cluster, every machine busy until its own time),
it is far below it: the machine freeing first no longer gets a position for every job.

Conversely, every matching of the kept slots is a schedule (Algorithm 1 reads each machine's
queue from its largest position down; a gap in the positions only overstates the cost), so the
optimum over the kept slots equals the paper's. With idle identical machines (the common case)
this keeps ``ceil(n_c / m_c)`` positions on at most ``n_c`` machines per kind: for 1,000 jobs and
5,000 GPUs, 1,000 columns instead of 5,000,000; machines busy behind ``n_c`` earlier ones get
none. With all ``ω`` distinct the total is ``Σ_r floor(n_c / r) <= n_c·(1 + ln n_c)`` per kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

try:
    from scheduler.matching import _positions as _built
except ImportError:  # pragma: no cover - the package was installed without its C extension
    # mypy types _built as the module (_positions.pyi, so its calls are checked); every use tests for None.
    _built = None  # type: ignore[assignment]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

NATIVE: Final = _built is not None  # the extension was built
native = _built  # the extension in use: None works the bound and the slots out in NumPy (the tests compare both)
# The kind orders' ranks in C, where the extension was built from a source that has them.
ranking = native if native is not None and hasattr(native, "ranks") else None
# A kind order's move in C (``moved``), where the extension was built from a source that has it.
moving = native if native is not None and hasattr(native, "moved") else None


@dataclass(frozen=True, slots=True)
class Slots:
    """The columns of the cost matrix: column ``s`` is position ``position[s]`` from the end of
    machine ``machine[s]``. Columns are grouped by kind (``kind_bounds[c]:kind_bounds[c+1]``)
    so that the cost matrix can be written one kind at a time without fancy indexing."""

    machine: IntArray
    position: IntArray
    kind_bounds: IntArray

    @property
    def count(self) -> int:
        return int(self.machine.shape[0])


@dataclass(frozen=True, slots=True)
class KindOrder:
    """One kind's machines as the bound reads them: by ω, those freeing together in the order
    listed (a stable sort by ω), each with how many of the kind free strictly earlier
    (``earlier``, Claim 1's ``s_i``) and at the same time or earlier (``earlier_or_equal``,
    ``r_i``). It depends on the machines alone, so Algorithm 2 keeps it across its solves and
    moves one machine per start (:func:`kind_orders_after`) rather than sorting every kind again."""

    members: IntArray  # machine indices, by (ω, index)
    omega: FloatArray  # their ω, ascending
    earlier: IntArray
    earlier_or_equal: IntArray


def kind_orders(*, machine_kind: IntArray, available: FloatArray, kind_count: int) -> tuple[KindOrder, ...]:
    """:class:`KindOrder` of every kind index below ``kind_count`` (empty for a kind without a
    machine)."""
    orders = []
    for kind in range(kind_count):
        members = (machine_kind == kind).nonzero()[0]
        omega = available[members]
        # Stable sort by ω keeps input order inside a group of equal ω, so Claim 2 keeps the
        # machines the caller listed first: the choice is deterministic and predictable.
        order = omega.argsort(kind="stable")
        sorted_omega = omega[order]
        earlier, earlier_or_equal = _ranks(sorted_omega)
        orders.append(KindOrder(members=members[order], omega=sorted_omega, earlier=earlier, earlier_or_equal=earlier_or_equal))
    return tuple(orders)


def kind_orders_after(orders: tuple[KindOrder, ...], *, machine: int, kind: int, omega: float) -> tuple[KindOrder, ...]:
    """``orders`` once machine ``machine`` (of kind index ``kind``) frees at ``omega``: what
    :func:`kind_orders` gives for the machines as they are then, with one machine moved in
    its kind's order rather than the kind sorted again. In C where ``_positions.c`` has it
    (``moved``: the same searches, moves and ranks in one pass), unless an ω is NaN."""
    old = orders[kind]
    members, omegas = old.members, old.omega
    if moving is not None and _plain(members, omega=omegas):
        count = members.shape[0]
        moved_members, moved_omega = np.empty(count, dtype=np.int64), np.empty(count)
        earlier, earlier_or_equal = np.empty(count, dtype=np.int64), np.empty(count, dtype=np.int64)
        if moving.moved(members, omegas, machine, omega, moved_members, moved_omega, earlier, earlier_or_equal):
            changed = KindOrder(members=moved_members, omega=moved_omega, earlier=earlier, earlier_or_equal=earlier_or_equal)
            return (*orders[:kind], changed, *orders[kind + 1 :])
    at = int((members == machine).nonzero()[0][0])
    # Where it goes among the others: after every machine freeing earlier, and among those
    # freeing with it after the ones listed before it (a run of equal ω is in listed order).
    low = int(omegas.searchsorted(omega, side="left"))
    high = int(omegas.searchsorted(omega, side="right"))
    before = low + int(members[low:high].searchsorted(machine))
    to = before - 1 if at < before else before
    new_members, new_omega = members.copy(), omegas.copy()
    if to > at:
        new_members[at:to], new_omega[at:to] = members[at + 1 : to + 1], omegas[at + 1 : to + 1]
    elif to < at:
        new_members[to + 1 : at + 1], new_omega[to + 1 : at + 1] = members[to:at], omegas[to:at]
    new_members[to], new_omega[to] = machine, omega
    earlier, earlier_or_equal = _ranks(new_omega)
    changed = KindOrder(members=new_members, omega=new_omega, earlier=earlier, earlier_or_equal=earlier_or_equal)
    return (*orders[:kind], changed, *orders[kind + 1 :])


def _ranks(sorted_omega: FloatArray) -> tuple[IntArray, IntArray]:
    """For each of ``sorted_omega`` (ascending), how many are smaller and how many at most as
    large: ``searchsorted(sorted_omega, sorted_omega)`` left and right, read off the runs of
    equal values instead of searched. In C where ``_positions.c`` has it (``ranks``, one pass:
    Algorithm 2 moves a machine in its kind's order at each start, and these were half of it)."""
    count = sorted_omega.shape[0]
    if ranking is not None and sorted_omega.dtype == np.float64 and sorted_omega.ndim == 1 and sorted_omega.flags.c_contiguous:
        earlier, earlier_or_equal = np.empty(count, dtype=np.int64), np.empty(count, dtype=np.int64)
        ranking.ranks(sorted_omega, earlier, earlier_or_equal)
        return earlier, earlier_or_equal
    new_run = np.empty(count, dtype=bool)
    new_run[:1] = True
    np.not_equal(sorted_omega[1:], sorted_omega[:-1], out=new_run[1:])
    starts = new_run.nonzero()[0]
    run = new_run.cumsum() - 1
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1:] = count
    return starts[run], ends[run]


def position_limits(
    *, machine_kind: IntArray, available: FloatArray, runnable_per_kind: IntArray, shortest_per_kind: FloatArray | None = None,
    orders: tuple[KindOrder, ...] | None = None,
) -> IntArray:
    """``K_i`` of Claim 1 for every machine, and 0 for machines Claim 2 drops.

    ``machine_kind[i]`` indexes ``runnable_per_kind`` (``n_c``); ``available[i]`` is ``ω_i``.
    ``shortest_per_kind`` (optional): the shortest processing time on each kind among the jobs
    that can run there; where it is above 0, Claim 3 tightens ``K_i``. ``orders``: the
    machines' :func:`kind_orders`, when the caller keeps them (else sorted here).
    """
    limits = np.zeros(machine_kind.shape[0], dtype=np.int64)
    if orders is None:
        orders = kind_orders(machine_kind=machine_kind, available=available, kind_count=runnable_per_kind.shape[0])
    # Every kind that jobs can run on (the kinds without a machine have no members).
    for kind in (runnable_per_kind > 0).nonzero()[0].tolist():
        order = orders[kind]
        count = order.members.shape[0]
        if count == 0:
            continue
        runnable = int(runnable_per_kind[kind])
        if native is not None and _plain(order.members, order.earlier, order.earlier_or_equal, omega=order.omega):
            shortest = float(shortest_per_kind[kind]) if shortest_per_kind is not None else 0.0
            native.kind_limits(order.members, order.omega, order.earlier, order.earlier_or_equal, runnable, shortest, limits)
            continue
        # Claim 2 keeps, of the t machines freeing together after s earlier ones, the first
        # runnable - s: the machine ranked i (from 0) in the order is kept when i - s <
        # runnable - s, that is when it is among the first runnable. The others get 0.
        head = min(runnable, count)
        earlier, earlier_or_equal = order.earlier[:head], order.earlier_or_equal[:head]
        bound = (runnable - 1 + earlier_or_equal - earlier) // earlier_or_equal
        if shortest_per_kind is not None and shortest_per_kind[kind] > 0:
            bound = _tightened(bound, omega=order.omega, earlier=earlier, runnable=runnable, shortest=float(shortest_per_kind[kind]))
        limits[order.members[:head]] = bound
    return limits


def _plain(*arrays: npt.NDArray[np.integer], omega: FloatArray | None = None) -> bool:
    """Whether the arrays are the extension's kind of buffer: one contiguous row each, of
    int64 (``omega``, when given: of float64)."""
    rows = all(array.dtype == np.int64 and array.ndim == 1 and array.flags.c_contiguous for array in arrays)
    return rows and (omega is None or (omega.dtype == np.float64 and omega.ndim == 1 and omega.flags.c_contiguous))


# Claim 3 counts the machines freeing within this many multiples of the shortest job after
# machine i (farther ones only loosen the bound, which stays valid without them).
_LEVELS = 16
_LEVEL_STEPS = np.arange(1, _LEVELS + 1)[:, np.newaxis]  # l + 1 for the levels l = 0 .. L-1
_K_STEPS = np.arange(1, _LEVELS + 2)[:, np.newaxis]  # k = 1 .. L+1


def _tightened(bound: IntArray, *, omega: FloatArray, earlier: IntArray, runnable: int, shortest: float) -> IntArray:
    """Claim 3's ``K_i`` for machines of one kind sorted by ω (``bound``: Claim 1's, which it
    never exceeds): the largest ``k`` with ``k·(1 + s_i) + Σ_l c_il·max(0, k − 1 − l) <= n_c``,
    ``c_il`` the other machines freeing in ``[ω_i + l·p, ω_i + (l+1)·p)`` (the window a hair
    narrower than ``p``, so that rounding can only loosen it)."""
    # Claim 1's bound of 1 stands (k = 1 needs 1 + s_i <= n_c, which Claim 1 already says):
    # only machines it allows two or more positions are worked on.
    open_ = np.flatnonzero(bound >= 2)
    if open_.shape[0] == 0:
        return bound
    # Machines freeing together have the same s_i, c_il and Claim 1 bound, so the same K_i:
    # worked out once per ω (idle machines all share one), then handed to each.
    opened = omega[open_]
    new_omega = np.empty(open_.shape[0], dtype=bool)
    new_omega[:1] = True
    np.not_equal(opened[1:], opened[:-1], out=new_omega[1:])
    first = open_[new_omega]
    width = shortest * (1.0 - 1e-9)
    ends = omega[np.newaxis, first] + _LEVEL_STEPS * width
    reach = omega.searchsorted(ends.ravel(), side="left").reshape(ends.shape)
    before = earlier[first]
    within = reach - before[np.newaxis, :] - 1  # W[l]: other machines at or after ω_i, closer than (l+1)·p
    # The largest k <= K_i (Claim 1) with needed(k) = k·(1 + s_i) + Σ_l c_il·max(0, k − 1 − l)
    # <= n_c, in closed form rather than by bisection: Σ_l c_il·max(0, k − 1 − l) is Σ_{m < k−1}
    # W[min(m, L−1)] (c_il counts the machines at level l, W their running sum, none beyond the
    # L levels), so needed(1..L+1) is a running sum of L+1 rows, and past L+1 it rises by
    # 1 + s_i + W[L−1] a step. needed rises with k (1 + s_i >= 1) and needed(0) = 0: the k
    # sought is how many of needed(1..L+1) fit, or past L+1 how many more steps do.
    own = 1 + before
    shifted = np.zeros((_LEVELS + 1, first.shape[0]), dtype=np.int64)
    np.cumsum(within, axis=0, out=shifted[1:])  # row k−1: Σ_{m < k−1} W[m]
    needed = _K_STEPS * own[np.newaxis, :] + shifted  # k = 1 .. L+1
    last = needed[_LEVELS]
    fitting = (needed <= runnable).sum(axis=0)
    # A step of 0 only where rounding emptied every window (W = −1: ω_i + p rounds back to ω_i,
    # a time below ~1e-17 of the wait): needed then stays put, and Claim 1's bound stands.
    step = own + within[_LEVELS - 1]
    beyond = np.where(step > 0, _LEVELS + 1 + (runnable - last) // np.maximum(step, 1), bound[first])
    low = np.minimum(np.where(last <= runnable, beyond, fitting), bound[first])
    tightened = bound.copy()
    tightened[open_] = low[np.cumsum(new_omega) - 1]
    return tightened


def all_positions(*, machine_count: int, job_count: int) -> IntArray:
    """The paper's layout: ``n`` positions on every machine (no bound)."""
    return np.full(machine_count, job_count, dtype=np.int64)


def slots_for(*, limits: IntArray, machine_kind: IntArray, kind_count: int) -> Slots:
    """Lay out ``limits[i]`` positions for every machine, grouped by kind."""
    if native is not None and _plain(limits, machine_kind):
        total = int(limits.sum())
        machine, position = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
        native.slots(limits, machine_kind, kind_count, machine, position)
        kind_bounds = np.zeros(kind_count + 1, dtype=np.int64)
        np.cumsum(np.bincount(machine_kind, weights=limits, minlength=kind_count).astype(np.int64), out=kind_bounds[1:])
        return Slots(machine=machine, position=position, kind_bounds=kind_bounds)
    machine = np.repeat(np.arange(limits.shape[0], dtype=np.int64), limits)
    first_column = np.cumsum(limits) - limits
    position = np.arange(machine.shape[0], dtype=np.int64) - np.repeat(first_column, limits) + 1
    slot_kind = machine_kind[machine]
    # Within a kind, order by position then machine: the paper's block order Q = [P 2P … nP]
    # (machine is ascending, and lexsort is stable: it needs no key of its own).
    span = int(limits.max(initial=0)) + 1  # positions run 1 .. the largest limit
    order = (slot_kind * span + position).argsort(kind="stable")  # lexsort((position, slot_kind))'s order
    kind_bounds = np.zeros(kind_count + 1, dtype=np.int64)
    np.cumsum(np.bincount(slot_kind, minlength=kind_count), out=kind_bounds[1:])
    return Slots(machine=machine[order], position=position[order], kind_bounds=kind_bounds)


@dataclass(frozen=True, slots=True)
class SlotClasses:
    """Slots grouped into classes of identical columns (same kind, same ω, same position):
    ``slots_by_class[class_start[c] : class_start[c] + capacity[c]]`` are class ``c``'s slots in
    slot order; ``first_slot[c]`` represents it."""

    slots_by_class: IntArray
    class_start: IntArray
    capacity: IntArray
    first_slot: IntArray

    @property
    def count(self) -> int:
        return int(self.capacity.shape[0])


def slot_classes(slots: Slots, *, machine_kind: IntArray, delay: FloatArray) -> SlotClasses:
    kind = machine_kind[slots.machine]
    wait = delay[slots.machine]
    order = np.lexsort((slots.position, wait, kind))  # stable: then slot order
    sorted_kind, sorted_wait, sorted_position = kind[order], wait[order], slots.position[order]
    new_class = np.ones(slots.count, dtype=bool)
    new_class[1:] = (
        (sorted_kind[1:] != sorted_kind[:-1])
        | (sorted_wait[1:] != sorted_wait[:-1])
        | (sorted_position[1:] != sorted_position[:-1])
    )
    class_start = new_class.nonzero()[0]
    capacity = np.empty_like(class_start)
    np.subtract(class_start[1:], class_start[:-1], out=capacity[:-1])
    capacity[-1:] = slots.count - class_start[-1:]
    return SlotClasses(
        slots_by_class=order.astype(np.int64),
        class_start=class_start,
        capacity=capacity,
        first_slot=order[class_start].astype(np.int64),
    )
