"""The ``allox`` workload (§5.1): machines, jobs, arrivals at a load, the world the sampling runs
meet, and the maximum sustainable rate that defines load 1."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from allox_helpers import cluster
from estimator.planner import EstimatorSettings
from scheduler.simulator.allox.workload import ALLOX_CLUSTER, AlloxWorkload, max_throughput
from scheduler.simulator.errors import InvalidWorkload
from scheduler.simulator.cluster import MINUTE

PAPER = AlloxWorkload()


def test_the_papers_cluster_is_20_gpus_and_20_cpus() -> None:
    machines = PAPER.machines(ALLOX_CLUSTER)
    assert sum(m.kind == "gpu" for m in machines) == 20 and sum(m.kind == "cpu" for m in machines) == 20
    nodes = PAPER.nodes(ALLOX_CLUSTER)
    assert sum(n.cpu for n in nodes) == 400 and sum(n.memory for n in nodes) == 1280  # 20 CPUs x 20 cores, 1,280 GiB
    # A CPU slot is 19 cores: one of each node's 20 is kept for its GPU's job (§4.4, §5.1).
    assert machines[0].name == "node-00/gpu-0" and machines[1].name == "node-00/cpu-0"


def test_jobs_follow_the_papers_ranges() -> None:
    jobs = PAPER.generate(jobs=4000, seed=1, cluster=ALLOX_CLUSTER, load=0.9)
    speedups = np.array([job.speedup() for job in jobs])
    assert speedups.min() >= 1.8 - 1e-9 and speedups.max() <= 10.0 + 1e-9
    assert {job.user for job in jobs} == {f"user-{u}" for u in range(10)}
    gpu = np.array([job.processing_time["gpu"] for job in jobs]) / MINUTE
    assert gpu.min() >= 1.0 and gpu.max() <= 240.0 and 8 < np.median(gpu) < 12
    # Users differ: user-0's models barely gain from a GPU, user-9's gain the most.
    by_user = {u: speedups[[job.user == f"user-{u}" for job in jobs]].mean() for u in range(10)}
    assert by_user[0] < 2.5 and by_user[9] > 8 and list(by_user.values()) == sorted(by_user.values())
    assert all(job.submit_time <= later.submit_time for job, later in zip(jobs, jobs[1:]))
    assert len({job.job_id for job in jobs}) == len(jobs)


def test_arrivals_are_poisson_at_the_load() -> None:
    jobs = PAPER.generate(jobs=5000, seed=2, cluster=ALLOX_CLUSTER, load=0.8)
    gpu = np.array([job.processing_time["gpu"] for job in jobs])
    cpu = np.array([job.processing_time["cpu"] for job in jobs])
    rate = len(jobs) / jobs[-1].submit_time
    assert rate == pytest.approx(0.8 * max_throughput(gpu, cpu, gpus=20, cpus=20), rel=0.05)
    gaps = np.diff([job.submit_time for job in jobs])
    assert np.std(gaps) == pytest.approx(np.mean(gaps), rel=0.1)  # exponential: sd = mean
    # Another load rescales the same arrival process; nothing else about the jobs changes.
    faster = PAPER.generate(jobs=5000, seed=2, cluster=ALLOX_CLUSTER, load=1.6)
    assert [2 * j.submit_time for j in faster] == pytest.approx([j.submit_time for j in jobs])
    assert [j.processing_time for j in faster] == [j.processing_time for j in jobs]


def test_a_jobs_sampling_world_adds_up_to_its_true_times() -> None:
    jobs = PAPER.generate(jobs=3000, seed=3, cluster=ALLOX_CLUSTER, load=0.9)
    for job in jobs:
        world = job.sampling
        assert world is not None and job.estimate is None  # the estimator, not the user, estimates
        assert PAPER.iterations_low <= world.iterations <= PAPER.iterations_high
        for kind, truth in job.processing_time.items():
            assert world.true_seconds(kind) == pytest.approx(truth, rel=1e-12)
            assert 0 < world.startup[kind] <= min(PAPER.startup_high_seconds, PAPER.startup_max_share * truth) + 1e-9
            assert world.per_iteration[kind] > 0
    startups = np.array([job.sampling.startup["gpu"] for job in jobs if job.sampling is not None])
    # Log-uniform on [5, 30] s (cut at 20% of the shortest jobs): the median near sqrt(5 · 30).
    assert np.median(startups) == pytest.approx((5 * 30) ** 0.5, rel=0.1)
    logs = np.log([f for job in jobs if job.sampling is not None for f in job.sampling.noise.values()])
    assert np.std(logs) == pytest.approx(PAPER.sample_noise, rel=0.05) and abs(np.mean(logs)) < 0.002


def test_sampling_knobs_change_only_the_sampling() -> None:
    base = PAPER.generate(jobs=500, seed=4, cluster=ALLOX_CLUSTER, load=0.9)
    noisier = PAPER.with_parameter("allox.sample_noise", 0.08).generate(jobs=500, seed=4, cluster=ALLOX_CLUSTER, load=0.9)
    exact = PAPER.with_parameter("allox.sample_noise", 0).generate(jobs=500, seed=4, cluster=ALLOX_CLUSTER, load=0.9)
    for a, b, c in zip(base, noisier, exact):
        assert (a.submit_time, a.processing_time, a.user) == (b.submit_time, b.processing_time, b.user)
        assert a.sampling is not None and b.sampling is not None and c.sampling is not None
        assert a.sampling.startup == b.sampling.startup and a.sampling.iterations == b.sampling.iterations
        for key, factor in a.sampling.noise.items():
            # The same draw z, scaled: log factor = noise · z.
            assert np.log(b.sampling.noise[key]) == pytest.approx(4 * np.log(factor))
            assert c.sampling.noise[key] == 1.0


def test_some_users_state_their_estimates() -> None:
    jobs = PAPER.with_parameter("allox.user_estimate_share", 0.25).generate(jobs=2000, seed=5, cluster=ALLOX_CLUSTER, load=0.9)
    stated = [job for job in jobs if job.estimate is not None]
    assert len(stated) / len(jobs) == pytest.approx(0.25, abs=0.03)
    assert all(job.estimate == job.processing_time and job.sampling is None for job in stated)
    assert all(job.sampling is not None for job in jobs if job.estimate is None)


def test_the_long_user_knob() -> None:
    base = PAPER.generate(jobs=500, seed=4, cluster=ALLOX_CLUSTER, load=0.9)
    longer = PAPER.with_parameter("allox.long_user_scale", 3).generate(jobs=500, seed=4, cluster=ALLOX_CLUSTER, load=0.9)
    for a, b in zip(base, longer):
        factor = 3.0 if a.user == "user-9" else 1.0
        assert b.processing_time["gpu"] == pytest.approx(factor * a.processing_time["gpu"])


def test_the_estimator_settings_follow_the_sampling_fraction() -> None:
    # 3%: the live estimator's own lengths (1% and 2% of the iterations) and long-sample rule.
    live = EstimatorSettings()
    ours = PAPER.estimator()
    assert ours.sampling.short_fraction == pytest.approx(live.sampling.short_fraction)
    assert ours.sampling.long_fraction == pytest.approx(live.sampling.long_fraction)
    assert (ours.sampling.long_factor, ours.sampling.long_min_seconds) == (live.sampling.long_factor, live.sampling.long_min_seconds)
    assert ours.model == live.model
    wider = PAPER.with_changes(sampling_fraction=0.3, long_factor=3).estimator()
    assert (wider.sampling.short_fraction, wider.sampling.long_fraction) == pytest.approx((0.1, 0.2))
    assert wider.sampling.long_factor == 3


@pytest.mark.parametrize("seed", range(12))
def test_max_throughput_is_the_fluid_optimum(seed: int) -> None:
    """Against a linear program: x_j of job j on CPUs, minimise the makespan T of the fluid
    schedule with sum x_j c_j <= C·T and sum (1 - x_j) g_j <= G·T; the rate is n / T."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 12))
    gpus, cpus = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    gpu = rng.uniform(1, 50, n)
    cpu = gpu * rng.uniform(1, 10, n)
    # Variables x_1..x_n, T. Constraints: sum x c - C T <= 0; sum g - sum x g - G T <= 0.
    objective = np.r_[np.zeros(n), 1.0]
    upper = np.array([np.r_[cpu, -cpus], np.r_[-gpu, -gpus]])
    bounds = [(0, 1)] * n + [(0, None)]
    solution = linprog(objective, A_ub=upper, b_ub=[0.0, -gpu.sum()], bounds=bounds, method="highs")
    assert solution.status == 0
    assert max_throughput(gpu, cpu, gpus=gpus, cpus=cpus) == pytest.approx(n / solution.fun, rel=1e-9)


