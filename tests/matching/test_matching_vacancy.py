"""Algorithm 2's shortcuts at small α decide exactly as solving every plan does.

At α < 1 Algorithm 2 makes a plan (a matching) for each user set a free machine asks for, and
§4.4's raise asks for more and more users on a machine the plans leave empty. Two shortcuts
(``allox.py``) answer without solving: ``_Vacancy`` tells that every optimal matching of a set
leaves the machine empty (no plan is made), and ``_Left.uncontended`` writes the matching where
no two jobs contend as ``solve`` would (``_uncontended``). Here ``decide`` with them is compared with
``decide`` without them (every plan solved, as before they existed) on random live states —
bursts on many free machines, full clusters, virtual clusters, gangs, α 1, 0.3, 0.1 and 0,
AlloX+, grids of 0, 1 and 60 s, whole-number times (ties) in a third of them — and, on
instances without ties, with Algorithm 2 written out as the paper has it (a scipy solve per
free machine and user set); and, plan by plan, every plan the bound tells empty is solved
anyway and leaves the machine empty.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Callable

import numpy as np
import pytest

from scheduler.matching import allox
from scheduler.matching.admission import AdmissionDecision, RunningJob, WaitingJob, decide
from scheduler.matching.allox import AlloxScheduler, _Left, _Plan, _Vacancy
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand, Job, Machine
from scheduler.matching.solve import FloatArray, Fleet, IntArray, Problem, contended_plan, contended_plan_of, fleet, prepare_on, rows_on, solve
from tests.matching.test_matching_fast_path import SHARES, instance, straightforward

DEMAND = {"cpu": Demand(cpu=8, memory=8), "gpu": Demand(gpu=1, cpu=1, memory=4)}


def _not_written(self: _Left, rows: IntArray, delay: FloatArray, machines: Fleet) -> _Plan | None:
    """Every plan solved (what Algorithm 2 did before the shortcuts)."""
    return None


def _never_empty(self: _Vacancy, rows: IntArray, position: int) -> bool:
    return False


def live_state(rng: random.Random, *, pools: bool) -> dict[str, object]:
    """A live state: a burst on many free machines, or a nearly full cluster."""
    now = 50_000.0
    users = [f"u{i}" for i in range(rng.randint(2, 10))]
    whole = rng.random() < 1 / 3  # whole-number times: ties between jobs and between machines
    full = rng.random() < 0.3

    def seconds() -> dict[str, float]:
        gpu = rng.uniform(60, 900)
        times = {"gpu": gpu, "cpu": gpu * rng.uniform(1.2, 8)}
        if whole:
            times = {kind: float(round(value / 60) or 1) * 60 for kind, value in times.items()}
        if rng.random() < 0.1:
            del times[rng.choice(["gpu", "cpu"])]
        if rng.random() < 0.05:
            times["gpu"] = times.get("cpu", 100.0) * rng.uniform(1.1, 2)  # a job faster on a CPU
        return times

    nodes = [NodeResources(name=f"n{i}", cpu=float(rng.choice([9, 17, 41])), gpu=rng.randint(0, 4), memory=256.0)
             for i in range(rng.randint(1, 6))]
    gpus = sum(n.gpu for n in nodes)
    slots = sum(max(0, int((n.cpu - n.gpu) // 8)) for n in nodes)
    busy = rng.randint(0, max(0, gpus + slots - rng.randint(1, 3))) if full else rng.randint(0, (gpus + slots) // 3)
    waiting = []
    for index in range(rng.randint(1, 70)):
        times = seconds()
        waiting.append(WaitingJob(key=f"w{index}", user=rng.choice(users), arrival=now - (float(rng.randint(0, 10)) if whole else rng.uniform(0, 600)),
                                  seconds=times, demand=DEMAND, pods=rng.choice([1] * 12 + [2]),
                                  pool=rng.choice([None, "a", "b"]) if pools else None))
    running = []
    for index in range(busy):
        times = {"gpu": rng.uniform(60, 900)}
        times["cpu"] = times["gpu"] * rng.uniform(1.5, 6)
        kind = rng.choice(["gpu", "cpu"])
        started = now - (float(rng.randint(0, 15)) * 60 if whole else rng.uniform(0, 900))
        running.append(RunningJob(key=f"r{index}", user=rng.choice(users), kind=kind, started=started, seconds=times, demand=DEMAND,
                                  pool=rng.choice([None, "a", "b"]) if pools else None))
    capacity = Capacity(cpu=sum(n.cpu for n in nodes), gpu=max(1, gpus), memory=256.0 * len(nodes))
    state: dict[str, object] = {"now": now, "waiting": waiting, "running": running, "free_nodes": nodes, "capacity": capacity,
                                "omega_grid_seconds": rng.choice([0.0, 1.0, 60.0])}
    if pools:
        state["gpu_pools"] = {"a": rng.randint(0, 4), "b": rng.randint(0, 3)}
    return state


def both(monkeypatch: pytest.MonkeyPatch, **arguments: object) -> tuple[AdmissionDecision, AdmissionDecision]:
    fast = decide(**arguments)  # type: ignore[arg-type]
    with monkeypatch.context() as patched:
        patched.setattr(_Left, "uncontended", _not_written)
        patched.setattr(_Vacancy, "empty", _never_empty)
        patched.setattr(allox, "runs", None)  # a run of visits in C writes uncontended plans too
        slow = decide(**arguments)  # type: ignore[arg-type]
    return fast, slow


@pytest.mark.parametrize("pools", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_decide_with_the_shortcuts_equals_decide_solving_every_plan(seed: int, pools: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(9100 + seed + 100 * pools)
    told = {"empty": 0, "written": 0}
    empty, written = _Vacancy.empty, _Left.uncontended

    def counting_empty(self: _Vacancy, rows: IntArray, position: int) -> bool:
        found = empty(self, rows, position)
        told["empty"] += found
        return found

    def counting_plan(self: _Left, rows: IntArray, delay: FloatArray, machines: Fleet) -> _Plan | None:
        plan = written(self, rows, delay, machines)
        told["written"] += plan is not None
        return plan

    monkeypatch.setattr(_Vacancy, "empty", counting_empty)
    monkeypatch.setattr(_Left, "uncontended", counting_plan)
    for _ in range(20):
        state = live_state(rng, pools=pools)
        for alpha in (1.0, 0.3, 0.1, 0.0):
            fast, slow = both(monkeypatch, alpha=alpha, **state)
            assert fast == slow
        fast, slow = both(monkeypatch, policy="allox+", alpha=0.1, **state)
        assert fast == slow
    assert told["empty"] > 0 and told["written"] > 0  # the shortcuts were taken, not only compared


@pytest.mark.parametrize("seed", range(4))
def test_algorithm_2_with_the_shortcuts_decides_as_the_paper_does(seed: int) -> None:
    """Without ties, the same starts as a scipy solve per free machine and user set."""
    rng = random.Random(9300 + seed)
    for alpha in [0.0, 0.1, 0.3] * 10:
        free, busy, waiting, running = instance(rng, jobs=rng.randint(5, 40), users=rng.randint(2, 8))
        expected = straightforward(alpha=alpha, now=100.0, free=free, busy=busy, waiting=waiting, running=running)
        decided = AlloxScheduler(alpha=alpha, shares=SHARES).on_machine_free(now=100.0, free_machines=free, pending_jobs=waiting,
                                                                             busy_until=busy, running=running)
        assert [(a.job.name, a.machine.name) for a in decided] == expected


def burst_of_ten_users(jobs: int) -> tuple[float, list[WaitingJob], list[NodeResources], Capacity]:
    """``jobs`` Jobs of ten users, several times slower on a CPU slot, on 30 idle nodes of 5
    GPUs and 5 CPU slots: now, the Jobs, the nodes and their capacity."""
    rng = np.random.default_rng(3)
    now = 10_000.0
    waiting = []
    for index in range(jobs):
        gpu = float(rng.uniform(60, 3600))
        waiting.append(WaitingJob(key=f"w{index:03d}", user=f"u{index % 10}", arrival=now - 300 + index,
                                  seconds={"gpu": gpu, "cpu": gpu * float(rng.uniform(1.8, 10))}, demand=DEMAND))
    nodes = [NodeResources(name=f"n{i:02d}", cpu=45.0, gpu=5, memory=256.0) for i in range(30)]
    return now, waiting, nodes, Capacity(cpu=45.0 * 30, gpu=150, memory=256.0 * 30)


def test_a_burst_at_small_alpha_solves_few_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """The case the shortcuts are for: many free machines, many Jobs, ten users. Plans a CPU
    slot asks for that certainly leave it empty are not made, and the jobs that contend for
    nothing are placed without a solve; the decision is the one solving every plan gives."""
    now, waiting, nodes, capacity = burst_of_ten_users(300)
    solves = 0

    def counted(*args: object, **kwargs: object) -> object:
        nonlocal solves
        solves += 1
        return solve(*args, **kwargs)  # type: ignore[arg-type]

    def counted_plan(problem: Problem) -> tuple[IntArray, IntArray, Callable[[], bool]]:
        nonlocal solves
        solves += 1
        return contended_plan(problem)

    def counted_plan_of(problem: Problem, rows: IntArray, machines: Fleet) -> tuple[IntArray, IntArray, Callable[[], bool]] | None:
        nonlocal solves
        planned = contended_plan_of(problem, rows, machines)
        solves += planned is not None  # else contended_plan, counted there
        return planned

    monkeypatch.setattr(allox, "solve", counted)
    monkeypatch.setattr(allox, "contended_plan", counted_plan)  # a plan's solve, its times left out
    monkeypatch.setattr(allox, "contended_plan_of", counted_plan_of)  # the same in one call
    fast = decide(now=now, waiting=waiting, running=[], free_nodes=nodes, capacity=capacity, alpha=0.1, plan_queue=False)
    quick = solves
    solves = 0
    with monkeypatch.context() as patched:
        patched.setattr(_Left, "uncontended", _not_written)
        patched.setattr(_Vacancy, "empty", _never_empty)
        patched.setattr(allox, "runs", None)
        slow = decide(now=now, waiting=waiting, running=[], free_nodes=nodes, capacity=capacity, alpha=0.1, plan_queue=False)
    assert fast == slow
    assert len(fast.starts) >= 150
    assert quick * 4 < solves


@pytest.mark.parametrize("seed", range(3))
def test_the_need_summed_over_positions_is_the_need_summed_over_machines(seed: int) -> None:
    """``_Vacancy._needs`` counts, per row, the (machine, n) with ``n·p + d < limit`` by a search
    per n (and over the machines for rows with many terms): the count a row × machines matrix
    gives, machines taken out (negative counts) included."""
    rng = np.random.default_rng(seed)
    rows = 200
    gpu = rng.uniform(1, 100, rows)
    times = np.stack([gpu * rng.uniform(1.2, 300, rows), gpu], axis=1)  # cpu, gpu: some rows need > 64 terms
    times[rng.random(rows) < 0.1, 1] = np.inf
    waits = np.concatenate([[0.0, 300.0, 0.0], rng.uniform(0, 2000, 50), np.round(rng.uniform(0, 20, 20)) * 60])
    counts = rng.integers(-2, 4, waits.shape[0]).astype(np.float64)
    vacancy = _Vacancy.__new__(_Vacancy)
    vacancy._times = times
    vacancy._plain = True  # float64, a contiguous row a job: summed in C where _solve.c was built
    vacancy._tolerance = 1e-6
    vacancy._live = None  # every row's need
    limit = times[:, 0] + 30.0 - 1e-6
    for few in (waits.shape[0], 2, 5):  # searched among many waits; compared with a start's few
        found = vacancy._needs(0, 30.0, 1, waits[:few], counts[:few])
        expected = np.zeros(rows)
        for row in range(rows):
            if not np.isfinite(times[row, 1]):
                continue
            for wait, count in zip(waits[:few], counts[:few]):
                n = 1
                while n * times[row, 1] + wait < limit[row]:
                    expected[row] += count
                    n += 1
        np.testing.assert_array_equal(found, expected)


@pytest.mark.parametrize("seed", range(6))
def test_a_plan_the_bound_tells_empty_leaves_the_machine_empty_when_solved(seed: int) -> None:
    """Plan by plan: wherever ``_Vacancy.empty`` tells a machine empty (for the machines as they
    are, and again after starts have moved some machines' waits), solving the plan anyway —
    the folded solve and the paper's full Q — gives that machine no job. Random instances of
    GPUs and CPU slots, free and busy, a few jobs or many, whole-number times (ties) in half of them."""
    rng = np.random.default_rng(9500 + seed)
    told = 0
    for _ in range(12):
        whole = bool(rng.random() < 0.5)
        now = 1_000.0
        machines = [Machine(name=f"g{i}", kind="gpu") for i in range(int(rng.integers(1, 10)))]
        machines += [Machine(name=f"c{i}", kind="cpu") for i in range(int(rng.integers(1, 10)))]
        busy = {m.name: now + (float(rng.integers(1, 8)) * 60 if whole else float(rng.uniform(1, 900)))
                for m in machines if rng.random() < 0.3}
        jobs = []
        for index in range(int(rng.integers(3, 40))):
            gpu = float(rng.integers(1, 15)) * 60 if whole else float(rng.uniform(60, 900))
            times = {"gpu": gpu, "cpu": gpu * (float(rng.integers(2, 6)) if whole else float(rng.uniform(1.2, 8)))}
            if rng.random() < 0.1:
                del times[str(rng.choice(["gpu", "cpu"]))]
            jobs.append(Job(name=f"j{index}", user="u", arrival=now, processing_time=times))
        arrays = fleet(machines=machines, now=now, busy_until=busy)
        every_job = prepare_on(arrays, jobs)
        delay = arrays.delay.copy()
        vacancy = _Vacancy(every_job, delay)
        for _start in range(3):
            for _ in range(4):
                rows = np.flatnonzero(rng.random(len(jobs)) < rng.uniform(0.3, 1.0)).astype(np.int64)
                if not rows.shape[0]:
                    continue
                for position in range(len(machines)):
                    if not vacancy.empty(rows, position):
                        continue
                    told += 1
                    problem = rows_on(every_job, rows, replace(arrays, delay=delay.copy()))
                    for queues in (solve(problem), solve(problem, bounded=False)):
                        assert queues.bounds[position] == queues.bounds[position + 1]
            # A start: a machine's wait moves (as Algorithm 2 moves it), the bound takes it in.
            position = int(rng.integers(0, len(machines)))
            old, new = float(delay[position]), float(delay[position]) + float(rng.integers(1, 10)) * 60
            vacancy.moved(position, old, new)
            delay[position] = new
    assert told > 50  # the bound was asked where it fires, not only where it declines
