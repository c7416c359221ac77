"""A start's new wait counted once (``allox._ALONE_TOLD``) rather than among each held plan's
machines (``_Plan.kept_after``) decides exactly as counting them does.

After a start, Algorithm 2 keeps a plan only where it has no queue on a machine of the started
one's kind that now waits what it does. A started job's finish is most often its own: when no
other machine of the kind waits it, no plan can have such a queue, and the walk asks that once
per start instead of once per plan. Here the starts (job, machine, start, finish, in order) are
compared with the path that counts every plan's machines, on random bursts (whole-number times
in half of them, so that two machines of a kind often wait alike), with and without runs of
visits in C, and on live states through admission's ``decide``; and on the benchmark's burst
every plan kept or dropped after a start is told so from the one count.

On those the one count seldom tells anything that decides: a start's machine that shares its
wait shares it with busy machines, whose queues are interchangeable with its own (the plan stays
optimal either way), so a plan kept where counting drops it starts the same jobs, but where a
re-solve breaks a tie otherwise (a count broken to "more than two machines" changed two bursts
in 450 random ones tried, by ties of whole-number times). A job that takes no time is where it
decides: its machine is free again, in the class of the free machines of its kind, and a plan
with a queue on one of them listed after it is no longer the one a re-solve makes (that queue is
the started machine's now). Such bursts are compared too, with the plans dropped from the count
(a plan with no queue on the started machine) counted, and bursts of two free machines a kind,
where the count must tell two machines from one.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from scheduler.matching import allox
from scheduler.matching.admission import decide
from tests.matching.native_paths import Ways, live_states_decide_alike, random_bursts_start_alike, switched_both_ways, varied_bursts_start_alike
from tests.matching.test_matching_walk_run import benchmark_state


def told_and_counted(monkeypatch: pytest.MonkeyPatch) -> Counter[bool]:
    """How often ``kept_after`` was told that no other machine waits alike (True) or asked to
    count (False)."""
    seen: Counter[bool] = Counter()
    kept_after = allox._Plan.kept_after

    def counted(plan: allox._Plan, **arguments: Any) -> bool:
        seen[arguments.get("shared", True) is False] += 1
        return kept_after(plan, **arguments)

    monkeypatch.setattr(allox._Plan, "kept_after", counted)
    return seen


def kept_and_dropped(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[bool, bool, bool]]:
    """With the start's wait counted once: of ``kept_after``'s answers, how many were (shared,
    kept, free again), where ``shared`` is what the walk's one count told it and ``free again``
    that the started machine waits 0."""
    seen: Counter[tuple[bool, bool, bool]] = Counter()
    kept_after = allox._Plan.kept_after

    def counted(plan: allox._Plan, **arguments: Any) -> bool:
        kept = kept_after(plan, **arguments)
        if allox._ALONE_TOLD:
            seen[arguments.get("shared", True), kept, arguments["wait"] == 0.0] += 1
        return kept

    monkeypatch.setattr(allox._Plan, "kept_after", counted)
    return seen


def both_ways(monkeypatch: pytest.MonkeyPatch) -> Ways:
    """A call made with the start's wait counted once, then with every plan's machines counted."""
    return lambda call: switched_both_ways(call, monkeypatch, allox, "_ALONE_TOLD")


@pytest.mark.parametrize("in_c", [True, False])
def test_random_bursts_start_the_same_with_the_wait_counted_once(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    monkeypatch.setattr(allox, "runs", allox.runs if in_c else None)
    seen = told_and_counted(monkeypatch)
    random_bursts_start_alike(random.Random(27101), both_ways(monkeypatch), gpu_bursts=150, bursts=150)
    # Both ways out were taken: a wait no other machine of the kind has, and one it shares.
    assert seen[True] > 500 and seen[False] > 500


@pytest.mark.parametrize("in_c", [True, False])
def test_bursts_with_jobs_of_no_time_start_the_same_with_the_wait_counted_once(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    """A fifth of the jobs take no time on one kind: their machines wait what the free ones of
    their kind do, and the plans with a queue on another of them are dropped from the count."""
    monkeypatch.setattr(allox, "runs", allox.runs if in_c else None)
    seen = kept_and_dropped(monkeypatch)
    varied_bursts_start_alike(random.Random(27103), both_ways(monkeypatch), bursts=150, interleaved=False, no_time=0.2)
    # Plans dropped for a queue on a free machine the started one rejoined, and plans told from
    # the one count: kept, or dropped for a queue on the started machine itself.
    assert seen[True, False, True] > 500 and seen[False, True, False] > 1000 and seen[False, False, False] > 200, seen


@pytest.mark.parametrize("in_c", [True, False])
def test_bursts_of_two_free_machines_a_kind_start_the_same_with_the_wait_counted_once(monkeypatch: pytest.MonkeyPatch,
                                                                                       in_c: bool) -> None:
    """Two free machines of each kind, most jobs taking no time on one kind: a job of no time
    started on the first leaves it waiting what the second does, and no other machine: the one
    count must tell two machines from one."""
    monkeypatch.setattr(allox, "runs", allox.runs if in_c else None)
    seen = kept_and_dropped(monkeypatch)
    varied_bursts_start_alike(random.Random(27104), both_ways(monkeypatch), bursts=400, interleaved=False, no_time=0.6, free_of_a_kind=2)
    # Machines free again told both ways: sharing their wait (a plan dropped for a queue on the
    # other), and waiting it alone (the other started before: a plan kept).
    assert seen[True, False, True] > 500 and seen[False, True, True] > 20, seen


def test_admission_decides_the_same_with_the_wait_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    live_states_decide_alike(random.Random(27102), both_ways(monkeypatch), states=10, options=({"alpha": 0.1}, {"alpha": 0.3}, {"alpha": 1.0}))


def test_the_bursts_starts_keep_plans_from_one_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's burst at α = 0.1 (455 starts): the plans kept or dropped after the walk's
    starts in Python are told from each start's one count (no machine of a GPU or CPU slot
    waits what a job started there does), deciding as counting does."""
    from tests.benchmarks.bench_admission import BURST_BUSY

    arguments = benchmark_state(BURST_BUSY)
    with monkeypatch.context() as patched:
        patched.setattr(allox, "_ALONE_TOLD", False)
        counted = decide(**arguments, alpha=0.1)
    seen = told_and_counted(monkeypatch)
    told = decide(**arguments, alpha=0.1)
    assert told == counted and len(told.starts) == 455
    assert seen[True] > 300 and seen[False] * 10 < seen[True]
