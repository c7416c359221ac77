"""A plan the raise puts off from a fact reads its waiting rows when it is made, not when it is
put off, and Algorithm 2 decides exactly as reading them then does.

After a burst at small α the raise at a CPU slot asks the sets of five, six, … nine users, each
new since the last start and put off by what an earlier plan showed (``allox._Empty``), their
rows read only to be kept in the ``_Deferred`` (~6 us a set). Once a smaller set of the visit
was declined by ``_Left.uncontended`` and its bound did not tell, neither test is asked of the
larger sets, so a set put off needs no rows then; a plan put off is dropped at any start of one
of its users' jobs and no run in C is made while one is put off, so the rows read when it is
made are those of when it was put off. ``allox._ROWS_WHEN_MADE`` off reads them for every set.
Here the starts, queue and progress are compared both ways on random bursts (ties, jobs that
take no time, a slot busy for a rounding error), on live states, and on the benchmark's burst,
where the way is taken; and a plan made from its users against one made from its rows.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from scheduler.matching import allox
from scheduler.matching.admission import decide
from scheduler.matching.allox import AlloxScheduler, _Deferred, _Empty, _Left
from scheduler.matching.model import Job, Machine
from scheduler.matching.solve import fleet, prepare_on
from tests.matching.test_matching_carry_empty import assert_decide_the_same_both_ways
from tests.matching.test_matching_walk_shortcuts import odd_bursts


def starts(arguments: dict[str, Any], alpha: float) -> list[tuple[str, str, float, float]]:
    return [(a.job.name, a.machine.name, a.start, a.finish) for a in AlloxScheduler(alpha=alpha).on_machine_free(**arguments)]


def counting(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often a plan put off without its rows was made (and so read them), or never made."""
    taken: Counter[str] = Counter()
    made = _Deferred.made

    def counted(self: _Deferred, *arguments: Any) -> Any:
        taken["made from its users" if self.rows is None else "made from its rows"] += 1
        return made(self, *arguments)

    monkeypatch.setattr(_Deferred, "made", counted)
    return taken


@pytest.mark.parametrize("seed", range(4))
def test_algorithm_2_reading_rows_when_made_starts_what_reading_them_when_put_off_starts(seed: int,
                                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(12900 + seed)
    taken = counting(monkeypatch)
    for arguments, alpha in odd_bursts(rng, 120):
        late = starts(arguments, alpha)
        monkeypatch.setattr(allox, "_ROWS_WHEN_MADE", False)
        early = starts(arguments, alpha)
        monkeypatch.setattr(allox, "_ROWS_WHEN_MADE", True)
        assert late == early
    # Plans put off without their rows were made, not only put off.
    assert taken["made from its users"] > 0


@pytest.mark.parametrize("pools", [False, True])
@pytest.mark.parametrize("seed", range(2))
def test_decide_reading_rows_when_made_equals_decide_reading_them_when_put_off(seed: int, pools: bool,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Live states (bursts, full clusters, virtual clusters, gangs), α 1, 0.3, 0.1 and 0 and
    AlloX+: the same starts, queue and progress."""
    assert_decide_the_same_both_ways(monkeypatch, ("_ROWS_WHEN_MADE",), random.Random(13100 + seed + 100 * pools), pools=pools)


def test_the_benchmarks_burst_puts_off_plans_without_their_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The case it is for: 1,000 Jobs of ten users after a burst at α = 0.1 (455 starts). Most
    sets the raise puts off read no rows (~100 of ~130 put off by a fact), and the decision is
    the one reading every set's rows gives."""
    from tests.benchmarks.bench_admission import BURST_BUSY
    from tests.matching.test_matching_walk_run import benchmark_state

    arguments = benchmark_state(BURST_BUSY)
    put_off: Counter[str] = Counter()
    deferred_init = _Deferred.__init__

    def counted(self: _Deferred, rows: Any, *rest: Any, **named: Any) -> None:
        put_off["without rows" if rows is None else "with rows"] += 1
        deferred_init(self, rows, *rest, **named)

    monkeypatch.setattr(_Deferred, "__init__", counted)
    late = decide(**arguments, alpha=0.1)
    without = put_off["without rows"]
    monkeypatch.setattr(allox, "_ROWS_WHEN_MADE", False)
    early = decide(**arguments, alpha=0.1)
    assert late == early and len(late.starts) == 455
    assert without > 50 and put_off["without rows"] == without  # none without rows once the way is off


def test_a_plan_made_from_its_users_is_the_plan_made_from_their_rows() -> None:
    """The same rows, so the same solve on the machines as they were, kept across the same starts."""
    machines = [Machine(name="g0", kind="gpu"), Machine(name="c0", kind="cpu"), Machine(name="c1", kind="cpu")]
    arrays = fleet(machines=machines, now=0.0)
    jobs = [Job(name=f"j{index}", user=f"u{index % 2}", arrival=0.0, processing_time={"gpu": 10.0 + index, "cpu": 60.0 + index})
            for index in range(5)]
    left = _Left(every_job=prepare_on(arrays, jobs))
    users = frozenset({"u0"})
    known = _Empty(kind=int(arrays.machine_kind[1]), wait=0.0, count=0, unique=None, tolerance=1e-9, certain=True)
    from_rows = _Deferred(left.rows(users), arrays, 0, known).made(left, [])
    from_users = _Deferred(None, arrays, 0, known, users=users).made(left, [])
    assert from_rows is not None and from_users is not None
    assert from_rows.bounds is not None and from_users.bounds is not None
    assert np.array_equal(from_rows.bounds, from_users.bounds)
    assert from_rows.queued is not None and from_users.queued is not None
    assert np.array_equal(from_rows.queued, from_users.queued)
    assert [from_users.first(position) for position in range(3)] == [from_rows.first(position) for position in range(3)]
    with pytest.raises(AssertionError, match="names its users"):
        _Deferred(None, arrays, 0, known).made(left, [])
