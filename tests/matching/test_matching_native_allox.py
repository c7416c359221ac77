"""Algorithm 2's steps in C (``_solve.c``, where it was built) against ``allox``'s NumPy, the
reference: ``uncontended_plan`` (``_Left.uncontended``) gives the same plan (each machine's
queue, the machines used) or the same refusal for random user sets of random bursts (jobs with
no kind, kinds that tie, jobs that take no time, kinds with too few free machines, machines
busy); ``vacancy_needs`` (``_Vacancy._needs``) the same need per row, bit for bit, for random
times (a kind a job cannot run on, times of 0, slowdowns past 64 terms) and waits (ties, counts
taking machines out); ``vacancy_empty`` (``_Vacancy.empty``) the same answer on random machines,
jobs and user sets between starts; and Algorithm 2's and admission's decisions with them against without
them. A process whose extension cannot be imported writes the plans in NumPy.
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

from scheduler.matching.allox import _Left, _Plan, _Vacancy
from scheduler.matching.model import Job, Machine
from scheduler.matching.solve import fleet, prepare_on
from tests.matching.native_paths import assert_decisions_alike, both_ways
from tests.matching.test_matching_unreached import random_times

native = pytest.importorskip("scheduler.matching._solve", reason="built without the C extension: nothing to compare")
allox = importlib.import_module("scheduler.matching.allox")

ROOT = Path(__file__).resolve().parents[2]


def plan_of(plan: _Plan | None) -> tuple[list[int], list[int], list[int]] | None:
    """What a plan's readers read: each machine's queue bounds, the rows queued, the machines used."""
    if plan is None:
        return None
    assert plan.bounds is not None and plan.queued is not None and plan.used is not None and not plan.taken
    return plan.bounds.tolist(), plan.queued.tolist(), plan.used.tolist()


def random_jobs(rng: random.Random, kinds: list[str], users: list[str], *, count: int, longest: int, zero_share: float) -> list[Job]:
    """Jobs of ``users`` on ``kinds``: whole-number times up to ``longest`` in half the calls
    (kinds that tie), a kind left out now and then, a time of 0 in ``zero_share`` of them."""
    whole = rng.random() < 0.5
    jobs = []
    for index in range(count):
        times = {kind: float(rng.randint(1, longest)) if whole else rng.uniform(1, 100) for kind in kinds}
        if len(kinds) > 1 and rng.random() < 0.2:
            del times[rng.choice(kinds)]
        if rng.random() < zero_share:
            times[rng.choice(list(times))] = 0.0
        jobs.append(Job(name=f"j{index}", user=rng.choice(users), arrival=0.0, processing_time=times))
    return jobs


def random_burst(rng: random.Random) -> tuple[_Left, list[np.ndarray], np.ndarray, object]:
    """Machines of up to three kinds, some busy; jobs of a few users, their times whole numbers
    now and then (kinds that tie), a kind left out or a time of 0 now and then; some user sets'
    rows with some jobs started (rows removed)."""
    kinds = ["gpu", "cpu", "tpu"][: rng.randint(1, 3)]
    listed = [*kinds, *(rng.choice(kinds) for _ in range(rng.randint(0, 30)))]
    rng.shuffle(listed)
    machines = [Machine(name=f"m{index}", kind=kind) for index, kind in enumerate(listed)]  # every kind, some job's only one
    busy = {machine.name: rng.choice([float(rng.randint(1, 50)), 0.25]) for machine in machines if rng.random() < 0.3}
    arrays = fleet(machines=machines, now=0.0, busy_until=busy)
    users = [f"u{index}" for index in range(rng.randint(1, 5))]
    jobs = random_jobs(rng, kinds, users, count=rng.randint(1, 40), longest=4, zero_share=0.05)
    every_job = prepare_on(arrays, jobs)
    left = _Left(every_job)
    for row in range(len(jobs)):
        if rng.random() < 0.2:
            left.remove(row)
    sets = [left.rows(None), *(left.rows(frozenset(rng.sample(users, rng.randint(1, len(users))))) for _ in range(4))]
    delay = arrays.delay.copy()
    if rng.random() < 0.3:
        delay[rng.randrange(delay.shape[0])] = 0.0  # a busy machine freed: another set of free machines
    return left, sets, delay, arrays


def test_uncontended_plans_in_c_are_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8711)
    written = declined = 0
    for _ in range(1500):
        left, sets, delay, arrays = random_burst(rng)
        for rows in sets:
            if not rows.shape[0]:
                continue
            in_c, in_numpy = both_ways(lambda: plan_of(left.uncontended(rows, delay, arrays)), monkeypatch, allox)  # noqa: B023
            assert in_c == in_numpy
            written += in_c is not None
            declined += in_c is None
    assert written > 1000 and declined > 1000  # both ways out taken, not only compared


def random_vacancy(rng: random.Random) -> tuple[_Vacancy, int]:
    """A vacancy bound over random jobs' times (whole numbers in half: waits that tie with
    limits), its kinds' count."""
    kinds = rng.randint(1, 3)
    whole = rng.random() < 0.5
    times = random_times(rng, kinds=kinds, whole=whole, rows=rng.randint(1, 60))
    machines = [Machine(name=f"m{index}", kind=f"k{index % kinds}") for index in range(kinds)]
    jobs = [Job(name=f"j{row}", user="u", arrival=0.0, processing_time={f"k{kind}": float(times[row, kind]) for kind in range(kinds)
                                                                        if np.isfinite(times[row, kind])} or {"k0": 1.0})
            for row in range(times.shape[0])]
    every_job = prepare_on(fleet(machines=machines, now=0.0), jobs)
    delay = np.array([float(rng.randint(0, 20)) if whole else rng.uniform(0, 100) for _ in range(kinds)])
    return _Vacancy(every_job, delay), kinds


