"""AlloX's matching (§3.1 steps i–iii, Algorithm 1, with the delays of §3.2).

Jobs that have all arrived by ``now`` are matched to (machine, position-from-the-end) slots at
minimum total completion time, and the matching is read back as one queue per machine. With every
machine idle at ``now`` this is Lemma 3.1's optimal schedule; with busy machines it is still
optimal for the jobs given, because a busy machine only adds its wait ``ω(i) - now`` to each job
it runs (that is what D adds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from itertools import chain
from operator import attrgetter, methodcaller
from types import ModuleType
from typing import Callable, Final, Iterator, Literal, Mapping, Sequence, overload

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

from scheduler.matching.costs import kind_times, slot_cost_matrix
from scheduler.matching.errors import InfeasibleInstance, InvalidInstance
from scheduler.matching.model import Assignment, Job, Machine
from scheduler.matching.positions import KindOrder, Slots, SlotClasses, all_positions, kind_orders, position_limits, slot_classes, slots_for
from scheduler.matching.transport import Groups, can_fold, distinct, assign_to_classes, certified, folded_match, only_optimum, planned

try:
    from scheduler.matching import _solve as _built
except ImportError:  # pragma: no cover - the package was installed without its C extension
    # mypy types _built as the module (_solve.pyi, so its calls are checked); every use tests for None.
    _built = None  # type: ignore[assignment]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NATIVE: Final = _built is not None  # the extension was built
native = _built  # the extension in use: None runs canonical's levels in NumPy (the tests compare both)
# canonical's queue names in C, where the extension was built from a source that has them.
names = native if native is not None and hasattr(native, "queue_names") else None
# The bound's jobs per kind in C, likewise.
stats = native if native is not None and hasattr(native, "kind_stats") else None
# contended_plan after the fold's call in one C call (canonical_plan), likewise.
plans = native if native is not None and hasattr(native, "canonical_plan") else None

# Fold only when the classes are fewer than this share of the slots: the folded matrix is
# jobs × classes, and with as many classes as slots (every machine's ω distinct) it is Q itself.
# Phase 3's steps cost O(G²) in the *groups* (kind × position, a few hundred at most), not in
# the classes, so many classes alone never make the folded solve slow: with 1,000 busy machines
# on ω's grid (~870-1,100 classes, 120 groups) it solves 1,000 Jobs in ~3 ms where scipy on the
# full 1,000 × 8,000 Q took 3-6 s (a full cluster, the live steady state).
FOLD_WHEN_CLASSES_PER_SLOT = 1.0

Method = Literal["auto", "scipy", "classes"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One matching instance in array form.

    ``delay[i]`` is ``ω(i) - now`` (never negative: a machine is available at ``now`` at the
    earliest); ``times`` is jobs × kinds.
    """

    jobs: Sequence[Job]  # a tuple, or the rows of another problem's (JobsOfRows)
    machines: tuple[Machine, ...]
    kinds: tuple[str, ...]
    times: FloatArray
    machine_kind: IntArray
    delay: FloatArray
    now: float
    # The machines' kind_orders for this delay, when the caller keeps them (Algorithm 2's
    # plans); None: sorted when the bound is worked out.
    orders: tuple[KindOrder, ...] | None = None


@dataclass(frozen=True, slots=True)
class Queues:
    """Algorithm 1's output, flat: ``job[bounds[i]:bounds[i+1]]`` are the job indices machine ``i``
    runs, in order, with their estimated ``start`` and ``finish``; and the matching's objective,
    the total completion time measured from arrival."""

    job: IntArray
    start: FloatArray
    finish: FloatArray
    bounds: IntArray
    total_completion_time: float

    def queue(self, machine: int) -> IntArray:
        return self.job[self.bounds[machine] : self.bounds[machine + 1]]

    def first_job(self, machine: int) -> int | None:
        """The job Algorithm 2 starts when ``machine`` frees up: its largest position."""
        begin, end = int(self.bounds[machine]), int(self.bounds[machine + 1])
        return int(self.job[begin]) if end > begin else None


@dataclass(frozen=True, slots=True)
class Fleet:
    """The machines of an instance in array form, reusable across solves with different jobs
    (Algorithm 2 re-solves for each user set with the same machines)."""

    machines: tuple[Machine, ...]
    kinds: tuple[str, ...]
    machine_kind: IntArray
    delay: FloatArray
    now: float
    position_of: Mapping[str, int]
    orders: tuple[KindOrder, ...] | None = None  # kind_orders of this delay, when kept (see Problem)

    def with_available(self, until: Mapping[int, float]) -> Fleet:
        """The same fleet with each machine ``position`` of ``until`` busy until its value."""
        delay = self.delay.copy()
        for position, end in until.items():
            delay[position] = max(end - self.now, 0.0)
        return Fleet(
            machines=self.machines,
            kinds=self.kinds,
            machine_kind=self.machine_kind,
            delay=delay,
            now=self.now,
            position_of=self.position_of,
        )


