"""The ``hived`` workload under kube-scheduler's queue (``--set hived.queue=kube``, the shared
:mod:`scheduler.simulator.kube_queue` model): what holds and what does not.

* Another tenant's event reorders a tenant's waiting jobs: a bind in another VC moves every
  job the extender refused, and their retry gives them new queue times, while on the private
  cluster they keep the order the flushes left them in. So HiveD no longer equals the private
  cluster job by job (under ``fifo`` it does: ``test_hived_experiment.py``).
* So does another tenant's idle node, with no other tenant's job at all: kube-scheduler's own
  fit sees it, so a job the private cluster's fit refuses (moved by deletions only) is
  refused by the extender on the shared cluster (moved by the tenant's own binds too).
* What holds in every setting under this queue: no job waits while its tenant's quota has a
  free GPU and the job asks for one GPU (a release moves every parked job, so nothing that fits
  is left parked).
"""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.simulator.hived.experiment import SETTINGS, HivedExperiment, run_setting
from scheduler.simulator.hived.simulation import GangRunResult
from scheduler.simulator.hived.workload import GangJob, HivedWorkload
from tests.simulator.hived_helpers import MINUTE, gang, two_tenants


def _scenario() -> list[GangJob]:
    # a's node is busy until minute 10 (a-0); a-1 (8 GPUs) fails at minute 1, a-2 (1 GPU) at
    # minute 2. The flush retries a-1 at 6.5 min (parked over 5 min): its queue time becomes
    # 6.5 min, later than a-2's 2 min, until the flush retries a-2 at 7.5 min. b's 1-GPU job
    # binds at 7 min, in between: the bind moves both (the extender refused them), a-2 first,
    # and their retry keeps a-2 ahead. At minute 10 a-0's deletion moves both again: privately
    # a-1 goes first and takes the node, under HiveD a-2 does and a-1 waits for it.
    return [
        gang("a-0", "a", 8, at=0.0, minutes=10),
        gang("a-1", "a", 8, at=1 * MINUTE, minutes=30),
        gang("a-2", "a", 1, at=2 * MINUTE, minutes=30),
        gang("b-0", "b", 1, at=7 * MINUTE, minutes=60),
    ]


def _starts(result: GangRunResult, jobs: list[GangJob]) -> dict[str, float]:
    return {job.job_id: float(start) / MINUTE for job, start in zip(jobs, result.start)}


def test_another_tenants_bind_reorders_a_tenants_jobs_under_kube() -> None:
    jobs = _scenario()
    experiment = HivedExperiment(workload=two_tenants(nodes_per_rack=2, a_nodes=1, b_nodes=1), queue="kube")
    private = _starts(run_setting(experiment, "private", jobs, seed=0), jobs)
    hived = _starts(run_setting(experiment, "hived", jobs, seed=0), jobs)
    assert private == {"a-0": 0.0, "a-1": 10.0, "a-2": 40.0, "b-0": 7.0}
    assert hived == {"a-0": 0.0, "a-1": 40.0, "a-2": 10.0, "b-0": 7.0}


def _idle_node_scenario() -> list[GangJob]:
    # a: two nodes, one full with a-0 until minute 10, seven of the other's GPUs taken for long.
    # a-1 (8 GPUs) fails at minute 1, a-2 (2 GPUs) at minute 2: privately kube-scheduler's fit
    # finds no node for either, on the shared cluster b's idle node passes it and HiveD refuses.
    # The flush restamps a-1 at 6.5 min; a's 1-GPU a-s binds at 7 min, which moves the two only
    # on the shared cluster (the extender refused them), a-2 first (queue time 2 min); the
    # flush then restamps a-2 at 7.5 min privately only. At minute 10 a-1 goes first privately,
    # a-2 under HiveD.
    jobs = [gang("a-0", "a", 8, minutes=10)] + [gang(f"a-h{i}", "a", 1, minutes=600) for i in range(7)]
    return jobs + [
        gang("a-1", "a", 8, at=1 * MINUTE, minutes=30),
        gang("a-2", "a", 2, at=2 * MINUTE, minutes=30),
        gang("a-s", "a", 1, at=7 * MINUTE, minutes=600),
    ]