def test_the_vacancy_need_in_c_is_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8713)
    beyond = 0
    for _ in range(1500):
        vacancy, kinds = random_vacancy(rng)
        whole = rng.random() < 0.5
        waits = np.array([float(rng.randint(0, 30)) if whole else rng.uniform(0, 300) for _ in range(rng.randint(1, 40))])
        if rng.random() < 0.2:
            waits[0] = -0.0
        counts = np.array([float(rng.choice([-1, 1, 1, 2, 5])) for _ in range(waits.shape[0])])
        kind, other, wait = rng.randrange(kinds), rng.randrange(kinds), float(rng.choice(waits.tolist() + [0.0]))
        if rng.random() < 0.5:
            # Waits exactly at a row's limit less n steps: the comparison's edge, strict.
            row, n = rng.randrange(vacancy._times.shape[0]), rng.randint(1, 3)
            own, step = float(vacancy._times[row, kind]), float(vacancy._times[row, other])
            edge = own + (wait - vacancy.tolerance) - step * n if np.isfinite(own) and np.isfinite(step) else np.nan
            if np.isfinite(edge):
                waits[rng.randrange(waits.shape[0])] = edge
        in_c, in_numpy = both_ways(lambda: vacancy._needs(kind, wait, other, waits, counts), monkeypatch, allox)  # noqa: B023
        assert in_c.tobytes() == in_numpy.tobytes()
        with np.errstate(divide="ignore", invalid="ignore"):
            beyond += bool((vacancy._times[:, kind] / vacancy._times[:, other] > 64).any())
    assert beyond > 50  # rows past the terms summed, through NumPy's path


