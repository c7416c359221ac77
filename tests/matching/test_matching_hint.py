"""Admission's queue takes Algorithm 2's matching less its starts when it is certainly still the
only optimum (``solve(hint=...)``, ``transport.certified``): the queues must be the very ones
solving gives, whether the hint is taken, refused, or wrong."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from scheduler.matching.admission import _left_of, _on_grid
from scheduler.matching.model import Job, Machine
from scheduler.matching.solve import Hint, Queues, fleet, prepare_on, rows_on, solve
from scheduler.matching.transport import Groups, assign_to_classes, certified, only_optimum


def same(a: Queues, b: Queues) -> bool:
    return (np.array_equal(a.job, b.job) and np.array_equal(a.bounds, b.bounds) and np.array_equal(a.start, b.start)
            and np.array_equal(a.finish, b.finish))


def instance(rng: random.Random, *, ties: bool) -> tuple[list[Machine], dict[str, float], list[Job], float]:
    """Idle machines and machines busy until their own times (as admission's grid would put them:
    many share a point), waiting jobs; ``ties``: whole-number times (equal costs everywhere)."""
    now = 1000.0
    draw = (lambda lo, hi: float(rng.randint(int(lo), int(hi)))) if ties else rng.uniform
    machines: list[Machine] = []
    busy: dict[str, float] = {}
    for kind in ("gpu", "cpu"):
        for i in range(rng.randint(1, 4)):
            machines.append(Machine(name=f"{kind}-idle-{i}", kind=kind))
        for i in range(rng.randint(0, 30)):
            machine = Machine(name=f"{kind}-busy-{i}", kind=kind)
            machines.append(machine)
            busy[machine.name] = now + _on_grid(draw(1, 3000), step=60.0, ratio=1.25)
    jobs = []
    for j in range(rng.randint(1, 120)):
        gpu = draw(10, 1500)
        times = {"gpu": gpu, "cpu": gpu * (rng.randint(2, 8) if ties else rng.uniform(1.2, 9))}
        if rng.random() < 0.1:
            del times[rng.choice(["gpu", "cpu"])]
        jobs.append(Job(name=f"j{j}", user="u", arrival=now - draw(0, 500), processing_time=times))
    return machines, busy, jobs, now


def queue_problem(rng: random.Random, *, ties: bool):  # type: ignore[no-untyped-def]
    """Algorithm 2's matching at α = 1 (every idle machine starts its first job) and admission's
    queue problem after it: the jobs left, the started machines busy until the grid point
    their job ends on."""
    machines, busy, jobs, now = instance(rng, ties=ties)
    arrays = fleet(machines=machines, now=now, busy_until=busy)
    first = prepare_on(arrays, jobs)
    queues = solve(first)
    started: dict[int, int] = {}
    for position in np.flatnonzero(arrays.delay == 0).tolist():
        head = queues.first_job(position)
        if head is not None:
            started[position] = head
    rows = [row for row in range(len(jobs)) if row not in set(started.values())]
    until = {position: now + _on_grid(float(first.times[row, first.machine_kind[position]]), step=60.0, ratio=1.25)
             for position, row in started.items()}
    return first, queues, rows, rows_on(first, rows, arrays.with_available(until))


@pytest.mark.parametrize("ties", [False, True])
def test_the_queue_is_the_one_solving_gives_with_or_without_the_hint(ties: bool) -> None:
    rng = random.Random(20 + ties)
    taken = 0
    for _ in range(80):
        first, queues, rows, problem = queue_problem(rng, ties=ties)
        if not rows:
            continue
        hint = _left_of(first, queues, rows)
        assert same(solve(problem, hint=hint), solve(problem))
        taken += _taken(problem, hint)
    if not ties:
        assert taken >= 40  # most hints are taken (65 of 78 here)


def _taken(problem, hint: Hint) -> int:  # type: ignore[no-untyped-def]
    from scheduler.matching.solve import _hinted, build

    matrix = build(problem)
    return int(_hinted(problem, matrix, hint) is not None)


def test_a_wrong_hint_changes_nothing() -> None:
    rng = random.Random(7)
    for _ in range(80):
        first, queues, rows, problem = queue_problem(rng, ties=rng.random() < 0.5)
        if not rows:
            continue
        hint = _left_of(first, queues, rows)
        kind, position = hint.kind.copy(), hint.position.copy()
        for row in rng.sample(range(len(rows)), k=min(len(rows), rng.randint(1, 3))):
            kind[row] = rng.randrange(len(problem.kinds))
            position[row] = max(1, position[row] + rng.choice([-1, 1, 2]))
        assert same(solve(problem, hint=Hint(kind=kind, position=position)), solve(problem))


def test_certified_takes_only_the_optimum() -> None:
    """On small grouped problems: the certificate accepts the solve's own answer when no other
    assignment costs as little, and never anything dearer."""
    rng = np.random.default_rng(3)
    accepted = 0
    for _ in range(200):
        rows, count = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        group = rng.integers(0, count, size=count + int(rng.integers(0, 3)))
        group[:count] = np.arange(count)
        offset = rng.integers(0, 4, size=group.shape[0]).astype(float) * 10
        capacity = rng.integers(1, 3, size=group.shape[0])
        group_cost = rng.uniform(1, 50, size=(rows, count)) if rng.random() < 0.7 else rng.integers(1, 4, size=(rows, count)) * 10.0
        groups = Groups(group=group, offset=offset, group_cost=group_cost)
        if capacity.sum() < rows:
            continue
        solved = assign_to_classes(None, capacity, max_augmentations=rows, groups=groups)
        assert solved is not None
        cost = group_cost[:, group] + offset
        best = cost[np.arange(rows), solved].sum()
        # Every assignment of rows to groups, filled cheapest first: how many reach the optimum.
        optimal = 0
        for choice in np.ndindex(*(count,) * rows):
            assign = np.array(choice, dtype=np.int64)
            found = certified(groups, capacity, assign)
            assert only_optimum(groups, capacity, assign) == (found is not None)  # the test alone, as Algorithm 2 asks it
            total = _filled_cost(groups, capacity, assign)
            if total is not None and math.isclose(total, best, abs_tol=1e-9):
                optimal += 1
            if found is not None:
                assert found.tolist() == solved.tolist()
                assert total == pytest.approx(best)
        if optimal == 1:
            accepted += certified(groups, capacity, group[solved]) is not None
    assert accepted > 20


def _filled_cost(groups: Groups, capacity: np.ndarray, assign: np.ndarray) -> float | None:
    total = float(groups.group_cost[np.arange(assign.shape[0]), assign].sum())
    for g in range(groups.group_cost.shape[1]):
        members = np.flatnonzero(groups.group == g)
        units = np.sort(np.repeat(groups.offset[members], capacity[members]))
        load = int((assign == g).sum())
        if load > units.shape[0]:
            return None
        total += float(units[:load].sum())
    return total
