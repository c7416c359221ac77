"""The fast path decides as the straightforward one does.

Fast: the folded solve (classes of identical slots, priced in groups, ``transport.py``) and
Algorithm 2 sharing one solve among the free machines while the users considered stay the same.
Straightforward: scipy's ``linear_sum_assignment`` on the full Q, and Algorithm 2 written out as
the paper has it — rank the users, match the considered users' jobs from scratch for every free
machine, start the first job the matching puts on it. Both pass through the same canonical
choice among equally good matchings (``solve.canonical``), so on instances without tied
processing times the decisions must be identical, not merely as good.
"""

from __future__ import annotations

import math
import random
from functools import partial
from typing import Any, Callable

import numpy as np
import pytest

from scheduler.matching.allox import AlloxScheduler
from scheduler.matching.fairness import Capacity, DemandShare, considered_count, rank_users, user_progress
from scheduler.matching.model import Assignment, Demand, Job, Machine
from scheduler.matching.solve import IntArray, Problem, build, prepare, solve
from scheduler.matching.visit_order import visiting_order

SHARES = DemandShare(capacity=Capacity(cpu=64, gpu=8, memory=256),
                     default_demand={"gpu": Demand(gpu=1, cpu=1), "cpu": Demand(cpu=8, memory=16)})


def instance(rng: random.Random, *, jobs: int, users: int) -> tuple[list[Machine], dict[Machine, float], list[Job], list[Assignment]]:
    """Idle machines and machines busy until a point of a coarse grid (so that several free at the
    same time and fold into one class), waiting jobs with continuous times, and the running jobs."""
    now = 100.0
    free = [Machine(name=f"{kind}-idle-{i}", kind=kind) for kind in ("gpu", "cpu") for i in range(rng.randint(1, 5))]
    busy: dict[Machine, float] = {}
    running: list[Assignment] = []
    for kind in ("gpu", "cpu"):
        for i in range(rng.randint(0, 4)):
            machine = Machine(name=f"{kind}-busy-{i}", kind=kind)
            busy[machine] = now + 60.0 * rng.randint(1, 3)
            gpu = rng.uniform(10, 300)
            job = Job(name=f"run-{kind}-{i}", user=f"u{rng.randrange(users)}", arrival=0.0,
                      processing_time={"gpu": gpu, "cpu": gpu * rng.uniform(1.5, 8)})
            running.append(Assignment(job=job, machine=machine, start=0.0, finish=busy[machine]))
    waiting = []
    for j in range(jobs):
        gpu = rng.uniform(10, 300)
        times = {"gpu": gpu, "cpu": gpu * rng.uniform(1.2, 9)}
        if rng.random() < 0.15:
            del times[rng.choice(["gpu", "cpu"])]  # some jobs have one configuration only
        waiting.append(Job(name=f"j{j}", user=f"u{rng.randrange(users)}", arrival=rng.uniform(0, now), processing_time=times))
    return free, busy, waiting, running


def straightforward(*, alpha: float, now: float, free: list[Machine], busy: dict[Machine, float], waiting: list[Job],
                    running: list[Assignment]) -> list[tuple[str, str]]:
    """Algorithm 2 with §4.4's raise, one scipy solve per free machine and user set, the free
    machines visited slowest kind first (visit_order.py)."""
    free = visiting_order(free, waiting)
    machines = [*free, *busy]
    until = {m.name: t for m, t in busy.items()}
    left = list(waiting)
    holding = list(running)
    users = {job.user for job in waiting} | {a.job.user for a in running}
    starts = []
    for machine in free:
        if not left:
            break
        ranking = rank_users(users, user_progress(holding, SHARES))
        count = considered_count(alpha=alpha, users=len(ranking))
        chosen = None
        while count:
            considered = set(ranking[:count])
            candidates = [job for job in left if job.user in considered]
            if candidates:
                problem = prepare(jobs=candidates, machines=machines, now=now, busy_until=until)
                queues = solve(problem, method="scipy")
                first = queues.first_job(machines.index(machine))
                if first is not None:
                    chosen = candidates[first]
                    break
            needing = [i for i in range(count, len(ranking))
                       if any(job.user == ranking[i] and job.can_run_on(machine.kind) for job in left)]
            count = needing[0] + 1 if needing else 0
        if chosen is None:
            continue
        finish = now + chosen.processing_time[machine.kind]
        until[machine.name] = finish
        left.remove(chosen)
        holding.append(Assignment(job=chosen, machine=machine, start=now, finish=finish))
        starts.append((chosen.name, machine.name))
    return starts


