"""Fairness (§3.3): progress, dominant shares, the α knob and §4.4's temporary raise; and the
capacity model (§4.1, §4.4's CPU reserved beside each GPU)."""

from __future__ import annotations

import pytest

from scheduler.matching.allox import AlloxScheduler
from scheduler.matching.capacity import NodeResources, cluster_capacity, cpu_slots, default_demands, machines_for
from scheduler.matching.errors import InvalidInstance
from scheduler.matching.fairness import (
    Capacity,
    DemandShare,
    MachineShare,
    considered_count,
    job_value,
    lowest_progress_users,
    preferred_kind,
    user_progress,
)
from scheduler.matching.model import Assignment, Demand, Job, Machine
from scheduler.matching.plan import plan

GPU0 = Machine(name="gpu-0", kind="gpu")
GPU1 = Machine(name="gpu-1", kind="gpu")
CPU0 = Machine(name="cpu-0", kind="cpu")


def job(name: str, user: str, gpu: float | None, cpu: float | None, *, arrival: float = 0.0) -> Job:
    times = {kind: value for kind, value in (("gpu", gpu), ("cpu", cpu)) if value is not None}
    return Job(name=name, user=user, arrival=arrival, processing_time=times)


class TestValue:
    def test_papers_example(self) -> None:
        """§3.3.2: CPU configuration (1 CPU, 4 memory, 20), GPU configuration (1 GPU, 2 memory, 5),
        capacity (8 CPUs, 2 GPUs, 64 memory): the share is 1/2, its value 1/2 on the GPU and
        1/8 on the CPU (4× slower)."""
        example = Job(
            name="j",
            user="u",
            arrival=0.0,
            processing_time={"cpu": 20.0, "gpu": 5.0},
            demand={"cpu": Demand(cpu=1, memory=4), "gpu": Demand(gpu=1, memory=2)},
        )
        shares = DemandShare(capacity=Capacity(cpu=8, gpu=2, memory=64), default_demand={})
        assert preferred_kind(example) == "gpu"
        assert shares.dominant_share(example, "gpu") == 0.5
        assert job_value(example, "gpu", shares) == 0.5
        assert job_value(example, "cpu", shares) == 0.125
        # Value × running time is the same on either configuration.
        assert job_value(example, "cpu", shares) * 20 == job_value(example, "gpu", shares) * 5

    def test_cpu_faster_job_uses_the_cpu_share(self) -> None:
        cpu_friendly = Job(
            name="j",
            user="u",
            arrival=0.0,
            processing_time={"cpu": 2.0, "gpu": 4.0},
            demand={"cpu": Demand(cpu=4, memory=8)},
        )
        shares = DemandShare(capacity=Capacity(cpu=16, gpu=4, memory=64), default_demand={})
        assert job_value(cpu_friendly, "cpu", shares) == 0.25
        assert job_value(cpu_friendly, "gpu", shares) == 0.125

    def test_default_demand_and_zero_capacity_dimensions(self) -> None:
        shares = DemandShare(
            capacity=Capacity(cpu=40, gpu=0, memory=0), default_demand=default_demands(cpu_slot=Demand(cpu=20))
        )
        assert shares.dominant_share(job("j", "u", None, 3), "cpu") == 0.5

    def test_machine_share(self) -> None:
        shares = MachineShare.of([GPU0, GPU1, CPU0])
        assert shares.dominant_share(job("j", "u", 1, 2), "gpu") == 0.5
        assert shares.dominant_share(job("j", "u", 1, 2), "cpu") == 1.0
        assert shares.dominant_share(job("j", "u", 1, 2), "tpu") == 0.0

    def test_progress_sums_running_values(self) -> None:
        shares = MachineShare.of([GPU0, GPU1, CPU0])
        running = [
            Assignment(job=job("a", "u1", 1, 4), machine=GPU0, start=0, finish=1),
            Assignment(job=job("b", "u1", 1, 4), machine=CPU0, start=0, finish=4),
            Assignment(job=job("c", "u2", 1, 4), machine=GPU1, start=0, finish=1),
        ]
        assert user_progress(running, shares) == {"u1": 0.5 + 0.5 * 1 / 4, "u2": 0.5}


