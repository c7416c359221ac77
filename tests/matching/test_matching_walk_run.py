"""Runs of Algorithm 2's visits in C (``_walk.c``'s ``uncontended_run``, allox's ``_Run``)
against the walk in Python, the reference: the same starts (job, machine, start, finish, in
order) on random bursts shaped like a burst's GPU visits (many users, most jobs fastest on a
GPU, a plan of one user's jobs uncontended, ties of whole-number times and of progress, a NaN
progress, a machine listed twice), on random live states through admission's ``decide``, and
on the benchmark's burst and full cluster; the benchmark's burst at α = 0.1 decides most of its
GPU visits in C (the run is used, not only compared); the C function refuses bad buffers by
name.
"""

from __future__ import annotations

import importlib
import random
from typing import Any, Callable

import numpy as np
import pytest

from scheduler.matching.admission import decide
from scheduler.matching.allox import AlloxScheduler
from scheduler.matching.model import Assignment, Job, Machine
from tests.matching.test_matching_carry_empty import burst
from tests.matching.test_matching_vacancy import live_state

allox = importlib.import_module("scheduler.matching.allox")
native = pytest.importorskip("scheduler.matching._walk", reason="built without the C extension: nothing to compare")


class Counted:
    """``_walk`` with the visits its runs decided counted (each start's)."""

    def __init__(self) -> None:
        self.starts = 0
        self.runs = 0

    def uncontended_run(self, *arguments: Any) -> tuple[int, int, list[int], list[tuple[int, int]], list[Any]]:
        answer = native.uncontended_run(*arguments)
        self.starts += answer[1]
        self.runs += 1
        return answer  # type: ignore[no-any-return]


def runs_both_ways(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch, counted: Counted | None = None) -> tuple[Any, Any]:
    """``call()`` with runs of visits in C, then with every visit in Python."""
    with monkeypatch.context() as patched:
        patched.setattr(allox, "runs", counted if counted is not None else native)
        in_c = call()
    with monkeypatch.context() as patched:
        patched.setattr(allox, "runs", None)
        in_python = call()
    return in_c, in_python


def starts(assignments: list[Assignment]) -> list[tuple[str, str, float, float]]:
    return [(a.job.name, a.machine.name, a.start, a.finish) for a in assignments]


def gpu_burst(rng: random.Random) -> dict[str, Any]:
    """Free GPUs and CPU slots, some busy; jobs of many users, most fastest on a GPU (some on a
    CPU, some tied, some with one kind), whole-number times in half; some running jobs (the
    users' progress), a machine listed twice now and then."""
    whole = rng.random() < 0.5
    free: list[Machine] = []
    busy: dict[Machine, float] = {}
    for node in range(rng.randint(3, 25)):
        for kind, count in (("gpu", rng.randint(0, 8)), ("cpu", rng.randint(0, 6))):
            for index in range(count):
                machine = Machine(name=f"n{node:02d}-{kind}{index}", kind=kind)
                if rng.random() < 0.85:
                    free.append(machine)
                else:
                    busy[machine] = float(rng.randint(1, 60)) if whole else rng.uniform(1, 3600)
    if not free:
        free.append(Machine(name="extra", kind="gpu"))
    if rng.random() < 0.1:
        free.append(rng.choice(free))  # listed twice: two machines of one name to the fleet
    users = [f"u{index:02d}" for index in range(rng.randint(2, 25))]
    jobs = []
    for index in range(rng.randint(5, 300)):
        gpu = float(rng.randint(1, 40)) if whole else rng.uniform(60, 3600)
        shape = rng.random()
        cpu = gpu * (rng.randint(2, 9) if whole else rng.uniform(1.8, 10)) if shape < 0.85 else (gpu if shape < 0.9 else gpu / 2)
        times = {"gpu": gpu, "cpu": cpu}
        if rng.random() < 0.04:
            del times[rng.choice(["gpu", "cpu"])]
        jobs.append(Job(name=f"j{index}", user=rng.choice(users), arrival=0.0, processing_time=times))
    running = []
    for index in range(rng.randint(0, 12)):
        job = Job(name=f"r{index}", user=rng.choice(users), arrival=0.0, processing_time={"gpu": 100.0, "cpu": 400.0})
        machine = Machine(name=f"busy-{index}", kind=rng.choice(["gpu", "cpu"]))
        running.append(Assignment.starting(job, machine, 0.0))
    arguments: dict[str, Any] = {"now": 0.0, "free_machines": free, "pending_jobs": jobs, "busy_until": busy, "running": running}
    if rng.random() < 0.3:
        # Progress given: ties (equal values, the ranking by name) and, now and then, a NaN.
        values = [0.0, 0.5, 1.0, float("nan") if rng.random() < 0.2 else 0.25]
        arguments["progress"] = {user: rng.choice(values) for user in users if rng.random() < 0.8}
    return arguments