def test_another_tenants_idle_node_alone_reorders_a_tenants_jobs_under_kube() -> None:
    jobs = _idle_node_scenario()
    experiment = HivedExperiment(workload=two_tenants(nodes_per_rack=3, a_nodes=2, b_nodes=1), queue="kube")
    private = _starts(run_setting(experiment, "private", jobs, seed=0), jobs)
    hived = _starts(run_setting(experiment, "hived", jobs, seed=0), jobs)
    shown = ("a-1", "a-2", "a-s")
    assert {job: private[job] for job in shown} == {"a-1": 10.0, "a-2": 40.0, "a-s": 7.0}
    assert {job: hived[job] for job in shown} == {"a-1": 40.0, "a-2": 10.0, "a-s": 7.0}


def test_without_the_other_tenants_bind_hived_equals_private_under_kube() -> None:
    jobs = _scenario()[:3]
    experiment = HivedExperiment(workload=two_tenants(nodes_per_rack=2, a_nodes=1, b_nodes=1), queue="kube")
    private = run_setting(experiment, "private", jobs, seed=0)
    hived = run_setting(experiment, "hived", jobs, seed=0)
    assert np.array_equal(private.start, hived.start)
    assert _starts(hived, jobs)["a-1"] == 10.0


@pytest.mark.parametrize(("jobs", "nodes"), [(_scenario(), (2, 1)), (_idle_node_scenario(), (3, 2))])
def test_under_fifo_the_same_jobs_start_as_privately(jobs: list[GangJob], nodes: tuple[int, int]) -> None:
    rack, a_nodes = nodes
    experiment = HivedExperiment(workload=two_tenants(nodes_per_rack=rack, a_nodes=a_nodes, b_nodes=1), queue="fifo")
    private = run_setting(experiment, "private", jobs, seed=0)
    hived = run_setting(experiment, "hived", jobs, seed=0)
    assert np.array_equal(private.start, hived.start)
    assert _starts(hived, jobs)["a-1"] == 10.0


def _idle_quota_while_waiting(result: GangRunResult, quota: dict[str, int]) -> list[tuple[int, float]]:
    """1-GPU jobs still waiting after a pass at which their tenant held fewer GPUs than its
    quota: (job, instant)."""
    found = []
    instants = np.unique(np.concatenate([result.submit, result.finish]))
    for index in np.flatnonzero((result.gpus == 1) & (result.start > result.submit)):
        tenant = result.tenant[index]
        name = result.tenants[tenant]
        mine = result.tenant == tenant
        for t in instants[(instants >= result.submit[index]) & (instants < result.start[index])]:
            held = int(result.gpus[mine & (result.start <= t) & (result.finish > t)].sum())
            if held < quota[name]:
                found.append((int(index), float(t)))
                break
    return found


@pytest.mark.parametrize("setting", SETTINGS)
def test_no_one_gpu_job_waits_while_its_quota_has_a_free_gpu_under_kube(setting: str) -> None:
    experiment = HivedExperiment(workload=HivedWorkload(load=1.4), jobs=500, seeds=(4,), queue="kube")
    workload = experiment.workload
    quota = {t.name: t.quota_gpus(workload.shape) for t in workload.tenants}
    result = run_setting(experiment, setting, experiment.jobs_for(4), seed=4)
    assert ((result.gpus == 1) & (result.start > result.submit)).sum() > 20
    assert _idle_quota_while_waiting(result, quota) == []


def test_under_fifo_a_one_gpu_job_waits_behind_its_tenants_head() -> None:
    # The check above can fail: YARN-CS's head-of-line blocking keeps 1-GPU jobs waiting while
    # their tenant's quota has room.
    experiment = HivedExperiment(workload=HivedWorkload(load=1.4), jobs=500, seeds=(4,), queue="fifo")
    workload = experiment.workload
    quota = {t.name: t.quota_gpus(workload.shape) for t in workload.tenants}
    result = run_setting(experiment, "hived", experiment.jobs_for(4), seed=4)
    assert _idle_quota_while_waiting(result, quota) != []
