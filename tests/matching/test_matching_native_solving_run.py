"""Runs of Algorithm 2's visits in C that go on through solves (``_walk.c``'s ``solving_run``,
allox's ``_Run._solved_at``, switched by ``allox._SOLVES_IN_RUNS``) against runs that stop at
a set whose jobs contend and leave it to the walk in Python, the reference: the same starts
(job, machine, start, finish, in order) on random GPU bursts and bursts (ties of whole-number
times and of progress), bursts visited with their kinds interleaved and with jobs that take no
time on a kind, live states through admission's ``decide`` (pools, α 1, 0.3, 0.1 and 0,
AlloX+), the benchmark's burst and full cluster, and with each switch the solve replays
(``_NEST_TESTS``, ``_LOOK_AHEAD``, ``_SEARCH_AHEAD``, ``_CARRY_EMPTY``) off; each comparison
counts the plans solved inside runs (the path is taken, not only compared) and the solves
declined (the run handed the visit back). The benchmark's burst at α = 0.1 decides every GPU
visit in C, its 49 solves inside one run. The C function refuses a solve's bad plan by name.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from scheduler.matching import allox
from scheduler.matching.admission import decide
from tests.matching.native_paths import Ways, live_states_decide_alike, random_bursts_start_alike, switched_both_ways, varied_bursts_start_alike

native = pytest.importorskip("scheduler.matching._walk", reason="built without the C extension: nothing to compare")
if not hasattr(native, "solving_run"):
    pytest.skip("built from a _walk.c without solving_run", allow_module_level=True)


def both_ways(monkeypatch: pytest.MonkeyPatch) -> Ways:
    """A call with runs that solve, then with runs that stop where a plan needs a solve."""
    return lambda call: switched_both_ways(call, monkeypatch, allox, "_SOLVES_IN_RUNS")


def counted_solves(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The plans ``_Run._solved_at`` answered a run (``solved``) and declined (``declined``)."""
    seen: Counter[str] = Counter()
    solved_at = allox._Run._solved_at

    def counted(self: allox._Run, *arguments: Any) -> Any:
        answer = solved_at(self, *arguments)
        seen["declined" if answer is None else "solved"] += 1
        return answer

    monkeypatch.setattr(allox._Run, "_solved_at", counted)
    return seen


def test_random_bursts_start_the_same_with_solves_in_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = counted_solves(monkeypatch)
    random_bursts_start_alike(random.Random(2901), both_ways(monkeypatch), gpu_bursts=250, bursts=120)
    assert seen["solved"] > 500 and seen["declined"] > 20


@pytest.mark.parametrize("interleaved, no_time", [(True, 0.0), (False, 0.1), (True, 0.1)])
def test_varied_bursts_start_the_same_with_solves_in_runs(monkeypatch: pytest.MonkeyPatch, interleaved: bool, no_time: float) -> None:
    seen = counted_solves(monkeypatch)
    varied_bursts_start_alike(random.Random(2902), both_ways(monkeypatch), bursts=80, interleaved=interleaved, no_time=no_time)
    assert seen["solved"] > 50


@pytest.mark.parametrize("switch", ["_NEST_TESTS", "_LOOK_AHEAD", "_SEARCH_AHEAD", "_CARRY_EMPTY"])
def test_bursts_start_the_same_with_solves_in_runs_and_a_switch_off(monkeypatch: pytest.MonkeyPatch, switch: str) -> None:
    seen = counted_solves(monkeypatch)
    monkeypatch.setattr(allox, switch, False)
    random_bursts_start_alike(random.Random(2903), both_ways(monkeypatch), gpu_bursts=80, bursts=40)
    assert seen["solved"] > 100


def test_admission_decides_the_same_with_solves_in_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = counted_solves(monkeypatch)
    live_states_decide_alike(random.Random(2904), both_ways(monkeypatch), states=10,
                             options=({"alpha": 1.0}, {"alpha": 0.3}, {"alpha": 0.1}, {"alpha": 0.0}, {"policy": "allox+", "alpha": 0.1}))
    assert seen["solved"] > 0


@pytest.mark.parametrize("state", ["burst", "full"])
def test_the_benchmarks_states_decide_the_same_with_solves_in_runs(monkeypatch: pytest.MonkeyPatch, state: str) -> None:
    from tests.benchmarks.bench_admission import BURST_BUSY, FULL_BUSY
    from tests.matching.test_matching_walk_run import benchmark_state

    arguments = benchmark_state(BURST_BUSY if state == "burst" else FULL_BUSY)
    for alpha in (0.1, 0.3, 1.0):
        with_solves, without = both_ways(monkeypatch)(lambda: decide(**arguments, alpha=alpha))  # noqa: B023
        assert with_solves == without


