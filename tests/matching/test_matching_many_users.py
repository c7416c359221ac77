"""Algorithm 2 with as many users as jobs (a cluster of many namespaces, each submitting a Job).

§4.4's raise then asks a free machine for hundreds of user sets a start, each the first
``count`` users of the ranking, one user more than the last. ``allox._UserSet`` names such a
set by the ranking's places and running hashes (O(1) to make and hash, where a ``frozenset``
cost O(set)); ``allox._reranked`` moves the started user in the ranking rather than sorting
every user again; ``allox._Ahead.searched`` solves O(log sets) of a visit's sets (a guess,
doubling strides, halves) to find where the plans stop leaving the machine empty, where one
guess solved every set past it. Here: the sets against frozensets of the same users, the
ranking against ``rank_users``, and the starts with the search on, off, and with every plan
solved (``_CARRY_EMPTY`` off), the sets named either way (``_NAMED_FROM``: up to 64 users,
frozensets, as cheap there), on random bursts of many users (ties from whole-number times,
jobs that take no time, a CPU slot busy for a rounding error) and ``decide`` on the
benchmark's burst with a user per Job.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scheduler.matching import allox
from scheduler.matching.admission import decide
from scheduler.matching.allox import AlloxScheduler, _Ahead, _reranked, _Users
from scheduler.matching.fairness import rank_users
from scheduler.matching.model import Job, Machine
from tests.matching.test_matching_carry_empty import burst


def test_user_sets_are_the_sets_of_their_users() -> None:
    """Prefixes of random rankings (moved one user at a time, as starts move them, or anew)
    and sets of given members: equal exactly when their users are, hashed alike then, with
    the same members, sizes and subsets as frozensets of the users."""
    rng = random.Random(4100)
    for _ in range(40):
        names = [f"u{index}" for index in range(rng.randint(1, 40))]
        named = _Users(rng.sample(names, len(names)))
        ranking = rng.sample(names, len(names))
        seen: list[tuple[Any, frozenset[str]]] = []
        for _ in range(30):
            if rng.random() < 0.3:
                ranking = rng.sample(names, len(names))
            else:
                ranking = ranking.copy()
                user = ranking.pop(rng.randrange(len(ranking)))
                ranking.insert(rng.randint(0, len(ranking)), user)
            for _ in range(5):
                count = rng.randint(0, len(ranking))
                seen.append((named.prefix(ranking, count), frozenset(ranking[:count])))
            members = rng.sample(names, rng.randint(0, len(names)))
            seen.append((named.of(np.array([named.number[user] for user in members], dtype=np.int64)), frozenset(members)))
        for one, users in seen:
            assert set(one) == users and len(one) == len(users)
            for name in names:
                assert (name in one) == (name in users)
            assert "nobody" not in one
        for _ in range(400):
            (one, users), (other, others) = rng.choice(seen), rng.choice(seen)
            assert (one == other) == (users == others)
            assert (one < other) == (users < others)
            if users == others:
                assert hash(one) == hash(other)


def test_a_set_asked_again_is_the_same_object_where_the_ranking_kept_it() -> None:
    """The walk's dictionaries find a set kept from before a start by identity."""
    named = _Users(["a", "b", "c", "d"])
    before = ["a", "b", "c", "d"]
    sets = [named.prefix(before, count) for count in range(5)]
    after = ["a", "c", "d", "b"]  # b started: moved from 1 to 3
    again = [named.prefix(after, count) for count in range(5)]
    assert again[0] is sets[0] and again[1] is sets[1] and again[4] is sets[4]
    assert again[2] is not sets[2] and again[2] != sets[2] and set(again[2]) == {"a", "c"}
    assert again[3] is not sets[3] and set(again[3]) == {"a", "c", "d"}


@pytest.mark.parametrize("seed", range(3))
def test_moving_the_started_user_ranks_as_sorting_every_user(seed: int) -> None:
    """Ties of progress (names decide), zeros of both signs, infinities, and a NaN (sorted)."""
    rng = random.Random(4200 + seed)
    for _ in range(200):
        users = [f"u{index:02d}" for index in rng.sample(range(60), rng.randint(1, 30))]
        values = [0.0, -0.0, 1.0, 2.5, math.inf]
        progress = {user: rng.choice([*values, rng.random()]) for user in users if rng.random() < 0.8}
        ranking = rank_users(users, progress)
        for _ in range(10):
            user = rng.choice(users)
            progress[user] = progress.get(user, 0.0) + rng.choice([0.0, 0.5, rng.random(), math.inf, math.nan if rng.random() < 0.05 else 1.0])
            moved = _reranked(ranking, user, users, progress)
            assert moved == rank_users(users, progress) and moved is not ranking
            ranking = moved


