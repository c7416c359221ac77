"""Algorithm 2 solving one plan ahead of §4.4's raise, and asking each visit's nested sets
once, decides exactly as solving every plan it needs does.

After a burst at small α the raise asks a CPU slot for the plans of five, six, … ten users,
each solved only to leave the slot empty, until one starts a job there. ``allox._Ahead``
solves, at the first of those solves, the plan of the largest set below the one that started
the last visit's job on a machine of the kind: when that plan is certainly the only optimum and
leaves the slot empty, every smaller set's plan does too, and is put off (``_Deferred``)
instead of solved. ``allox._NEST_TESTS`` asks ``_Left.uncontended`` and ``_Vacancy.empty`` of
a visit's sets only until a smaller set's answer tells a larger set's. Here the starts, the
queue and the progress are compared with both off, and with every plan solved
(``allox._CARRY_EMPTY`` off, which turns the look-ahead off too), on random bursts (ties from
whole-number times in half of them, jobs that take no time, a CPU slot busy for a rounding
error) and on live states (pools, gangs, α 1, 0.3, 0.1, 0, AlloX+); and the claim itself on
nested sets solved one by one.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from scheduler.matching import allox
from scheduler.matching.allox import AlloxScheduler, _Ahead, _ahead_count, _Empty, _Left, _Vacancy
from scheduler.matching.model import Job, Machine
from scheduler.matching.solve import fleet, prepare_on
from tests.matching.test_matching_carry_empty import assert_decide_the_same_both_ways, burst, ten_users_both_ways
from tests.matching.test_matching_walk_shortcuts import odd_bursts, with_odd_times

SHORTCUTS = ("_LOOK_AHEAD", "_NEST_TESTS")


def starts(arguments: dict[str, Any], alpha: float) -> list[tuple[str, str, float, float]]:
    return [(a.job.name, a.machine.name, a.start, a.finish) for a in AlloxScheduler(alpha=alpha).on_machine_free(**arguments)]


def counting(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often a plan was solved ahead, and a smaller set's plan put off from it."""
    taken: Counter[str] = Counter()
    solved, tells = _Ahead.solved, _Ahead.tells

    def counted_solved(*arguments: Any) -> _Ahead:
        ahead = solved(*arguments)
        taken["ahead" if ahead.fact is not None else "ahead, not empty"] += 1
        return ahead

    def counted_tells(self: _Ahead, *arguments: Any) -> bool:
        found = tells(self, *arguments)
        taken["told" if found else "not told"] += 1
        return found

    monkeypatch.setattr(_Ahead, "solved", staticmethod(counted_solved))
    monkeypatch.setattr(_Ahead, "tells", counted_tells)
    return taken


