"""The interchangeable-job simulation (``allox`` workload): hand-computed schedules of the
paper's examples, invariants under every policy, estimates against truth, profiling through the
estimator's planner, SRPT as a reference, and the issue's claims on small instances."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from allox_helpers import EXACT, average_jct_minutes, cluster, run, spec, world
from estimator.model import Sample, estimate_configuration
from scheduler.matching.model import Machine
from scheduler.simulator.allox.policies import PAPER_POLICIES, interchangeable_policy_names
from scheduler.simulator.allox.simulation import InterchangeableSimulation
from scheduler.simulator.allox.workload import AlloxWorkload
from scheduler.simulator.errors import PolicyError, SimulationStalled
from scheduler.simulator.cluster import MINUTE

ALL = interchangeable_policy_names()


def test_the_registry_has_the_papers_policies() -> None:
    assert ALL == ["allox", "allox+", "es", "drff", "drfs", "drfa", "srpt", "bf", "jsq+", "sjf+"]
    assert set(PAPER_POLICIES) <= set(ALL)


# ---------------------------------------------------------------------- hand-computed schedules


def test_allox_plays_the_papers_three_job_example() -> None:
    # §3.1: one GPU, one CPU, P = [[3, 4], [4, 6], [5, 10]]; the optimum is 17 (Fig. 7).
    jobs = [spec("j1", 3, 4), spec("j2", 4, 6), spec("j3", 5, 10)]
    result = run(jobs, "allox")
    assert result.completion_time.sum() / MINUTE == pytest.approx(17.0)
    assert list(result.final_kind) == [1, 0, 0]  # j1 on the CPU, j2 then j3 on the GPU
    assert list(result.finish / MINUTE) == pytest.approx([4.0, 4.0, 9.0])
    assert result.cpu_work_speedup == pytest.approx(4 / 3)  # the CPU ran j1, 4 min of work worth 3 on a GPU


@pytest.mark.parametrize(
    ("policy", "average"),
    # §2.2's SJF+ counter-example on 2 GPUs + 2 CPUs. SJF+ gets the paper's 50, AlloX the
    # optimum 20. SRPT starts Jobs 3 and 4 on the CPUs and moves them to the GPUs at t = 10
    # with 80/90 of their work left: (10 + 10 + 2 · (10 + 20 · 8/9)) / 4 = 18.89 minutes.
    [("sjf+", 50.0), ("allox", 20.0), ("srpt", (20 + 2 * (10 + 20 * 8 / 9)) / 4)],
)
def test_the_sjf_counter_example(policy: str, average: float) -> None:
    jobs = [spec("J1", 10, 20), spec("J2", 10, 20), spec("J3", 20, 90), spec("J4", 20, 90)]
    assert average_jct_minutes(run(jobs, policy, nodes=2)) == pytest.approx(average)


def test_the_jsq_counter_example() -> None:
    # §2.2: AlloX's optimum 45; JSQ+ as the matching package reads its definition: 60.
    jobs = [spec("J1", 40, 50), spec("J2", 40, 50), spec("J3", 40, 160), spec("J4", 40, 160)]
    assert average_jct_minutes(run(jobs, "allox", nodes=2)) == pytest.approx(45.0)
    assert average_jct_minutes(run(jobs, "jsq+", nodes=2)) == pytest.approx(60.0)


def test_srpt_is_not_a_lower_bound_in_general() -> None:
    # One GPU, one CPU. SRPT gives the GPU to the shorter job A (speedup 1.8) and starts B
    # (speedup 10) on the CPU, moving it to the GPU when A is done: 1 + (1 + 1.1 · 10/11) = 3.0.
    # Waiting is better: A on the CPU, B on the GPU: 1.8 + 1.1 = 2.9, AlloX's matching.
    jobs = [spec("A", 1.0, 1.8), spec("B", 1.1, 11.0)]
    assert run(jobs, "srpt").completion_time.sum() / MINUTE == pytest.approx(3.0)
    assert run(jobs, "allox").completion_time.sum() / MINUTE == pytest.approx(2.9)


def test_policies_see_estimates_and_jobs_run_for_their_true_time() -> None:
    # The estimator thinks the CPU is faster (15 against 20 min); truly it takes 30 (GPU: 10).
    job = spec("j", 10, 30, estimate=(20, 15))
    allox = run([job], "allox")
    assert allox.final_kind[0] == 1 and allox.finish[0] / MINUTE == pytest.approx(30.0)
    # DRFF needs no estimate: it runs the job on the kind the user prefers (truly faster).
    drff = run([job], "drff")
    assert drff.final_kind[0] == 0 and drff.finish[0] / MINUTE == pytest.approx(10.0)


def test_profiling_delays_the_policies_that_need_estimates() -> None:
    # 10,000 iterations, no start-up: runs of 1% and 2% take 6 and 12 s on the GPU, 18 and 36
    # s on the CPU. One machine of each kind, so one run per kind at a time: the GPU runs end
    # at 18 s, the CPU runs at 54 s, and then the job starts.
    job = spec("j", 10, 30, sampling=world(10, 30))
    allox = run([job], "allox")
    assert allox.first_start[0] == pytest.approx(54.0)
    assert allox.finish[0] == pytest.approx(54.0 + 600)
    assert allox.busy["gpu"]["samples"] == pytest.approx(18.0)
    assert allox.busy["cpu"]["samples"] == pytest.approx(54.0)
    assert list(allox.sampling.estimate[0]) == pytest.approx([600, 1800])  # exact samples, exact fit
    assert allox.sampling.methods == {"samples": 2} and allox.sampling.stopped == 0
    assert allox.sampling.overhead[0] == pytest.approx(72 / 600)  # the planner's figure: over the fastest estimate
    # DRFF needs no estimate: nothing is sampled, the job starts at once.
    drff = run([job], "drff")
    assert drff.first_start[0] == 0.0 and drff.finish[0] == pytest.approx(600)
    assert drff.busy["gpu"]["samples"] == 0.0 and not drff.sampling.sampled.any()
    # A user-set estimate (cellfit.io/estimate) is not sampled either.
    stated = run([spec("j", 10, 30)], "allox")
    assert stated.first_start[0] == 0.0 and not stated.sampling.sampled.any()


def test_the_policy_sees_the_estimators_answer_and_the_job_its_true_time() -> None:
    # The GPU's long run is measured 2.2x slow (a noisy neighbour): the fitted time per
    # iteration more than triples, the GPU looks slower than the CPU (32 against 30 min), and
    # AlloX runs the job on the CPU for its true 30 minutes.
    noise = {("gpu", "long"): 2.2}
    job = spec("j", 10, 30, sampling=world(10, 30, noise=noise))
    result = run([job], "allox")
    gpu = estimate_configuration("gpu", [Sample("gpu", 100, 6.0), Sample("gpu", 200, 12.0 * 2.2)], iterations=10_000)
    assert result.sampling.estimate[0, 0] == pytest.approx(gpu.seconds) and gpu.seconds > 1800
    assert result.final_kind[0] == 1
    assert result.finish[0] - result.first_start[0] == pytest.approx(1800)


def test_a_sample_far_past_its_peers_is_stopped_and_frees_its_machine() -> None:
    # CPU 200x slower than the GPU. The GPU runs end at 6 and 18 s; the CPU short run (20
    # min) is stopped by the planner once it has run 120 s (10x the GPU's prediction, at
    # least 120 s), the CPU long run then starts and is stopped 120 s later. The CPU's estimate
    # is the lower bound they proved, and the job starts on the GPU at 240 s.
    job = spec("j", 10, 2000, sampling=world(10, 2000))
    result = run([job], "allox")
    assert result.sampling.stopped == 2
    assert result.sampling.methods == {"lower-bound": 1, "samples": 1}
    assert result.first_start[0] == pytest.approx(240.0)
    assert result.sampling.estimate[0, 1] == pytest.approx(120 * 100, rel=1e-6)
    assert result.busy["cpu"]["samples"] == pytest.approx(240.0)
    assert result.final_kind[0] == 0 and result.finish[0] == pytest.approx(240 + 600)


def test_samples_go_first_but_hold_at_most_their_share_of_machines() -> None:
    # 10 nodes (10 GPUs, 10 CPU slots), sample_share 0.2: two runs per kind at a time. Each
    # job's runs take 6 and 12 s on a GPU, 12 and 24 s on a CPU; the CPU queue (short, long of
    # each job in arrival order) ends each job's sampling at 24, 48, 60, 84, 96 and 120 s.
    workload = AlloxWorkload(sample_share=0.2)
    jobs = [spec(f"j{i}", 10, 20, sampling=world(10, 20)) for i in range(6)]
    result = run(jobs, "allox", nodes=10, workload=workload)
    assert list(result.first_start) == pytest.approx([24, 48, 60, 84, 96, 120])


# ---------------------------------------------------------------------- invariants, every policy


SMALL = AlloxWorkload(users=4)


@pytest.mark.parametrize("policy", ALL)
def test_every_policy_finishes_every_job_once_and_never_over_allocates(policy: str) -> None:
    jobs = SMALL.generate(jobs=120, seed=7, cluster=cluster(3), load=0.9)
    result = run(jobs, policy, nodes=3, workload=SMALL, alpha=0.25, timeout=3600.0)  # Checked after every call
    truth = {job.job_id: job for job in jobs}
    assert result.jobs == len(jobs)
    assert np.all(result.finish > 0) and np.all(result.first_start >= result.submit)
    kinds = ("gpu", "cpu")
    for index, job in enumerate(jobs):
        assert truth[job.job_id].submit_time == result.submit[index]
        ran = result.finish[index] - result.first_start[index]
        if policy == "srpt":
            # Preempted and moved at will, but never faster than its fastest configuration.
            assert result.finish[index] - result.submit[index] >= job.fastest_time * (1 - 1e-9)
        else:
            assert ran == pytest.approx(job.processing_time[kinds[result.final_kind[index]]])
        if policy not in ("drff", "bf"):  # profiled first: not before its short runs ended
            assert job.sampling is not None and result.sampling.sampled[index]
            short = max(job.sampling.run_seconds(kind, "short", round(0.01 * job.sampling.iterations)) for kind in kinds)
            assert result.first_start[index] >= job.submit_time + short * (1 - 1e-6)
            assert result.sampling.sample_seconds[index] > 0
    if policy in ("drff", "bf"):
        assert not result.sampling.sampled.any() and np.isnan(result.sampling.estimate).all()
    else:
        assert result.sampling.sampled.all() and result.sampling.stopped == 0
        assert np.isfinite(result.sampling.estimate).all()
    assert (result.preemptions > 0) == (policy == "srpt")
    for kind, held in result.window_busy.items():
        assert 0.0 <= held["jobs"] + held["samples"] <= result.machines[kind] + 1e-9


def test_same_seed_same_result() -> None:
    jobs = SMALL.generate(jobs=80, seed=3, cluster=cluster(2), load=0.8)
    first, again = run(jobs, "allox", nodes=2, workload=SMALL, alpha=0.1), run(jobs, "allox", nodes=2, workload=SMALL, alpha=0.1)
    assert np.array_equal(first.finish, again.finish) and first.progress_sd == again.progress_sd


class _StartBusy:
    name = "start-busy"
    preemptive = False
    needs_estimates = False

    def schedule(self, sim: InterchangeableSimulation) -> None:
        job = sim.waiting_jobs()[0]
        busy = next(iter(sim.busy_until()), None)
        sim.start(job.name, busy or Machine(name="nowhere", kind="gpu"))


class _Idle:
    name = "idle"
    preemptive = False
    needs_estimates = False

    def schedule(self, sim: InterchangeableSimulation) -> None:
        return None


def test_impossible_decisions_and_idle_policies_are_caught() -> None:
    jobs = [spec("a", 1, 2), spec("b", 1, 2)]
    with pytest.raises(PolicyError, match="is not idle"):
        InterchangeableSimulation(cluster=cluster(1), workload=EXACT, jobs=jobs, policy=_StartBusy()).run()
    with pytest.raises(SimulationStalled, match="left 2 jobs waiting"):
        InterchangeableSimulation(cluster=cluster(1), workload=EXACT, jobs=jobs, policy=_Idle()).run()


def test_a_job_no_machine_can_run_is_refused() -> None:
    from scheduler.core.resources import Resources
    from scheduler.simulator.errors import InvalidWorkload
    from scheduler.simulator.cluster import GIB

    with pytest.raises(InvalidWorkload, match="does not fit on a node"):
        run([spec("a", 1, 2)], "allox", node=Resources(cpu_millis=20_000, memory_bytes=8 * GIB, gpus=1))


# ---------------------------------------------------------------------- SRPT as the reference


def test_srpt_is_a_lower_bound_on_random_small_instances() -> None:
    """Exact estimates, no profiling: 2 GPUs + 2 CPU slots, 20 jobs of 3 users, light to high
    load. SRPT (free preemption and migration) is below every policy's average JCT here; it is
    not a bound in general (see :func:`test_srpt_is_not_a_lower_bound_in_general` and the
    README: with 40 jobs AlloX beats it on 7 of 90 such instances, at load 0.9 on the paper's
    cluster AlloX and SJF+ beat it), because it hands GPUs to the shortest jobs whatever
    their speedup."""
    workload = AlloxWorkload(users=3, user_estimate_share=1.0)
    rng = random.Random(11)
    for _ in range(18):
        seed, load = rng.randrange(10_000), rng.choice((0.3, 0.6, 0.9))
        jobs = workload.generate(jobs=20, seed=seed, cluster=cluster(2), load=load)
        averages = {policy: average_jct_minutes(run(jobs, policy, nodes=2, workload=workload, checked=False)) for policy in ALL}
        for policy, value in averages.items():
            assert averages["srpt"] <= value + 1e-9, (seed, load, policy, averages)


def test_srpt_is_optimal_with_one_speedup_and_every_job_waiting() -> None:
    """With every job at time 0 and one speedup, GPUs and CPUs are uniform machines, where
    SRPT on the fastest machines is the optimal preemptive schedule (Gonzalez 1977): no
    policy, preemptive or not, can beat it."""
    rng = random.Random(5)
    for _ in range(10):
        speedup = rng.uniform(1.8, 10)
        jobs = [spec(f"j{i}", g, g * speedup) for i, g in enumerate(rng.uniform(1, 60) for _ in range(rng.randint(3, 9)))]
        nodes = rng.randint(1, 3)
        averages = {policy: average_jct_minutes(run(jobs, policy, nodes=nodes, checked=False)) for policy in ALL}
        assert averages["srpt"] == pytest.approx(min(averages.values()))


# ---------------------------------------------------------------------- the claims, small


def test_allox_beats_drff_at_high_load() -> None:
    # 4 GPUs + 4 CPUs, load 0.9: DRFF leaves CPUs idle and its GPUs cannot keep up (GPUs alone
    # sustain ~69% of the rate the cluster can); estimation error and profiling as the paper's.
    workload = AlloxWorkload(users=4)
    for seed in (1, 2):
        jobs = workload.generate(jobs=300, seed=seed, cluster=cluster(4), load=0.9)
        allox = average_jct_minutes(run(jobs, "allox", nodes=4, workload=workload, alpha=0.25, checked=False))
        drff = average_jct_minutes(run(jobs, "drff", nodes=4, workload=workload, checked=False))
        assert allox < 0.75 * drff, (seed, allox, drff)


def test_a_smaller_alpha_narrows_the_users_progress_spread() -> None:
    # 4 users (speedups centred on 1.8, 3.2, 5.6, 10), 4 GPUs + 4 CPUs, load 0.9. α = 0.25,
    # 0.5, 0.75, 1 consider 1, 2, 3, 4 users. Monotone on all 8 seeds we tried (0-7); two here.
    workload = AlloxWorkload(users=4)
    for seed in (0, 4):
        jobs = workload.generate(jobs=300, seed=seed, cluster=cluster(4), load=0.9)
        spreads = [
            run(jobs, "allox", nodes=4, workload=workload, alpha=alpha, checked=False).progress_sd
            for alpha in (0.25, 0.5, 0.75, 1.0)
        ]
        assert spreads == sorted(spreads), (seed, spreads)
        assert spreads[0] < 0.85 * spreads[-1]


def test_progress_spread_is_zero_for_one_user() -> None:
    workload = AlloxWorkload(users=1)
    jobs = workload.generate(jobs=40, seed=1, cluster=cluster(2), load=0.8)
    result = run(jobs, "allox", nodes=2, workload=workload)
    assert result.progress_sd == 0.0 and result.progress_mean > 0
    assert math.isclose(result.user_progress[0], result.progress_mean, rel_tol=0.05)


def test_allox_is_robust_to_the_estimators_error() -> None:
    # Fig. 17 on 4 GPUs + 4 CPUs, load 0.8: exact samples, then samples measured with 8% noise
    # (the estimator's mean absolute error goes from 0 to ~40%). AlloX's average JCT moves by
    # a few percent and stays well below ES's.
    base = AlloxWorkload(users=4)
    for seed in (1, 2):
        averages = {}
        for noise in (0.0, 0.08):
            workload = base.with_changes(sample_noise=noise)
            jobs = workload.generate(jobs=300, seed=seed, cluster=cluster(4), load=0.8)
            results = {policy: run(jobs, policy, nodes=4, workload=workload, alpha=0.25, checked=False) for policy in ("allox", "es")}
            errors = results["allox"].sampling.estimate / results["allox"].sampling.truth - 1
            assert (np.nanmean(np.abs(errors)) < 1e-9) == (noise == 0.0)
            averages[noise] = {policy: average_jct_minutes(result) for policy, result in results.items()}
            assert averages[noise]["allox"] < 0.85 * averages[noise]["es"], (seed, noise, averages)
        assert averages[0.08]["allox"] < 1.1 * averages[0.0]["allox"], (seed, averages)


def test_profiling_overhead_costs_the_profiled_policies_only() -> None:
    # Fig. 18 on 10 GPUs + 10 CPUs, load 0.8: DRFF samples nothing, so the sampling fraction does
    # not change it; AlloX beats ES and DRFF while sampling fits in its share of the machines.
    base = AlloxWorkload(users=4)
    drff = []
    for fraction in (0.015, 0.03, 0.1):
        workload = base.with_changes(sampling_fraction=fraction)
        jobs = workload.generate(jobs=400, seed=1, cluster=cluster(10), load=0.8)
        averages = {
            policy: average_jct_minutes(run(jobs, policy, nodes=10, workload=workload, alpha=0.25, checked=False))
            for policy in ("allox", "es", "drff")
        }
        drff.append(averages["drff"])
        if fraction <= 0.03:
            assert averages["allox"] < min(0.85 * averages["es"], averages["drff"]), (fraction, averages)
        else:  # 3 CPU slots of 10 for samples, 10% of every CPU run: the samples' queue grows
            assert averages["allox"] > averages["drff"], (fraction, averages)
    assert drff[0] == drff[1] == drff[2]
