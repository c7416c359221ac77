"""Machines free at the same time are visited slowest kind first (visit_order.py): the order
itself, the live decision laying its fleet out so, and Algorithm 2 deciding the same whatever
order the caller lists the free machines in."""

from __future__ import annotations

import random
import statistics

from scheduler.matching.admission import WaitingJob, decide
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand
from scheduler.matching.allox import AlloxScheduler
from scheduler.matching.model import Job, Machine
from scheduler.matching.plan import plan
from scheduler.matching.solve import fleet as laid_out
from scheduler.matching.visit_order import visiting_order
from tests.matching.test_matching_vacancy import burst_of_ten_users


def machines(*kinds: str) -> list[Machine]:
    return [Machine(name=f"m{index}-{kind}", kind=kind) for index, kind in enumerate(kinds)]


def burst(rng: random.Random, *, count: int, users: int, gpu_seconds: tuple[float, float], cpu_slowdown: tuple[float, float]) -> list[Job]:
    """``count`` Jobs arrived at 0 of ``users`` users, each slower on a CPU slot than on a GPU."""
    jobs = []
    for index in range(count):
        gpu = rng.uniform(*gpu_seconds)
        jobs.append(Job(name=f"j{index}", user=f"u{index % users}", arrival=0.0, processing_time={"gpu": gpu, "cpu": gpu * rng.uniform(*cpu_slowdown)}))
    return jobs


def test_the_slowest_kind_on_average_is_visited_first_each_kind_in_its_order() -> None:
    free = machines("gpu", "gpu", "cpu", "gpu", "cpu", "tpu")
    jobs = [Job(name="a", user="u", arrival=0.0, processing_time={"gpu": 10.0, "cpu": 80.0}),
            Job(name="b", user="u", arrival=0.0, processing_time={"gpu": 30.0, "cpu": 40.0, "tpu": 20.0})]
    # cpu 60 s on average, tpu 20, gpu 20: gpu and tpu tie, by name
    assert [m.name for m in visiting_order(free, jobs)] == ["m2-cpu", "m4-cpu", "m0-gpu", "m1-gpu", "m3-gpu", "m5-tpu"]


def test_a_kind_no_job_can_use_comes_last_and_one_kind_is_left_as_it_is() -> None:
    jobs = [Job(name="a", user="u", arrival=0.0, processing_time={"gpu": 10.0})]
    assert [m.kind for m in visiting_order(machines("cpu", "gpu", "cpu"), jobs)] == ["gpu", "cpu", "cpu"]
    same = machines("gpu", "gpu")
    assert visiting_order(same, jobs) == same and visiting_order(same, []) == same


def test_kinds_tied_on_average_are_visited_by_name_whatever_the_node_order() -> None:
    """review29 #3: with the kinds' mean times equal (mirrored estimates), ties went by which
    kind's machine was listed first, so the same cluster listed GPU node first or CPU node first
    started different Jobs at alpha 0.2."""
    demand = {"cpu": Demand(cpu=8, memory=8), "gpu": Demand(gpu=1, cpu=1, memory=4)}
    waiting = []
    for index, (first, second) in enumerate([(180.0, 180.0), (720.0, 360.0), (600.0, 540.0)]):
        waiting.append(WaitingJob(key=f"j{index}", user=f"u{index % 3}", arrival=100.0 + index, seconds={"gpu": first, "cpu": second},
                                  demand=demand))
        waiting.append(WaitingJob(key=f"k{index}", user=f"u{(index + 1) % 3}", arrival=100.5 + index, seconds={"gpu": second, "cpu": first},
                                  demand=demand))
    gpu_node = NodeResources(name="gpu-0", cpu=4.0, gpu=2, memory=64.0)
    cpu_node = NodeResources(name="cpu-0", cpu=12.0, gpu=0, memory=64.0)
    decided = [sorted((start.key, start.kind) for start in decide(now=1000.0, waiting=waiting, running=[], free_nodes=nodes,
                                                                  capacity=Capacity(cpu=16.0, gpu=2, memory=128.0), alpha=0.2).starts)
               for nodes in ([gpu_node, cpu_node], [cpu_node, gpu_node])]
    assert decided[0] == decided[1] and decided[0]


def test_the_live_decision_visits_a_bursts_cpu_slots_before_its_gpus() -> None:
    """``decide`` lays the fleet out in visiting order, so its starts (in the order Algorithm 2
    made them) are the CPU slots' first; node order would interleave them node by node."""
    now, waiting, nodes, capacity = burst_of_ten_users(600)
    starts = decide(now=now, waiting=waiting, running=[], free_nodes=nodes, capacity=capacity, alpha=0.1).starts
    kinds = [start.kind for start in starts]
    assert "cpu" in kinds and "gpu" in kinds
    assert kinds == sorted(kinds, key=lambda kind: kind != "cpu")


def test_the_free_machines_listed_in_any_order_decide_alike() -> None:
    rng = random.Random(5)
    jobs = burst(rng, count=60, users=6, gpu_seconds=(60, 900), cpu_slowdown=(1.2, 6))
    listed = [Machine(name=f"n{node}/{kind}-{index}", kind=kind) for node in range(4) for kind in ("gpu", "cpu") for index in range(3)]
    shuffled = rng.sample(listed, len(listed))
    # machines of a kind are alike: which of them a job takes follows the caller's order
    decided = [sorted((a.job.name, a.machine.kind) for a in AlloxScheduler(alpha=0.2).on_machine_free(
        now=0.0, free_machines=free, pending_jobs=jobs, busy_until={})) for free in (listed, shuffled)]
    assert decided[0] == decided[1] and len(decided[0]) == len(listed)


def test_a_burst_played_out_completes_no_later_on_average_than_gpus_first() -> None:
    """What the order is for (the module's docstring): a burst of 200 Jobs at α = 0.1 played
    to its end, CPU slots and GPUs freeing together; the Jobs' mean completion with the slow
    kind visited first is not above its mean with the GPUs visited first."""
    jobs = burst(random.Random(11), count=200, users=10, gpu_seconds=(60, 3600), cpu_slowdown=(1.2, 4))
    fleet = [Machine(name=f"n{node}/{kind}-{index}", kind=kind) for node in range(12) for kind in ("gpu", "cpu") for index in range(5)]

    class GpusFirst(AlloxScheduler):
        def on_machine_free(self, **arguments):  # type: ignore[no-untyped-def]
            # a fleet laid out by the caller is visited in its order
            free = sorted(arguments["free_machines"], key=lambda machine: machine.kind != "gpu")
            busy = arguments["busy_until"]
            arguments["free_machines"] = free
            arguments["machines"] = laid_out(machines=[*free, *busy], now=arguments["now"],
                                             busy_until={machine.name: until for machine, until in busy.items()})
            return self.matched(**arguments).started

    def mean_completion(policy: AlloxScheduler) -> float:
        return statistics.mean(a.finish for a in plan(policy=policy, jobs=jobs, machines=fleet))

    assert mean_completion(AlloxScheduler(alpha=0.1)) <= mean_completion(GpusFirst(alpha=0.1))
