"""The folded solve's phases in C (``scheduler.matching._transport``) against the same phases in
NumPy (``transport._cheapest_classes``, ``transport._Grouped``), the reference.

The extension must give the very assignment NumPy gives, ties included (Algorithm 2 starts the
job a plan puts first; two optimal assignments can start different jobs): each test runs the
same call with ``transport.native`` set and with it ``None`` and compares exactly — each row's
cheapest class (phase 1) and the groups phases 2 and 3 hand back on random, tie-heavy group
problems, then Algorithm 2's starts and
admission's decisions (bursts and full clusters, pools and gangs, α 1, 0.3, 0.1 and 0, AlloX+).
And a process whose extension cannot be imported solves with NumPy, to the same answer.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from scheduler.matching import allox, transport
from scheduler.matching.admission import decide
from scheduler.matching.allox import AlloxScheduler
from scheduler.matching.transport import Groups, _cheapest_classes, _Grouped, _units, assign_to_classes
from tests.matching.native_paths import both_ways
from tests.matching.test_matching_carry_empty import burst
from tests.matching.test_matching_vacancy import live_state

native = pytest.importorskip("scheduler.matching._transport", reason="built without the C extension: nothing to compare")

ROOT = Path(__file__).resolve().parents[2]


def group_problem(rng: np.random.Generator) -> tuple[Groups, np.ndarray]:
    """Rows × groups costs (whole numbers in most: ties everywhere; some forbidden entries)
    and classes of each group with capacities and waits, fewer units in the cheap groups than
    rows want them (phase 2's prices, then phase 3's paths)."""
    rows, group_count = int(rng.integers(1, 60)), int(rng.integers(1, 12))
    whole = rng.random() < 0.7
    cost = rng.integers(1, 6, (rows, group_count)).astype(np.float64) if whole else rng.uniform(1, 100, (rows, group_count))
    cost *= np.arange(1, group_count + 1)  # later groups are later positions: dearer
    if rng.random() < 0.3:
        cost[rng.random((rows, group_count)) < 0.2] = np.inf
    classes = int(rng.integers(group_count, 3 * group_count + 1))
    group = np.concatenate([np.arange(group_count), rng.integers(0, group_count, classes - group_count)]).astype(np.int64)
    offset = rng.integers(0, 4, classes).astype(np.float64) if whole else rng.uniform(0, 30, classes)
    capacity = rng.integers(0, max(2, 2 * rows // group_count + 1), classes).astype(np.int64)
    return Groups(group=group, offset=offset, group_cost=cost), capacity


def reference_excess(groups: Groups, capacity: np.ndarray) -> int | None:
    """How many jobs NumPy's phase 2 leaves over for phase 3 (None: it is not reached)."""
    found = _units(groups, capacity)
    if not found.units:
        return None
    problem = _Grouped(cost=groups.group_cost[:, found.ids], units=found.units)
    if not problem.feasible():
        return None
    problem.raise_prices()
    load = np.bincount(problem.assign, minlength=len(found.units))
    return int((load - np.minimum(load, problem._priced_units())).sum())


def test_the_phases_in_c_assign_every_row_as_numpy_does(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7900)
    answers: Counter[str] = Counter()
    for _ in range(2000):
        groups, capacity = group_problem(rng)
        budget = int(rng.choice([0, 1, 3, 1000]))
        cheapest_in_c, cheapest_in_numpy = both_ways(lambda: _cheapest_classes(groups), monkeypatch, transport)
        assert np.array_equal(cheapest_in_c, cheapest_in_numpy)
        in_c, in_numpy = both_ways(lambda: assign_to_classes(None, capacity, max_augmentations=budget, groups=groups), monkeypatch, transport)
        if in_numpy is None:
            assert in_c is None
            answers["none"] += 1
            continue
        assert in_c is not None and np.array_equal(in_c, in_numpy)
        excess = reference_excess(groups, capacity)
        answers["paths" if excess else "prices" if excess == 0 else "greedy"] += 1
    # The extension's ways out were taken: prices alone, shortest paths, no answer.
    assert min(answers["prices"], answers["paths"], answers["none"]) > 100, answers


