"""Lemma 3.1 against brute force, and the position bound against the paper's unbounded Q."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allox_reference import brute_force_total, check_valid, random_instance, total_completion
from scheduler.matching.costs import delay_matrix, kind_times, paper_cost_matrix, processing_matrix, slot_cost_matrix
from scheduler.matching.errors import InfeasibleInstance, InvalidInstance
from scheduler.matching.model import Job, Machine
from scheduler.matching.positions import all_positions, position_limits, slots_for
from scheduler.matching.solve import prepare, schedule, solve


@pytest.mark.parametrize("seed", range(6))
def test_lemma_3_1_matches_brute_force(seed: int) -> None:
    """All jobs at time 0, idle machines: the matching is optimal (brute force over every
    assignment and every order), on 40 random instances per seed."""
    rng = random.Random(seed)
    for _ in range(40):
        case = random_instance(rng, max_jobs=5, max_machines=3, integer_times=seed % 2 == 0, kinds=("gpu", "cpu", "tpu"))
        result = schedule(jobs=case.jobs, machines=case.machines)
        check_valid(result, case.jobs, case.machines)
        assert total_completion(result) == pytest.approx(brute_force_total(case.jobs, case.machines), abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_matching_with_busy_machines_matches_brute_force(seed: int) -> None:
    """§3.2's delays: jobs that arrived before ``now`` and machines busy until ω are still
    scheduled optimally (each job pays its machine's ω − a once)."""
    rng = random.Random(100 + seed)
    for _ in range(40):
        case = random_instance(rng, max_jobs=5, max_machines=3, busy=True, integer_times=seed % 2 == 1)
        result = schedule(jobs=case.jobs, machines=case.machines, now=case.now, busy_until=case.busy_until)
        check_valid(result, case.jobs, case.machines, now=case.now, busy_until=case.busy_until)
        expected = brute_force_total(case.jobs, case.machines, now=case.now, busy_until=case.busy_until)
        assert total_completion(result) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_bounded_positions_give_the_unbounded_optimum(seed: int) -> None:
    """The bound of scheduler.matching.positions loses nothing: same optimum as all n positions on
    every machine, with ties (integer times), equal and distinct ω, forbidden kinds, and many
    identical machines."""
    rng = random.Random(1000 + seed)
    for _ in range(30):
        case = random_instance(
            rng,
            # Alternate many jobs per machine with more machines than jobs (Claim 2's cuts).
            max_jobs=14 if seed % 2 else 5,
            max_machines=9 if seed % 2 else 14,
            busy=seed % 3 != 0,
            integer_times=seed % 4 < 2,
            kinds=("gpu", "cpu") if seed < 4 else ("gpu", "cpu", "fpga"),
        )
        problem = prepare(jobs=case.jobs, machines=case.machines, now=case.now, busy_until=case.busy_until)
        bounded = solve(problem)
        unbounded = solve(problem, bounded=False)
        assert bounded.total_completion_time == pytest.approx(unbounded.total_completion_time, abs=1e-9)


def test_bounded_equals_unbounded_with_one_fast_machine() -> None:
    """A GPU so much faster that every job queues on it: the bound must allow n positions there."""
    jobs = [Job(name=f"j{i}", user="u", arrival=0.0, processing_time={"gpu": 1.0, "cpu": 1000.0}) for i in range(7)]
    machines = [Machine(name="g", kind="gpu")] + [Machine(name=f"c{i}", kind="cpu") for i in range(5)]
    problem = prepare(jobs=jobs, machines=machines, now=0.0)
    assert solve(problem).total_completion_time == solve(problem, bounded=False).total_completion_time == 28


@settings(max_examples=60, deadline=None)
@given(
    times=st.lists(
        st.tuples(st.integers(0, 6), st.one_of(st.none(), st.integers(0, 6))), min_size=1, max_size=5
    ),
    kinds=st.lists(st.sampled_from(["gpu", "cpu"]), min_size=1, max_size=3),
    delays=st.lists(st.integers(0, 8), min_size=3, max_size=3),
)
def test_property_optimal_including_zero_times(
    times: list[tuple[int, int | None]], kinds: list[str], delays: list[int]
) -> None:
    """Hypothesis: zero processing times and exact ties included (the bound's proof covers p >= 0)."""
    machines = [Machine(name=f"m{i}", kind=kind) for i, kind in enumerate(kinds)]
    present = {m.kind for m in machines}
    jobs = []
    for index, (first, second) in enumerate(times):
        processing = {"gpu": float(first)} if second is None else {"gpu": float(first), "cpu": float(second)}
        if not present & processing.keys():
            processing[next(iter(present))] = float(first)
        jobs.append(Job(name=f"j{index}", user="u", arrival=0.0, processing_time=processing))
    busy = {m.name: float(delay) for m, delay in zip(machines, delays)}
    result = schedule(jobs=jobs, machines=machines, busy_until=busy)
    check_valid(result, jobs, machines, busy_until=busy)
    assert total_completion(result) == pytest.approx(brute_force_total(jobs, machines, busy_until=busy))


class TestPositionLimits:
    def test_idle_identical_machines_hold_ceil_n_over_m(self) -> None:
        limits = position_limits(
            machine_kind=np.array([0, 0, 0, 1, 1]),
            available=np.zeros(5),
            runnable_per_kind=np.array([7, 1]),
        )
        # 7 jobs over 3 GPUs: at most 3 each. One CPU job: one CPU kept (Claim 2), one position.
        assert limits.tolist() == [3, 3, 3, 1, 0]

    def test_more_identical_machines_than_jobs_keeps_n_of_them(self) -> None:
        limits = position_limits(
            machine_kind=np.zeros(10, dtype=np.int64), available=np.zeros(10), runnable_per_kind=np.array([4])
        )
        assert limits.tolist() == [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]

    def test_earlier_machines_may_hold_more(self) -> None:
        limits = position_limits(
            machine_kind=np.zeros(4, dtype=np.int64),
            available=np.array([5.0, 0.0, 9.0, 0.0]),
            runnable_per_kind=np.array([6]),
        )
        # (s, t) = (2, 1), (0, 2), (3, 1), (0, 2): floor((6 + t - 1) / (s + t)) = 2, 3, 1, 3.
        assert limits.tolist() == [2, 3, 1, 3]

    def test_machines_behind_n_earlier_ones_get_nothing(self) -> None:
        """Two jobs, two idle GPUs: a busy GPU can never be worth waiting for."""
        limits = position_limits(
            machine_kind=np.zeros(5, dtype=np.int64),
            available=np.array([0.0, 3.0, 0.0, 1.0, 3.0]),
            runnable_per_kind=np.array([2]),
        )
        assert limits.tolist() == [1, 0, 1, 0, 0]

    def test_group_after_earlier_machines_keeps_what_is_left(self) -> None:
        """Three jobs; one machine free now, four free at 2: if any of the four is used, the first
        machine is too, so at most two of the four can be non-empty."""
        limits = position_limits(
            machine_kind=np.zeros(5, dtype=np.int64),
            available=np.array([0.0, 2.0, 2.0, 2.0, 2.0]),
            runnable_per_kind=np.array([3]),
        )
        assert limits.tolist() == [3, 1, 1, 0, 0]

    def test_kind_nobody_can_use_gets_no_slots(self) -> None:
        limits = position_limits(
            machine_kind=np.array([0, 1]), available=np.zeros(2), runnable_per_kind=np.array([3, 0])
        )
        assert limits.tolist() == [3, 0]

    def test_slots_are_grouped_by_kind_in_block_order(self) -> None:
        slots = slots_for(limits=np.array([2, 1, 2]), machine_kind=np.array([0, 1, 0]), kind_count=2)
        assert list(zip(slots.machine.tolist(), slots.position.tolist())) == [(0, 1), (2, 1), (0, 2), (2, 2), (1, 1)]
        assert slots.kind_bounds.tolist() == [0, 4, 5]


def test_vectorised_cost_matrix_matches_the_definition() -> None:
    """Q(j, s) = k·P(j, i) + ω(i) for every slot, forbidden kinds infinite."""
    rng = random.Random(7)
    case = random_instance(rng, max_jobs=6, max_machines=5, busy=True)
    problem = prepare(jobs=case.jobs, machines=case.machines, now=case.now, busy_until=case.busy_until)
    slots = slots_for(
        limits=all_positions(machine_count=len(case.machines), job_count=len(case.jobs)),
        machine_kind=problem.machine_kind,
        kind_count=len(problem.kinds),
    )
    cost = slot_cost_matrix(times=problem.times, slots=slots, delay=problem.delay)
    for j, job in enumerate(problem.jobs):
        for s in range(slots.count):
            machine = problem.machines[int(slots.machine[s])]
            expected = slots.position[s] * job.time_on(machine.kind) + problem.delay[slots.machine[s]]
            assert cost[j, s] == expected or (math.isinf(expected) and math.isinf(cost[j, s]))


def test_paper_layout_and_delay_matrix() -> None:
    jobs = [
        Job(name="a", user="u", arrival=1.0, processing_time={"gpu": 2.0}),
        Job(name="b", user="u", arrival=0.0, processing_time={"gpu": 3.0, "cpu": 4.0}),
    ]
    machines = [Machine(name="g", kind="gpu"), Machine(name="c", kind="cpu")]
    processing = processing_matrix(jobs, machines)
    assert processing.tolist() == [[2.0, math.inf], [3.0, 4.0]]
    delay = delay_matrix(available=np.array([5.0, 2.0]), arrival=np.array([1.0, 0.0]))
    assert delay.tolist() == [[4.0, 1.0], [5.0, 2.0]]
    q = paper_cost_matrix(processing, delay)
    assert q.tolist() == [[6.0, math.inf, 8.0, math.inf], [8.0, 6.0, 11.0, 10.0]]
    assert kind_times(jobs, ["cpu", "gpu"]).tolist() == [[math.inf, 2.0], [4.0, 3.0]]


def test_identical_input_gives_identical_schedule() -> None:
    rng = random.Random(3)
    case = random_instance(rng, max_jobs=30, max_machines=12, integer_times=True)
    first = schedule(jobs=case.jobs, machines=case.machines)
    second = schedule(jobs=list(case.jobs), machines=list(case.machines))
    assert first == second


def test_large_instance_is_valid_and_uses_few_slots() -> None:
    rng = np.random.default_rng(0)
    gpu = rng.uniform(1, 10, 300)
    jobs = [
        Job(name=f"j{i}", user="u", arrival=0.0, processing_time={"gpu": float(g), "cpu": float(g * s)})
        for i, (g, s) in enumerate(zip(gpu, rng.uniform(1.8, 10, 300)))
    ]
    machines = [Machine(name=f"g{i}", kind="gpu") for i in range(100)] + [
        Machine(name=f"c{i}", kind="cpu") for i in range(400)
    ]
    result = schedule(jobs=jobs, machines=machines)
    check_valid(result, jobs, machines)


class TestRejectedInstances:
    def test_job_without_a_present_kind(self) -> None:
        job = Job(name="x", user="u", arrival=0.0, processing_time={"tpu": 1.0})
        with pytest.raises(InfeasibleInstance, match="'x'"):
            schedule(jobs=[job], machines=[Machine(name="g", kind="gpu")])

    def test_job_from_the_future(self) -> None:
        job = Job(name="x", user="u", arrival=5.0, processing_time={"gpu": 1.0})
        with pytest.raises(InvalidInstance, match=r"jobs\[0\]\.arrival"):
            schedule(jobs=[job], machines=[Machine(name="g", kind="gpu")], now=1.0)

    @pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
    def test_bad_processing_time(self, bad: float) -> None:
        job = Job(name="x", user="u", arrival=0.0, processing_time={"gpu": bad})
        with pytest.raises(InvalidInstance, match=r"jobs\[0\]\.processing_time\.gpu"):
            schedule(jobs=[job], machines=[Machine(name="g", kind="gpu")])

    def test_unknown_busy_machine(self) -> None:
        with pytest.raises(InvalidInstance, match="busy_until.nope"):
            schedule(jobs=[], machines=[Machine(name="g", kind="gpu")], busy_until={"nope": 3.0})

    def test_no_jobs(self) -> None:
        assert schedule(jobs=[], machines=[Machine(name="g", kind="gpu")]) == []


@pytest.mark.parametrize("seed", range(6))
def test_claim_3_keeps_the_unbounded_optimum_on_a_full_cluster(seed: int) -> None:
    """Every machine busy until its own time, within a few jobs' time of each other (a full
    cluster): Claim 3 cuts the first-freeing machine's positions well below Claim 1's n, and the
    schedule is still the paper's unbounded optimum, queue for queue."""
    rng = random.Random(3000 + seed)
    for _ in range(8):
        machines = [Machine(name=f"{kind}{i}", kind=kind) for kind in ("gpu", "cpu") for i in range(rng.randint(2, 6))]
        jobs = []
        for j in range(rng.randint(10, 30)):
            gpu = rng.uniform(5.0, 30.0)
            jobs.append(Job(name=f"j{j}", user="u", arrival=0.0, processing_time={"gpu": gpu, "cpu": gpu * rng.uniform(1.5, 4.0)}))
        busy = {m.name: rng.uniform(0.0, 60.0) for m in machines}
        problem = prepare(jobs=jobs, machines=machines, now=0.0, busy_until=busy)
        bounded, unbounded = solve(problem), solve(problem, bounded=False)
        assert bounded.total_completion_time == pytest.approx(unbounded.total_completion_time, abs=1e-9)
        assert bounded.bounds.tolist() == unbounded.bounds.tolist()
        assert bounded.job.tolist() == unbounded.job.tolist()
    claim_1 = position_limits(machine_kind=problem.machine_kind, available=problem.delay, runnable_per_kind=np.array([len(jobs)] * 2))
    claim_3 = position_limits(machine_kind=problem.machine_kind, available=problem.delay, runnable_per_kind=np.array([len(jobs)] * 2),
                              shortest_per_kind=np.array([5.0, 5.0]))
    assert np.all(claim_3 <= claim_1) and claim_3.sum() < claim_1.sum()


def test_claim_3_counts_machines_by_how_far_behind_they_free() -> None:
    # One kind, shortest job 10, 9 jobs. Machines free at 0, 5, 15, 100: Claim 1 gives the first
    # 9 positions. Claim 3 with k on it: the one at 5 holds >= k-1, the one at 15 >= k-2, the one
    # at 100 (9 jobs' time behind) nothing forced: k + (k-1) + (k-2) <= 9 -> k <= 4.
    limits = position_limits(machine_kind=np.zeros(4, dtype=np.int64), available=np.array([0.0, 5.0, 15.0, 100.0]),
                             runnable_per_kind=np.array([9]), shortest_per_kind=np.array([10.0]))
    assert limits[0] == 4
    assert position_limits(machine_kind=np.zeros(4, dtype=np.int64), available=np.array([0.0, 5.0, 15.0, 100.0]),
                           runnable_per_kind=np.array([9]))[0] == 9
