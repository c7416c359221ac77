"""A plan's folded matrix and its matching in one call of ``_transport.c`` (``fold_match``,
``transport.folded_match``) against NumPy's steps, the reference: ``slot_classes``,
``_groups``, ``assign_to_classes`` and ``_slots_to_rows``, each with the C phases in use and
without them.

The call must give the very rows and slots NumPy's steps give, ties included (Algorithm 2
starts the job a plan puts first): random problems with busy machines (whole-number times and
waits in half of them: ties everywhere), many jobs on few machines (phase 2's prices and phase
3's paths), jobs that take no time, a kind no job can run; then Algorithm 2's starts and
admission's decisions with the call and without it. Kind orders that are not the waits', and
an extension built from an older ``_transport.c`` (without the call), leave it to NumPy.
"""

from __future__ import annotations

import importlib
import random
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from scheduler.matching import transport
from scheduler.matching.errors import InfeasibleInstance
from scheduler.matching.model import Job, Machine
from scheduler.matching.positions import kind_orders
from scheduler.matching.solve import Problem, _bounded_slots, _matrix_on, _only_optimum, build, contended_plan, match, prepare
from scheduler.matching.transport import _units, folded_match
from tests.matching.native_paths import assert_decisions_alike

solve = importlib.import_module("scheduler.matching.solve")  # the module: the package's ``solve`` is its function
native = pytest.importorskip("scheduler.matching._transport", reason="built without the C extension: nothing to compare")


def problem_with_orders(rng: random.Random) -> Problem:
    """Jobs on a few GPUs and CPU slots, some busy, with the machines' kind orders (drawn again
    while a job has no machine of its kinds)."""
    while True:
        try:
            return _drawn(rng)
        except InfeasibleInstance:
            continue


def _drawn(rng: random.Random) -> Problem:
    whole = rng.random() < 0.5
    machines = [Machine(name=f"m{i}", kind=rng.choice(["cpu", "gpu", "gpu"])) for i in range(rng.randint(1, 16))]
    busy = {m.name: float(rng.choice([0, 60, 60, 120, 300])) if whole else rng.uniform(0, 400) for m in machines if rng.random() < 0.6}
    jobs = []
    for index in range(rng.randint(1, rng.choice([12, 60]))):
        gpu = float(rng.randint(1, 6) * 60) if whole else rng.uniform(30, 600)
        times = {"gpu": gpu, "cpu": gpu * (rng.randint(2, 4) if whole else rng.uniform(1.5, 6))}
        if rng.random() < 0.05:
            times[rng.choice(["gpu", "cpu"])] = 0.0
        if rng.random() < 0.1:
            del times[rng.choice(["gpu", "cpu"])]
        if rng.random() < 0.03:
            times = {"tpu": 60.0, **times}  # a kind no machine has
        jobs.append(Job(name=f"j{index}", user="u", arrival=0.0, processing_time=times))
    problem = prepare(jobs=jobs, machines=machines, now=0.0, busy_until=busy)
    return replace(problem, orders=kind_orders(machine_kind=problem.machine_kind, available=problem.delay, kind_count=len(problem.kinds)))


def folded(problem: Problem, *, omega_shift: float = 0.0) -> tuple[np.ndarray, np.ndarray] | None:
    assert problem.orders is not None
    slots = _bounded_slots(problem)
    return folded_match(slot_machine=slots.machine, slot_position=slots.position, machine_kind=problem.machine_kind, delay=problem.delay,
                        times=problem.times, members=np.concatenate([o.members for o in problem.orders]),
                        omega=np.concatenate([o.omega for o in problem.orders]) + omega_shift)


