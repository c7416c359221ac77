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
from tests.matching.native_paths import Ways, live_states_decide_alike, switched_both_ways
from tests.matching.test_matching_walk_run import benchmark_state


def both_ways(monkeypatch: pytest.MonkeyPatch) -> Ways:
    """A call made with the walk's progress taken, then with it summed again over the starts."""
    return lambda call: switched_both_ways(call, monkeypatch, admission, "_PROGRESS_FROM_WALK")


def bits(decision: AdmissionDecision) -> dict[str, str]:
    """Each user's progress as its float's bits (``==`` would call -0.0 and 0.0 alike)."""
    return {user: float(value).hex() for user, value in decision.progress.items()}


def alike_to_the_bit(taken: AdmissionDecision, summed: AdmissionDecision) -> bool:
    return taken == summed and bits(taken) == bits(summed)


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
    live_states_decide_alike(random.Random(28201 + in_c), both_ways(monkeypatch), states=25,
                             options=({"alpha": 0.1}, {"alpha": 0.3}, {"alpha": 1.0}), alike=alike_to_the_bit)
    assert kept.count(True) > 100 and kept.count(False) > 50  # both ways out: a walk's sums, and none kept


def test_the_bursts_progress_is_the_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's burst at α = 0.1: 455 starts, ~350 of them in runs in C, valued there
    through the callback; the walk's sums are taken and are the ones summed again."""
    from tests.benchmarks.bench_admission import BURST_BUSY

    arguments = benchmark_state(BURST_BUSY)
    kept = walks_kept(monkeypatch)
    taken, summed = both_ways(monkeypatch)(lambda: decide(**arguments, alpha=0.1))
    assert taken == summed and len(taken.starts) == 455
    assert bits(taken) == bits(summed)
    assert kept == [True, True]