def fleet(*, machines: Sequence[Machine], now: float, busy_until: Mapping[str, float] | None = None) -> Fleet:
    """Validate machines and their availability; :class:`InvalidInstance` names a bad entry."""
    kinds = tuple(sorted({machine.kind for machine in machines}))
    kind_index = {kind: index for index, kind in enumerate(kinds)}
    position_of = {machine.name: position for position, machine in enumerate(machines)}
    busy = busy_until or {}
    ends = np.fromiter(busy.values(), dtype=np.float64, count=len(busy))
    if not (position_of.keys() >= busy.keys() and np.isfinite(ends).all()):  # checked in C; named below
        for name, until in busy.items():
            if name not in position_of:
                raise InvalidInstance(f"unknown machine {name!r}", field=f"busy_until.{name}")
            if not math.isfinite(until):
                raise InvalidInstance(f"must be a finite time, got {until!r}", field=f"busy_until.{name}")
    machine_kind = np.array([kind_index[machine.kind] for machine in machines], dtype=np.int64)
    # Measured from now, and never negative: a machine that "freed up" in the past is free now.
    delay = np.zeros(len(machines), dtype=np.float64)
    if busy:
        rows = np.fromiter(map(position_of.__getitem__, busy), dtype=np.int64, count=len(busy))
        delay[rows] = np.maximum(ends - now, 0.0)
    return Fleet(
        machines=tuple(machines),
        kinds=kinds,
        machine_kind=machine_kind,
        delay=delay,
        now=now,
        position_of=position_of,
    )


def prepare_on(machines: Fleet, jobs: Sequence[Job]) -> Problem:
    """Validate ``jobs`` against ``machines`` and make the instance's arrays.

    Raises :class:`InvalidInstance` for a job that has not arrived by ``now`` or a negative or
    non-finite processing time, and :class:`InfeasibleInstance` for a job no machine can run.
    """
    now = machines.now
    times = kind_times(jobs, machines.kinds)
    # One pass in C over every value; the loop below only runs to name what is wrong.
    values = np.fromiter(chain.from_iterable(map(methodcaller("values"), map(attrgetter("processing_time"), jobs))), dtype=np.float64)
    arrivals = np.fromiter(map(attrgetter("arrival"), jobs), dtype=np.float64, count=len(jobs))
    valid = bool(np.isfinite(values).all() and (values >= 0).all() and (arrivals <= now).all())
    if not (valid and np.isfinite(times).any(axis=1).all()):
        _explain_invalid(machines, jobs)
    return Problem(
        jobs=tuple(jobs),
        machines=machines.machines,
        kinds=machines.kinds,
        times=times,
        machine_kind=machines.machine_kind,
        delay=machines.delay,
        now=now,
        orders=machines.orders,
    )


class JobsOfRows(Sequence[Job]):
    """``jobs[rows[i]]`` for each ``i``, looked up when read. A plan of Algorithm 2 is matched
    on its rows' times and reads none of its jobs (its queues are rows of every waiting job):
    a tuple of ~900 jobs made per plan cost ~0.07 ms (the plan's solve ~0.5)."""

    __slots__ = ("_jobs", "_rows")

    def __init__(self, jobs: Sequence[Job], rows: IntArray) -> None:
        self._jobs = jobs
        self._rows = rows

    def __len__(self) -> int:
        return int(self._rows.shape[0])

    @overload
    def __getitem__(self, index: int) -> Job: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Job]: ...

    def __getitem__(self, index: int | slice) -> Job | Sequence[Job]:
        if isinstance(index, slice):
            return tuple(map(self._jobs.__getitem__, self._rows[index].tolist()))
        return self._jobs[int(self._rows[index])]  # an index out of range raises IndexError, as a tuple's

    def __iter__(self) -> Iterator[Job]:
        return map(self._jobs.__getitem__, self._rows.tolist())  # Python ints: no NumPy scalar a job


def rows_on(problem: Problem, rows: Sequence[int] | IntArray, machines: Fleet) -> Problem:
    """Some of ``problem``'s jobs (``rows``, in that order), already validated, on ``machines``
    (the same machines, their availability changed): :func:`prepare_on` without making the
    jobs' arrays again (admission's queue after Algorithm 2's starts, Algorithm 2's plans)."""
    taken = np.array(rows, dtype=np.int64)  # a copy: the jobs' view reads it later
    return Problem(
        jobs=JobsOfRows(problem.jobs, taken),
        machines=machines.machines,
        kinds=machines.kinds,
        times=problem.times[taken],
        machine_kind=machines.machine_kind,
        delay=machines.delay,
        now=machines.now,
        orders=machines.orders,
    )


