"""A contended plan after the fold's call in one C call (``_solve.c``'s ``canonical_plan``:
each row's slot, canonical's names and levels, the queues by machine then position) against
NumPy's steps, the reference (``canonical`` without the extension, then ``lexsort``): the same
queues for random matchings (optimal or not: none of those steps depends on it) of random
problems, ties everywhere in half of them and three kinds in a third; ``contended_plan`` with
and without it, the certificate included; and Algorithm 2's and admission's decisions. Then a
plan from its rows to its queues in one call (``_transport.c``'s ``contended_plan``: the rows'
times, the bound, its slots, the fold and the queues) against those steps one by one, on some
rows of random problems on machines whose waits move, and the decisions both ways.
"""

from __future__ import annotations

import importlib
import random
from dataclasses import replace

import numpy as np
import pytest

from allox_reference import random_instance
from scheduler.matching.positions import KindOrder, kind_orders
from scheduler.matching.solve import Problem, canonical, contended_plan, contended_plan_of, fleet, prepare, prepare_on, rows_on
from tests.matching.native_paths import assert_decisions_alike, both_ways
from tests.matching.test_matching_native_solve import random_columns

native = pytest.importorskip("scheduler.matching._solve", reason="built without the C extension: nothing to compare")
solve = importlib.import_module("scheduler.matching.solve")  # the module: the package's ``solve`` is its function
transport = importlib.import_module("scheduler.matching.transport")


def ordered(problem: Problem) -> Problem:
    """``problem`` with its machines' kind orders, as Algorithm 2 hands its plans over."""
    return replace(problem, orders=kind_orders(machine_kind=problem.machine_kind, available=problem.delay, kind_count=len(problem.kinds)))


def random_problem(index: int) -> Problem:
    """Whole-number times and waits in half (ties in every order canonical makes), three kinds in a third."""
    kinds = ("gpu", "cpu", "tpu") if index % 3 == 0 else ("gpu", "cpu")
    instance = random_instance(random.Random(8150 + index), max_jobs=40, max_machines=12, kinds=kinds, integer_times=index % 4 < 2, busy=True)
    return ordered(prepare(jobs=instance.jobs, machines=instance.machines, now=instance.now, busy_until=instance.busy_until))


