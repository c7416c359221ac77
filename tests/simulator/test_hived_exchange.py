"""HiveD's cell exchange experiment (scheduler/simulator/hived/exchange.py): tenants' proxies post
offers and requests from their demand, the production arbiter and quota proof match them hour by
hour, and each tenant's guaranteed use is measured with and without the exchanges."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.simulator.hived.exchange import ExchangeWorkload, balanced_vcs, run_assignment, run_exchange_experiment


def small(**overrides) -> ExchangeWorkload:
    base = {"vcs": {"a": 2, "b": 2}, "base_share": {"a": 0.5, "b": 0.0}, "racks": 1, "nodes_per_rack": 4, "hours": 48,
            "lead_hours": 6, "chunk_hours": 6}
    return ExchangeWorkload(**{**base, **overrides})


def test_a_burst_borrows_the_idle_tenants_cells_and_the_lender_loses_nothing():
    workload = small()
    a = np.full(48, 8.0)
    a[24:36] = 32.0  # two node cells (16 GPUs) over its VC for 12 hours
    demand = {"a": a, "b": np.zeros(48)}
    outcome = run_assignment(workload, demand, {"a": 2, "b": 2}, assignment="default")
    rows = {r.tenant: r for r in outcome.rows}
    # a uses 16 more guaranteed GPUs for 12 of 48 hours of its 16-GPU VC.
    assert rows["a"].increased == pytest.approx(16 * 12 / (16 * 48))
    assert rows["a"].effective == pytest.approx((8 * 36 + 16 * 12) / (16 * 48))
    assert rows["a"].borrowed_gpu_hours == pytest.approx(16 * 12) and rows["b"].lent_gpu_hours == pytest.approx(16 * 12)
    assert rows["b"].increased == 0.0 and rows["b"].effective == 0.0
    assert outcome.matches == 4  # two one-node requests per 6-hour chunk of the burst
    assert sum(outcome.surplus.values()) == pytest.approx(0.0) and outcome.surplus["b"] == pytest.approx(16 * 12)


def test_without_idle_cells_nothing_is_exchanged():
    workload = small(vcs={"a": 2, "b": 2})
    a = np.full(48, 24.0)
    outcome = run_assignment(workload, {"a": a, "b": np.full(48, 16.0)}, {"a": 2, "b": 2}, assignment="default")
    assert outcome.matches == 0 and outcome.offers == 0 and outcome.requests == 7  # chunks from hour 6 (the lead) on
    assert {r.tenant: r.increased for r in outcome.rows} == {"a": 0.0, "b": 0.0}


def test_a_request_is_matched_only_for_a_chunk_the_offer_covers():
    a = np.full(48, 8.0)
    a[24:36] = 24.0
    b = np.full(48, 16.0)
    b[24:30] = 0.0  # b's cells are idle for the first half of a's burst only
    outcome = run_assignment(small(), {"a": a, "b": b}, {"a": 2, "b": 2}, assignment="default")
    rows = {r.tenant: r for r in outcome.rows}
    assert rows["a"].borrowed_gpu_hours == pytest.approx(8 * 6)  # one node for hours 24-30
    assert rows["a"].increased == pytest.approx(8 * 6 / (16 * 48))


def test_the_experiment_is_deterministic_and_lending_never_costs_guaranteed_use():
    workload = ExchangeWorkload(hours=240, seed=3)
    first, second = run_exchange_experiment(workload), run_exchange_experiment(workload)
    assert first == second
    for outcome in first:
        assert all(r.increased >= 0 for r in outcome.rows)
        assert sum(outcome.surplus.values()) == pytest.approx(0.0, abs=1e-6)
        assert sum(r.lent_gpu_hours for r in outcome.rows) == pytest.approx(sum(r.borrowed_gpu_hours for r in outcome.rows))
    assert sum(r.increased for r in first[0].rows) > 0


def test_balanced_vcs_share_the_nodes_by_total_demand():
    demand = {"a": np.full(10, 30.0), "b": np.full(10, 10.0), "c": np.zeros(10)}
    assert balanced_vcs(demand, 8) == {"a": 5, "b": 2, "c": 1}
    assert sum(balanced_vcs(demand, 24).values()) == 24
