"""The ``allox`` workload (§5.1): machines, jobs, arrivals at a load, estimates, and the maximum
sustainable rate that defines load 1."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from allox_helpers import cluster
from scheduler.simulator.allox.workload import ALLOX_CLUSTER, AlloxWorkload, max_throughput
from scheduler.simulator.errors import InvalidWorkload
from scheduler.simulator.workload import MINUTE

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


def test_estimates_carry_the_chosen_error() -> None:
    exact = AlloxWorkload(estimation_error=0.0).generate(jobs=3000, seed=3, cluster=ALLOX_CLUSTER, load=0.9)
    assert all(job.estimate == job.processing_time for job in exact)
    noisy = PAPER.generate(jobs=3000, seed=3, cluster=ALLOX_CLUSTER, load=0.9)
    errors = np.array([job.estimate[k] / job.processing_time[k] - 1 for job in noisy for k in ("gpu", "cpu")])
    # σ = 0.1: mean absolute error 8% (the paper's Fig. 10), sd 10%.
    assert np.mean(np.abs(errors)) == pytest.approx(0.08, abs=0.005)
    assert np.std(errors) == pytest.approx(0.10, abs=0.005)
    assert [j.processing_time for j in noisy] == [j.processing_time for j in exact]


def test_the_long_user_and_profiling_knobs() -> None:
    base = PAPER.generate(jobs=500, seed=4, cluster=ALLOX_CLUSTER, load=0.9)
    longer = PAPER.with_parameter("allox.long_user_scale", 3).generate(jobs=500, seed=4, cluster=ALLOX_CLUSTER, load=0.9)
    for a, b in zip(base, longer):
        factor = 3.0 if a.user == "user-9" else 1.0
        assert b.processing_time["gpu"] == pytest.approx(factor * a.processing_time["gpu"])
    job = base[0]
    assert PAPER.sample_time(job) == pytest.approx(0.015 * job.processing_time["gpu"])


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
        ("allox.profiling_overhead", 2, "allox.profiling_overhead: 2 is not a fraction in [0, 1]"),
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
