"""The ``hived`` experiment end to end on a small generated workload: seeded and deterministic,
every setting replays the same arrivals, and under the ``fifo`` queue HiveD's queueing delays
equal the private clusters' exactly (sharing safety: bound 0 s, job by job), while the
quota-only baseline's do not (under ``kube``: ``test_hived_kube_queue.py``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scheduler.errors import InvalidRequest
from scheduler.simulator.hived.experiment import (
    HivedExperiment,
    run_hived_experiment,
    run_setting,
)
from scheduler.simulator.hived.results import ALL_SIZES, summarise_outcome
from scheduler.simulator.hived.workload import ClusterShape, HivedWorkload, Tenant

SMALL = HivedExperiment(jobs=600, seeds=(3,))


def test_the_workload_is_seeded() -> None:
    workload = HivedWorkload()
    first, again, other = (workload.generate(jobs=300, seed=s) for s in (1, 1, 2))
    assert first == again
    assert first != other
    assert [j.submit_time for j in first] == sorted(j.submit_time for j in first)
    assert {j.tenant for j in first} == {t.name for t in workload.tenants}
    for job in first:
        assert job.gpus in (1, 2, 4, 8, 16, 32)
        assert job.pods == max(1, job.gpus // 8) and job.gpus_per_pod * job.pods == job.gpus


def test_arrival_rates_keep_each_quota_busy_at_the_load() -> None:
    workload = HivedWorkload(load=0.5)
    jobs = workload.generate(jobs=20_000, seed=5)
    span = jobs[-1].submit_time
    for tenant in workload.tenants:
        gpu_seconds = sum(j.gpus * j.duration for j in jobs if j.tenant == tenant.name)
        offered = gpu_seconds / (span * tenant.quota_gpus(workload.shape))
        assert offered == pytest.approx(0.5 * tenant.load, rel=0.25), tenant.name


def test_hived_delays_equal_the_private_clusters_job_by_job_under_fifo() -> None:
    # Each tenant's queue is its own (YARN-CS): only its own releases unblock it, and its VC
    # decides as its private cluster would.
    experiment = HivedExperiment(jobs=600, seeds=(3,), queue="fifo")
    jobs = experiment.jobs_for(3)
    private = run_setting(experiment, "private", jobs, seed=3)
    hived = run_setting(experiment, "hived", jobs, seed=3)
    assert np.array_equal(hived.submit, private.submit)
    assert np.array_equal(hived.start, private.start)  # bound: 0 s
    assert np.array_equal(hived.finish, private.finish)
    assert np.isfinite(hived.start).all()


@pytest.mark.parametrize("queue", ["fifo", "kube"])
def test_runs_are_deterministic_and_replay_the_same_arrivals(queue: str) -> None:
    experiment = replace(SMALL, queue=queue)
    outcome = run_hived_experiment(experiment)
    again = run_hived_experiment(experiment)
    for setting, runs in outcome.runs.items():
        assert np.array_equal(runs[0].start, again.runs[setting][0].start), setting
    submits = [runs[0].submit for runs in outcome.runs.values()]
    assert all(np.array_equal(s, submits[0]) for s in submits)


def test_the_quota_baseline_delays_multi_gpu_jobs_that_hived_starts() -> None:
    summaries = summarise_outcome(run_hived_experiment(SMALL).runs)
    assert summaries["hived"].longer_than_private == {t: 0.0 for t in summaries["hived"].delays}
    spread = summaries["quota-spread"]
    assert spread.longer_than_private is not None
    # Most of the multi-GPU jobs of every tenant but the 1-GPU-dominated prod-e wait longer
    # than on their private cluster under kube-scheduler's spreading (600 jobs: half a day of arrivals).
    for tenant in ("prod-a", "prod-c", "res-f"):
        assert spread.longer_than_private[tenant] > 0.5, tenant
    for tenant in ("prod-c", "res-f"):
        assert spread.delays[tenant][ALL_SIZES].mean > 10 * max(summaries["hived"].delays[tenant][ALL_SIZES].mean, 10.0)


@pytest.mark.parametrize("queue", ["fifo", "kube"])
def test_workers_give_the_same_results(queue: str) -> None:
    serial = run_hived_experiment(HivedExperiment(jobs=200, seeds=(1, 2), queue=queue))
    parallel = run_hived_experiment(HivedExperiment(jobs=200, seeds=(1, 2), queue=queue), workers=2)
    for setting, runs in serial.runs.items():
        for one, two in zip(runs, parallel.runs[setting]):
            assert np.array_equal(one.start, two.start)


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        (lambda: HivedWorkload(load=0), "hived.load"),
        (lambda: HivedWorkload(duration_low=10, duration_high=5), "hived.duration_low"),
        (lambda: HivedWorkload(tenants=(Tenant(name="x", racks=9),)), "hived.tenants"),
        (lambda: HivedWorkload(tenants=(Tenant(name="x", nodes=1, sizes=((16, 1.0),)),)), "hived.tenant x"),
        (lambda: HivedWorkload(tenants=(Tenant(name="x", nodes=2, sizes=((12, 1.0),)),)), "hived.tenant x"),
        (lambda: HivedWorkload(shape=ClusterShape(racks=0)), "hived.racks"),
    ],
)
def test_bad_workloads_name_the_field(workload: object, field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        workload()  # type: ignore[operator]
    assert caught.value.field == field


def test_unknown_setting_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="unknown policy 'yarn'"):
        HivedExperiment(settings=("yarn",))


@pytest.mark.parametrize("setting", ["private", "hived", "quota-pack", "quota-spread"])
def test_reusing_a_failure_decides_as_asking_the_engine_again(setting: str) -> None:
    # Under the kube queue a job retried with nothing bound or released since it failed is not
    # asked again; asking the engine every time must start the same jobs at the same instants.
    experiment = HivedExperiment(jobs=400, seeds=(2,), queue="kube")
    jobs = experiment.jobs_for(2)
    reused = run_setting(experiment, setting, jobs, seed=2)
    asked = run_setting(replace(experiment, reuse_failures=False), setting, jobs, seed=2)
    assert np.array_equal(reused.start, asked.start)