@pytest.mark.parametrize("seed", range(4))
def test_the_call_gives_the_rows_and_slots_numpys_steps_give(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(9600 + seed)
    taken = declined = 0
    for _ in range(400):
        problem = problem_with_orders(rng)
        got = folded(problem)
        matrix = build(problem)
        if got is None:
            # Only where the phases in C would not answer either: over match's budget for phase
            # 3 (scipy then) or declined (NumPy's phases then).
            assert matrix.classes is not None and matrix.groups is not None
            jobs, groups = len(problem.jobs), matrix.groups.group_cost.shape[1]
            budget = 50 * jobs * matrix.slots.count // (20_000 + jobs * groups + groups**2)
            found = _units(matrix.groups, matrix.classes.capacity)
            status = native.solve_groups(np.ascontiguousarray(matrix.groups.group_cost[:, found.ids]), found.flat, found.bounds,
                                         np.empty(jobs, dtype=np.int64), budget)
            assert status != 0
            declined += 1
            continue
        taken += 1
        expected = match(problem, matrix)
        with monkeypatch.context() as patched:
            patched.setattr(transport, "native", None)  # the phases in NumPy too
            in_numpy = match(problem, build(problem))
        for mine, theirs, numpys in zip(got, expected, in_numpy):
            np.testing.assert_array_equal(mine, theirs)
            np.testing.assert_array_equal(mine, numpys)
    assert taken > 100 and declined > 0  # the call answered, and declined where NumPy's way goes to scipy


@pytest.mark.parametrize("seed", range(3))
def test_the_calls_certificate_is_the_one_numpy_gives_from_the_folded_matrix(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``fold_certified``'s answer (whether the matching is certainly the only optimum over the
    groups) is ``solve._only_optimum``'s on the folded matrix built in NumPy, with the
    certificate's test in C and in NumPy, and its rows and slots are ``fold_match``'s."""
    rng = random.Random(9700 + seed)
    answers = {True: 0, False: 0}
    for _ in range(300):
        problem = problem_with_orders(rng)
        assert problem.orders is not None
        slots = _bounded_slots(problem)
        members, omega = np.concatenate([o.members for o in problem.orders]), np.concatenate([o.omega for o in problem.orders])
        certain = np.full(1, -7, dtype=np.int64)
        got = folded_match(slot_machine=slots.machine, slot_position=slots.position, machine_kind=problem.machine_kind, delay=problem.delay,
                           times=problem.times, members=members, omega=omega, certain=certain)
        plain = folded(problem)
        if got is None:
            assert plain is None and certain[0] == -1
            continue
        assert plain is not None
        np.testing.assert_array_equal(got[0], plain[0])
        np.testing.assert_array_equal(got[1], plain[1])
        assert certain[0] in (0, 1)
        expected = _only_optimum(lambda: _matrix_on(problem, slots), got[0], got[1])
        with monkeypatch.context() as patched:
            patched.setattr(transport, "certifying", None)  # the certificate's steps in NumPy
            in_numpy = _only_optimum(lambda: _matrix_on(problem, slots), got[0], got[1])
        assert bool(certain[0]) == expected == in_numpy
        answers[expected] += 1
    assert answers[True] > 20 and answers[False] > 20  # both answers met


def test_a_plans_test_is_the_same_with_the_calls_certificate_and_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """contended_plan's test answers alike whether the fold worked it out (``fold_certified``)
    or an extension without it leaves it to the folded matrix made again when asked."""
    rng = random.Random(9720)
    for _ in range(100):
        problem = problem_with_orders(rng)
        with_it = contended_plan(problem)
        older = SimpleNamespace(solve_groups=native.solve_groups, cheapest_classes=native.cheapest_classes, fold_match=native.fold_match,
                                certificate=native.certificate)
        with monkeypatch.context() as patched:
            patched.setattr(transport, "native", older)
            without = contended_plan(problem)
            np.testing.assert_array_equal(with_it[0], without[0])
            np.testing.assert_array_equal(with_it[1], without[1])
            assert with_it[2]() == without[2]()


def test_kind_orders_not_those_of_the_waits_are_declined() -> None:
    rng = random.Random(9650)
    answered = 0
    while answered < 5:
        problem = problem_with_orders(rng)
        if folded(problem) is not None:
            answered += 1
            assert folded(problem, omega_shift=1.0) is None


def test_an_extension_built_from_an_older_source_leaves_the_fold_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = problem_with_orders(random.Random(9660))
    expected = contended_plan(problem)
    older = SimpleNamespace(solve_groups=native.solve_groups, cheapest_classes=native.cheapest_classes)  # no fold_match
    monkeypatch.setattr(transport, "native", older)
    assert folded(problem) is None
    job, bounds, unique = contended_plan(problem)
    np.testing.assert_array_equal(job, expected[0])
    np.testing.assert_array_equal(bounds, expected[1])
    assert unique() == expected[2]()


def test_bad_buffers_are_refused_by_name() -> None:
    ints, floats = np.zeros(2, dtype=np.int64), np.zeros(2)
    with pytest.raises(TypeError, match="slot_position"):
        native.fold_match(ints, floats, ints, floats, np.zeros((2, 1)), ints, floats, ints, ints)
    with pytest.raises(ValueError, match="a position per slot"):
        native.fold_match(ints, np.zeros(3, dtype=np.int64), ints, floats, np.zeros((2, 1)), ints, floats, ints, ints)
    with pytest.raises(ValueError, match="one certificate"):
        native.fold_certified(ints, ints, ints, floats, np.zeros((2, 1)), ints, floats, ints, ints, np.zeros(2, dtype=np.int64))
    with pytest.raises(TypeError, match="certain"):
        native.fold_certified(ints, ints, ints, floats, np.zeros((2, 1)), ints, floats, ints, ints, np.zeros(1))


def test_decisions_are_the_same_with_the_call_and_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Algorithm 2's starts on random bursts and admission's decisions on live states, with the
    call (and the phases in C) and with NumPy's steps alone."""
    taken = 0
    real = solve.folded_match

    def counted(**arguments: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        nonlocal taken
        answer = real(**arguments)
        taken += answer is not None
        return answer

    monkeypatch.setattr(solve, "folded_match", counted)
    assert_decisions_alike(random.Random(9670), monkeypatch, transport)
    assert taken > 0
