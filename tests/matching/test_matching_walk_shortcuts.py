"""Algorithm 2's walk over the free machines, with its shortcuts, decides exactly as visiting
every machine does.

After a burst at small α the walk visits a node's CPU slots one after another with no start
between them: once one of them started nothing, the slots listed after it (the same kind, the
same wait) start nothing either (``allox._starts_nothing_after``), and are passed without a
visit. Here the starts are compared with the walk that visits every machine
(``allox._SKIP_PASSED`` off) on random bursts (ties from whole-number times in half of them,
jobs that take no time on a kind now and then, a CPU slot busy for a rounding error) and on
live states through ``decide`` (the starts, the queue and the progress).
"""

from __future__ import annotations

import random
from typing import Any, Iterator

import pytest

from scheduler.matching import allox
from scheduler.matching.admission import decide
from scheduler.matching.model import Job
from tests.matching.test_matching_carry_empty import burst, starts_both_ways
from tests.matching.test_matching_vacancy import live_state


def counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often a machine was passed without a visit."""
    passed = {"passed": 0}
    tells = allox._starts_nothing_after

    def counted(*arguments: Any, **keywords: Any) -> bool:
        found = tells(*arguments, **keywords)
        passed["passed"] += found
        return found

    monkeypatch.setattr(allox, "_starts_nothing_after", counted)
    return passed


def with_odd_times(arguments: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Now and then a job that takes no time on a kind (its machine's wait stays 0 after it
    starts), and a CPU slot busy for a rounding error (a class of its own, next to the free one)."""
    jobs = [Job(name=job.name, user=job.user, arrival=job.arrival,
                processing_time={kind: 0.0 if rng.random() < 0.03 else time for kind, time in job.processing_time.items()})
            for job in arguments["pending_jobs"]]
    busy = dict(arguments["busy_until"])
    for machine in list(busy)[:1]:
        if rng.random() < 0.3:
            busy[machine] = 4e-16
    return {**arguments, "pending_jobs": jobs, "busy_until": busy}


def odd_bursts(rng: random.Random, count: int) -> Iterator[tuple[dict[str, Any], float]]:
    """``count`` random bursts and their α, three in ten :func:`with_odd_times`."""
    for _ in range(count):
        arguments, alpha = burst(rng)
        yield (with_odd_times(arguments, rng) if rng.random() < 0.3 else arguments), alpha


@pytest.mark.parametrize("seed", range(4))
def test_algorithm_2_passing_machines_starts_what_visiting_every_machine_starts(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8700 + seed)
    passed = counting(monkeypatch)
    for arguments, alpha in odd_bursts(rng, 250):
        passing, visiting = starts_both_ways(monkeypatch, "_SKIP_PASSED", arguments, alpha)
        assert passing == visiting
    assert passed["passed"] > 0  # the shortcut was taken, not only compared


@pytest.mark.parametrize("pools", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_decide_passing_machines_equals_decide_visiting_every_machine(seed: int, pools: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Live states (bursts, full clusters, virtual clusters, gangs, grids of 0, 1 and 60 s),
    α 0.3, 0.1 and 0 and AlloX+: the same starts, queue and progress."""
    rng = random.Random(8800 + seed + 100 * pools)
    passed = counting(monkeypatch)
    for _ in range(25):
        state = live_state(rng, pools=pools)
        for options in ({"alpha": 0.3}, {"alpha": 0.1}, {"alpha": 0.0}, {"policy": "allox+", "alpha": 0.1}):
            decided = []
            for skip in (True, False):
                monkeypatch.setattr(allox, "_SKIP_PASSED", skip)
                decided.append(decide(**state, **options))  # type: ignore[arg-type]
            assert decided[0] == decided[1]
    assert passed["passed"] > 0