def _explain_invalid(machines: Fleet, jobs: Sequence[Job]) -> None:
    """The first thing wrong with ``jobs``, in job order, raised with its field."""
    present = set(machines.kinds)
    now = machines.now
    for index, job in enumerate(jobs):
        if job.arrival > now:
            raise InvalidInstance(
                f"job {job.name!r} arrives at {job.arrival}, after now ({now}); only jobs that "
                "have arrived can be matched",
                field=f"jobs[{index}].arrival",
            )
        for kind, value in job.processing_time.items():
            if not (math.isfinite(value) and value >= 0):
                raise InvalidInstance(
                    f"must be a finite number >= 0, got {value!r}",
                    field=f"jobs[{index}].processing_time.{kind}",
                )
        if present.isdisjoint(job.processing_time):
            raise InfeasibleInstance(job.name)


def prepare(
    *,
    jobs: Sequence[Job],
    machines: Sequence[Machine],
    now: float,
    busy_until: Mapping[str, float] | None = None,
) -> Problem:
    """Validate an instance and turn it into arrays (:func:`fleet`, then :func:`prepare_on`)."""
    return prepare_on(fleet(machines=machines, now=now, busy_until=busy_until), jobs)


@dataclass(frozen=True, slots=True)
class Matrix:
    """What the solver matches jobs against: Q over every kept slot, or — when the kept slots
    fall into few classes of identical columns — Q folded to one column per class."""

    slots: Slots
    classes: SlotClasses | None
    full_cost: FloatArray | None  # Q over every kept slot; None when folded
    groups: Groups | None = None  # the classes' groups, when folded

    @property
    def method(self) -> str:
        return "scipy" if self.classes is None else "classes"

    @property
    def cost(self) -> FloatArray:
        """Q over every kept slot, or folded to one column per class. The folded solve never
        needs the folded matrix written out (jobs × classes; as large as Q when every busy
        machine frees at its own time): its groups stand for it."""
        if self.full_cost is not None:
            return self.full_cost
        assert self.groups is not None
        return self.groups.group_cost[:, self.groups.group] + self.groups.offset


def build(problem: Problem, *, bounded: bool = True, method: Method = "auto") -> Matrix:
    """The slots and the cost matrix to match on.

    ``bounded=False`` builds all ``n`` positions on every machine, exactly as the paper does (and
    never folds them): the reference the bound is tested against, far slower. ``method``
    forces the full matrix (``"scipy"``) or the folded one (``"classes"``); ``"auto"`` folds
    when there are few classes.
    """
    if not bounded:
        slots, cost = cost_matrix(problem, bounded=False)
        return Matrix(slots=slots, classes=None, full_cost=cost)
    return _matrix_on(problem, _bounded_slots(problem), method=method)


def _matrix_on(problem: Problem, slots: Slots, *, method: Method = "auto") -> Matrix:
    """:func:`build`'s matrix on the bounded ``slots``."""
    classes = slot_classes(slots, machine_kind=problem.machine_kind, delay=problem.delay)
    if method == "scipy" or (method == "auto" and classes.count > FOLD_WHEN_CLASSES_PER_SLOT * slots.count):
        return Matrix(slots=slots, classes=None, full_cost=slot_cost_matrix(times=problem.times, slots=slots, delay=problem.delay))
    return Matrix(slots=slots, classes=classes, full_cost=None, groups=_groups(problem, slots, classes))


def match(problem: Problem, matrix: Matrix, *, method: Method = "auto") -> tuple[IntArray, IntArray]:
    """An optimal matching: job rows and the slot (column of the full Q) each one takes.
    ``method="classes"`` lets the folded solve take as many steps as it needs (for tests)."""
    jobs = len(problem.jobs)
    if matrix.classes is not None:
        classes, groups = matrix.classes, matrix.groups
        assert groups is not None
        count = groups.group_cost.shape[1]
        # The folded solve's last phase costs about (20,000 + n·G + G²) element operations per
        # step over its G groups (the first term is Python's fixed cost per step); scipy ~50 per
        # entry of the full Q once many columns tie. Fold only while that is cheaper.
        per_step = 20_000 + jobs * count + count**2
        budget = jobs if method == "classes" else 50 * jobs * matrix.slots.count // per_step
        assign = assign_to_classes(None, classes.capacity, max_augmentations=budget, groups=groups)
        if assign is not None:
            # Within a class the slots are identical: hand them out in slot order.
            return _slots_to_rows(assign, classes)
        cost = slot_cost_matrix(times=problem.times, slots=matrix.slots, delay=problem.delay)
    else:
        cost = matrix.cost
    rows, columns = linear_sum_assignment(cost)
    return rows.astype(np.int64), columns.astype(np.int64)