def test_the_vacancy_need_of_the_waiting_rows_alone_is_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    """With Algorithm 2's waiting rows given (``live``), ``vacancy_needs`` sums their need alone:
    each waiting row's is NumPy's bit for bit (over every row), a row no longer waiting gets 0."""
    rng = random.Random(8714)
    skipped = 0
    for _ in range(600):
        vacancy, kinds = random_vacancy(rng)
        rows = vacancy._times.shape[0]
        live = np.array([int(rng.random() < 0.6) for _ in range(rows)], dtype=np.int64)
        waits = np.array([float(rng.randint(0, 30)) for _ in range(rng.randint(1, 12))])
        counts = np.array([float(rng.choice([-1, 1, 2])) for _ in range(waits.shape[0])])
        kind, other, wait = rng.randrange(kinds), rng.randrange(kinds), float(rng.choice(waits.tolist() + [0.0]))
        with monkeypatch.context() as numpy_only:
            numpy_only.setattr(allox, "native", None)
            every_row = vacancy._needs(kind, wait, other, waits, counts)
        waiting_only = np.full(rows, np.nan)
        beyond = native.vacancy_needs(vacancy._times, kind, other, wait - vacancy.tolerance, waits, counts, waiting_only, live)
        if beyond:
            continue  # a row past 64 terms: the caller sums every row in NumPy
        waiting = live.astype(bool)
        assert waiting_only[waiting].tobytes() == every_row[waiting].tobytes()
        assert not waiting_only[~waiting].any()  # a row no longer waiting gets 0
        skipped += int((~waiting & (every_row != 0)).sum())
    assert skipped > 100  # rows whose need is not 0 were left out


def test_the_vacancy_test_in_c_is_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_Vacancy.empty`` on random machines (waits that tie: classes of several machines, so
    machines listed before), jobs (a kind left out, times of 0: not told) and user sets, with
    starts moving machines between the tests."""
    rng = random.Random(8714)
    told = {True: 0, False: 0}
    for _ in range(600):
        kinds = ["gpu", "cpu", "tpu"][: rng.randint(1, 3)]
        listed = [*kinds, *(rng.choice(kinds) for _ in range(rng.randint(0, 30)))]
        machines = [Machine(name=f"m{index}", kind=kind) for index, kind in enumerate(listed)]
        busy = {machine.name: float(rng.choice([5, 10, 10, 60])) for machine in machines if rng.random() < 0.4}
        arrays = fleet(machines=machines, now=0.0, busy_until=busy)
        jobs = random_jobs(rng, kinds, ["u0", "u1", "u2", "u3"], count=rng.randint(1, 60), longest=8, zero_share=0.02)
        every_job = prepare_on(arrays, jobs)
        delay = arrays.delay.copy()
        vacancy = _Vacancy(every_job, delay)
        left = _Left(every_job)
        for _ in range(6):
            rows = left.rows(frozenset(rng.sample(["u0", "u1", "u2", "u3"], rng.randint(1, 4))))
            position = rng.randrange(len(machines))
            if rows.shape[0]:
                in_c, in_numpy = both_ways(lambda: vacancy.empty(rows, position), monkeypatch, allox)  # noqa: B023
                assert in_c == in_numpy
                told[in_c] += 1
            moved = rng.randrange(len(machines))  # a start: the machine waits a job's time longer
            wait = float(delay[moved]) + float(rng.randint(1, 8))
            vacancy.moved(moved, float(delay[moved]), wait)
            delay[moved] = wait
            left.remove(rng.randrange(len(jobs)))
    assert told[True] > 300 and told[False] > 300


def test_bad_buffers_are_refused_by_name() -> None:
    one = np.zeros(1, dtype=np.int64)
    out = np.zeros(2, dtype=np.int64)
    with pytest.raises(TypeError, match="fastest"):
        native.uncontended_plan(one, np.zeros(1), one, np.zeros(1), 1, out.copy(), one.copy(), one.copy())
    with pytest.raises(TypeError, match="delay"):
        native.uncontended_plan(one, one, one, one, 1, out.copy(), one.copy(), one.copy())
    with pytest.raises(ValueError, match="rows of fastest"):  # a row beyond fastest
        native.uncontended_plan(one + 3, one, one, np.zeros(1), 1, out.copy(), one.copy(), one.copy())
    with pytest.raises(ValueError, match="kinds below kind_count"):  # a machine of a kind beyond the kinds
        native.uncontended_plan(one, one, one + 4, np.zeros(1), 1, out.copy(), one.copy(), one.copy())
    times = np.ones((2, 2))
    with pytest.raises(TypeError, match="waits"):
        native.vacancy_needs(times, 0, 1, 0.0, np.zeros(1, dtype=np.int64), np.ones(1), np.zeros(2))
    with pytest.raises(ValueError, match="a count per wait"):
        native.vacancy_needs(times, 0, 2, 0.0, np.zeros(1), np.ones(1), np.zeros(2))
    flags = np.ones(2, dtype=np.int64)
    with pytest.raises(TypeError, match="runnable"):
        native.vacancy_empty(one, flags, flags, np.zeros(2), one, np.zeros(1), 0)
    with pytest.raises(ValueError, match="rows of positive"):
        native.vacancy_empty(one + 2, flags, np.ones((2, 1), dtype=np.int64), np.zeros(2), one, np.zeros(1), 0)


def test_algorithm_2_and_admission_decide_the_same_with_its_steps_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_decisions_alike(random.Random(8712), monkeypatch, allox)


# A decision of Algorithm 2 in a child process, its extension as the script before it leaves it:
# whether allox uses it, and the starts.
DECIDE = """
from scheduler.matching.model import Job, Machine
allox = importlib.import_module("scheduler.matching.allox")
jobs = [Job(name=f"j{i}", user=f"u{i % 3}", arrival=0.0, processing_time={"gpu": float(t), "cpu": float(3 * t)})
        for i, t in enumerate(json.loads(sys.argv[1]))]
