"""The solve's shortcuts that compute in closed form what a search used to, checked against that
search on random inputs: the same values, so the same slots, matchings and decisions.

- ``positions._tightened``: Claim 3's ``K_i``, the largest ``k <= K_i`` (Claim 1) with
  ``k·(1 + s_i) + Σ_l c_il·max(0, k − 1 − l) <= n_c``, was found by bisection; it is now read
  off a running sum of the levels (and a division past the last level). The reference below is
  that bisection, as it was.
- ``transport.distinct``: ``np.unique(values, return_inverse=True)`` for group ids, by counting.
- ``transport._Grouped._priced_units`` and phase 3's next units: each group's units counted
  against its price for every group at once, not a ``searchsorted`` per group.
- ``solve.canonical``'s levels cut by slicing, not ``np.split``: checked through the solve's
  optimality and canonical tests (tests/matching), and here through ``decide``.
- Admission's queue at α < 1 takes its rows from Algorithm 2's arrays of every waiting Job
  instead of making them again (``prepare_on``): decided both ways on random live states
  (pools, gangs, α 0.3, 0.1 and 0, grids of 0, 1 and 60 s, ties), queue positions and expected
  starts included.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.matching import allox, positions
from scheduler.matching.admission import decide
from scheduler.matching.allox import AlloxScheduler, Matched
from scheduler.matching.positions import _LEVELS, position_limits
from scheduler.matching.transport import _Grouped, distinct
from tests.matching.test_matching_vacancy import live_state


def _tightened_by_bisection(bound: np.ndarray, *, omega: np.ndarray, earlier: np.ndarray, runnable: int, shortest: float) -> np.ndarray:
    """Claim 3's K_i as positions.py found it before the closed form (bisection over k)."""
    open_ = np.flatnonzero(bound >= 2)
    if open_.shape[0] == 0:
        return bound
    opened = omega[open_]
    new_omega = np.ones(open_.shape[0], dtype=bool)
    new_omega[1:] = opened[1:] != opened[:-1]
    first = open_[new_omega]
    width = shortest * (1.0 - 1e-9)
    ends = omega[np.newaxis, first] + np.arange(1, _LEVELS + 1)[:, np.newaxis] * width
    reach = np.searchsorted(omega, ends.ravel(), side="left").reshape(ends.shape)
    before = earlier[first]
    within = reach - before[np.newaxis, :] - 1
    counts = np.diff(np.concatenate((np.zeros((1, first.shape[0]), dtype=np.int64), within)), axis=0)
    behind = np.arange(1, _LEVELS + 1)[:, np.newaxis]

    def needed(k: np.ndarray) -> np.ndarray:
        result: np.ndarray = k * (1 + before) + (counts * np.maximum(0, k[np.newaxis, :] - behind)).sum(axis=0)
        return result

    low, high = np.zeros_like(first), bound[first]
    while bool(np.any(low < high)):
        middle = (low + high + 1) // 2
        fits = needed(middle) <= runnable
        low = np.where(fits, middle, low)
        high = np.where(fits, high, middle - 1)
    tightened = bound.copy()
    tightened[open_] = low[np.cumsum(new_omega) - 1]
    return tightened


def _limits_case(rng: np.random.Generator, trial: int) -> dict[str, np.ndarray]:
    machines = int(rng.integers(1, 120))
    kinds = int(rng.integers(1, 4))
    machine_kind = rng.integers(0, kinds, machines)
    mode = trial % 6
    if mode == 0:
        available = rng.uniform(0, 100, machines)  # every machine freeing at its own time
    elif mode == 1:
        available = np.round(rng.uniform(0, 20, machines))  # on a grid: many together
    elif mode == 2:
        available = np.where(rng.random(machines) < 0.5, 0.0, rng.integers(0, 5, machines) * float(rng.choice([0.5, 1.0, 3.0])))
    elif mode == 3:
        available = rng.exponential(5, machines) * (rng.random(machines) < 0.8)
    elif mode == 4:
        available = np.zeros(machines)  # every machine idle
    else:
        # Every machine busy for ages and jobs of almost no time: ω + p rounds back to ω.
        available = rng.uniform(1e6, 1e9, machines)
        runnable = rng.integers(0, 60, kinds)
        shortest = rng.choice([1e-15, 1e-12, 1e-9, 1e-3], kinds)
        return {"machine_kind": machine_kind, "available": available, "runnable_per_kind": runnable, "shortest_per_kind": shortest}
    runnable = rng.integers(0, int(rng.choice([5, 50, 400, 3000])) + 1, kinds)
    shortest = np.where(rng.random(kinds) < 0.85, rng.choice([float(rng.uniform(0.01, 10)), 1.0, 0.5, 3.0, 0.001], kinds), 0.0)
    return {"machine_kind": machine_kind, "available": available, "runnable_per_kind": runnable, "shortest_per_kind": shortest}


