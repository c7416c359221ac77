"""Algorithm 2 (online AlloX) as a pure policy, and the planner that plays a policy forward."""

from __future__ import annotations

import math
import random
from typing import Mapping, Sequence

import pytest

from allox_reference import brute_force_total, check_valid, random_instance, total_completion
from scheduler.matching.allox import AlloxScheduler
from scheduler.matching.errors import PolicyViolation, StalledSchedule
from scheduler.matching.model import Assignment, Job, Machine
from scheduler.matching.plan import plan
from scheduler.matching.solve import prepare, schedule, solve

GPU = Machine(name="gpu-0", kind="gpu")
CPU = Machine(name="cpu-0", kind="cpu")


def job(name: str, gpu: float | None, cpu: float | None, *, user: str = "u", arrival: float = 0.0) -> Job:
    times = {kind: value for kind, value in (("gpu", gpu), ("cpu", cpu)) if value is not None}
    return Job(name=name, user=user, arrival=arrival, processing_time=times)


class TestOnMachineFree:
    def test_starts_the_first_job_of_each_free_machine(self) -> None:
        jobs = [job("J1", 3, 4), job("J2", 4, 6), job("J3", 5, 10)]
        started = AlloxScheduler().on_machine_free(now=0.0, free_machines=[GPU, CPU], pending_jobs=jobs, busy_until={})
        # The optimal matching (total 17) runs J2 then J3 on the GPU, J1 on the CPU; or J1 then J3
        # on the GPU and J2 on the CPU. Either way each machine starts its first job now.
        assert {(a.job.name, a.machine.name) for a in started} in (
            {("J2", "gpu-0"), ("J1", "cpu-0")},
            {("J1", "gpu-0"), ("J2", "cpu-0")},
        )
        assert all(a.start == 0.0 and a.finish == a.job.processing_time[a.kind] for a in started)

    def test_free_machine_stays_idle_when_waiting_is_better(self) -> None:
        """The GPU frees up at 1; a job 100× slower on the CPU waits for it."""
        busy_gpu = {GPU: 1.0}
        started = AlloxScheduler().on_machine_free(
            now=0.0, free_machines=[CPU], pending_jobs=[job("a", 1, 100)], busy_until=busy_gpu
        )
        assert started == []

    def test_busy_machine_counts_its_remaining_time(self) -> None:
        """The GPU is busy for long: the job takes the free CPU although the GPU is faster."""
        started = AlloxScheduler().on_machine_free(
            now=0.0, free_machines=[CPU], pending_jobs=[job("a", 1, 5)], busy_until={GPU: 50.0}
        )
        assert [(a.job.name, a.machine.name, a.finish) for a in started] == [("a", "cpu-0", 5.0)]

    def test_jobs_not_yet_arrived_are_ignored(self) -> None:
        started = AlloxScheduler().on_machine_free(
            now=1.0, free_machines=[GPU], pending_jobs=[job("late", 1, None, arrival=2.0)], busy_until={}
        )
        assert started == []

    def test_jobs_no_machine_can_run_are_ignored(self) -> None:
        started = AlloxScheduler().on_machine_free(
            now=0.0,
            free_machines=[GPU],
            pending_jobs=[job("cpu-only", None, 1), job("ok", 2, None)],
            busy_until={},
        )
        assert [a.job.name for a in started] == ["ok"]

    def test_no_machine_gets_two_jobs_and_no_job_two_machines(self) -> None:
        rng = random.Random(5)
        for _ in range(30):
            case = random_instance(rng, max_jobs=12, max_machines=8, users=4)
            started = AlloxScheduler(alpha=0.5).on_machine_free(
                now=0.0, free_machines=case.machines, pending_jobs=case.jobs, busy_until={}
            )
            assert len({a.machine.name for a in started}) == len(started)
            assert len({a.job.name for a in started}) == len(started)
            # All machines idle and every user considered eventually: some job always starts.
            assert started

    def test_rejects_alpha_outside_0_1(self) -> None:
        with pytest.raises(ValueError):
            AlloxScheduler(alpha=1.5)

    def test_is_deterministic(self) -> None:
        rng = random.Random(9)
        case = random_instance(rng, max_jobs=20, max_machines=6, integer_times=True, users=5)
        calls = [
            AlloxScheduler(alpha=0.4).on_machine_free(
                now=0.0, free_machines=case.machines, pending_jobs=case.jobs, busy_until={}
            )
            for _ in range(2)
        ]
        assert calls[0] == calls[1]

    def test_reusing_the_matching_equals_solving_again(self) -> None:
        """After the first job on a machine starts, the rest of the matching stays optimal: the
        total of the remaining matching equals a fresh solve with that machine's ω moved."""
        rng = random.Random(11)
        for _ in range(40):
            case = random_instance(rng, max_jobs=10, max_machines=5, busy=True)
            problem = prepare(jobs=case.jobs, machines=case.machines, now=case.now, busy_until=case.busy_until)
            queues = solve(problem)
            machine = next(i for i in range(len(case.machines)) if queues.first_job(i) is not None)
            first = problem.jobs[queues.first_job(machine) or 0]
            name = case.machines[machine].name
            moved = dict(case.busy_until)
            moved[name] = max(case.busy_until.get(name, case.now), case.now) + first.processing_time[case.machines[machine].kind]
            rest = [j for j in case.jobs if j.name != first.name]
            fresh = solve(prepare(jobs=rest, machines=case.machines, now=case.now, busy_until=moved))
            kept = queues.total_completion_time - (
                max(case.busy_until.get(name, case.now), case.now)
                + first.processing_time[case.machines[machine].kind]
                - first.arrival
            )
            assert fresh.total_completion_time == pytest.approx(kept, abs=1e-9)