def test_the_bursts_gpu_visits_after_the_first_run_are_decided_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's burst at α = 0.1: its 49 solves of one user's jobs at the GPU visits are
    made inside runs (before: each one a visit in Python, the run stopping there)."""
    from tests.benchmarks.bench_admission import BURST_BUSY
    from tests.matching.test_matching_walk_run import Counted, benchmark_state

    seen = counted_solves(monkeypatch)
    counted = Counted()
    monkeypatch.setattr(allox, "_SOLVES_IN_RUNS", True)
    monkeypatch.setattr(allox, "runs", counted)
    monkeypatch.setattr(counted, "solving_run", counted_run(counted), raising=False)
    decided = decide(**benchmark_state(BURST_BUSY), alpha=0.1)
    assert len(decided.starts) == 455
    assert seen["solved"] >= 45 and seen["declined"] == 0
    assert counted.starts >= 399  # every GPU start


def counted_run(counted: Any) -> Any:
    def solving_run(*arguments: Any) -> Any:
        answer = native.solving_run(*arguments)
        counted.starts += answer[1]
        counted.runs += 1
        return answer

    return solving_run


def plain_arguments() -> list[Any]:
    """solving_run's arguments (but solve) for 2 GPUs, 2 rows of 1 user that contend (both
    fastest on the GPUs, as uncontended_run's plain run has them, but tied: no strictly
    fastest kind)."""
    machine_kind = np.zeros(2, dtype=np.int64)
    return [np.array([0, 1], dtype=np.int64), machine_kind, np.zeros(2), np.array([[1.0], [2.0]]), np.full(2, -1, dtype=np.int64),
            np.zeros(2, dtype=np.int64), np.ones(2, dtype=np.int64), np.array([0], dtype=np.int64), np.zeros(1), np.zeros(2, dtype=np.int64),
            np.zeros(2, dtype=np.int64), np.zeros(2), np.zeros(2), [], None, 0, 1, 0.0, 0.0, None]


def test_a_solved_plan_is_walked_on_and_handed_back_when_alive() -> None:
    asked: list[tuple[int, int]] = []
    taken = np.zeros(2, dtype=np.int64)

    def solve(visit: int, starts: int) -> Any:
        asked.append((visit, starts))
        # Row 1 on machine 0, row 0 on machine 1.
        return (np.ones(1, dtype=np.int64), np.array([0, 1, 2], dtype=np.int64), np.array([1, 0], dtype=np.int64), taken,
                np.array([0, 1], dtype=np.int64))

    arguments = plain_arguments()
    next_visit, count, dropped, pops, made, solved = native.solving_run(*arguments, solve)
    # Solved once (visit 0), the plan then held at visit 1.
    assert asked == [(0, 0)]
    assert (next_visit, count, dropped, pops, made, solved) == (2, 2, [], [], [], [0])
    assert arguments[9].tolist() == [1, 0] and taken.tolist() == [1, 1]
    # uncontended_run stops at the same visit, starting nothing.
    assert native.uncontended_run(*plain_arguments())[:2] == (0, 0)


def test_a_declined_solve_stops_the_run() -> None:
    answer = native.solving_run(*plain_arguments(), lambda visit, starts: None)
    assert answer == (0, 0, [], [], [], [])


def test_a_solves_bad_plan_is_refused() -> None:
    members, taken = np.ones(1, dtype=np.int64), np.zeros(2, dtype=np.int64)
    bad_rows = (members, np.array([0, 1, 2], dtype=np.int64), np.array([0, 5], dtype=np.int64), taken, np.array([0, 1], dtype=np.int64))
    with pytest.raises(ValueError, match="queued rows"):
        native.solving_run(*plain_arguments(), lambda visit, starts: bad_rows)
    with pytest.raises(TypeError, match="each plan a tuple"):
        native.solving_run(*plain_arguments(), lambda visit, starts: (1, 2))
    arguments = plain_arguments()
    sharing = (members, np.array([0, 1, 2], dtype=np.int64), np.array([1, 0], dtype=np.int64), arguments[9], np.array([0, 1], dtype=np.int64))
    with pytest.raises(ValueError, match="shares memory"):
        native.solving_run(*arguments, lambda visit, starts: sharing)

    def failing(visit: int, starts: int) -> Any:
        raise RuntimeError("solve failed")

    with pytest.raises(RuntimeError, match="solve failed"):
        native.solving_run(*plain_arguments(), failing)