def test_random_bursts_start_the_same_with_runs_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(27001)
    counted = Counted()
    for _ in range(300):
        arguments = gpu_burst(rng)
        alpha = rng.choice([0.05, 0.1, 0.1, 0.2, 0.3, 0.5, 1.0])
        raise_alpha = rng.random() < 0.8
        scheduler = AlloxScheduler(alpha=alpha, raise_alpha_when_idle=raise_alpha)
        in_c, in_python = runs_both_ways(lambda: starts(scheduler.on_machine_free(**arguments)), monkeypatch, counted)  # noqa: B023
        assert in_c == in_python
    for _ in range(150):
        arguments, alpha = burst(rng)
        in_c, in_python = runs_both_ways(lambda: starts(AlloxScheduler(alpha=alpha).on_machine_free(**arguments)),  # noqa: B023
                                         monkeypatch, counted)
        assert in_c == in_python
    # The runs decided visits, not only handed them back: the comparison covers them.
    assert counted.starts > 3000 and counted.runs > 300


def test_admission_decides_the_same_with_runs_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(27002)
    for pools in (False, True):
        for _ in range(12):
            state = live_state(rng, pools=pools)
            for options in ({"alpha": 1.0}, {"alpha": 0.1}, {"alpha": 0.3}, {"policy": "allox+", "alpha": 0.1}):
                in_c, in_python = runs_both_ways(lambda: decide(**state, **options), monkeypatch)  # type: ignore[arg-type]  # noqa: B023
                assert in_c == in_python


def benchmark_state(busy: int) -> dict[str, Any]:
    from tests.benchmarks.bench_admission import CAPACITY, NOW, instance

    _, _, waiting, running, nodes = instance(1000, busy=busy)
    return {"now": NOW, "waiting": waiting, "running": running, "free_nodes": nodes, "capacity": CAPACITY}


@pytest.mark.parametrize("state", ["burst", "full"])
def test_the_benchmarks_states_decide_the_same_with_runs_in_c(monkeypatch: pytest.MonkeyPatch, state: str) -> None:
    from tests.benchmarks.bench_admission import BURST_BUSY, FULL_BUSY

    arguments = benchmark_state(BURST_BUSY if state == "burst" else FULL_BUSY)
    for alpha in (0.1, 0.3, 1.0):
        in_c, in_python = runs_both_ways(lambda: decide(**arguments, alpha=alpha), monkeypatch)  # noqa: B023
        assert in_c == in_python


def test_the_bursts_gpu_visits_are_decided_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's burst at α = 0.1 (455 starts): most of its 399 GPU starts come from runs
    in C, in a few calls."""
    from tests.benchmarks.bench_admission import BURST_BUSY

    counted = Counted()
    monkeypatch.setattr(allox, "runs", counted)
    decided = decide(**benchmark_state(BURST_BUSY), alpha=0.1)
    assert len(decided.starts) == 455
    assert counted.starts > 300
    assert counted.runs < 30  # tried where a run is worth it, not at every visit


def plain_arguments(*, plans: list[Any] | None = None, ranking: Any = None, visits: Any = None) -> list[Any]:
    """uncontended_run's arguments for 2 machines (one GPU kind), 2 rows of 2 users."""
    machine_kind = np.zeros(2, dtype=np.int64)
    return [np.array([0, 1], dtype=np.int64) if visits is None else visits, machine_kind, np.zeros(2), np.array([[1.0], [2.0]]),
            np.zeros(2, dtype=np.int64), np.array([0, 1], dtype=np.int64), np.ones(2, dtype=np.int64),
            np.array([0, 1], dtype=np.int64) if ranking is None else ranking, np.zeros(2), np.zeros(2, dtype=np.int64),
            np.zeros(2, dtype=np.int64), np.zeros(2), np.zeros(2), [] if plans is None else plans, None, 0, 1, 0.0, 0.0, None]


