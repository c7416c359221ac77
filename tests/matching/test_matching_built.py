"""The solver's steps in C (``scheduler/matching/_transport.c``) answer exactly as NumPy's.

Phase 2 of the folded solve (``transport._Grouped.raise_prices``), the position bound
(``positions.position_limits``) and ``solve.canonical`` each have a C version, used when the
optional extension is built; each is the same steps in the same floating-point operations and
ties, so it must leave the same prices, assignment, limits and matching, bit for bit. Here each
is compared with its NumPy steps on random problems (whole-number values, so ties, in a third),
and ``decide`` with the extension against ``decide`` without it on random live states (bursts,
full clusters, virtual clusters, gangs, α 1, 0.3, 0.1 and 0, AlloX+, ties). Skipped where the
extension is not built.
"""

from __future__ import annotations

import importlib
import random

import numpy as np
import numpy.typing as npt
import pytest

from scheduler.matching import allox, positions, transport
from scheduler.matching.admission import decide
from scheduler.matching.model import Job, Machine
from scheduler.matching.positions import position_limits
from scheduler.matching.solve import build, canonical, match, prepare
from tests.matching.test_matching_vacancy import live_state

solving = importlib.import_module("scheduler.matching.solve")  # the package's ``solve`` is the function
BUILT = transport._built

pytestmark = pytest.mark.skipif(BUILT is None, reason="scheduler.matching._transport is not built")


