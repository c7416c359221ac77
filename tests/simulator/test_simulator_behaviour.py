"""The simulator on hand-made traces whose schedules can be worked out on paper, and its
invariants on small synthetic workloads under every policy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.preemption import FitGppSettings
from scheduler.simulator.errors import InvalidWorkload, SimulationStalled, UnknownPolicy
from scheduler.simulator.fitgpp.experiment import Experiment, derive_arrivals, run_variant, Variant
from scheduler.simulator.fitgpp.policies import make_policy
from scheduler.simulator.policy_registry import PolicyOptions, _REGISTRY, policy_names, register_policy
from scheduler.simulator.fitgpp.simulation import Simulation
from scheduler.simulator.cluster import ClusterSpec
from scheduler.simulator.fitgpp.workload import FitGppWorkload

from sim_helpers import job, simulate

POLICIES = ("fifo", "lrtp", "rand", "fitgpp", "kube")
SMALL_CLUSTER = ClusterSpec(nodes=6)


def test_registry_has_the_papers_policies() -> None:
    assert set(POLICIES) <= set(policy_names())
    with pytest.raises(UnknownPolicy, match="unknown policy 'sjf'"):
        make_policy("sjf", PolicyOptions(settings=FitGppSettings()))


def test_a_new_policy_can_join_the_registry() -> None:
    class StartNothing:
        name = "nothing"
        preemptive = False

        def schedule(self, sim: Simulation) -> None:
            return None

    register_policy("test-nothing", lambda options: StartNothing())
    try:
        with pytest.raises(ValueError, match="already registered"):
            register_policy("test-nothing", lambda options: StartNothing())
        # A policy that never starts anything is caught rather than looping for ever.
        with pytest.raises(SimulationStalled, match="never finished"):
            simulate([job("a")], policy="test-nothing", checked=False)
    finally:
        _REGISTRY.pop("test-nothing")


# ---------------------------------------------------------------------- FIFO


def test_fifo_slowdown_is_one_on_an_empty_cluster() -> None:
    jobs = [job(f"j{i}", at=100.0 * i, gpus=8, duration=90.0, trial=i % 3 == 0) for i in range(20)]
    result, _ = simulate(jobs)
    assert result.slowdown.tolist() == [1.0] * 20
    assert result.events == 40  # one arrival and one completion each, nothing else


def test_fifo_blocks_behind_its_head() -> None:
    jobs = [
        job("a", at=0, gpus=8, duration=100),
        job("b", at=1, gpus=8, duration=100),
        job("c", at=2, gpus=1, duration=10, trial=True),  # fits beside nothing: a holds all 8
    ]
    result, _ = simulate(jobs)
    assert result.first_start.tolist() == [0.0, 100.0, 200.0]
    assert result.finish.tolist() == [100.0, 200.0, 210.0]
    assert result.slowdown[2] == pytest.approx(1 + 198 / 10)


# ---------------------------------------------------------------------- preemption


def _one_be_one_te() -> list:
    return [
        job("b", at=0, gpus=8, duration=600, grace=30),
        job("t", at=100, gpus=1, duration=60, trial=True),
    ]


def test_fitgpp_preempts_and_the_victim_resumes_with_its_remaining_work() -> None:
    result, sim = simulate(_one_be_one_te(), policy="fitgpp")
    b, t = sim.jobs
    # t arrives at 100, b is signalled and checkpoints for its 30 s GP, t starts at 130.
    assert t.first_start == 130.0 and t.finished_at == 190.0
    # b did 100 s of work, waited for its GP and for t, and resumed at 190 with 500 s left.
    assert b.intervals == [90.0]
    assert b.finished_at == 690.0
    assert result.work_done.tolist() == pytest.approx([600.0, 60.0])
    assert result.preemptions.tolist() == [1, 0]
    assert result.slowdown.tolist() == pytest.approx([1 + 90 / 600, 1 + 30 / 60])
    assert result.rules == {"fitgpp": 1}
    # FIFO on the same trace: t waits for b.
    fifo, _ = simulate(_one_be_one_te(), policy="fifo")
    assert fifo.slowdown.tolist() == pytest.approx([1.0, 1 + 500 / 60])


@pytest.mark.parametrize("policy", ["lrtp", "rand", "fitgpp", "kube"])
def test_te_never_preempts_te(policy: str) -> None:
    jobs = [job("t1", at=0, gpus=8, duration=100, trial=True), job("t2", at=1, gpus=1, duration=10, trial=True)]
    result, _ = simulate(jobs, policy=policy)
    assert result.preemptions.tolist() == [0, 0]
    assert result.first_start.tolist() == [0.0, 100.0]


@pytest.mark.parametrize("policy", ["lrtp", "rand", "fitgpp", "kube"])
def test_be_never_preempts(policy: str) -> None:
    jobs = [job("b1", at=0, gpus=8, duration=100), job("b2", at=1, gpus=1, duration=10)]
    result, _ = simulate(jobs, policy=policy)
    assert result.preemptions.tolist() == [0, 0]
    assert result.first_start.tolist() == [0.0, 100.0]


@pytest.mark.parametrize("policy", ["lrtp", "rand", "fitgpp", "kube"])
def test_p_limits_how_often_a_job_is_preempted(policy: str) -> None:
    jobs = [
        job("b", at=0, gpus=8, duration=1000, grace=10),
        job("t1", at=100, gpus=1, duration=50, trial=True),
        job("t2", at=500, gpus=1, duration=50, trial=True),
    ]
    once, _ = simulate(jobs, policy=policy, settings=FitGppSettings(max_preemptions=1))
    assert once.preemptions.tolist() == [1, 0, 0]
    # b restarted at 160 and may not be preempted again: t2 waits for it.
    assert once.first_start[2] == pytest.approx(160 + 900)
    twice, _ = simulate(jobs, policy=policy, settings=FitGppSettings(max_preemptions=None))
    assert twice.preemptions.tolist() == [2, 0, 0]
    assert twice.first_start[2] == pytest.approx(510.0)
    assert twice.work_done[0] == pytest.approx(1000.0)
    never, _ = simulate(jobs, policy=policy, settings=FitGppSettings(max_preemptions=0))
    assert never.preemptions.tolist() == [0, 0, 0]


def test_lrtp_preempts_the_longest_remaining_job_and_fitgpp_the_cheapest() -> None:
    jobs = [
        job("long", at=0, gpus=8, duration=1000, grace=600),
        job("short", at=0, gpus=8, duration=300, grace=0),
        job("t", at=10, gpus=1, duration=60, trial=True),
    ]
    lrtp, _ = simulate(jobs, policy="lrtp", nodes=2)
    assert lrtp.preemptions.tolist() == [1, 0, 0]
    fitgpp, _ = simulate(jobs, policy="fitgpp", nodes=2)
    assert fitgpp.preemptions.tolist() == [0, 1, 0]
    assert fitgpp.first_start[2] == 10.0  # a zero grace period: the TE job starts at once


def test_lrtp_keeps_preempting_until_one_node_has_room() -> None:
    # Node 0: x1 (4 GPUs, longest) and x2 (4 GPUs); node 1: y (8 GPUs). A TE job needs 6.
    jobs = [
        job("x1", at=0, gpus=4, duration=1000),
        job("y", at=0, gpus=8, duration=900),
        job("x2", at=0, gpus=4, duration=100),
        job("t", at=10, gpus=6, duration=60, trial=True),
    ]
    lrtp, sim = simulate(jobs, policy="lrtp", nodes=2)
    assert lrtp.preemptions.tolist() == [1, 1, 0, 0]  # x1 freed too little on its node; y did it
    assert sim.jobs[3].first_start == 10.0
    fitgpp, _ = simulate(jobs, policy="fitgpp", nodes=2)
    assert fitgpp.preemptions.tolist() == [0, 1, 0, 0]  # eq. 4: y alone makes room


def test_rand_is_seeded() -> None:
    jobs = [job(f"b{i}", at=0, gpus=1, duration=1000) for i in range(16)] + [
        job(f"t{i}", at=10 + i, gpus=2, duration=60, trial=True) for i in range(4)
    ]
    first, _ = simulate(jobs, policy="rand", nodes=2, seed=3)
    again, _ = simulate(jobs, policy="rand", nodes=2, seed=3)
    assert first.preemptions.tolist() == again.preemptions.tolist()
    outcomes = {tuple(simulate(jobs, policy="rand", nodes=2, seed=s)[0].preemptions.tolist()) for s in range(8)}
    assert len(outcomes) > 1


def test_released_resources_stay_with_the_te_job_until_its_last_victim_is_gone() -> None:
    # Two victims with different grace periods; a BE job waits at the head of the BE queue and
    # must not take what the first victim releases.
    jobs = [
        job("v1", at=0, gpus=4, duration=1000, grace=10),
        job("v2", at=0, gpus=4, duration=1000, grace=100),
        job("w", at=1, gpus=4, duration=10),
        job("t", at=5, gpus=8, duration=60, trial=True),
    ]
    result, sim = simulate(jobs, policy="lrtp")
    assert sim.jobs[3].first_start == 105.0
    assert result.preemptions.tolist() == [1, 1, 0, 0]


# ---------------------------------------------------------------------- invariants


def _synthetic(jobs: int, seed: int) -> list:
    return FitGppWorkload().generate(jobs=jobs, seed=seed, cluster=SMALL_CLUSTER)


def _check_run(result, sim, settings: FitGppSettings) -> None:  # type: ignore[no-untyped-def]
    n = result.jobs
    assert len(sim.jobs) == n and all(job.state.name == "DONE" for job in sim.jobs)  # conservation
    assert np.allclose(result.work_done, result.duration, rtol=0, atol=1e-6)  # exactly its work
    assert (result.first_start >= result.submit - 1e-9).all()
    assert (result.finish >= result.submit + result.duration - 1e-6).all()
    assert (result.slowdown >= 1.0).all()
    assert not result.preemptions[result.trial].any()  # TE jobs are never victims
    if settings.max_preemptions is not None:
        assert (result.preemptions <= settings.max_preemptions).all()
    # Every preemption was followed by a restart (resumed, not failed).
    assert len(result.intervals) == int(result.preemptions.sum())
    assert (result.intervals >= 0).all()
    assert sim.engine.stats()["pods"] == 0 and sim.engine.stats()["preemptionCandidates"] == 0


@pytest.mark.parametrize("policy", POLICIES)
def test_invariants_on_a_loaded_cluster(policy: str) -> None:
    experiment = Experiment(cluster=SMALL_CLUSTER, jobs=500)
    jobs, _ = derive_arrivals(experiment, _synthetic(500, seed=5), seed=5)
    for limit in (1, None):
        chosen = FitGppSettings(max_preemptions=limit)
        result, sim = simulate(jobs, policy=policy, nodes=6, settings=chosen, seed=5)
        _check_run(result, sim, chosen)
        assert sim.policy.passes > 0  # type: ignore[attr-defined]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(
        st.tuples(
            st.floats(0, 500),
            st.booleans(),
            st.integers(0, 8),
            st.integers(1, 32),
            st.integers(1, 256),
            st.floats(1, 400),
            st.sampled_from([0.0, 5.0, 60.0]),
        ),
        min_size=1,
        max_size=40,
    ),
    policy=st.sampled_from(POLICIES),
    limit=st.sampled_from([0, 1, 3, None]),
    nodes=st.integers(1, 3),
    seed=st.integers(0, 5),
)
def test_invariants_on_random_traces(specs, policy, limit, nodes, seed) -> None:  # type: ignore[no-untyped-def]
    jobs = [
        job(f"j{i}", at=at, trial=trial, gpus=gpus, cpu=cpu, memory_gib=memory, duration=duration, grace=grace)
        for i, (at, trial, gpus, cpu, memory, duration, grace) in enumerate(specs)
    ]
    chosen = FitGppSettings(max_preemptions=limit)
    result, sim = simulate(jobs, policy=policy, nodes=nodes, settings=chosen, seed=seed)
    _check_run(result, sim, chosen)


# ---------------------------------------------------------------------- determinism and arrivals


def test_same_seed_same_result() -> None:
    experiment = Experiment(cluster=SMALL_CLUSTER, jobs=400)
    variant = Variant(label="rand", policy="rand", settings=FitGppSettings())
    runs = []
    for seed in (7, 7, 8):
        jobs, _ = derive_arrivals(experiment, _synthetic(400, seed), seed=seed)
        runs.append(run_variant(experiment, variant, jobs, seed=seed))
    first, again, other = runs
    for field in ("submit", "first_start", "finish", "preemptions", "intervals"):
        assert np.array_equal(getattr(first, field), getattr(again, field)), field
    assert not np.array_equal(first.finish, other.finish)


def test_replaying_the_closed_loop_under_fifo_reproduces_it() -> None:
    experiment = Experiment(cluster=SMALL_CLUSTER, jobs=600)
    jobs, closed = derive_arrivals(experiment, _synthetic(600, seed=2), seed=2)
    replay = run_variant(experiment, Variant(label="fifo", policy="fifo", settings=FitGppSettings()), jobs, seed=2)
    for field in ("submit", "first_start", "finish"):
        assert np.array_equal(getattr(closed, field), getattr(replay, field)), field
    assert closed.events == replay.events


def test_the_closed_loop_holds_the_load() -> None:
    jobs = [job(f"j{i}", gpus=2, duration=100.0 + i) for i in range(200)]
    result, sim = simulate(jobs, nodes=2, arrivals="load", load=2.0)
    assert 2.0 <= result.max_load <= 2.0 + 2 / 16 + 1e-9  # one job's share above the target
    # Submissions follow completions: 16 GPUs of load-2 demand are 16 jobs in the system at t=0.
    assert (result.submit == 0).sum() == 16
    assert (np.diff(result.submit) >= 0).all()


def test_jobs_that_can_never_run_are_refused() -> None:
    with pytest.raises(InvalidWorkload, match="does not fit on a node"):
        simulate([job("huge", gpus=9)])
    with pytest.raises(InvalidWorkload, match="appears twice"):
        simulate([job("a"), job("a")])
    with pytest.raises(InvalidWorkload, match="load"):
        simulate([job("a")], arrivals="load", load=0.0)


def test_minute_ticks_delay_decisions_to_the_next_boundary() -> None:
    jobs = [job("b", at=0, gpus=8, duration=600, grace=30), job("t", at=100, gpus=1, duration=60, trial=True)]
    result, sim = simulate(jobs, policy="fitgpp", tick=60.0)
    b, t = sim.jobs
    # t arrives at 100 and is considered at 120; b's GP ends at 150 and t starts then; b waits
    # for t (210) and resumes at the next tick, 240.
    assert t.first_start == 150.0
    assert b.intervals == [120.0] and b.finished_at == 240.0 + 480.0
    with pytest.raises(InvalidWorkload, match="tick"):
        simulate(jobs, tick=-1.0)