def test_a_run_over_plain_buffers_starts_each_users_jobs() -> None:
    arguments = plain_arguments()
    next_visit, count, dropped, pops, made = native.uncontended_run(*arguments)
    # User 0's row 0 on machine 0; then user 0 (still first: no value moves the ranking) has
    # no job left: visit 1 is handed back.
    assert (next_visit, count, dropped, pops) == (1, 1, [], [])
    assert arguments[9][0] == 0 and arguments[2][0] == 1.0 and arguments[6].tolist() == [0, 1]
    assert made == [([0], [0], [0], [0])]


def test_bad_buffers_are_refused_by_name() -> None:
    with pytest.raises(TypeError, match="delay"):
        native.uncontended_run(*plain_arguments()[:2], np.zeros(2, dtype=np.int64), *plain_arguments()[3:])
    with pytest.raises(ValueError, match="visits of machines"):
        native.uncontended_run(*plain_arguments(visits=np.array([0, 2], dtype=np.int64)))
    with pytest.raises(ValueError, match="the ranking every user once"):
        native.uncontended_run(*plain_arguments(ranking=np.array([1, 1], dtype=np.int64)))
    with pytest.raises(TypeError, match="each plan a tuple"):
        native.uncontended_run(*plain_arguments(plans=[(1, 2)]))
    members, taken = np.array([1, 0], dtype=np.int64), np.zeros(2, dtype=np.int64)
    bad_bounds = (members, np.array([0, 1, 3], dtype=np.int64), np.array([0, 1], dtype=np.int64), taken, np.array([0, 1], dtype=np.int64))
    with pytest.raises(ValueError, match="plan 0: .*bounds"):
        native.uncontended_run(*plain_arguments(plans=[bad_bounds]))
    bad_rows = (members, np.array([0, 1, 2], dtype=np.int64), np.array([0, 5], dtype=np.int64), taken, np.array([0, 1], dtype=np.int64))
    with pytest.raises(ValueError, match="queued rows"):
        native.uncontended_run(*plain_arguments(plans=[bad_rows]))
    with pytest.raises(TypeError, match="plan taken"):
        native.uncontended_run(*plain_arguments(plans=[(members, None, None, np.zeros(2), None)]))


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_a_start_drops_the_plans_it_leaves_invalid() -> None:
    """Machine 0 (free) starts user 0's row from the plan held for user 0, and then waits 5.0,
    as long as machine 1: the plan with a queue on machine 1 is dropped (it may no longer be
    canonical, _Plan.kept_after), the plan on machine 2 (waiting 7.0) is kept, the plan of a set
    with user 0 is dropped, and the held plan's queue on machine 0 is popped."""
    empty = ints(0, 0, 0)
    plans = [(ints(0, 1, 0), ints(0, 0, 1, 1), ints(1), empty.copy(), ints(1)),
             (ints(0, 0, 1), ints(0, 0, 0, 1), ints(2), empty.copy(), ints(2)),
             (ints(1, 1, 0), None, None, empty.copy(), None),
             (ints(1, 0, 0), ints(0, 1, 1, 1), ints(0), empty.copy(), ints(0))]
    delay = np.array([0.0, 5.0, 7.0])
    arguments = [ints(0), ints(0, 0, 0), delay, np.array([[5.0], [3.0], [4.0]]), ints(0, 0, 0), ints(0, 1, 2), ints(1, 1, 1), ints(0, 1, 2),
                 np.zeros(3), ints(0), ints(0), np.zeros(1), np.zeros(1), plans, None, 0, 1, 0.0, 0.0, None]
    assert native.uncontended_run(*arguments) == (1, 1, [0, 2], [(3, 0)], [])
    assert delay.tolist() == [5.0, 5.0, 7.0] and plans[3][3].tolist() == [1, 0, 0]