@pytest.mark.parametrize("seed", range(4))
def test_algorithm_2_solving_ahead_starts_what_solving_every_plan_starts(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(9800 + seed)
    taken = counting(monkeypatch)
    for arguments, alpha in odd_bursts(rng, 120):
        fast = starts(arguments, alpha)
        for flag in SHORTCUTS:
            monkeypatch.setattr(allox, flag, False)
        without = starts(arguments, alpha)
        monkeypatch.setattr(allox, "_CARRY_EMPTY", False)
        every = starts(arguments, alpha)
        for flag in (*SHORTCUTS, "_CARRY_EMPTY"):
            monkeypatch.setattr(allox, flag, True)
        assert fast == without == every
    # The ways out were taken, not only compared.
    assert taken["ahead"] > 0 and taken["told"] > 0


@pytest.mark.parametrize("pools", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_decide_solving_ahead_equals_decide_solving_every_plan(seed: int, pools: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Live states (bursts, full clusters, virtual clusters, gangs, grids of 0, 1 and 60 s),
    α 1, 0.3, 0.1 and 0 and AlloX+: the same starts, queue and progress."""
    assert_decide_the_same_both_ways(monkeypatch, (*SHORTCUTS, "_CARRY_EMPTY"), random.Random(9900 + seed + 100 * pools), pools=pools)


def test_a_burst_of_ten_users_solves_fewer_plans_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """The case it is for: 400 Jobs of ten users on 30 nodes of 5 GPUs and 5 CPU slots, α = 0.1."""
    taken = counting(monkeypatch)
    equal, fewer, without = ten_users_both_ways(monkeypatch, "_LOOK_AHEAD")
    assert equal
    assert taken["told"] > 0 and fewer < without


@pytest.mark.parametrize("seed", range(6))
def test_a_larger_sets_only_optimum_leaving_a_machine_empty_leaves_it_empty_in_every_smaller_sets_plan(seed: int) -> None:
    """The claim itself: of nested user sets, each smaller set's plan, solved, leaves the
    machine empty wherever the largest set's plan, certainly the only optimum, does."""
    rng = random.Random(9700 + seed)
    told = 0
    for _ in range(40):
        arguments, _alpha = burst(rng)
        if rng.random() < 0.3:
            arguments = with_odd_times(arguments, rng)
        listed = [*arguments["free_machines"], *arguments["busy_until"]]
        machines = fleet(machines=listed, now=0.0, busy_until={m.name: t for m, t in arguments["busy_until"].items()})
        jobs = [job for job in arguments["pending_jobs"] if set(job.processing_time) & set(machines.kinds)]
        every_job = prepare_on(machines, jobs)
        left = _Left(every_job)
        vacancy = _Vacancy(every_job, machines.delay.copy())
        users = sorted({job.user for job in jobs})
        rng.shuffle(users)
        for position in range(len(arguments["free_machines"])):
            ahead = _Ahead.solved(frozenset(users), left, machines, position, machines.delay, vacancy)
            for size in range(1, len(users)):
                smaller = frozenset(users[:size])
                rows = left.rows(smaller)
                if rows.shape[0] and ahead.tells(smaller, position, machines.delay, machines.machine_kind):
                    assert left.solved(rows, machines).first(position) is None
                    told += 1
    assert told > 0


def test_the_set_solved_ahead_is_the_last_the_raise_comes_to_below_the_last_visits() -> None:
    ranking = ["a", "b", "c", "d", "e", "f"]
    runnable = {"a": 1, "c": 2, "d": 1, "f": 3}  # b and e have no job the machine can run
    assert _ahead_count(ranking, 1, runnable, None) == 0  # no visit yet: nothing ahead
    assert _ahead_count(ranking, 1, runnable, 6) == 4  # the raise comes to 3, 4, 6
    assert _ahead_count(ranking, 1, runnable, 4) == 3
    assert _ahead_count(ranking, 1, runnable, 3) == 0  # 3 is the raise's next: nothing to put off
    assert _ahead_count(ranking, 1, runnable, allox._EXHAUSTED) == 6  # the last visit's raise started nothing


def test_a_plan_solved_ahead_that_starts_a_job_tells_nothing() -> None:
    machines = fleet(machines=[Machine(name="g0", kind="gpu"), Machine(name="c0", kind="cpu")], now=0.0)
    jobs = [Job(name=f"j{index}", user=f"u{index}", arrival=0.0, processing_time={"gpu": 10.0, "cpu": 12.0}) for index in range(3)]
    every_job = prepare_on(machines, jobs)
    left = _Left(every_job)
    vacancy = _Vacancy(every_job, machines.delay.copy())
    ahead = _Ahead.solved(frozenset({"u0", "u1", "u2"}), left, machines, 1, machines.delay, vacancy)
    assert ahead.plan.first(1) is not None and ahead.fact is None
    assert not ahead.tells(frozenset({"u0"}), 1, machines.delay, machines.machine_kind)
    empty = _Empty(kind=0, wait=0.0, count=0, unique=None, tolerance=1e-9, certain=False)
    assert not _Ahead(frozenset({"u0", "u1"}), ahead.plan, empty).tells(frozenset({"u0"}), 1, machines.delay, np.array([1, 0]))


def ahead_on_a_gpu_and_a_cpu_slot(cpu_of_a: float, gpu_of_b: float) -> tuple[_Ahead, Any]:
    """The plan of {u0, u1} solved ahead at the CPU slot c0 (g0 beside it): job a of u0
    (10 s on the GPU), job b of u1 (15 s on the CPU)."""
    machines = fleet(machines=[Machine(name="g0", kind="gpu"), Machine(name="c0", kind="cpu")], now=0.0)
    jobs = [Job(name="a", user="u0", arrival=0.0, processing_time={"gpu": 10.0, "cpu": cpu_of_a}),
            Job(name="b", user="u1", arrival=0.0, processing_time={"gpu": gpu_of_b, "cpu": 15.0})]
    every_job = prepare_on(machines, jobs)
    left = _Left(every_job)
    return _Ahead.solved(frozenset({"u0", "u1"}), left, machines, 1, machines.delay, _Vacancy(every_job, machines.delay.copy())), machines


def test_a_plan_solved_ahead_tells_only_when_it_is_certainly_the_only_optimum_and_no_job_takes_no_time() -> None:
    # Both on the GPU (10 + 2·5 = 20) beats every way with the CPU slot (25 at least): told.
    ahead, machines = ahead_on_a_gpu_and_a_cpu_slot(15.5, 5.0)
    assert ahead.plan.first(1) is None and ahead.tells(frozenset({"u0"}), 1, machines.delay, machines.machine_kind)
    # a on the CPU slot and b on the GPU costs 15 + 5 = 20 as well: another optimum has a queue
    # on the slot, and the solver's choice of the one without tells nothing.
    ahead, machines = ahead_on_a_gpu_and_a_cpu_slot(15.0, 5.0)
    assert ahead.plan.first(1) is None and ahead.fact is not None
    assert not ahead.tells(frozenset({"u0"}), 1, machines.delay, machines.machine_kind)
    # b takes no time on the GPU (a queue may have a gap there): never told.
    ahead, machines = ahead_on_a_gpu_and_a_cpu_slot(15.5, 0.0)
    assert ahead.plan.first(1) is None and ahead.fact is None