def _hinted(problem: Problem, matrix: Matrix, hint: Hint) -> tuple[IntArray, IntArray] | None:
    """:func:`match`'s answer when ``hint`` is certainly the only optimal matching of the
    folded problem (its groups are kind × position, see :func:`_groups`); else None."""
    classes, groups = matrix.classes, matrix.groups
    if classes is None or groups is None or hint.kind.shape[0] != len(problem.jobs):
        return None
    first = classes.first_slot
    position = matrix.slots.position[first]
    span = int(position.max(initial=0)) + 1
    keys = np.unique(problem.machine_kind[matrix.slots.machine[first]] * span + position)  # group g is keys[g], as _groups has it
    if bool((hint.position < 1).any()) or bool((hint.position >= span).any()):
        return None
    wanted = hint.kind * span + hint.position
    group = np.searchsorted(keys, wanted)
    if bool((group >= keys.shape[0]).any()) or bool((keys[np.minimum(group, keys.shape[0] - 1)] != wanted).any()):
        return None
    assign = certified(groups, classes.capacity, group.astype(np.int64))
    return None if assign is None else _slots_to_rows(assign, classes)


def _slots_to_rows(assign: IntArray, classes: SlotClasses) -> tuple[IntArray, IntArray]:
    """Each class's rows take its slots in slot order (a class at position k then fills the
    same machines as position k-1 before it: no gaps)."""
    rows = np.argsort(assign, kind="stable")
    rank = np.arange(rows.shape[0]) - np.searchsorted(assign[rows], assign[rows], side="left")
    return rows.astype(np.int64), classes.slots_by_class[classes.class_start[assign[rows]] + rank]