def test_a_plans_taken_sharing_memory_is_refused() -> None:
    members, bounds, queued = ints(1, 0), ints(0, 1, 1), ints(0)
    taken = np.zeros(2, dtype=np.int64)
    with pytest.raises(ValueError, match="plan 0's taken shares memory"):
        native.uncontended_run(*plain_arguments(plans=[(members, bounds, queued, taken, taken[:1])]))
    arguments = plain_arguments()
    with pytest.raises(ValueError, match="plan 0's taken shares memory"):
        native.uncontended_run(*arguments[:13], [(members, bounds, queued, arguments[9], ints(0))], *arguments[14:])


def test_a_plans_read_only_buffers_sharing_memory_with_a_written_one_are_refused() -> None:
    """review27b F1: only a plan's taken was checked; a queued laid over delay (a start writes
    delay, which then read as a row indexed out of bounds: a segfault) or a used laid over
    out_rows (a heap overflow under ASan) went through."""
    delay = np.zeros(3)
    arguments = plain_arguments()
    arguments[1], arguments[2] = ints(0, 0, 0), delay
    over_delay = (ints(1, 0), ints(0, 0, 1, 2), delay[:2].view(np.int64), np.zeros(3, dtype=np.int64), ints(1, 2))
    with pytest.raises(ValueError, match="plan 0's queued shares memory with delay"):
        native.uncontended_run(*arguments[:13], [over_delay], *arguments[14:])
    arguments = plain_arguments()
    over_out_rows = (ints(1, 0), ints(0, 1, 1), ints(0), np.zeros(2, dtype=np.int64), arguments[9][:1])
    with pytest.raises(ValueError, match="plan 0's used shares memory with out_rows"):
        native.uncontended_run(*arguments[:13], [over_out_rows], *arguments[14:])


def test_a_plans_taken_beyond_its_queue_is_refused() -> None:
    """review27b F3: taken was only checked to be at least 0; bounds + taken could overflow."""
    beyond = (ints(1, 0), ints(0, 1, 2), ints(0, 1), ints(0, 2**63 - 1), ints(0, 1))
    with pytest.raises(ValueError, match="at most its queue's length"):
        native.uncontended_run(*plain_arguments(plans=[beyond]))


def test_a_share_model_of_numpy_floats_ranks_alike_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    """review27b F4: a share model returning np.float32 kept float32 progress in Python (NumPy 2
    keeps the type: 0.2 + f32(0.1) = 0.30000001) where the C run adds in float64, so the ranking
    against a user at 0.3000000005 flipped and the two ways started other jobs."""

    class Float32Shares:
        def usage(self, job: Job, kind: str) -> dict[str, float]:
            return {kind: self.dominant_share(job, kind)}

        def dominant_share(self, job: Job, kind: str) -> float:
            return np.float32(0.1) if job.user == "a" else 0.0  # type: ignore[return-value]

    machines = [Machine(name=f"g{i}", kind="gpu") for i in range(4)]
    jobs = [Job(name=f"{u}{i}", user=u, arrival=0.0, processing_time={"gpu": 1.0, "cpu": 9.0}) for u in "abcd" for i in range(3)]
    progress = {"a": 0.2, "b": 0.3000000005, "c": 5.0, "d": 5.0}

    def started() -> list[tuple[str, str]]:
        scheduler = AlloxScheduler(alpha=0.25, shares=Float32Shares())
        return [(a.job.name, a.machine.name) for a in scheduler.on_machine_free(now=0.0, free_machines=machines, pending_jobs=jobs,
                                                                                 busy_until={}, progress=dict(progress))]

    in_c, in_python = runs_both_ways(started, monkeypatch)
    assert in_c == in_python and len(in_c) == 4  # before: C a0 b0 b1 b2, Python a0 a1 b0 b1
