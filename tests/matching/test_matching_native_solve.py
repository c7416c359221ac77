"""canonical's levels in C (``scheduler.matching._solve``) against ``solve.canonical``'s NumPy,
the reference: the same rows and machines for random matchings (optimal or not: canonical's
orders do not depend on it) of random problems, ties everywhere in half of them, with the
machines' kind orders kept (Algorithm 2's) or not; and the solves and decisions with it against
without it. A process whose extension cannot be imported names the same queues in NumPy.
"""

from __future__ import annotations

import importlib
import json
import random
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest

from allox_reference import random_instance
from scheduler.matching.positions import Slots, kind_orders
from scheduler.matching.solve import Problem, build, canonical, prepare
from tests.matching.native_paths import assert_decisions_alike, both_ways

native = pytest.importorskip("scheduler.matching._solve", reason="built without the C extension: nothing to compare")
solve = importlib.import_module("scheduler.matching.solve")  # the module: the package's ``solve`` is its function

ROOT = Path(__file__).resolve().parents[2]


def random_columns(problem: Problem, slots: Slots, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each job on a random one of ``slots`` it can run on (one job a slot), rows in a random order: rows and slots."""
    runnable = np.isfinite(problem.times[:, problem.machine_kind[slots.machine]])
    rows, columns, taken = [], [], np.zeros(slots.count, dtype=bool)
    for row in rng.permutation(len(problem.jobs)).tolist():
        free = np.flatnonzero(runnable[row] & ~taken)
        if free.shape[0]:
            column = int(rng.choice(free))
            taken[column] = True
            rows.append(row)
            columns.append(column)
    return np.array(rows, dtype=np.int64), np.array(columns, dtype=np.int64)


def random_matching(problem: Problem, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each job on a random kept slot (one job a slot), rows in a random order."""
    slots = build(problem, method="scipy").slots
    rows, picked = random_columns(problem, slots, rng)
    return rows, slots.machine[picked], slots.position[picked]


def test_the_levels_in_c_are_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7930)
    for index in range(400):
        # Whole-number times and waits in half of them: ties in every order canonical makes.
        instance = random_instance(random.Random(7930 + index), max_jobs=40, max_machines=12, integer_times=index % 4 < 2, busy=True)
        problem = prepare(jobs=instance.jobs, machines=instance.machines, now=instance.now, busy_until=instance.busy_until)
        if index % 2:
            problem = Problem(jobs=problem.jobs, machines=problem.machines, kinds=problem.kinds, times=problem.times,
                              machine_kind=problem.machine_kind, delay=problem.delay, now=problem.now,
                              orders=kind_orders(machine_kind=problem.machine_kind, available=problem.delay, kind_count=len(problem.kinds)))
        rows, machine, position = random_matching(problem, rng)
        in_c, in_numpy = both_ways(lambda: canonical(problem, rows=rows, machine=machine, position=position), monkeypatch, solve)
        assert all(np.array_equal(a, b) for a, b in zip(in_c, in_numpy, strict=True))


def test_bad_buffers_are_refused_by_name() -> None:
    one = np.zeros(1, dtype=np.int64)
    with pytest.raises(TypeError, match="times"):
        native.canonical_levels(one, one, one, one, np.zeros(1), np.zeros(1), one.copy(), one.copy())
    with pytest.raises(TypeError, match="ready"):  # the other byte order: refused, not misread
        native.canonical_levels(one, one, one, one, np.zeros(1, dtype=">f8"), np.zeros((1, 1)), one.copy(), one.copy())
    with pytest.raises(ValueError, match="per matched job"):
        native.canonical_levels(one + 5, one, one, one, np.zeros(1), np.zeros((1, 1)), one.copy(), one.copy())


def test_algorithm_2_and_admission_decide_the_same_with_the_levels_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_decisions_alike(random.Random(7931), monkeypatch, solve)


FALLBACK = """
import json, sys
sys.modules["scheduler.matching._solve"] = None  # as if built without a C compiler: the import fails
import importlib
from scheduler.matching.model import Job, Machine
solve = importlib.import_module("scheduler.matching.solve")
jobs = [Job(name=f"j{i}", user="u", arrival=0.0, processing_time={"gpu": float(t), "cpu": float(3 * t)}) for i, t in enumerate(json.loads(sys.argv[1]))]
machines = [Machine(name="g0", kind="gpu"), Machine(name="g1", kind="gpu"), Machine(name="c0", kind="cpu")]
print(json.dumps({"native": solve.NATIVE, "in_use": solve.native is not None,
                  "schedule": [(a.job.name, a.machine.name, a.start) for a in solve.schedule(jobs=jobs, machines=machines, busy_until={"g1": 2.0})]}))
"""


def test_without_the_extension_numpy_names_the_same_queues() -> None:
    times = [4, 4, 1, 2, 2, 7]
    done = subprocess.run([sys.executable, "-c", FALLBACK, json.dumps(times)], cwd=ROOT, capture_output=True, text=True, check=True)
    answer = json.loads(done.stdout)
    assert answer["native"] is False and answer["in_use"] is False
    assert solve.NATIVE and solve.native is not None
    from scheduler.matching.model import Job, Machine

    jobs = [Job(name=f"j{i}", user="u", arrival=0.0, processing_time={"gpu": float(t), "cpu": float(3 * t)}) for i, t in enumerate(times)]
    machines = [Machine(name="g0", kind="gpu"), Machine(name="g1", kind="gpu"), Machine(name="c0", kind="cpu")]
    built = [[a.job.name, a.machine.name, a.start] for a in solve.schedule(jobs=jobs, machines=machines, busy_until={"g1": 2.0})]
    assert answer["schedule"] == built
