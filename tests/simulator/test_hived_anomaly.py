"""The sharing anomaly of HiveD §2 (Fig. 2) in scenarios small enough to be certain: under the
quota-only baseline another tenant's 1-GPU jobs leave no whole node for a tenant that has its
whole quota free, so its node-level (8-GPU) or multi-node (16-GPU) job waits; under HiveD and
on its private cluster it starts at once."""

from __future__ import annotations

import pytest

from scheduler.simulator.hived.experiment import SETTINGS, HivedExperiment, run_setting
from scheduler.simulator.hived.workload import GangJob
from tests.simulator.hived_helpers import MINUTE, gang, two_tenants


def _delays(experiment: HivedExperiment, jobs: list[GangJob]) -> dict[str, dict[str, float]]:
    out = {}
    for setting in SETTINGS:
        result = run_setting(experiment, setting, jobs, seed=0)
        out[setting] = {job.job_id: float(d) for job, d in zip(jobs, result.delay)}
    return out


@pytest.mark.parametrize("queue", ["fifo", "kube"])
def test_a_node_level_job_waits_under_the_quota_baseline_only(queue: str) -> None:
    # Two 8-GPU nodes, a and b one node cell (8 GPUs of quota) each. a's short 1-GPU job and
    # seven of b's long ones share node 0 under the baseline (packing fills it; spreading puts
    # a's job first on node 0); b's eighth goes to node 1. When a's job is gone, a holds no GPU
    # but no node has 8 free: its 8-GPU job waits for b's jobs (1,000 min).
    experiment = HivedExperiment(workload=two_tenants(nodes_per_rack=2, a_nodes=1, b_nodes=1), queue=queue)
    jobs = [gang("a-small", "a", 1, minutes=10)]
    jobs += [gang(f"b-{i}", "b", 1, minutes=1000) for i in range(8)]
    jobs += [gang("a-node", "a", 8, at=20 * MINUTE, minutes=30)]
    delays = _delays(experiment, jobs)
    assert delays["private"]["a-node"] == 0.0
    assert delays["hived"]["a-node"] == 0.0
    assert delays["quota-pack"]["a-node"] == pytest.approx(980 * MINUTE)
    assert delays["quota-spread"]["a-node"] == pytest.approx(980 * MINUTE)
    for setting in SETTINGS:  # nobody else waits: 16 GPUs, 9 jobs of 1 GPU
        assert all(d == 0.0 for job_id, d in delays[setting].items() if job_id != "a-node")


@pytest.mark.parametrize("queue", ["fifo", "kube"])
def test_a_multi_node_gang_waits_under_the_quota_baseline_only(queue: str) -> None:
    # Four nodes, a and b two node cells each. Packing puts a's short 1-GPU jobs and b's long
    # ones together on nodes 0 and 1, and b's last eight on node 2: when a's jobs are gone only
    # node 3 is whole, and a's 16-GPU gang (two 8-GPU pods) waits although a holds nothing.
    experiment = HivedExperiment(workload=two_tenants(nodes_per_rack=4, a_nodes=2, b_nodes=2), queue=queue)
    jobs = [gang(f"a-{i}", "a", 1, minutes=10) for i in range(4)]
    jobs += [gang(f"b-{i}", "b", 1, minutes=1000) for i in range(4)]
    jobs += [gang(f"a-{i}", "a", 1, minutes=10) for i in range(4, 8)]
    jobs += [gang(f"b-{i}", "b", 1, minutes=1000) for i in range(4, 16)]
    jobs += [gang("a-gang", "a", 16, at=20 * MINUTE, minutes=30)]
    delays = _delays(experiment, jobs)
    assert delays["private"]["a-gang"] == 0.0
    assert delays["hived"]["a-gang"] == 0.0
    assert delays["quota-pack"]["a-gang"] == pytest.approx(980 * MINUTE)
    assert delays["quota-spread"]["a-gang"] > 0.0


def test_under_hived_a_full_tenant_waits_for_its_own_cells_not_for_others() -> None:
    # HiveD does not make a tenant faster than its private cluster: a's second 8-GPU job waits
    # for a's first even while b's node is idle (a's quota is one node).
    experiment = HivedExperiment(workload=two_tenants(nodes_per_rack=2, a_nodes=1, b_nodes=1))
    jobs = [gang("a-1", "a", 8, minutes=30), gang("a-2", "a", 8, minutes=30)]
    for setting in SETTINGS:
        result = run_setting(experiment, setting, jobs, seed=0)
        assert list(result.delay) == [0.0, 30 * MINUTE], setting