def _grouped(rng: np.random.Generator, *, whole: bool) -> transport._Grouped:
    rows, groups = int(rng.integers(1, 90)), int(rng.integers(1, 14))
    cost = rng.uniform(0, 100, size=(rows, groups))
    cost[rng.random((rows, groups)) < 0.15] = np.inf
    cost[np.arange(rows), rng.integers(0, groups, rows)] = rng.uniform(0, 100, rows)  # every row can go somewhere
    units = [np.sort(rng.uniform(0, 50, int(rng.integers(1, max(2, rows // 2))))) for _ in range(groups)]
    if whole:
        cost = np.round(cost / 10) * 10
        units = [np.round(u / 10) * 10 for u in units]
    # Half the time in Fortran order (a group_cost[:, ids] is), which the C phase copies.
    return transport._Grouped(cost=cost if rng.random() < 0.5 else np.asfortranarray(cost), units=units)


@pytest.mark.parametrize("seed", range(6))
def test_phase_2_in_c_leaves_numpys_prices_and_assignment(seed: int) -> None:
    rng = np.random.default_rng(7300 + seed)
    compared = 0
    for trial in range(150):
        ours = _grouped(rng, whole=trial % 3 == 0)
        theirs = transport._Grouped(cost=ours.cost.copy(), units=[u.copy() for u in ours.units])
        if not ours.feasible():
            continue
        ours.raise_prices()
        theirs.raise_prices(built=False)
        assert np.array_equal(ours.assign, theirs.assign)
        assert np.array_equal(ours.price.view(np.int64), theirs.price.view(np.int64))  # bit for bit
        compared += 1
    assert compared > 50


def test_phase_2_in_c_declines_nan_costs() -> None:
    grouped = transport._Grouped(cost=np.array([[1.0, np.nan], [1.0, 2.0]]), units=[np.array([0.0]), np.array([0.0])])
    assert BUILT.raise_prices(grouped.cost, 2, 2, grouped._flat, grouped._first.astype(np.int64), grouped._sizes, grouped.price,
                              grouped.assign) is False


def _machine_kinds(rng: np.random.Generator, most: int) -> tuple[int, int, npt.NDArray[np.int64]]:
    """Up to ``most`` machines of 1-3 kinds: how many, how many kinds, each one's kind."""
    machines, kinds = int(rng.integers(0, most)), int(rng.integers(1, 4))
    return machines, kinds, rng.integers(0, kinds, machines).astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_the_position_bound_in_c_is_numpys(seed: int) -> None:
    rng = np.random.default_rng(7400 + seed)
    for trial in range(300):
        machines, kinds, machine_kind = _machine_kinds(rng, 400 if trial % 10 == 0 else 50)
        mode = trial % 4
        if mode == 0:
            available = rng.uniform(0, 100, machines)
        elif mode == 1:
            available = np.round(rng.uniform(0, 100, machines) / 10) * 10  # machines freeing together
        elif mode == 2:
            available = np.where(rng.random(machines) < 0.6, 0.0, rng.uniform(0, 50, machines))  # idle ones
        else:
            available = rng.integers(0, 5, machines) * float(rng.choice([1e-17, 1.0, 7.3]))  # windows rounding away
        runnable = rng.integers(0, 600 if trial % 10 == 0 else 150, kinds).astype(np.int64)
        shortest = None if trial % 5 == 0 else rng.choice([0.0, 1e-20, 0.5, 3.0, 10.0], kinds) * rng.uniform(0.5, 2, kinds)
        ours = position_limits(machine_kind=machine_kind, available=available, runnable_per_kind=runnable, shortest_per_kind=shortest)
        theirs = position_limits(machine_kind=machine_kind, available=available, runnable_per_kind=runnable,
                                 shortest_per_kind=shortest, built=False)
        assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("seed", range(6))
def test_canonical_in_c_is_numpys(seed: int) -> None:
    rng = random.Random(7500 + seed)
    compared = 0
    for trial in range(120):
        kinds = rng.choice([["cpu"], ["cpu", "gpu"], ["a", "b", "c"]])
        machines = [Machine(name=f"m{i}", kind=rng.choice(kinds)) for i in range(rng.randint(1, 30))]
        whole = trial % 3 == 0
        jobs = []
        for index in range(rng.randint(1, 60)):
            times = {kind: float(rng.randint(0, 5)) if whole else rng.uniform(0.1, 10) for kind in kinds if rng.random() < 0.85}
            jobs.append(Job(name=f"j{index}", user="u", arrival=0.0, processing_time=times or {kinds[0]: 1.0}))
        busy = {m.name: float(rng.randint(0, 4)) if whole else rng.choice([0.0, rng.uniform(0, 5)]) for m in machines if rng.random() < 0.5}
        present = {machine.kind for machine in machines}
        if not all(present & job.processing_time.keys() for job in jobs):
            continue  # a job no machine runs (prepare refuses it)
        problem = prepare(jobs=jobs, machines=machines, now=0.0, busy_until=busy)
        matrix = build(problem)
        rows, columns = match(problem, matrix)
        slots = matrix.slots
        ours = canonical(problem, rows=rows, machine=slots.machine[columns], position=slots.position[columns])
        theirs = canonical(problem, rows=rows, machine=slots.machine[columns], position=slots.position[columns], built=False)
        assert all(np.array_equal(a, b) for a, b in zip(ours, theirs))
        compared += 1
    assert compared > 60


@pytest.mark.parametrize("pools", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_decide_with_the_c_steps_equals_decide_without(seed: int, pools: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7600 + seed + 100 * pools)
    for _ in range(12):
        state = live_state(rng, pools=pools)
        for options in ({"alpha": 1.0}, {"alpha": 0.3}, {"alpha": 0.1}, {"alpha": 0.0}, {"policy": "allox+", "alpha": 0.1}):
            with_c = decide(**options, **state)  # type: ignore[arg-type]
            with monkeypatch.context() as patched:
                for module in (transport, positions, solving, allox):
                    patched.setattr(module, "_built", None)
                without = decide(**options, **state)  # type: ignore[arg-type]
            assert with_c == without


@pytest.mark.parametrize("seed", range(4))
def test_the_uncontended_plan_in_c_is_numpys(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7700 + seed)
    written = 0
    for trial in range(150):
        kinds = rng.choice([["cpu", "gpu"], ["a", "b", "c"]])
        machines = [Machine(name=f"m{i}", kind=rng.choice(kinds)) for i in range(rng.randint(1, 40))]
        present = sorted({machine.kind for machine in machines})
        jobs = []
        for index in range(rng.randint(1, 30)):
            times = {kind: float(rng.randint(0, 4)) if trial % 3 == 0 else rng.uniform(0.5, 10) for kind in present if rng.random() < 0.8}
            jobs.append(Job(name=f"j{index}", user=f"u{index % 3}", arrival=0.0, processing_time=times or {present[0]: 1.0}))
        busy = {m.name: rng.uniform(0, 5) for m in machines if rng.random() < 0.3}
        fleet = solving.fleet(machines=machines, now=0.0, busy_until=busy)
        left = allox._Left(solving.prepare_on(fleet, jobs))
        rows = np.array(sorted(rng.sample(range(len(jobs)), rng.randint(1, len(jobs)))), dtype=np.int64)
        ours = left.uncontended(rows, fleet.delay, fleet)
        with monkeypatch.context() as patched:
            patched.setattr(allox, "_built", None)
            theirs = left.uncontended(rows, fleet.delay, fleet)
        assert (ours is None) == (theirs is None)
        if ours is not None and theirs is not None:
            assert ours.bounds is not None and theirs.bounds is not None and ours.queued is not None and theirs.queued is not None
            assert np.array_equal(ours.bounds, theirs.bounds) and np.array_equal(ours.queued, theirs.queued)
            assert ours.used is not None and theirs.used is not None and np.array_equal(ours.used, theirs.used)
            written += 1
    assert written > 10


@pytest.mark.parametrize("seed", range(4))
def test_the_slot_layout_and_classes_in_c_are_numpys(seed: int) -> None:
    rng = np.random.default_rng(7800 + seed)
    for trial in range(300):
        machines, kinds, machine_kind = _machine_kinds(rng, 500 if trial % 10 == 0 else 60)
        limits = rng.integers(0, 40 if trial % 7 == 0 else 6, machines).astype(np.int64) * (rng.random(machines) < 0.8)
        mode = trial % 3
        if mode == 0:
            delay = rng.uniform(0, 10, machines)
        elif mode == 1:
            delay = rng.integers(0, 4, machines).astype(np.float64)  # machines freeing together
        else:
            delay = np.where(rng.random(machines) < 0.5, -0.0, rng.integers(0, 3, machines).astype(np.float64))  # -0.0 is 0.0
        ours = positions.slots_for(limits=limits, machine_kind=machine_kind, kind_count=kinds)
        theirs = positions.slots_for(limits=limits, machine_kind=machine_kind, kind_count=kinds, built=False)
        for a, b in ((ours.machine, theirs.machine), (ours.position, theirs.position), (ours.kind_bounds, theirs.kind_bounds)):
            assert np.array_equal(a, b)
        classes = positions.slot_classes(theirs, machine_kind=machine_kind, delay=delay)
        reference = positions.slot_classes(theirs, machine_kind=machine_kind, delay=delay, built=False)
        for a, b in ((classes.slots_by_class, reference.slots_by_class), (classes.class_start, reference.class_start),
                     (classes.capacity, reference.capacity), (classes.first_slot, reference.first_slot)):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("seed", range(4))
def test_the_vacancy_bound_in_c_is_numpys(seed: int) -> None:
    """``_Vacancy``'s N (each row's least number of jobs outside a machine's class) and its
    answers, with the C sums and NumPy's, as starts move the machines' waits."""
    rng = random.Random(7900 + seed)
    compared = 0
    for trial in range(60):
        whole = trial % 3 == 0
        machines = [Machine(name=f"m{i}", kind=rng.choice(["cpu", "gpu"])) for i in range(rng.randint(2, 60))]
        jobs = []
        for index in range(rng.randint(1, 80)):
            gpu = float(rng.randint(1, 5)) if whole else rng.uniform(0.5, 10)
            times = {"gpu": gpu, "cpu": gpu * (rng.randint(1, 9) if whole else rng.uniform(1.0, 12.0))}  # up to > _TERMS terms
            if rng.random() < 0.1:
                del times[rng.choice(["cpu", "gpu"])]
            jobs.append(Job(name=f"j{index}", user="u", arrival=0.0, processing_time=times))
        present = {machine.kind for machine in machines}
        if not all(present & job.processing_time.keys() for job in jobs):
            continue
        busy = {m.name: float(rng.randint(0, 30)) if whole else rng.choice([0.0, rng.uniform(0, 60)]) for m in machines if rng.random() < 0.6}
        fleet = solving.fleet(machines=machines, now=0.0, busy_until=busy)
        every_job = solving.prepare_on(fleet, jobs)
        delay = fleet.delay.copy()
        ours, theirs = allox._Vacancy(every_job, delay), allox._Vacancy(every_job, delay)  # both see each start's move
        theirs.built = False
        for _ in range(5):
            for position in rng.sample(range(len(machines)), min(5, len(machines))):
                rows = np.array(sorted(rng.sample(range(len(jobs)), rng.randint(1, len(jobs)))), dtype=np.int64)
                assert ours.empty(rows, position) == theirs.empty(rows, position)
                kind, wait = int(every_job.machine_kind[position]), float(delay[position])
                assert np.array_equal(ours._needed(kind, wait), theirs._needed(kind, wait))
                compared += 1
            position = rng.randrange(len(machines))
            moved = float(delay[position]) + (float(rng.randint(1, 20)) if whole else rng.uniform(0, 50))
            for vacancy in (ours, theirs):
                vacancy.moved(position, float(delay[position]), moved)
            delay[position] = moved
    assert compared > 500


@pytest.mark.parametrize("seed", range(4))
def test_the_classes_glue_in_c_is_numpys(seed: int) -> None:
    """Each row's cheapest class, the groups' units, a group's rows filling its units, and a
    class's rows taking its slots: C and NumPy alike, ties (equal offsets, equal costs) included."""
    rng = np.random.default_rng(8000 + seed)
    for trial in range(200):
        rows, count = int(rng.integers(1, 60)), int(rng.integers(1, 8))
        classes = int(rng.integers(1, 25))
        group = rng.integers(0, count, classes).astype(np.int64)
        offset = rng.integers(0, 4, classes).astype(np.float64) if trial % 2 else rng.uniform(0, 5, classes)
        group_cost = rng.integers(0, 6, (rows, count)).astype(np.float64) if trial % 3 == 0 else rng.uniform(0, 20, (rows, count))
        group_cost[rng.random((rows, count)) < 0.2] = np.inf
        if trial % 5 == 0:
            group_cost[0] = np.inf  # a row with nowhere to go
        groups = transport.Groups(group=group, offset=offset, group_cost=np.asfortranarray(group_cost))
        assert np.array_equal(transport._cheapest_classes(groups), transport._cheapest_classes(groups, built=False))
        capacity = rng.integers(0 if trial % 4 else 1, 4, classes).astype(np.int64)
        units = transport._units(groups, capacity)
        reference = transport._units(groups, capacity, built=False)
        for a, b in ((units.ids, reference.ids), (units.unit_class, reference.unit_class), (units.bounds, reference.bounds)):
            assert np.array_equal(a, b)
        assert len(units.units) == len(reference.units) and all(np.array_equal(a, b) for a, b in zip(units.units, reference.units))
        if units.ids.shape[0]:
            # each group at most its units' rows, in a random order (as the solve leaves them)
            assign = rng.permutation(np.repeat(np.arange(units.ids.shape[0]), np.diff(units.bounds)))[:rows].astype(np.int64)
            assert np.array_equal(transport._filled(assign, units), transport._filled(assign, units, built=False))
        slots = positions.slots_for(limits=rng.integers(0, 4, 12).astype(np.int64), machine_kind=rng.integers(0, 2, 12).astype(np.int64),
                                    kind_count=2)
        if slots.count:
            slot_classes = positions.slot_classes(slots, machine_kind=rng.integers(0, 2, 12).astype(np.int64),
                                                  delay=rng.integers(0, 3, 12).astype(np.float64))
            # each class at most its capacity of rows, in a random order (as a solve's assignment)
            picked = rng.permutation(np.repeat(np.arange(slot_classes.count), slot_classes.capacity))[: min(rows, slots.count)]
            picked = picked.astype(np.int64)
            ours, theirs = solving._slots_to_rows(picked, slot_classes), solving._slots_to_rows(picked, slot_classes, built=False)
            assert np.array_equal(ours[0], theirs[0]) and np.array_equal(ours[1], theirs[1])
