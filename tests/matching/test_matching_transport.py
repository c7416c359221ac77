"""The folded solve (classes of identical slots, successive shortest paths) against scipy on the
expanded matrix and against brute force."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from allox_reference import brute_force_total, check_valid, random_instance
from scheduler.matching.model import Job, Machine
from scheduler.matching.solve import assignments, prepare, solve
from scheduler.matching.transport import Groups, assign_to_classes


def expanded_optimum(cost: np.ndarray, capacity: np.ndarray) -> float | None:
    columns = np.repeat(np.arange(cost.shape[1]), capacity)
    if columns.shape[0] < cost.shape[0]:
        return None  # fewer slots than rows: scipy would leave rows out
    try:
        rows, picked = linear_sum_assignment(cost[:, columns])
    except ValueError:
        return None  # infeasible
    return float(cost[:, columns][rows, picked].sum())


def check_transport(cost: np.ndarray, capacity: np.ndarray) -> None:
    expected = expanded_optimum(cost, capacity)
    if expected is None:
        return
    assign = assign_to_classes(cost, capacity, max_augmentations=cost.shape[0])
    assert assign is not None
    assert np.all(np.bincount(assign, minlength=cost.shape[1]) <= capacity)
    assert cost[np.arange(cost.shape[0]), assign].sum() == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_transport_equals_scipy_on_the_expanded_matrix(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(60):
        rows, classes = int(rng.integers(1, 25)), int(rng.integers(1, 7))
        if seed % 2:
            cost = rng.integers(0, 6, (rows, classes)).astype(float)  # many ties, zeros
        else:
            cost = rng.uniform(0, 50, (rows, classes))
        cost[rng.random((rows, classes)) < 0.2] = np.inf
        capacity = rng.integers(0, max(2, rows // 2), classes)
        check_transport(cost, capacity)


@settings(max_examples=80, deadline=None)
@given(
    cost=st.lists(st.lists(st.integers(0, 9), min_size=3, max_size=3), min_size=1, max_size=8),
    capacity=st.lists(st.integers(0, 4), min_size=3, max_size=3),
)
def test_property_transport(cost: list[list[int]], capacity: list[int]) -> None:
    check_transport(np.array(cost, dtype=float), np.array(capacity, dtype=np.int64))


def test_no_excess_needs_no_step() -> None:
    cost = np.array([[1.0, 5.0], [2.0, 1.0]])
    assign = assign_to_classes(cost, np.array([1, 1]), max_augmentations=0)
    assert assign is not None and assign.tolist() == [0, 1]


def test_too_many_steps_is_declined_and_groups_need_none() -> None:
    # A and B are one position on two machines, B free 60 later: every job pays 60 more on B.
    # Priced class by class, the jobs trade places between A and B at zero price and the
    # shortest paths must finish; priced as one group, the dual ascent alone finds the optimum.
    cost = np.array([[100.0, 160.0, 300.0]] * 3)
    capacity = np.array([1, 1, 10])
    assert assign_to_classes(cost, capacity, max_augmentations=0) is None
    assert sorted(assign_to_classes(cost, capacity, max_augmentations=1).tolist()) == [0, 1, 2]
    groups = Groups(group=np.array([0, 0, 1]), offset=np.array([0.0, 60.0, 0.0]), group_cost=cost[:, [0, 2]])
    assign = assign_to_classes(cost, capacity, max_augmentations=0, groups=groups)
    assert assign is not None and sorted(assign.tolist()) == [0, 1, 2]


def test_grouped_prices_equal_scipy_on_random_staircases() -> None:
    # Groups of classes that differ by a constant per class (positions on machines free at
    # different times), many jobs competing: the dual ascent plus the shortest paths stay exact.
    rng = np.random.default_rng(11)
    for _ in range(40):
        rows, group_count = int(rng.integers(5, 40)), int(rng.integers(1, 4))
        per_group = rng.integers(1, 4, group_count)
        group = np.repeat(np.arange(group_count), per_group)
        offset = np.concatenate([np.sort(rng.choice([0.0, 60.0, 120.0, 300.0], n, replace=False)) for n in per_group])
        group_cost = rng.uniform(10, 200, (rows, group_count)) * (1 + np.arange(group_count))
        if rng.random() < 0.3:
            group_cost[: rows // 2] = group_cost[0]  # identical jobs
        cost = group_cost[:, group] + offset
        capacity = rng.integers(1, max(2, rows // 2), group.shape[0])
        expected = expanded_optimum(cost, capacity)
        if expected is None:
            continue
        assign = assign_to_classes(cost, capacity, max_augmentations=rows, groups=Groups(group=group, offset=offset, group_cost=group_cost))
        assert assign is not None
        assert np.all(np.bincount(assign, minlength=cost.shape[1]) <= capacity)
        assert cost[np.arange(rows), assign].sum() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_folded_solve_matches_brute_force(seed: int) -> None:
    rng = random.Random(500 + seed)
    for _ in range(30):
        case = random_instance(rng, max_jobs=5, max_machines=4, busy=seed % 2 == 1, integer_times=True)
        problem = prepare(jobs=case.jobs, machines=case.machines, now=case.now, busy_until=case.busy_until)
        queues = solve(problem, method="classes")
        result = assignments(problem, queues)
        check_valid(result, case.jobs, case.machines, now=case.now, busy_until=case.busy_until)
        expected = brute_force_total(case.jobs, case.machines, now=case.now, busy_until=case.busy_until)
        assert queues.total_completion_time == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_folded_solve_equals_scipy_under_contention(seed: int) -> None:
    """Many jobs, few idle machines of each kind, a few busy ones: jobs compete for the idle
    machines, so the folded solve needs many steps."""
    rng = np.random.default_rng(seed)
    for _ in range(5):
        jobs_count = int(rng.integers(20, 80))
        gpu = rng.uniform(1, 100, jobs_count)
        jobs = [
            Job(name=f"j{i}", user="u", arrival=0.0, processing_time={"gpu": float(g), "cpu": float(g * s)})
            for i, (g, s) in enumerate(zip(gpu, rng.uniform(1.8, 10, jobs_count)))
        ]
        machines = [Machine(name=f"g{i}", kind="gpu") for i in range(int(rng.integers(3, 15)))] + [
            Machine(name=f"c{i}", kind="cpu") for i in range(int(rng.integers(3, 15)))
        ]
        busy = {m.name: float(rng.choice([0.0, 0.0, 30.0, 60.0])) for m in machines}
        problem = prepare(jobs=jobs, machines=machines, now=0.0, busy_until=busy)
        folded = solve(problem, method="classes")
        full = solve(problem, method="scipy")
        assert folded.total_completion_time == pytest.approx(full.total_completion_time, rel=1e-12)
        check_valid(assignments(problem, folded), jobs, machines, busy_until=busy)


def test_the_groups_pick_the_cheapest_class_as_argmin_over_the_written_out_matrix() -> None:
    """Given the groups alone (``cost`` None), the first choice of every row is ``argmin`` over
    ``group_cost[:, group] + offset``, ties to the first class, as when the matrix is written out."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        rows, group_count = int(rng.integers(1, 30)), int(rng.integers(1, 6))
        per_group = rng.integers(1, 5, group_count)
        group = rng.permutation(np.repeat(np.arange(group_count), per_group))
        offset = rng.choice([0.0, 30.0, 60.0, 90.0], group.shape[0])  # ties within and across groups
        group_cost = rng.integers(0, 4, (rows, group_count)).astype(float) * 30.0
        group_cost[rng.random((rows, group_count)) < 0.2] = np.inf
        capacity = np.full(group.shape[0], rows)  # nothing over: the first choice is the answer
        groups = Groups(group=group, offset=offset, group_cost=group_cost)
        written = group_cost[:, group] + offset
        assert assign_to_classes(None, capacity, max_augmentations=0, groups=groups).tolist() == np.argmin(written, axis=1).tolist()