def laid(orders: tuple[KindOrder, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    members, omega = solve._laid_end_to_end(orders)
    kind_bounds = np.zeros(len(orders) + 1, dtype=np.int64)
    np.cumsum([order.members.shape[0] for order in orders], out=kind_bounds[1:])
    return members, omega, kind_bounds


def test_the_plan_in_c_is_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8150)
    compared = 0
    for index in range(400):
        problem = random_problem(index)
        assert problem.orders is not None
        slots = solve._bounded_slots(problem)
        rows, columns = random_columns(problem, slots, rng)
        members, omega, kind_bounds = laid(problem.orders)
        bounds = np.full(len(problem.machines) + 1, -7, dtype=np.int64)
        queued = np.full(rows.shape[0], -7, dtype=np.int64)
        assert native.canonical_plan(
            rows, columns, slots.machine, slots.position, members, omega, kind_bounds, problem.machine_kind, problem.delay, problem.times, bounds, queued
        )
        with monkeypatch.context() as numpy_only:
            numpy_only.setattr(solve, "native", None)
            numpy_only.setattr(solve, "names", None)
            out_rows, machine, position = canonical(problem, rows=rows, machine=slots.machine[columns], position=slots.position[columns])
        order = np.lexsort((-position, machine))
        expected_bounds = np.zeros(len(problem.machines) + 1, dtype=np.int64)
        np.cumsum(np.bincount(machine, minlength=len(problem.machines)), out=expected_bounds[1:])
        assert np.array_equal(queued, out_rows[order]) and np.array_equal(bounds, expected_bounds)
        compared += rows.shape[0] > 1
    assert compared > 300


def test_contended_plans_are_the_same_with_and_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for index in range(300):
        problem = random_problem(index)
        (queued, bounds, unique), (queued_numpy, bounds_numpy, unique_numpy) = both_ways(lambda: contended_plan(problem), monkeypatch, solve, attribute="plans")
        assert np.array_equal(queued, queued_numpy) and np.array_equal(bounds, bounds_numpy)
        assert unique() == unique_numpy()


def test_a_kind_order_not_the_machines_is_declined_and_numpy_plans_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = random_problem(4)
    assert problem.orders is not None
    slots = solve._bounded_slots(problem)
    rows, columns = random_columns(problem, slots, np.random.default_rng(1))
    members, omega, kind_bounds = laid(problem.orders)
    wrong = omega.copy()
    wrong[0] += 1.0  # no longer its machine's wait
    bounds, queued = np.empty(len(problem.machines) + 1, dtype=np.int64), np.empty(rows.shape[0], dtype=np.int64)
    assert not native.canonical_plan(
        rows, columns, slots.machine, slots.position, members, wrong, kind_bounds, problem.machine_kind, problem.delay, problem.times, bounds, queued
    )
    # contended_plan then takes NumPy's steps: the plan solving without the extension gives.
    broken = (replace(problem.orders[0], omega=problem.orders[0].omega + 1.0), *problem.orders[1:])
    off = replace(problem, orders=broken)
    with monkeypatch.context() as numpy_only:
        numpy_only.setattr(solve, "plans", None)
        queued_numpy, bounds_numpy, _ = contended_plan(off)
    queued_c, bounds_c, _ = contended_plan(off)
    assert np.array_equal(queued_c, queued_numpy) and np.array_equal(bounds_c, bounds_numpy)


def test_bad_buffers_are_refused_by_name() -> None:
    one, ints = np.zeros(1, dtype=np.int64), np.zeros(2, dtype=np.int64)
    with pytest.raises(TypeError, match="times"):
        native.canonical_plan(one, one, one, one, one, np.zeros(1), ints, one, np.zeros(1), np.zeros(1), ints.copy(), one.copy())
    with pytest.raises(TypeError, match="omega"):  # the other byte order: refused, not misread
        native.canonical_plan(one, one, one, one, one, np.zeros(1, dtype=">f8"), ints, one, np.zeros(1), np.zeros((1, 1)), ints.copy(), one.copy())
    with pytest.raises(ValueError, match="per matched row"):  # a row past the times
        native.canonical_plan(one + 5, one, one, one + 1, one, np.zeros(1), ints + [0, 1], one, np.zeros(1), np.zeros((1, 1)), ints.copy(), one.copy())
    with pytest.raises(ValueError, match="per matched row"):  # a slot past the slots
        native.canonical_plan(one, one + 1, one, one + 1, one, np.zeros(1), ints + [0, 1], one, np.zeros(1), np.zeros((1, 1)), ints.copy(), one.copy())
    with pytest.raises(ValueError, match="shares memory"):
        queued = one.copy()
        native.canonical_plan(queued, one, one, one + 1, one, np.zeros(1), ints + [0, 1], one, np.zeros(1), np.zeros((1, 1)), ints.copy(), queued)


def test_algorithm_2_and_admission_decide_the_same_with_the_plan_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    assert solve.plans is not None, "the extension was built from a _solve.c without canonical_plan: rebuild it"
    assert_decisions_alike(random.Random(8151), monkeypatch, solve, attribute="plans")


def test_the_plan_in_one_call_is_the_steps_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8152)
    answered = 0
    for index in range(300):
        kinds = ("gpu", "cpu", "tpu") if index % 3 == 0 else ("gpu", "cpu")
        instance = random_instance(random.Random(8152 + index), max_jobs=160, max_machines=40, kinds=kinds, integer_times=index % 4 < 2, busy=True)
        machines = fleet(machines=instance.machines, now=instance.now, busy_until=instance.busy_until)
        every_job = prepare_on(machines, instance.jobs)
        # Some machines' waits moved, as Algorithm 2's starts move them; the orders sorted from them.
        delay = machines.delay.copy()
        moved = rng.random(delay.shape[0]) < 0.3
        delay[moved] += rng.integers(0, 4, int(moved.sum())) if index % 2 else rng.uniform(0, 50, int(moved.sum()))
        orders = kind_orders(machine_kind=machines.machine_kind, available=delay, kind_count=len(machines.kinds))
        machines = replace(machines, delay=delay, orders=orders)
        rows = np.flatnonzero(rng.random(len(every_job.jobs)) < 0.7).astype(np.int64)
        if not rows.shape[0]:
            continue
        in_one_call = contended_plan_of(every_job, rows, machines)
        queued, bounds, unique = contended_plan(rows_on(every_job, rows, machines))
        if in_one_call is not None:
            answered += 1
            assert np.array_equal(in_one_call[0], queued) and np.array_equal(in_one_call[1], bounds)
            assert in_one_call[2]() == unique()
        with monkeypatch.context() as steps:
            steps.setattr(transport, "planning", None)
            assert contended_plan_of(every_job, rows, machines) is None
    # The fold declines about two thirds of these (NumPy's way then runs, and the one call
    # declines too): a third is enough to compare.
    assert answered > 90


def test_the_plan_in_one_call_refuses_bad_buffers_by_name() -> None:
    native_transport = transport._built
    one, ints, times = np.zeros(1, dtype=np.int64), np.array([0, 1], dtype=np.int64), np.ones((1, 1))
    arguments = [times, one, one, np.zeros(1), one, np.zeros(1), one, one + 1, ints, ints.copy(), one.copy(), np.full(1, -1, dtype=np.int64)]
    assert native_transport.contended_plan(*arguments) in (True, False)
    with pytest.raises(TypeError, match="times"):
        native_transport.contended_plan(np.ones(1), *arguments[1:])
    with pytest.raises(ValueError, match="rows of times"):  # a row past the times
        native_transport.contended_plan(times, one + 3, *arguments[2:])
    with pytest.raises(ValueError, match="rows of times"):  # a member past the machines
        native_transport.contended_plan(*arguments[:4], one + 5, *arguments[5:])
    with pytest.raises(ValueError, match="shares memory"):
        queued = one.copy()
        native_transport.contended_plan(times, queued, *arguments[2:10], queued, arguments[11])


def test_algorithm_2_and_admission_decide_the_same_with_the_plan_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    assert transport.planning is not None, "the extension was built from a _transport.c without contended_plan: rebuild it"
    assert_decisions_alike(random.Random(8153), monkeypatch, transport, attribute="planning")