def test_max_throughput_by_hand() -> None:
    # GPUs only: n jobs over the GPU work per GPU.
    assert max_throughput(np.array([2.0, 4.0]), np.array([np.inf, np.inf]), gpus=2, cpus=0) == pytest.approx(2 / 3)
    # One GPU, one CPU, one job of 1 (GPU) or 3 (CPU): split 3/4 on the GPU, 1/4 on the CPU.
    assert max_throughput(np.array([1.0]), np.array([3.0]), gpus=1, cpus=1) == pytest.approx(1 / 0.75)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("allox.speedup_low", 0.5, "allox.speedup_low: 0.5 is not at least 1"),
        ("allox.gpu_min_minutes", 500, "allox.gpu_min_minutes: 500 is not positive and at most gpu_max_minutes"),
        ("allox.sample_share", 0, "allox.sample_share: 0 is not a fraction in (0, 1]"),
        ("allox.sampling_fraction", 0, "allox.sampling_fraction: 0 is not a fraction in (0, 0.5]"),
        ("allox.sample_noise", -0.1, "allox.sample_noise: -0.1 is not a relative sd in [0, 1]"),
        ("allox.estimation_error", 0.1, "'allox.estimation_error' is no longer a parameter: estimates come from the estimator"),
        ("allox.profiling_overhead", 0.1, "'allox.profiling_overhead' is no longer a parameter: the profiling overhead is the"),
        ("allox.nonsense", 1, "'allox.nonsense' is not a parameter of workload allox"),
    ],
)
def test_bad_parameters_name_the_field(key: str, value: float, message: str) -> None:
    with pytest.raises(InvalidWorkload) as error:
        PAPER.with_parameter(key, value)
    assert message in str(error.value)


def test_a_small_cluster_gets_its_own_machines() -> None:
    machines = PAPER.machines(cluster(2))
    assert [m.kind for m in machines] == ["gpu", "cpu", "gpu", "cpu"]
    with pytest.raises(InvalidWorkload, match="negative"):
        PAPER.generate(jobs=-1, seed=0, cluster=cluster(1), load=0.5)