def test_large_visits_split_their_rows_as_numpy_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Phase 2's visits of a few hundred rows, as a plan's after a burst: a few groups, whole
    numbers (runs of equal margins, equal units) in most, the cheap group's units fewer than
    its rows or more (the split at the units' end or inside a run of equal margins)."""
    rng = np.random.default_rng(7903)
    for index in range(300):
        rows, group_count = int(rng.integers(100, 600)), int(rng.integers(2, 6))
        whole = index % 4 != 0
        cost = rng.integers(1, 4 if index % 2 else 40, (rows, group_count)).astype(np.float64) if whole else rng.uniform(1, 50, (rows, group_count))
        cost *= np.arange(1, group_count + 1)
        classes = int(rng.integers(group_count, 4 * group_count + 1))
        group = np.concatenate([np.arange(group_count), rng.integers(0, group_count, classes - group_count)]).astype(np.int64)
        offset = rng.integers(0, 3, classes).astype(np.float64) if whole else rng.uniform(0, 20, classes)
        capacity = rng.integers(1, max(2, 3 * rows // classes), classes).astype(np.int64)
        groups = Groups(group=group, offset=offset, group_cost=cost)
        in_c, in_numpy = both_ways(lambda: assign_to_classes(None, capacity, max_augmentations=1000, groups=groups), monkeypatch, transport)
        assert (in_c is None) == (in_numpy is None)
        assert in_c is None or np.array_equal(in_c, in_numpy)


def test_the_extension_declines_what_numpy_hands_to_scipy_and_numpy_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 40 groups phase 3's paths are scipy's; the extension leaves the whole solve to NumPy."""
    rng = np.random.default_rng(7901)
    rows, group_count = 120, 50
    cost = rng.integers(1, 4, (rows, group_count)).astype(np.float64) * np.arange(1, group_count + 1)
    groups = Groups(group=np.arange(group_count, dtype=np.int64), offset=np.zeros(group_count), group_cost=cost)
    capacity = np.full(group_count, 3, dtype=np.int64)
    found = _units(groups, capacity)
    assign = np.empty(rows, dtype=np.int64)
    assert native.solve_groups(np.ascontiguousarray(cost[:, found.ids]), found.flat, found.bounds, assign, rows) == 2
    in_c, in_numpy = both_ways(lambda: assign_to_classes(None, capacity, max_augmentations=rows, groups=groups), monkeypatch, transport)
    assert in_numpy is not None and np.array_equal(in_c, in_numpy)


def test_bad_buffers_are_refused_by_name() -> None:
    cost = np.zeros((2, 1))
    flat, bounds = np.zeros(2), np.array([0, 2], dtype=np.int64)
    with pytest.raises(TypeError, match="assign"):
        native.solve_groups(cost, flat, bounds, np.empty(2, dtype=np.int32), 1)
    with pytest.raises(ValueError, match="rows x groups"):
        native.solve_groups(cost, flat, np.array([0, 1], dtype=np.int64), np.empty(2, dtype=np.int64), 1)


def test_algorithm_2_starts_the_same_jobs_with_the_phases_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random bursts at α 0.1-0.3, whole-number times (ties) in half of them, every plan solved
    (no plan carried) as well as with the shortcuts."""
    rng = random.Random(7902)
    for index in range(60):
        arguments, alpha = burst(rng)
        monkeypatch.setattr(allox, "_CARRY_EMPTY", index % 2 == 0)

        def starts() -> list[tuple[str, str, float, float]]:
            return [(a.job.name, a.machine.name, a.start, a.finish) for a in AlloxScheduler(alpha=alpha).on_machine_free(**arguments)]

        in_c, in_numpy = both_ways(starts, monkeypatch, transport)
        assert in_c == in_numpy


@pytest.mark.parametrize("pools", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_admission_decides_the_same_with_the_phases_in_c(seed: int, pools: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Live states (bursts, full clusters, virtual clusters, gangs), α 1, 0.3, 0.1 and 0 and
    AlloX+: the same starts, queue and progress."""
    rng = random.Random(7910 + seed + 100 * pools)
    for _ in range(12):
        state = live_state(rng, pools=pools)
        for options in ({"alpha": 1.0}, {"alpha": 0.3}, {"alpha": 0.1}, {"alpha": 0.0}, {"policy": "allox+", "alpha": 0.1}):
            in_c, in_numpy = both_ways(lambda: decide(**state, **options), monkeypatch, transport)  # type: ignore[arg-type]
            assert in_c == in_numpy


FALLBACK = """
import json, sys
sys.modules["scheduler.matching._transport"] = None  # as if built without a C compiler: the import fails
import numpy as np
from scheduler.matching import transport
cost = np.array(json.loads(sys.argv[1]))
answer = transport.assign_to_classes(cost, np.array([1, 1, 2]), max_augmentations=10)
print(json.dumps({"native": transport.NATIVE, "in_use": transport.native is not None, "assign": answer.tolist()}))
"""


def test_without_the_extension_numpy_solves_to_the_same_answer() -> None:
    cost = np.array([[1.0, 5.0, 9.0], [1.0, 4.0, 9.0], [1.0, 6.0, 7.0], [2.0, 2.0, 8.0]])
    done = subprocess.run([sys.executable, "-c", FALLBACK, json.dumps(cost.tolist())], cwd=ROOT, capture_output=True, text=True,
                          check=True)
    answer = json.loads(done.stdout)
    assert answer["native"] is False and answer["in_use"] is False
    assert transport.NATIVE and transport.native is not None  # this process has it ...
    built = assign_to_classes(cost, np.array([1, 1, 2]), max_augmentations=10)
    assert built is not None and answer["assign"] == built.tolist()  # ... and decides the same