class TestPlan:
    @pytest.mark.parametrize("seed", range(4))
    def test_algorithm_2_played_forward_is_optimal_when_all_jobs_wait(self, seed: int) -> None:
        """With α = 1 and every job waiting at the start, re-solving at each event (Algorithm 2)
        keeps the optimum of the single matching (Lemma 3.1)."""
        rng = random.Random(200 + seed)
        for _ in range(15):
            case = random_instance(rng, max_jobs=5, max_machines=3, busy=seed % 2 == 1)
            result = plan(
                policy=AlloxScheduler(), jobs=case.jobs, machines=case.machines, now=case.now, busy_until=case.busy_until
            )
            check_valid(result, case.jobs, case.machines, now=case.now, busy_until=case.busy_until)
            expected = brute_force_total(case.jobs, case.machines, now=case.now, busy_until=case.busy_until)
            assert total_completion(result) == pytest.approx(expected, abs=1e-9)

    def test_jobs_arriving_later_are_not_seen_early(self) -> None:
        """The short job arrives at 1; at 0 the scheduler cannot know and starts the long one."""
        jobs = [job("long", 10, None), job("short", 1, None, arrival=1.0)]
        result = plan(policy=AlloxScheduler(), jobs=jobs, machines=[GPU])
        assert [(a.job.name, a.start) for a in result] == [("long", 0.0), ("short", 10.0)]
        assert total_completion(result) == 10 + 10

    def test_online_schedule_is_valid_with_arrivals(self) -> None:
        rng = random.Random(21)
        for _ in range(20):
            case = random_instance(rng, max_jobs=15, max_machines=5, users=4)
            arrivals = [
                Job(name=j.name, user=j.user, arrival=float(rng.randint(0, 20)), processing_time=j.processing_time)
                for j in case.jobs
            ]
            for policy in (AlloxScheduler(), AlloxScheduler(alpha=0.2)):
                result = plan(policy=policy, jobs=arrivals, machines=case.machines)
                check_valid(result, arrivals, case.machines)

    def test_single_matching_and_plan_agree(self) -> None:
        rng = random.Random(33)
        for _ in range(20):
            case = random_instance(rng, max_jobs=25, max_machines=7, busy=True)
            direct = schedule(jobs=case.jobs, machines=case.machines, now=case.now, busy_until=case.busy_until)
            played = plan(
                policy=AlloxScheduler(), jobs=case.jobs, machines=case.machines, now=case.now, busy_until=case.busy_until
            )
            assert total_completion(played) == pytest.approx(total_completion(direct), abs=1e-6)

    def test_a_policy_that_never_schedules_stalls(self) -> None:
        class Never:
            def on_machine_free(self, **_: object) -> list[Assignment]:
                return []

        with pytest.raises(StalledSchedule, match="'a'"):
            plan(policy=Never(), jobs=[job("a", 1, None)], machines=[GPU])

    def test_a_policy_using_a_busy_machine_is_rejected(self) -> None:
        class Greedy:
            def on_machine_free(
                self,
                *,
                now: float,
                free_machines: Sequence[Machine],
                pending_jobs: Sequence[Job],
                busy_until: Mapping[Machine, float],
                running: Sequence[Assignment] = (),
            ) -> list[Assignment]:
                return [Assignment(job=j, machine=GPU, start=now, finish=now + 1) for j in pending_jobs]

        with pytest.raises(PolicyViolation, match="not free"):
            plan(policy=Greedy(), jobs=[job("a", 1, None), job("b", 1, None)], machines=[GPU])

    def test_empty_instance(self) -> None:
        assert plan(policy=AlloxScheduler(), jobs=[], machines=[GPU]) == []
        assert math.isclose(total_completion([]), 0.0)
