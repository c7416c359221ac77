"""AlloX+ (§4.4): shortest job first across CPU and GPU with a waiting timeout."""

from __future__ import annotations

import random

import pytest

from allox_reference import check_valid, random_instance, total_completion
from scheduler.matching.alloxplus import AlloxPlusScheduler
from scheduler.matching.model import Job, Machine
from scheduler.matching.plan import plan

GPU0 = Machine(name="gpu-0", kind="gpu")
GPU1 = Machine(name="gpu-1", kind="gpu")
CPU0 = Machine(name="cpu-0", kind="cpu")
CPU1 = Machine(name="cpu-1", kind="cpu")


def job(name: str, gpu: float | None, cpu: float | None, *, arrival: float = 0.0) -> Job:
    times = {kind: value for kind, value in (("gpu", gpu), ("cpu", cpu)) if value is not None}
    return Job(name=name, user="u", arrival=arrival, processing_time=times)


def test_sjf_plus_counter_example_is_solved() -> None:
    """§2.2's instance where SJF+ averages 50: AlloX+ lets Jobs 3, 4 wait for the GPUs (AJCT 20,
    the optimum)."""
    jobs = [job("J1", 10, 20), job("J2", 10, 20), job("J3", 20, 90), job("J4", 20, 90)]
    result = plan(policy=AlloxPlusScheduler(), jobs=jobs, machines=[GPU0, GPU1, CPU0, CPU1])
    check_valid(result, jobs, [GPU0, GPU1, CPU0, CPU1])
    assert total_completion(result) / 4 == 20


def test_shortest_job_first() -> None:
    jobs = [job("long", 5, None), job("short", 1, None), job("mid", 3, None)]
    started = AlloxPlusScheduler().on_machine_free(now=0.0, free_machines=[GPU0], pending_jobs=jobs, busy_until={})
    assert [a.job.name for a in started] == ["short"]


def test_length_is_the_shortest_time_on_any_kind() -> None:
    """'a' is the shorter job (1 on a GPU) even though only a CPU is free; it waits for the GPU,
    and 'b' (shortest on the CPU) takes the CPU."""
    jobs = [job("b", 8, 4), job("a", 1, 50)]
    started = AlloxPlusScheduler().on_machine_free(
        now=0.0, free_machines=[CPU0], pending_jobs=jobs, busy_until={GPU0: 2.0}
    )
    assert [(a.job.name, a.machine.name) for a in started] == [("b", "cpu-0")]


def test_waiting_job_holds_the_machine_it_waits_for() -> None:
    """'a' waits for the GPU (free at 1); 'b' would also prefer that GPU, but after 'a' it finishes
    earlier on the free CPU."""
    jobs = [job("a", 1, 50), job("b", 2, 4)]
    started = AlloxPlusScheduler().on_machine_free(
        now=0.0, free_machines=[CPU0], pending_jobs=jobs, busy_until={GPU0: 1.0}
    )
    # 'b' on the GPU would finish at 1 + 1 + 2 = 4, on the CPU at 4: ties go to the free machine.
    assert [(a.job.name, a.machine.name) for a in started] == [("b", "cpu-0")]


def test_timeout_puts_old_jobs_first() -> None:
    jobs = [job("old-long", 9, None, arrival=0.0), job("new-short", 1, None, arrival=5.0)]
    never = AlloxPlusScheduler().on_machine_free(now=10.0, free_machines=[GPU0], pending_jobs=jobs, busy_until={})
    assert [a.job.name for a in never] == ["new-short"]
    timed = AlloxPlusScheduler(timeout=8.0).on_machine_free(
        now=10.0, free_machines=[GPU0], pending_jobs=jobs, busy_until={}
    )
    assert [a.job.name for a in timed] == ["old-long"]


def test_starving_job_does_not_wait_for_a_better_machine() -> None:
    jobs = [job("old", 1, 50, arrival=0.0)]
    waits = AlloxPlusScheduler().on_machine_free(now=10.0, free_machines=[CPU0], pending_jobs=jobs, busy_until={GPU0: 11.0})
    assert waits == []
    starving = AlloxPlusScheduler(timeout=5.0).on_machine_free(
        now=10.0, free_machines=[CPU0], pending_jobs=jobs, busy_until={GPU0: 11.0}
    )
    assert [(a.job.name, a.machine.name, a.finish) for a in starving] == [("old", "cpu-0", 60.0)]


def test_rejects_negative_timeout() -> None:
    with pytest.raises(ValueError):
        AlloxPlusScheduler(timeout=-1.0)


@pytest.mark.parametrize("seed", range(3))
def test_schedules_are_valid(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(20):
        case = random_instance(rng, max_jobs=20, max_machines=6, busy=True)
        for policy in (AlloxPlusScheduler(), AlloxPlusScheduler(timeout=3.0)):
            result = plan(policy=policy, jobs=case.jobs, machines=case.machines, now=case.now, busy_until=case.busy_until)
            check_valid(result, case.jobs, case.machines, now=case.now, busy_until=case.busy_until)