@pytest.mark.parametrize("seed", range(4))
def test_claim_3_in_closed_form_equals_the_bisection(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    for trial in range(1500):
        case = _limits_case(rng, trial)
        closed = position_limits(**case)
        with monkeypatch.context() as patched:
            patched.setattr(positions, "_tightened", _tightened_by_bisection)
            bisected = position_limits(**case)
        assert (closed == bisected).all(), (seed, trial)


def test_claim_3_keeps_claim_1s_bound_where_rounding_empties_every_window() -> None:
    """Found by a review (helper-43): jobs of 1e-12 s queued behind machines busy for 1e7 s, so
    ω + p rounds back to ω on the earliest machine. The closed form divided by zero there and cut
    that machine to 17 positions, queueing w17..w19 behind the later machine (2e7 s) where the
    optimum keeps them on the earlier one (1e7 s)."""
    from scheduler.matching.admission import RunningJob, WaitingJob
    from scheduler.matching.capacity import NodeResources
    from scheduler.matching.fairness import Capacity
    from scheduler.matching.model import Demand

    demand = {"gpu": Demand(gpu=1, cpu=1, memory=4)}
    now = 1000.0
    running = [RunningJob(key="r0", user="a", kind="gpu", started=now, seconds={"gpu": 1e7}, demand=demand),
               RunningJob(key="r1", user="a", kind="gpu", started=now, seconds={"gpu": 2e7}, demand=demand)]
    waiting = [WaitingJob(key=f"w{i:02d}", user="b", arrival=now, seconds={"gpu": 1e-12}, demand=demand) for i in range(20)]
    with np.errstate(divide="raise"):
        decision = decide(now=now, waiting=waiting, running=running, free_nodes=[NodeResources(name="n0", cpu=2.0, gpu=2, memory=64.0)],
                          capacity=Capacity(cpu=2.0, gpu=2, memory=64.0), alpha=1.0, omega_grid_seconds=0.0)
    assert all(queued.expected_start_seconds == pytest.approx(1e7) for queued in decision.queue)


def test_distinct_is_numpy_unique_with_its_inverse() -> None:
    rng = np.random.default_rng(5)
    for _ in range(500):
        values = rng.integers(0, int(rng.integers(1, 300)), int(rng.integers(1, 400)))
        keys, inverse = distinct(values)
        expected_keys, expected_inverse = np.unique(values, return_inverse=True)
        np.testing.assert_array_equal(keys, expected_keys)
        np.testing.assert_array_equal(inverse, expected_inverse.reshape(-1))
        assert keys.dtype == np.int64 and inverse.dtype == np.int64


def test_priced_units_are_each_groups_searchsorted() -> None:
    rng = np.random.default_rng(6)
    for _ in range(300):
        groups = int(rng.integers(1, 12))
        units = [np.sort(np.round(rng.uniform(0, 50, int(rng.integers(1, 9))))) for _ in range(groups)]
        grouped = _Grouped(cost=rng.uniform(0, 10, (3, groups)), units=units)
        np.testing.assert_array_equal(grouped.price, [u[0] for u in units])
        grouped.price = np.round(rng.uniform(-5, 55, groups)) if rng.random() < 0.5 else np.array([rng.choice(u) for u in units])
        expected = [np.searchsorted(u, p, side="right") for u, p in zip(units, grouped.price)]
        np.testing.assert_array_equal(grouped._priced_units(), expected)


@pytest.mark.parametrize("pools", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_the_queue_at_small_alpha_from_algorithm_2s_arrays_equals_it_made_again(seed: int, pools: bool,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(9700 + seed + 100 * pools)
    matched = AlloxScheduler.matched
    taken = 0

    def without_arrays(self: AlloxScheduler, **arguments: object) -> Matched:
        found = matched(self, **arguments)  # type: ignore[arg-type]
        return Matched(found.started, found.problem, found.queues)

    for _ in range(20):
        state = live_state(rng, pools=pools)
        for alpha in (0.3, 0.1, 0.0):
            kept = decide(alpha=alpha, **state)  # type: ignore[arg-type]
            with monkeypatch.context() as patched:
                patched.setattr(allox.AlloxScheduler, "matched", without_arrays)
                made = decide(alpha=alpha, **state)  # type: ignore[arg-type]
            assert kept == made
            taken += bool(kept.queue)
    assert taken > 0