def _groups(problem: Problem, slots: Slots, classes: SlotClasses) -> Groups:
    """The classes of one kind and one position differ only by their machines' wait (the same
    for every job): one group each, priced together by the folded solve."""
    first = classes.first_slot
    machine = slots.machine[first]
    kind = problem.machine_kind[machine]
    position = slots.position[first]
    # One integer per (kind, position), ordered as the pairs are (np.unique over rows is slow).
    span = int(position.max(initial=0)) + 1
    keys, group = distinct(kind * span + position)
    group_cost = problem.times[:, keys // span] * (keys % span)
    return Groups(group=group, offset=problem.delay[machine], group_cost=group_cost)


@dataclass(frozen=True, slots=True)
class Hint:
    """A matching that may well be the optimum: each job's kind (an index of the problem's
    ``kinds``) and position from the end (admission's queue: Algorithm 2's matching less the
    jobs it started, which stays optimal unless the grid moved a started machine's ω)."""

    kind: IntArray
    position: IntArray


def solve(problem: Problem, *, bounded: bool = True, method: Method = "auto", hint: Hint | None = None) -> Queues:
    """Match jobs to slots at minimum cost and convert the matching to queues (Algorithm 1).
    ``bounded`` and ``method``: see :func:`build`. ``hint``: taken without solving when it is
    certainly the only optimal matching (:func:`~scheduler.matching.transport.certified`), so
    the queues are the ones solving gives; else solved as without it."""
    if not problem.jobs:
        return Queues(
            job=np.zeros(0, dtype=np.int64),
            start=np.zeros(0, dtype=np.float64),
            finish=np.zeros(0, dtype=np.float64),
            bounds=np.zeros(len(problem.machines) + 1, dtype=np.int64),
            total_completion_time=0.0,
        )
    uncontended = _uncontended(problem) if method == "auto" else None
    if uncontended is not None:
        rows, machine = uncontended
        return _queues(problem, rows=rows, machine=machine, position=np.ones(rows.shape[0], dtype=np.int64))
    rows, machine, position = _solved(problem, bounded=bounded, method=method, hint=hint)
    return _queues(problem, rows=rows, machine=machine, position=position)


def _solved(problem: Problem, *, bounded: bool = True, method: Method = "auto", hint: Hint | None = None) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`solve`'s canonical matching of a problem where jobs contend: each row's machine and position."""
    return _matched(problem, bounded=bounded, method=method, hint=hint)[0]


def _matched(problem: Problem, *, bounded: bool = True, method: Method = "auto", hint: Hint | None = None,
             certify: bool = False, folded: _Fold | None = None) -> tuple[tuple[IntArray, IntArray, IntArray], Callable[[], Matrix], IntArray, IntArray, bool | None]:
    """:func:`_solved`'s matching, with the matrix it was found on (made when asked for) and,
    before :func:`canonical`, each row and its column of the matrix. Without a hint, the folded
    matrix and its matching are worked out in one call of ``_transport.c`` where it was built
    (:func:`~scheduler.matching.transport.folded_match`: the same rows and slots, from the
    machines' kind orders, sorted here when the problem has none), else as :func:`build` and
    :func:`match` do. Last, with ``certify``, whether the matching is certainly the only optimum
    over the groups (:func:`_only_optimum`'s answer) where that call worked it out too; None
    where it did not (the caller asks :func:`_only_optimum`). ``folded``: :func:`_fold`'s
    answer for ``problem`` made already (with ``certify``), not made again."""
    if bounded and method == "auto" and hint is None and problem.jobs and can_fold():
        fold = folded if folded is not None else _fold(problem, certify=certify)
        if fold.rows is not None and fold.columns is not None:
            problem, slots, rows, columns = fold.problem, fold.slots, fold.rows, fold.columns
            return (canonical(problem, rows=rows, machine=slots.machine[columns], position=slots.position[columns]),
                    partial(_matrix_on, problem, slots), rows, columns, fold.certain)
        matrix = _matrix_on(fold.problem, fold.slots)
        problem = fold.problem
    else:
        matrix = build(problem, bounded=bounded, method=method)
    hinted = _hinted(problem, matrix, hint) if hint is not None and bounded and method == "auto" else None
    rows, columns = hinted if hinted is not None else match(problem, matrix, method=method)
    slots = matrix.slots
    return canonical(problem, rows=rows, machine=slots.machine[columns], position=slots.position[columns]), lambda: matrix, rows, columns, None


@dataclass(frozen=True, slots=True)
class _Fold:
    """What :func:`_fold` made: the problem with its kind orders, its bounded slots, the kind
    orders laid end to end (``members``, ``omega``), and where the fold's call answered, each
    matched row and its slot (``rows``, ``columns``; None where NumPy's way runs) and the
    certificate (None: not worked out)."""

    problem: Problem
    slots: Slots
    members: IntArray
    omega: FloatArray
    rows: IntArray | None
    columns: IntArray | None
    certain: bool | None


def _fold(problem: Problem, *, certify: bool) -> _Fold:
    """The bounded slots of ``problem`` and the fold's call on them (:func:`~scheduler.
    matching.transport.folded_match`), the kind orders sorted first where the problem has none."""
    if problem.orders is None:
        # Sorted once for the bound, the fold and canonical's names (each reads them as it
        # would sort them, tests/matching/test_matching_kind_orders.py).
        problem = replace(problem, orders=kind_orders(machine_kind=problem.machine_kind, available=problem.delay,
                                                      kind_count=len(problem.kinds)))
    assert problem.orders is not None
    slots = _bounded_slots(problem)
    members, omega = _laid_end_to_end(problem.orders)
    certain = np.full(1, -1, dtype=np.int64) if certify else None
    folded = folded_match(slot_machine=slots.machine, slot_position=slots.position, machine_kind=problem.machine_kind,
                          delay=problem.delay, times=problem.times, members=members, omega=omega, certain=certain)
    rows, columns = folded if folded is not None else (None, None)
    return _Fold(problem, slots, members, omega, rows, columns, None if certain is None or certain[0] < 0 else bool(certain[0]))


def _laid_end_to_end(orders: tuple[KindOrder, ...]) -> tuple[IntArray, FloatArray]:
    """Every kind's order's machines and their ω, kind after kind."""
    if not orders:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    return np.concatenate([order.members for order in orders]), np.concatenate([order.omega for order in orders])


def contended_plan(problem: Problem) -> tuple[IntArray, IntArray, Callable[[], bool]]:
    """:func:`solve`'s queues (``job``, ``bounds``) without their times, for a problem that
    ``_uncontended`` declines (jobs that contend; the caller has asked): what Algorithm 2's
    plans read, without the starts, finishes and total it does not. And a test, for the caller
    to ask if it needs to, of whether that matching is certainly the only optimal one at the
    level of kinds and positions (:func:`~scheduler.matching.transport.certified` over the
    folded problem it was found on; False when that is not certain): every optimal matching
    then puts as many jobs on each (kind, position), so on each group of machines of one kind
    and one wait. Worked out in the fold's C call where it was built (``fold_certified``: a few
    microseconds there, where the folded matrix made again in NumPy for it cost ~0.3 ms a plan
    of ~850 rows), else when asked."""
    folded = _fold(problem, certify=True) if problem.jobs and can_fold() else None
    if folded is not None and plans is not None:
        planned = _planned_in_c(folded, plans)
        if planned is not None:
            return planned
    (rows, machine, position), matrix, matched_rows, columns, certain = _matched(problem, certify=True, folded=folded)
    order = np.lexsort((-position, machine))
    bounds = np.zeros(len(problem.machines) + 1, dtype=np.int64)
    np.cumsum(np.bincount(machine, minlength=len(problem.machines)), out=bounds[1:])
    return rows[order], bounds, partial(_only_optimum, matrix, matched_rows, columns) if certain is None else partial(_known, certain)


def contended_plan_of(problem: Problem, rows: IntArray, machines: Fleet) -> tuple[IntArray, IntArray, Callable[[], bool]] | None:
    """:func:`contended_plan` of :func:`rows_on`'s problem (``rows`` of ``problem`` on
    ``machines``) without making it: every step from the rows to the queues in one call of
    ``_transport.c`` where it was built (:func:`~scheduler.matching.transport.planned`), the
    queued jobs as indices of ``rows``; None where it does not answer (no kind orders kept, a
    buffer not its kind, a step leaving its way), and the caller takes the steps one by one."""
    if machines.orders is None or not rows.shape[0] or not can_fold():
        return None
    answer = planned(times=problem.times, rows=rows, machine_kind=machines.machine_kind, delay=machines.delay, orders=machines.orders)
    if answer is None:
        return None
    queued, bounds, certain = answer
    return queued, bounds, partial(_known, certain)


def _planned_in_c(fold: _Fold, extension: ModuleType) -> tuple[IntArray, IntArray, Callable[[], bool]] | None:
    """:func:`contended_plan`'s answer from the fold's call (``fold``, :func:`_fold`'s) with
    everything after it in one call of ``_solve.c`` (``canonical_plan``: each row's slot,
    :func:`canonical`'s names and levels, the queues by machine then position, the same
    integers and sums as those NumPy steps and calls); None where the fold's call did not
    answer or the kind orders are not the machines' (then :func:`_matched`'s steps run on it)."""
    problem, slots, rows, columns = fold.problem, fold.slots, fold.rows, fold.columns
    assert problem.orders is not None
    if rows is None or columns is None or len(problem.orders) != problem.times.shape[1]:
        return None
    kind_bounds = np.zeros(len(problem.orders) + 1, dtype=np.int64)
    np.cumsum([order.members.shape[0] for order in problem.orders], out=kind_bounds[1:])
    bounds = np.empty(len(problem.machines) + 1, dtype=np.int64)
    queued = np.empty(rows.shape[0], dtype=np.int64)
    if not extension.canonical_plan(rows, columns, slots.machine, slots.position, fold.members, fold.omega, kind_bounds, problem.machine_kind,
                                    problem.delay, problem.times, bounds, queued):
        return None
    certain = fold.certain
    return queued, bounds, partial(_only_optimum, partial(_matrix_on, problem, slots), rows, columns) if certain is None else partial(_known, certain)


def _known(answer: bool) -> bool:
    """A test answered already (the fold's certificate)."""
    return answer


def _only_optimum(matrix_of: Callable[[], Matrix], rows: IntArray, columns: IntArray) -> bool:
    """Whether matching each of ``rows`` to its column of the matrix (``matrix_of()``) is
    certainly the only optimal matching of the folded problem's rows to its groups (kind ×
    position)."""
    matrix = matrix_of()
    classes, groups = matrix.classes, matrix.groups
    if classes is None or groups is None:
        return False
    class_of = np.empty(matrix.slots.count, dtype=np.int64)
    class_of[classes.slots_by_class] = np.repeat(np.arange(classes.count, dtype=np.int64), classes.capacity)
    group = np.empty(rows.shape[0], dtype=np.int64)
    group[rows] = groups.group[class_of[columns]]
    return only_optimum(groups, classes.capacity, group)


def _uncontended(problem: Problem) -> tuple[IntArray, IntArray] | None:
    """The canonical optimal matching when no two jobs contend, without solving: each job's
    rows and machines, every one first on its machine; None when they may contend.

    A job costs at least its shortest time wherever it runs (``k·p + ω - now`` with ``k >= 1``
    and ``ω >= now``). When every job has one strictly fastest kind, at a time above zero, and
    each kind has a free machine for every job whose fastest kind it is, the matching that
    starts each job now on a free machine of that kind meets that bound, and every optimal
    matching does the same (a job anywhere else costs more). What :func:`canonical` fixes is
    then which free machines: of each kind the first listed, taken by the jobs in row order.
    Algorithm 2 at small α solves for a few users' jobs on a cluster with many free machines
    after a burst again and again; this is that case.
    """
    times = problem.times
    count = times.shape[0]
    free = np.flatnonzero(problem.delay == 0)
    if free.shape[0] < count:
        return None  # a kind would need more free machines than it has (the test below, summed)
    fastest = np.argmin(times, axis=1)
    best = times[np.arange(count), fastest]
    if not (best > 0).all() or (np.count_nonzero(times == best[:, np.newaxis], axis=1) > 1).any():
        return None
    kind_count = len(problem.kinds)
    free_kind = problem.machine_kind[free]
    free_per_kind = np.bincount(free_kind, minlength=kind_count)
    if (np.bincount(fastest, minlength=kind_count) > free_per_kind).any():
        return None
    free_by_kind = free[np.argsort(free_kind, kind="stable")]  # by kind, then as listed
    first_of_kind = np.concatenate(([0], np.cumsum(free_per_kind)))
    rows = np.argsort(fastest, kind="stable")
    kinds = fastest[rows]
    rank = np.arange(count) - np.searchsorted(kinds, kinds, side="left")
    return rows.astype(np.int64), free_by_kind[first_of_kind[kinds] + rank].astype(np.int64)


def canonical(problem: Problem, *, rows: IntArray, machine: IntArray, position: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """One optimal matching fixed by the instance alone, whichever optimal one the solver found.

    Optimal matchings differ in ways that cost nothing: machines of one kind free at the same
    time are interchangeable, and two jobs at the same position on two machines of one kind
    can swap (``k·p₁ + ω_a + k·p₂ + ω_b`` either way), even when those machines free at
    different times. The first decides which machine a queue is named after; the second which
    of the two jobs starts first — a different decision for Algorithm 2. So: among
    interchangeable machines the longer queues go to the machines listed first; then, from the
    largest position down, the jobs of one (kind, position) in the order listed take its slots
    in the order they start (then machine order), a slot starting when the jobs ahead of it on
    its machine end. A slot's start does not move when Algorithm 2 starts the first job of its
    machine (ω grows by what the queue ahead shrinks by), so a matching kept after a start is
    still the canonical one. What is left (which jobs at which kind and position) is the same in
    every optimal matching unless two jobs' times tie.
    """
    kind = problem.machine_kind
    count = np.bincount(machine, minlength=kind.shape[0])
    if problem.orders is None:
        index = np.arange(kind.shape[0])
        by_index = np.lexsort((index, problem.delay, kind))
        by_queue = np.lexsort((index, -count, problem.delay, kind))
        label = np.empty_like(index)
        label[by_queue] = by_index  # same groups, same sizes: the k-th longest queue to the k-th listed
    else:
        label = _queue_names(problem.orders, kind=kind, delay=problem.delay, count=count)
    machine = label[machine]
    slot_kind = kind[machine]
    out_rows, out_machine = np.empty_like(rows), np.empty_like(machine)
    ready = problem.delay.copy()  # when each machine's slot at the current position starts
    if native is not None and _plain(rows, machine, position, slot_kind) and ready.dtype == np.float64 and problem.times.dtype == np.float64:
        # In C: the same levels, orders and sums (_solve.c).
        native.canonical_levels(rows, machine, position, slot_kind, ready, np.ascontiguousarray(problem.times), out_rows, out_machine)
        return out_rows, out_machine, position
    levels = np.argsort(-position, kind="stable")
    by_level = position[levels]
    cuts = [0, *((by_level[1:] != by_level[:-1]).nonzero()[0] + 1).tolist(), levels.shape[0]]
    # Each level's jobs by kind then row, for every level in one sort (the slots' order waits
    # for the levels above: when a slot starts).
    ordered = np.lexsort((rows, slot_kind, -position))
    for begin, end in zip(cuts[:-1], cuts[1:]):
        at, jobs = levels[begin:end], ordered[begin:end]
        slots = at[np.lexsort((machine[at], ready[machine[at]], slot_kind[at]))]
        out_rows[at], out_machine[at] = rows[jobs], machine[slots]
        ready[machine[slots]] += problem.times[rows[jobs], slot_kind[slots]]
    return out_rows, out_machine, position


def _plain(*arrays: IntArray) -> bool:
    """Whether the arrays are the extension's kind of buffer: int64, one contiguous row each."""
    return all(array.dtype == np.int64 and array.ndim == 1 and array.flags.c_contiguous for array in arrays)


def _plain_floats(*arrays: FloatArray) -> bool:
    """Whether the arrays are the extension's kind of buffer: float64, one contiguous row each."""
    return all(array.dtype == np.float64 and array.ndim == 1 and array.flags.c_contiguous for array in arrays)


def _queue_names(orders: tuple[KindOrder, ...], *, kind: IntArray, delay: FloatArray, count: IntArray) -> IntArray:
    """:func:`canonical`'s names of the machines with a queue (``count`` jobs each), read off
    the machines' kind orders instead of sorting every machine twice: among machines of one
    kind and wait, the queues by length (longest first, then as listed) take the machines as
    listed. Only the machines with a queue are renamed (the others keep their own index). In C
    where ``_solve.c`` was built (``queue_names``, a kind a call: each run of equal waits in the
    kind's order, its queues sorted as here), once it has checked each order against the
    machines; else, or where one does not hold, in NumPy."""
    label = np.arange(kind.shape[0])
    if names is not None and _plain(kind, count, label) and _plain_floats(delay, *(order.omega for order in orders)) and _plain(
            *(order.members for order in orders)):
        if all(names.queue_names(order.members, order.omega, index, kind, delay, count, label) for index, order in enumerate(orders)):
            return label
        label = np.arange(kind.shape[0])  # an order not the machines' (not met: orders are sorted from the waits)
    used = count.nonzero()[0]
    used_kind, used_wait = kind[used], delay[used]
    order = np.lexsort((-count[used], used_wait, used_kind))  # used ascending: then as listed
    queues, queue_kind, queue_wait = used[order], used_kind[order], used_wait[order]
    # Each queue's rank among the queues of its kind and wait.
    new_group = np.empty(order.shape[0], dtype=bool)
    new_group[:1] = True
    np.not_equal(queue_kind[1:], queue_kind[:-1], out=new_group[1:])
    new_group[1:] |= queue_wait[1:] != queue_wait[:-1]
    starts = new_group.nonzero()[0]
    rank = np.arange(order.shape[0]) - starts[new_group.cumsum() - 1]
    edges = queue_kind.searchsorted(np.arange(len(orders) + 1), side="left").tolist()
    for kind_order, begin, end in zip(orders, edges[:-1], edges[1:]):
        if begin < end:
            # The machines of the kind that wait as long, as listed, from the first such ω on.
            first = kind_order.omega.searchsorted(queue_wait[begin:end], side="left")
            label[queues[begin:end]] = kind_order.members[first + rank[begin:end]]
    return label


def cost_matrix(problem: Problem, *, bounded: bool = True) -> tuple[Slots, FloatArray]:
    """The slots kept (all ``n`` per machine when not ``bounded``) and the full Q over them."""
    if bounded:
        slots = _bounded_slots(problem)
    else:
        limits = all_positions(machine_count=len(problem.machines), job_count=len(problem.jobs))
        slots = slots_for(limits=limits, machine_kind=problem.machine_kind, kind_count=len(problem.kinds))
    return slots, slot_cost_matrix(times=problem.times, slots=slots, delay=problem.delay)


def _bounded_slots(problem: Problem) -> Slots:
    runnable, shortest = _per_kind(problem.times)
    limits = position_limits(machine_kind=problem.machine_kind, available=problem.delay, runnable_per_kind=runnable,
                             shortest_per_kind=shortest, orders=problem.orders)
    return slots_for(limits=limits, machine_kind=problem.machine_kind, kind_count=len(problem.kinds))


def _per_kind(times: FloatArray) -> tuple[IntArray, FloatArray]:
    """Per kind (column of ``times``): how many jobs can run on it (a finite time), and their
    shortest time there (0.0 where none can). One pass in C where ``_solve.c`` has it
    (``kind_stats``; a plan's ~900 rows: five NumPy reductions down its columns otherwise)."""
    if stats is not None and times.dtype == np.float64 and times.ndim == 2 and times.flags.c_contiguous:
        runnable, shortest = np.empty(times.shape[1], dtype=np.int64), np.empty(times.shape[1])
        stats.kind_stats(times, runnable, shortest)
        return runnable, shortest
    finite = np.isfinite(times)
    least = np.where(finite, times, np.inf).min(axis=0, initial=np.inf)
    return finite.sum(axis=0).astype(np.int64), np.where(np.isfinite(least), least, 0.0)


def _queues(problem: Problem, *, rows: IntArray, machine: IntArray, position: IntArray) -> Queues:
    # Algorithm 1: on each machine the job with the largest position-from-the-end runs first.
    # A gap in the positions (possible only where times tie at 0) just closes up.
    order = np.lexsort((-position, machine))
    jobs_sorted = rows[order]
    machines_sorted = machine[order]
    durations = problem.times[jobs_sorted, problem.machine_kind[machines_sorted]]
    machine_count = len(problem.machines)
    counts = np.bincount(machines_sorted, minlength=machine_count)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    running_total = np.cumsum(durations)
    before_machine = np.repeat(np.concatenate(([0.0], running_total))[bounds[:-1]], counts)
    available = problem.now + problem.delay[machines_sorted]
    finish = available + running_total - before_machine
    start = finish - durations
    arrival = np.fromiter(map(attrgetter("arrival"), problem.jobs), dtype=np.float64, count=len(problem.jobs))
    total = float(np.sum(finish) - np.sum(arrival[jobs_sorted]))
    return Queues(
        job=jobs_sorted,
        start=start,
        finish=finish,
        bounds=bounds.astype(np.int64),
        total_completion_time=total,
    )


def assignments(problem: Problem, queues: Queues) -> list[Assignment]:
    """Every job's machine, start and (estimated) finish, ordered by start then machine."""
    machine_of = np.repeat(np.arange(len(problem.machines)), np.diff(queues.bounds))
    result = [
        Assignment(
            job=problem.jobs[job],
            machine=problem.machines[machine],
            start=start,
            finish=finish,
        )
        for job, machine, start, finish in zip(
            queues.job.tolist(), machine_of.tolist(), queues.start.tolist(), queues.finish.tolist()
        )
    ]
    result.sort(key=lambda a: (a.start, a.machine.name, a.job.name))
    return result


def schedule(
    *,
    jobs: Sequence[Job],
    machines: Sequence[Machine],
    now: float = 0.0,
    busy_until: Mapping[str, float] | None = None,
    bounded: bool = True,
) -> list[Assignment]:
    """The optimal non-preemptive schedule of ``jobs`` (all arrived by ``now``) on ``machines``
    (Lemma 3.1, with §3.2's machine availability)."""
    problem = prepare(jobs=jobs, machines=machines, now=now, busy_until=busy_until)
    return assignments(problem, solve(problem, bounded=bounded))