class TestAlpha:
    @pytest.mark.parametrize(
        ("alpha", "users", "expected"),
        [(0.3, 20, 6), (1.0, 20, 20), (0.0, 20, 1), (0.5, 3, 2), (0.01, 3, 1), (1.0, 0, 0), (0.7, 10, 7)],
    )
    def test_ceil_alpha_n(self, alpha: float, users: int, expected: int) -> None:
        """§3.3.3: 20 users at α = 0.3 consider 6 (0.3 × 20 is 6.000000000000001 in floating
        point, which must not round up to 7)."""
        assert considered_count(alpha=alpha, users=users) == expected

    def test_lowest_progress_users_ties_by_name(self) -> None:
        progress = {"b": 0.1, "c": 0.0, "a": 0.0, "d": 0.5}
        assert list(lowest_progress_users(users=progress, progress=progress, alpha=0.5)) == ["a", "c"]

    def test_only_users_furthest_behind_are_considered(self) -> None:
        """u1 already runs a job; with α = 0.5 only u2's job may take the free GPU, even though
        u1's would be shorter."""
        running = [Assignment(job=job("r", "u1", 5, None), machine=GPU1, start=0, finish=5)]
        pending = [job("short", "u1", 1, None), job("long", "u2", 3, None)]
        started = AlloxScheduler(alpha=0.5).on_machine_free(
            now=0.0, free_machines=[GPU0], pending_jobs=pending, busy_until={GPU1: 5.0}, running=running
        )
        assert [a.job.name for a in started] == ["long"]
        started = AlloxScheduler(alpha=1.0).on_machine_free(
            now=0.0, free_machines=[GPU0], pending_jobs=pending, busy_until={GPU1: 5.0}, running=running
        )
        assert [a.job.name for a in started] == ["short"]

    def test_alpha_raised_when_a_machine_would_idle(self) -> None:
        """§4.4: the user furthest behind (u1) only has a job that waits for the busy GPU; the free
        CPU would idle, so the next user with a job the CPU can run (u2) is brought in."""
        pending = [job("gpu-lover", "u1", 1, 100), job("cpu-fine", "u2", 5, 6)]
        running = [Assignment(job=job("r", "u2", 1, None), machine=GPU0, start=0, finish=1)]
        started = AlloxScheduler(alpha=0.5).on_machine_free(
            now=0.0, free_machines=[CPU0], pending_jobs=pending, busy_until={GPU0: 1.0}, running=running
        )
        assert [(a.job.name, a.machine.name) for a in started] == [("cpu-fine", "cpu-0")]
        without = AlloxScheduler(alpha=0.5, raise_alpha_when_idle=False).on_machine_free(
            now=0.0, free_machines=[CPU0], pending_jobs=pending, busy_until={GPU0: 1.0}, running=running
        )
        assert without == []

    def test_raise_is_temporary(self) -> None:
        """After the raise served one idle machine, the next free machine starts again from the
        ceil(α·n) users furthest behind."""
        pending = [job("gpu-lover", "u1", 1, 100), job("cpu-fine", "u2", 5, 6), job("u2-gpu", "u2", 1, 2)]
        started = AlloxScheduler(alpha=0.5).on_machine_free(
            now=0.0, free_machines=[CPU0, GPU0], pending_jobs=pending, busy_until={}
        )
        assert {(a.job.name, a.machine.name) for a in started} == {("cpu-fine", "cpu-0"), ("gpu-lover", "gpu-0")}

    def test_smaller_alpha_serves_the_user_behind_sooner(self) -> None:
        """u1 submits short jobs, u2 long ones. α = 1 (pure performance) runs u1's short jobs first;
        α = 0.5 gives u2 a GPU from the start."""
        jobs = [job(f"s{i}", "u1", 1, None) for i in range(4)] + [job(f"l{i}", "u2", 5, None) for i in range(4)]

        def first_start(alpha: float) -> float:
            result = plan(policy=AlloxScheduler(alpha=alpha), jobs=jobs, machines=[GPU0, GPU1])
            return min(a.start for a in result if a.job.user == "u2")

        assert first_start(1.0) == 2.0
        assert first_start(0.5) == 0.0


class TestCapacity:
    def test_cpu_reserved_beside_each_gpu(self) -> None:
        """A 20-core node with 2 GPUs keeps 2 cores for them: 18 cores, two 9-core CPU slots."""
        node = NodeResources(name="n0", cpu=20, gpu=2, memory=128)
        assert cpu_slots(node, cpu_slot=Demand(cpu=9)) == 2
        assert cpu_slots(node, cpu_slot=Demand(cpu=9), reserved_cpu_per_gpu=2.5) == 1
        assert cpu_slots(node, cpu_slot=Demand(cpu=9), reserved_cpu_per_gpu=0) == 2
        assert cpu_slots(NodeResources(name="n", cpu=20, gpu=0, memory=128), cpu_slot=Demand(cpu=10)) == 2

    def test_memory_limits_slots(self) -> None:
        node = NodeResources(name="n0", cpu=64, gpu=0, memory=100)
        assert cpu_slots(node, cpu_slot=Demand(cpu=8, memory=40)) == 2

    def test_gpus_that_eat_every_core_leave_no_slot(self) -> None:
        assert cpu_slots(NodeResources(name="n", cpu=4, gpu=8, memory=1), cpu_slot=Demand(cpu=1)) == 0

    def test_machines_and_capacity_of_the_papers_cluster(self) -> None:
        """§5.1's simulated cluster: 20 GPUs, 20 CPUs of 20 cores, 1,280 GB; here as 20 CPU nodes
        and 5 GPU nodes of 4 GPUs (with 4 cores for the reserved CPUs)."""
        nodes = [NodeResources(name=f"c{i}", cpu=20, gpu=0, memory=48) for i in range(20)] + [
            NodeResources(name=f"g{i}", cpu=4, gpu=4, memory=64) for i in range(5)
        ]
        machines = machines_for(nodes, cpu_slot=Demand(cpu=20))
        assert sum(m.kind == "gpu" for m in machines) == 20
        assert sum(m.kind == "cpu" for m in machines) == 20
        assert machines[0] == Machine(name="c0/cpu-0", kind="cpu")
        assert cluster_capacity(nodes) == Capacity(cpu=420, gpu=20, memory=1280)

    def test_bad_slot(self) -> None:
        with pytest.raises(InvalidInstance, match="cpu_slot.cpu"):
            cpu_slots(NodeResources(name="n", cpu=4, gpu=0, memory=1), cpu_slot=Demand(cpu=0))

    def test_default_demands_reserve_a_core_for_gpu_jobs(self) -> None:
        demands = default_demands(cpu_slot=Demand(cpu=20, memory=12))
        assert demands["gpu"] == Demand(gpu=1, cpu=1)
        assert demands["cpu"] == Demand(cpu=20, memory=12)
