"""The answer's progress taken from Algorithm 2's walk (``Matched.progress``,
``admission._PROGRESS_FROM_WALK``) is the progress summed again over the starts, bit for bit.

At α < 1 the walk ranks users by their progress plus each start's value, start by start (in
Python, or in a run in C that adds the values ``fairness.job_value`` gives it); the answer added
the same values over the same starts once more. Here decisions with the walk's sums are compared
with the sums made again, every user's progress as its float's bits, on live states (bursts and
nearly full clusters, pools, gangs, whole-number times, α 0.1, 0.3 and 1: none kept there), with
and without runs of visits in C, and on the benchmark's burst, where the walk's sums are taken.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from scheduler.matching import admission, allox
from scheduler.matching.admission import AdmissionDecision, decide
from scheduler.matching.allox import AlloxScheduler, Matched
from tests.matching.test_matching_vacancy import live_state
from tests.matching.test_matching_walk_run import benchmark_state


def both_ways(call: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[AdmissionDecision, AdmissionDecision]:
    """``call()`` with the walk's progress taken, then with it summed again over the starts."""
    with monkeypatch.context() as patched:
        patched.setattr(admission, "_PROGRESS_FROM_WALK", True)
        taken = call()
    with monkeypatch.context() as patched:
        patched.setattr(admission, "_PROGRESS_FROM_WALK", False)
        summed = call()
    return taken, summed


def bits(decision: AdmissionDecision) -> dict[str, str]:
    """Each user's progress as its float's bits (``==`` would call -0.0 and 0.0 alike)."""
    return {user: float(value).hex() for user, value in decision.progress.items()}


def walks_kept(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each of Algorithm 2's walks, whether it handed its progress back."""
    kept: list[bool] = []
    matched = AlloxScheduler.matched

    def recorded(self: AlloxScheduler, **arguments: Any) -> Matched:
        answer = matched(self, **arguments)
        kept.append(answer.progress is not None)
        return answer

    monkeypatch.setattr(AlloxScheduler, "matched", recorded)
    return kept


@pytest.mark.parametrize("in_c", [True, False])
def test_live_states_answer_the_same_progress_from_the_walk(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    monkeypatch.setattr(allox, "runs", allox.runs if in_c else None)
    kept = walks_kept(monkeypatch)
    rng = random.Random(28201 + in_c)
    for pools in (False, True):
        for _ in range(25):
            state = live_state(rng, pools=pools)
            for alpha in (0.1, 0.3, 1.0):
                taken, summed = both_ways(lambda: decide(**state, alpha=alpha), monkeypatch)  # type: ignore[arg-type]  # noqa: B023
                assert taken == summed
                assert bits(taken) == bits(summed)
    assert kept.count(True) > 100 and kept.count(False) > 50  # both ways out: a walk's sums, and none kept


def test_the_bursts_progress_is_the_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's burst at α = 0.1: 455 starts, ~350 of them in runs in C, valued there
    through the callback; the walk's sums are taken and are the ones summed again."""
    from tests.benchmarks.bench_admission import BURST_BUSY

    arguments = benchmark_state(BURST_BUSY)
    kept = walks_kept(monkeypatch)
    taken, summed = both_ways(lambda: decide(**arguments, alpha=0.1), monkeypatch)
    assert taken == summed and len(taken.starts) == 455
    assert bits(taken) == bits(summed)
    assert kept == [True, True]