machines = [Machine(name=f"g{i}", kind="gpu") for i in range(4)] + [Machine(name=f"c{i}", kind="cpu") for i in range(4)]
starts = allox.AlloxScheduler(alpha=0.3).on_machine_free(now=0.0, free_machines=machines, pending_jobs=jobs, busy_until={})
print(json.dumps({"in_use": allox.native is not None, "starts": [(a.job.name, a.machine.name) for a in starts]}))
"""

FALLBACK = """
import importlib, json, sys
sys.modules["scheduler.matching._solve"] = None  # as if built without a C compiler: the import fails
""" + DECIDE

STALE = """
import glob, importlib, importlib.util, json, sys, types
# The built extension loaded from its file, before the package (whose modules import it) is.
spec = importlib.util.spec_from_file_location("scheduler.matching._solve", glob.glob("scheduler/matching/_solve*.so")[0])
real = importlib.util.module_from_spec(spec)
stale = types.ModuleType("scheduler.matching._solve")  # built before Algorithm 2's steps were in it: canonical's levels alone
stale.canonical_levels = real.canonical_levels
sys.modules["scheduler.matching._solve"] = stale
""" + DECIDE


def decided_in_a_child(script: str) -> bool:
    """Runs ``script`` on a few jobs; whether its allox used the extension (its starts are
    asserted to be this process's, the extension in use here)."""
    times = [4, 4, 1, 2, 2, 7, 3, 5]
    done = subprocess.run([sys.executable, "-c", script, json.dumps(times)], cwd=ROOT, capture_output=True, text=True, check=True)
    answer = json.loads(done.stdout)
    jobs = [Job(name=f"j{i}", user=f"u{i % 3}", arrival=0.0, processing_time={"gpu": float(t), "cpu": float(3 * t)}) for i, t in enumerate(times)]
    machines = [Machine(name=f"g{i}", kind="gpu") for i in range(4)] + [Machine(name=f"c{i}", kind="cpu") for i in range(4)]
    starts = allox.AlloxScheduler(alpha=0.3).on_machine_free(now=0.0, free_machines=machines, pending_jobs=jobs, busy_until={})
    assert allox.native is not None and answer["starts"] == [[a.job.name, a.machine.name] for a in starts]
    return bool(answer["in_use"])


def test_without_the_extension_numpy_writes_the_same_plans() -> None:
    assert not decided_in_a_child(FALLBACK)


def test_an_extension_built_from_an_older_source_leaves_the_steps_to_numpy() -> None:
    assert not decided_in_a_child(STALE)
