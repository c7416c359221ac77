"""The machines' kind orders (``positions.KindOrder``): Algorithm 2 sorts each kind's machines by
ω once and moves one machine per start (``kind_orders_after``), and the bound and ``canonical``
read them instead of sorting every machine at every solve. Checked against what they replace:

- ``kind_orders_after`` after any sequence of moves equals ``kind_orders`` of the machines as
  they are then (ties, machines idle or on a grid, a machine moved back or moved twice);
- ``position_limits`` with the orders equals the bound as it was computed before them (a stable
  argsort per kind, ``searchsorted`` for ``s_i`` and ``r_i``, Claim 2's rank in its group);
- ``canonical`` with the orders equals it without (two lexsorts over every machine), on the
  matchings the solver finds and on arbitrary ones;
- ``decide`` with Algorithm 2 keeping the orders equals it with every plan's problem stripped of
  them (the bound and ``canonical`` then sort), on random live states at α < 1.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from scheduler.matching import allox, positions
from scheduler.matching.admission import decide
from scheduler.matching.model import Job, Machine
from scheduler.matching.positions import kind_orders, kind_orders_after, position_limits
from scheduler.matching.solve import Fleet, Problem, _matched, canonical, prepare
from tests.matching.test_matching_closed_forms import _limits_case
from tests.matching.test_matching_vacancy import live_state


def _waits(rng: np.random.Generator, count: int) -> np.ndarray:
    """Waits with ties: idle machines, a coarse grid, or each its own time."""
    mode = int(rng.integers(0, 3))
    if mode == 0:
        return np.where(rng.random(count) < 0.3, 0.0, rng.integers(1, 6, count) * 60.0)
    if mode == 1:
        return np.zeros(count)
    return rng.uniform(0, 1000, count)


def _assert_same(got: tuple[positions.KindOrder, ...], expected: tuple[positions.KindOrder, ...]) -> None:
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected):
        np.testing.assert_array_equal(mine.members, theirs.members)
        np.testing.assert_array_equal(mine.omega, theirs.omega)
        np.testing.assert_array_equal(mine.earlier, theirs.earlier)
        np.testing.assert_array_equal(mine.earlier_or_equal, theirs.earlier_or_equal)


@pytest.mark.parametrize("seed", range(3))
def test_moving_machines_one_at_a_time_gives_the_orders_sorted_afresh(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(200):
        count = int(rng.integers(1, 60))
        kinds = int(rng.integers(1, 4))
        machine_kind = rng.integers(0, kinds, count)
        delay = _waits(rng, count)
        orders = kind_orders(machine_kind=machine_kind, available=delay, kind_count=kinds)
        for _ in range(int(rng.integers(1, 12))):
            machine = int(rng.integers(0, count))
            # A start moves a machine later; onto a wait others have, back to 0, or where it is.
            choice = int(rng.integers(0, 4))
            wait = float(delay[int(rng.integers(0, count))]) if choice == 0 else 0.0 if choice == 1 else (
                float(delay[machine]) if choice == 2 else float(rng.integers(0, 8) * 60.0))
            delay[machine] = wait
            orders = kind_orders_after(orders, machine=machine, kind=int(machine_kind[machine]), omega=wait)
            _assert_same(orders, kind_orders(machine_kind=machine_kind, available=delay, kind_count=kinds))


def _limits_before_orders(*, machine_kind: np.ndarray, available: np.ndarray, runnable_per_kind: np.ndarray,
                          shortest_per_kind: np.ndarray | None = None) -> np.ndarray:
    """``position_limits`` as it was before the kind orders (the reference)."""
    limits = np.zeros(machine_kind.shape[0], dtype=np.int64)
    for kind in (runnable_per_kind > 0).nonzero()[0].tolist():
        members = (machine_kind == kind).nonzero()[0]
        if members.shape[0] == 0:
            continue
        runnable = int(runnable_per_kind[kind])
        omega = available[members]
        order = np.argsort(omega, kind="stable")
        sorted_omega = omega[order]
        earlier = np.searchsorted(sorted_omega, sorted_omega, side="left")
        earlier_or_equal = np.searchsorted(sorted_omega, sorted_omega, side="right")
        together = earlier_or_equal - earlier
        rank_in_group = np.arange(members.shape[0]) - earlier
        bound = (runnable + together - 1) // earlier_or_equal
        if shortest_per_kind is not None and shortest_per_kind[kind] > 0:
            bound = positions._tightened(bound, omega=sorted_omega, earlier=earlier, runnable=runnable, shortest=float(shortest_per_kind[kind]))
        kept = rank_in_group < runnable - earlier
        limits[members[order]] = np.where(kept, bound, 0)
    return limits


@pytest.mark.parametrize("seed", range(3))
def test_the_bound_read_off_the_orders_equals_the_bound_sorted_per_solve(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    for trial in range(1500):
        case = _limits_case(rng, trial)
        expected = _limits_before_orders(**case)
        np.testing.assert_array_equal(position_limits(**case), expected)
        orders = kind_orders(machine_kind=case["machine_kind"], available=case["available"], kind_count=case["runnable_per_kind"].shape[0])
        np.testing.assert_array_equal(position_limits(**case, orders=orders), expected)


def _problem(rng: random.Random) -> Problem:
    machines = [Machine(name=f"m{i}", kind=rng.choice(["cpu", "gpu"])) for i in range(rng.randint(1, 14))]
    whole = rng.random() < 0.5
    busy = {m.name: float(rng.choice([0, 60, 60, 120, 300])) if whole else rng.uniform(0, 400) for m in machines if rng.random() < 0.6}
    jobs = []
    for index in range(rng.randint(1, 30)):
        gpu = float(rng.randint(1, 6) * 60) if whole else rng.uniform(30, 600)
        times = {"gpu": gpu, "cpu": gpu * (rng.randint(2, 4) if whole else rng.uniform(1.5, 6))}
        jobs.append(Job(name=f"j{index}", user="u", arrival=0.0, processing_time=times))
    return prepare(jobs=jobs, machines=machines, now=0.0, busy_until=busy)


@pytest.mark.parametrize("seed", range(3))
def test_canonical_with_the_orders_equals_it_sorting_every_machine(seed: int) -> None:
    rng = random.Random(200 + seed)
    numbers = np.random.default_rng(seed)
    for _ in range(300):
        problem = _problem(rng)
        assert problem.orders is None
        ordered = replace(problem, orders=kind_orders(machine_kind=problem.machine_kind, available=problem.delay, kind_count=len(problem.kinds)))
        _, matrix_of, rows, columns, _ = _matched(problem)
        slots = matrix_of().slots
        found = (rows, slots.machine[columns], slots.position[columns])
        # Arbitrary matchings too: any machine, positions with repeats and gaps.
        count = rows.shape[0]
        arbitrary = (rows, numbers.integers(0, len(problem.machines), count), numbers.integers(1, 4, count))
        for given_rows, machine, position in (found, arbitrary):
            expected = canonical(problem, rows=given_rows, machine=machine, position=position)
            got = canonical(ordered, rows=given_rows, machine=machine, position=position)
            for mine, theirs in zip(got, expected):
                np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("pools", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_decisions_keeping_the_orders_equal_those_sorting_at_every_solve(seed: int, pools: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(9900 + seed + 100 * pools)
    rows_on = allox.rows_on
    solved = 0

    def without_orders(problem: Problem, rows: np.ndarray, machines: Fleet) -> Problem:
        nonlocal solved
        solved += 1
        return rows_on(problem, rows, replace(machines, orders=None))

    for _ in range(20):
        state = live_state(rng, pools=pools)
        for alpha in (0.3, 0.1, 0.0):
            kept = decide(alpha=alpha, **state)  # type: ignore[arg-type]
            with monkeypatch.context() as patched:
                patched.setattr(allox, "rows_on", without_orders)
                sorted_each_time = decide(alpha=alpha, **state)  # type: ignore[arg-type]
            assert kept == sorted_each_time
    assert solved > 0