@pytest.mark.parametrize("seed", range(8))
def test_the_folded_solve_and_scipy_give_the_same_schedule(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(25):
        free, busy, waiting, _ = instance(rng, jobs=rng.randint(2, 40), users=3)
        problem = prepare(jobs=waiting, machines=[*free, *busy], now=100.0, busy_until={m.name: t for m, t in busy.items()})
        fast, reference = solve(problem, method="classes"), solve(problem, method="scipy")
        assert fast.total_completion_time == pytest.approx(reference.total_completion_time)
        assert fast.bounds.tolist() == reference.bounds.tolist()
        assert fast.job.tolist() == reference.job.tolist()
        np.testing.assert_allclose(fast.start, reference.start)


@pytest.mark.parametrize("alpha", [0.2, 0.5, 1.0])
@pytest.mark.parametrize("seed", range(5))
def test_algorithm_2_starts_the_same_jobs_on_the_same_machines(alpha: float, seed: int) -> None:
    rng = random.Random(1000 * seed + int(alpha * 10))
    for _ in range(12):
        free, busy, waiting, running = instance(rng, jobs=rng.randint(1, 30), users=rng.randint(1, 6))
        fast = AlloxScheduler(alpha=alpha, shares=SHARES).on_machine_free(
            now=100.0, free_machines=free, pending_jobs=waiting, busy_until=busy, running=running)
        expected = straightforward(alpha=alpha, now=100.0, free=free, busy=busy, waiting=waiting, running=running)
        assert [(a.job.name, a.machine.name) for a in fast] == expected
        assert all(math.isclose(a.finish - a.start, a.job.processing_time[a.kind]) for a in fast)


@pytest.mark.parametrize("seed", range(6))
def test_a_full_cluster_folds_and_decides_as_scipy(seed: int) -> None:
    """The live steady state: most machines busy, each until its own time (no grid), a few idle,
    many more jobs than machines. Nearly every slot is a class of its own; the folded solve
    still takes it (it prices groups of kind and position, not classes) and must decide what
    scipy decides on the full Q."""
    rng = random.Random(7000 + seed)
    for _ in range(3):
        machines, until = [], {}
        for kind in ("gpu", "cpu"):
            for i in range(rng.randint(8, 30)):
                machine = Machine(name=f"{kind}-{i}", kind=kind)
                machines.append(machine)
                if rng.random() < 0.85:
                    until[machine.name] = 100.0 + rng.uniform(0, 3000)
        jobs = []
        for j in range(rng.randint(40, 150)):
            gpu = rng.uniform(60, 3600)
            jobs.append(Job(name=f"j{j}", user="u", arrival=rng.uniform(0, 100), processing_time={"gpu": gpu, "cpu": gpu * rng.uniform(1.8, 10)}))
        problem = prepare(jobs=jobs, machines=machines, now=100.0, busy_until=until)
        assert build(problem).method == "classes"
        fast, reference = solve(problem), solve(problem, method="scipy")
        assert fast.bounds.tolist() == reference.bounds.tolist()
        assert fast.job.tolist() == reference.job.tolist()
        np.testing.assert_allclose(fast.start, reference.start)


def _paper_plan(problem: Problem) -> tuple[IntArray, IntArray, Callable[[], bool]]:
    """A plan's queues (job, bounds) from the paper's unbounded Q, solved by scipy (never
    taken for the only optimal matching: each plan Algorithm 2 needs is solved)."""
    queues = solve(problem, bounded=False)
    return queues.job, queues.bounds, lambda: False


@pytest.mark.parametrize("alpha", [0.3, 1.0])
@pytest.mark.parametrize("seed", range(4))
def test_admission_decides_as_with_the_paper_s_full_matrix_on_random_live_queues(alpha: float, seed: int,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """decide() on random live queues (idle and busy machines, running Jobs of several users, ω on
    admission's grid or exact) decides what it decides when every matching is scipy's on the
    paper's unbounded Q (no position bound, no fold): the same starts on the same machines, the
    same queue (kinds, positions, expected starts) and progress."""
    from scheduler.matching import admission, allox
    from scheduler.matching.admission import RunningJob, WaitingJob, decide
    from scheduler.matching.capacity import NodeResources
    from scheduler.matching.fairness import Capacity

    rng = random.Random(9000 + seed)
    now = 10_000.0
    for _ in range(4):
        nodes = [NodeResources(name=f"n{i}", cpu=rng.choice([9.0, 17.0]), gpu=rng.randint(0, 2), memory=64.0) for i in range(rng.randint(1, 3))]
        demand = {"cpu": Demand(cpu=8, memory=8), "gpu": Demand(gpu=1, cpu=1, memory=4)}
        users = [f"u{i}" for i in range(rng.randint(1, 4))]
        waiting = []
        for j in range(rng.randint(1, 18)):
            gpu = rng.uniform(60, 900)
            waiting.append(WaitingJob(key=f"w{j}", user=rng.choice(users), arrival=now - rng.uniform(0, 600),
                                      seconds={"gpu": gpu, "cpu": gpu * rng.uniform(1.5, 6)}, demand=demand))
        running = []
        for j in range(rng.randint(0, 4)):
            gpu = rng.uniform(60, 900)
            running.append(RunningJob(key=f"r{j}", user=rng.choice(users), kind=rng.choice(["gpu", "cpu"]), started=now - rng.uniform(0, 900),
                                      seconds={"gpu": gpu, "cpu": gpu * rng.uniform(1.5, 6)}, demand=demand))
        grid = rng.choice([0.0, 60.0])
        capacity = Capacity(cpu=sum(n.cpu for n in nodes), gpu=max(1, sum(n.gpu for n in nodes)), memory=64.0 * len(nodes))

        def decided() -> Any:
            return decide(now=now, waiting=waiting, running=running, free_nodes=nodes, capacity=capacity, alpha=alpha, omega_grid_seconds=grid)

        fast = decided()
        with monkeypatch.context() as patched:
            paper = partial(solve, bounded=False)
            patched.setattr(allox, "solve", paper)
            patched.setattr(allox, "contended_plan", _paper_plan)  # Algorithm 2's plans
            patched.setattr(admission, "solve", paper)
            reference = decided()
        assert fast.starts == reference.starts
        assert [(q.key, q.kind, q.position) for q in fast.queue] == [(q.key, q.kind, q.position) for q in reference.queue]
        for ours, theirs in zip(fast.queue, reference.queue):
            assert ours.expected_start_seconds == pytest.approx(theirs.expected_start_seconds)
        assert fast.progress == pytest.approx(reference.progress)


@pytest.mark.parametrize("alpha", [0.1, 0.3])
@pytest.mark.parametrize("seed", range(4))
def test_a_burst_on_many_free_machines_decides_as_the_paper_does(alpha: float, seed: int) -> None:
    """After a burst: many users, many free machines of both kinds, few busy. At small α each start
    changes the users considered and a free machine their plan leaves empty raises α, so plans
    for many user sets are made, and those a start leaves optimal are kept for the next
    machines; no job is contended for early on, so matchings are made without solving. The
    starts must be the paper's, solved afresh with scipy for every machine and user set."""
    rng = random.Random(500 + seed)
    now = 100.0
    for _ in range(3):
        free = [Machine(name=f"{kind}-idle-{i}", kind=kind) for i in range(rng.randint(10, 25)) for kind in ("gpu", "cpu")]
        busy = {Machine(name=f"{kind}-busy-{i}", kind=kind): now + 60.0 * rng.randint(1, 3) for kind in ("gpu", "cpu") for i in range(rng.randint(0, 4))}
        users = rng.randint(5, 9)
        waiting = []
        for j in range(rng.randint(20, 70)):
            gpu = rng.uniform(10, 300)
            times = {"gpu": gpu, "cpu": gpu * rng.uniform(0.6, 6)}  # a few jobs are faster on CPU
            if rng.random() < 0.1:
                del times[rng.choice(["gpu", "cpu"])]
            waiting.append(Job(name=f"j{j}", user=f"u{rng.randrange(users)}", arrival=rng.uniform(0, now), processing_time=times))
        fast = AlloxScheduler(alpha=alpha, shares=SHARES).on_machine_free(now=now, free_machines=free, pending_jobs=waiting, busy_until=busy)
        expected = straightforward(alpha=alpha, now=now, free=free, busy=busy, waiting=waiting, running=[])
        assert [(a.job.name, a.machine.name) for a in fast] == expected


@pytest.mark.parametrize("seed", range(6))
def test_jobs_that_contend_for_nothing_are_matched_without_solving_as_a_solve_would(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each job's fastest kind has a free machine for every job that prefers it: the matching is
    written without solving, and it is the one the folded solve and scipy give."""
    import importlib

    solve_module = importlib.import_module("scheduler.matching.solve")  # the package exports solve(), the function
    rng = random.Random(3000 + seed)
    for _ in range(20):
        machines = [Machine(name=f"{kind}-{i}", kind=kind) for kind in ("gpu", "cpu", "tpu") for i in range(rng.randint(0, 12))]
        rng.shuffle(machines)
        until = {m.name: 100.0 + 60.0 * rng.randint(1, 3) for m in machines if rng.random() < 0.3}
        free_kinds = [m.kind for m in machines if m.name not in until]
        jobs = []
        for j in range(rng.randint(1, 12)):
            kinds = sorted({m.kind for m in machines})
            times = {kind: rng.uniform(10, 300) for kind in kinds if rng.random() < 0.8} or {kinds[0]: rng.uniform(10, 300)}
            fastest = min(times, key=times.__getitem__)
            if free_kinds.count(fastest) <= sum(1 for job in jobs if min(job.processing_time, key=job.processing_time.__getitem__) == fastest):
                continue  # it would contend
            jobs.append(Job(name=f"j{j}", user="u", arrival=rng.uniform(0, 100), processing_time=times))
        if not jobs:
            continue
        problem = prepare(jobs=jobs, machines=machines, now=100.0, busy_until=until)
        assert solve_module._uncontended(problem) is not None
        solved = []
        monkeypatch.setattr(solve_module, "build", lambda *a, **k: solved.append(1) or build(*a, **k))
        fast = solve(problem)
        assert not solved
        for method in ("classes", "scipy"):
            reference = solve(problem, method=method)
            assert fast.bounds.tolist() == reference.bounds.tolist()
            assert fast.job.tolist() == reference.job.tolist()
            np.testing.assert_allclose(fast.finish, reference.finish)
            assert fast.total_completion_time == pytest.approx(reference.total_completion_time)
        monkeypatch.undo()


def test_jobs_that_may_contend_are_solved() -> None:
    """Too few free machines of a job's fastest kind, a job whose two kinds tie, or a job that
    takes no time (it could go anywhere): the matching is solved."""
    from scheduler.matching.solve import _uncontended

    machines = [Machine(name="gpu-0", kind="gpu"), Machine(name="gpu-1", kind="gpu"), Machine(name="cpu-0", kind="cpu")]

    def problem(*times: dict[str, float], busy: dict[str, float] | None = None) -> Any:
        jobs = [Job(name=f"j{i}", user="u", arrival=0.0, processing_time=t) for i, t in enumerate(times)]
        return prepare(jobs=jobs, machines=machines, now=0.0, busy_until=busy)

    assert _uncontended(problem({"gpu": 1.0, "cpu": 5.0}, {"gpu": 2.0, "cpu": 4.0})) is not None
    assert _uncontended(problem({"gpu": 1.0, "cpu": 5.0}, {"gpu": 2.0, "cpu": 4.0}, busy={"gpu-1": 10.0})) is None
    assert _uncontended(problem({"gpu": 1.0}, {"gpu": 2.0}, {"gpu": 3.0})) is None
    assert _uncontended(problem({"gpu": 3.0, "cpu": 3.0})) is None
    assert _uncontended(problem({"gpu": 0.0, "cpu": 3.0})) is None


def test_a_job_that_takes_no_time_leaves_no_plan_kept_that_a_re_solve_would_not_make() -> None:
    """A start of a job that takes no time leaves its machine free, in its group with a shorter
    queue than machines listed after it: plans with a queue in that group are made again (found
    by an independent review: the kept plan started j4 on cpu-idle-2, the paper leaves it idle)."""
    now = 100.0
    free = [Machine(name=name, kind=name.split("-")[0]) for name in ("gpu-idle-0", "cpu-idle-1", "cpu-idle-0", "gpu-idle-1", "cpu-idle-2")]
    busy = {Machine(name=name, kind="gpu"): until for name, until in (("gpu-busy-1", 280.0), ("gpu-busy-2", 100.0), ("gpu-busy-3", 130.0))}
    running = [Assignment(job=Job(name=f"r{i}", user=user, arrival=0.0, processing_time={"gpu": 50.0}), machine=machine, start=0.0,
                          finish=max(until, now + 1)) for i, (user, (machine, until)) in enumerate(zip(["u1", "u1", "u2"], busy.items()))]
    waiting = [Job(name=name, user=user, arrival=arrival, processing_time=times) for name, user, arrival, times in (
        ("j0", "u5", 6.63, {"gpu": 137.47, "cpu": 60.48}), ("j1", "u3", 6.353, {"gpu": 91.3, "cpu": 121.7}),
        ("j2", "u1", 32.976, {"gpu": 88.9, "cpu": 118.2}), ("j3", "u0", 11.238, {"gpu": 17.3, "cpu": 0.0}),
        ("j4", "u2", 74.481, {"gpu": 93.1, "cpu": 57.9}))]
    fast = AlloxScheduler(alpha=0.25, shares=SHARES).on_machine_free(now=now, free_machines=free, pending_jobs=waiting, busy_until=busy,
                                                                      running=running)
    assert [(a.job.name, a.machine.name) for a in fast] == straightforward(alpha=0.25, now=now, free=free, busy=busy, waiting=waiting,
                                                                            running=running)


@pytest.mark.parametrize("alpha", [0.2, 1.0])
def test_a_job_with_a_bad_time_is_named_by_its_place_among_the_pending_jobs_whoever_is_considered(alpha: float) -> None:
    from scheduler.matching.errors import InvalidInstance

    machines = [Machine(name="gpu-0", kind="gpu"), Machine(name="cpu-0", kind="cpu")]
    jobs = [Job(name="later", user="u0", arrival=500.0, processing_time={"gpu": 5.0}),  # not arrived: not waiting
            *(Job(name=f"ok{i}", user=f"u{i}", arrival=0.0, processing_time={"gpu": 5.0 + i}) for i in range(4)),
            Job(name="bad", user="u9", arrival=0.0, processing_time={"gpu": 5.0, "cpu": -1.0})]
    with pytest.raises(InvalidInstance) as raised:
        AlloxScheduler(alpha=alpha).on_machine_free(now=100.0, free_machines=machines, pending_jobs=jobs, busy_until={})
    assert raised.value.field == "pending_jobs[5].processing_time.cpu"
    assert str(raised.value) == "pending_jobs[5].processing_time.cpu: must be a finite number >= 0, got -1.0"