def many_users(rng: random.Random) -> tuple[dict[str, Any], float]:
    """``burst``'s free GPUs and CPU slots, some busy (one for a rounding error at times), and
    jobs of as many users as jobs, or half as many; whole-number times (ties) in half of them,
    now and then a job that takes no time on a kind or cannot run on one."""
    arguments, _ = burst(rng)
    free: list[Machine] = arguments["free_machines"]
    busy: dict[Machine, float] = arguments["busy_until"]
    whole = rng.random() < 0.5
    if rng.random() < 0.2 and len(free) > 1:
        busy[free.pop()] = 4e-16
    count = rng.randint(20, 120)
    users = [f"u{index:03d}" for index in range(count if rng.random() < 0.6 else max(1, count // 2))]
    jobs = []
    for index in range(count):
        gpu = float(rng.randint(1, rng.choice([5, 50]))) if whole else rng.uniform(60, 3600)
        times = {"gpu": gpu, "cpu": gpu * rng.randint(2, 10) if whole else gpu * rng.uniform(1.8, 10)}
        if rng.random() < 0.03:
            del times[rng.choice(["gpu", "cpu"])]
        elif rng.random() < 0.02:
            times[rng.choice(["gpu", "cpu"])] = 0.0
        jobs.append(Job(name=f"j{index}", user=users[index % len(users)], arrival=0.0, processing_time=times))
    return {"now": 0.0, "free_machines": free, "pending_jobs": jobs, "busy_until": busy}, rng.choice([0.05, 0.1, 0.1, 0.2, 0.3])


def starts(arguments: dict[str, Any], alpha: float) -> list[tuple[str, str, float, float]]:
    return [(a.job.name, a.machine.name, a.start, a.finish) for a in AlloxScheduler(alpha=alpha).on_machine_free(**arguments)]


@pytest.mark.parametrize("named_from", [0, 64, 10**9])
@pytest.mark.parametrize("seed", range(3))
def test_searching_the_raise_starts_what_solving_every_plan_starts(seed: int, named_from: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random bursts of many users, the search asked from 3 sets on (so that small raises
    search too), the sets named by the ranking or frozensets of their users (``_NAMED_FROM``):
    the starts with the search, without it, and with every plan solved."""
    rng = random.Random(4300 + seed)
    monkeypatch.setattr(allox, "_SEARCH_FROM", 2)
    monkeypatch.setattr(allox, "_NAMED_FROM", named_from)
    searched, told = 0, 0
    search = _Ahead.searched

    def counted(*arguments: Any) -> _Ahead | None:
        nonlocal searched, told
        ahead = search(*arguments)
        searched += ahead is not None
        told += ahead is not None and ahead.fact is not None
        return ahead

    monkeypatch.setattr(_Ahead, "searched", staticmethod(counted))
    for _ in range(40):
        arguments, alpha = many_users(rng)
        fast = starts(arguments, alpha)
        monkeypatch.setattr(allox, "_SEARCH_AHEAD", False)
        without = starts(arguments, alpha)
        monkeypatch.setattr(allox, "_CARRY_EMPTY", False)
        every = starts(arguments, alpha)
        monkeypatch.setattr(allox, "_SEARCH_AHEAD", True)
        monkeypatch.setattr(allox, "_CARRY_EMPTY", True)
        assert fast == without == every
    assert searched > 0 and told > 0  # the search ran, and told sets, not only compared


def test_the_benchmarks_burst_with_a_user_per_job_decides_the_same_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    """``decide`` on bench_admission's burst (300 Jobs over 1,000 machines, a fifth busy),
    each Job its own user, α = 0.1: the search on and off, and every plan solved."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bench_admission as bench

    _, _, waiting, running, nodes = bench.instance(300, users=300)
    waiting = [dataclasses.replace(job, user=f"user-{index}") for index, job in enumerate(waiting)]
    state = {"now": bench.NOW, "waiting": waiting, "running": running, "free_nodes": nodes, "capacity": bench.CAPACITY, "alpha": 0.1}
    decided = [decide(**state)]
    monkeypatch.setattr(allox, "_SEARCH_AHEAD", False)
    decided.append(decide(**state))
    monkeypatch.setattr(allox, "_CARRY_EMPTY", False)
    decided.append(decide(**state))
    assert decided[0] == decided[1] == decided[2]
    assert decided[0].starts
