"""A pass with no single-pod Job to match (none waiting, only gangs, only Jobs no node holds) lays
out no machine for Algorithm 2 (decide_starts), and still answers what a pass with Jobs does:
the machines idle and busy per kind, the users' progress, the gangs' starts and queue."""

from __future__ import annotations

import random
from collections import Counter
from functools import partial

import pytest

from scheduler.matching.admission import AdmissionPolicy, RunningJob, WaitingJob, IdleMachines

from scheduler.matching.admission import decide as decide_with
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand

CPU, GPU = Demand(cpu=4, memory=8), Demand(gpu=1, cpu=1)
decide = partial(decide_with, capacity=Capacity(cpu=32, gpu=4, memory=128))
# Two GPUs, and beside their two cores two 4-core CPU slots, per node.
NODES = [NodeResources(name=f"n{index}", cpu=10, gpu=2, memory=64) for index in range(2)]


def running(key: str, user: str, kind: str, *, started: float = 0.0, seconds: float = 100.0) -> RunningJob:
    return RunningJob(key=key, user=user, kind=kind, started=started, seconds={kind: seconds}, demand={"cpu": CPU, "gpu": GPU})


def waiting(key: str, user: str, *, pods: int = 1, seconds: dict[str, float] | None = None) -> WaitingJob:
    times = seconds if seconds is not None else {"cpu": 300.0, "gpu": 60.0}
    return WaitingJob(key=key, user=user, arrival=0.0, seconds=times, demand={kind: {"cpu": CPU, "gpu": GPU}[kind] for kind in times},
                      pods=pods)


@pytest.mark.parametrize("alpha", [0.1, 1.0])
@pytest.mark.parametrize("policy", ["allox", "allox+"])
def test_no_waiting_job_reports_the_machines_and_the_progress(alpha: float, policy: AdmissionPolicy) -> None:
    held = [running("r1", "u1", "gpu"), running("r2", "u2", "cpu"), running("r3", "u2", "gpu")]
    decision = decide(now=10.0, waiting=[], running=held, free_nodes=NODES, alpha=alpha, policy=policy)
    assert decision.starts == () and decision.queue == () and decision.unplaceable == ()
    assert decision.busy_machines == {"gpu": 2, "cpu": 1}
    # CPU slots of one core (no queued CPU configuration sizes them): 16, one held.
    assert decision.idle_machines == {"gpu": 2, "cpu": 15}
    assert set(decision.progress) == {"u1", "u2"} and decision.progress["u2"] > decision.progress["u1"] > 0


def test_only_a_gang_waiting_starts_on_idle_machines_or_queues() -> None:
    gang = waiting("g", "u1", pods=2, seconds={"gpu": 60.0})
    decision = decide(now=0.0, waiting=[gang], running=[], free_nodes=NODES)
    (start,) = decision.starts
    assert start.key == "g" and start.kind == "gpu" and len(start.machines) == 2
    # Every GPU held: the gang waits for the first two to free, 40 s from now.
    held = [running(f"r{index}", "u2", "gpu", seconds=40.0 + index) for index in range(4)]
    decision = decide(now=0.0, waiting=[gang], running=held, free_nodes=NODES, omega_grid_seconds=0)
    assert decision.starts == ()
    (queued,) = decision.queue
    assert (queued.key, queued.kind, queued.position) == ("g", "gpu", 1)
    assert queued.expected_start_seconds == pytest.approx(41.0)


def test_only_jobs_no_node_holds_are_named_unplaceable() -> None:
    gpu_only = waiting("g", "u1", seconds={"gpu": 60.0})
    decision = decide(now=0.0, waiting=[gpu_only], running=[], free_nodes=[NodeResources(name="c", cpu=16, gpu=0, memory=64)])
    assert decision.unplaceable == ("g",) and decision.starts == () and decision.queue == ()
    assert decision.idle_machines == {"cpu": 16}  # one-core slots


def _random_case(rng: random.Random) -> dict[str, object]:
    nodes = [NodeResources(name=f"n{index}", cpu=rng.choice([0, 3, 8, 17.5, 64, 96]), gpu=rng.choice([0, 1, 2, 4, 8]),
                           memory=rng.choice([0, 16, 64, 512]), kept_cpu_per_gpu=rng.choice([0.0, 0.0, 2.0, 6.5]),
                           kept_memory_per_gpu=rng.choice([0.0, 0.0, 8.0])) for index in range(rng.randint(0, 6))]
    pools = {f"vc{index}": rng.randint(-1, 9) for index in range(rng.randint(1, 3))} if rng.random() < 0.4 else None
    kinds = ["cpu", "gpu"] + ([f"gpu@{pool}" for pool in pools] if pools else [])
    running_jobs = []
    for index in range(rng.randint(0, 8)):
        kind = rng.choice(kinds)
        pool = kind.partition("@")[2] or None
        demand = {kind: Demand(cpu=rng.choice([1.0, 4.0, 9.0]), gpu=rng.choice([1, 2, 4]) if kind != "cpu" else 0,
                               memory=rng.choice([0.0, 8.0, 40.0]))}
        running_jobs.append(RunningJob(key=f"r{index}", user=f"u{index % 3}", kind="gpu" if pool else kind, started=0.0,
                                       seconds={"gpu" if pool else kind: 100.0}, demand={"gpu" if pool else kind: demand[kind]},
                                       pods=rng.randint(1, 3), pool=pool))
    gpu_slots = {kind: rng.choice([1, 2, 4]) for kind in kinds if kind != "cpu" and rng.random() < 0.5}
    return {"free_nodes": nodes, "running": running_jobs, "cpu_slot": Demand(cpu=rng.choice([1.0, 2.0, 4.0, 8.0]), memory=rng.choice([0.0, 8.0, 16.0])),
            "reserved_cpu_per_gpu": rng.choice([0.0, 1.0, 2.0]), "gpu_pools": pools, "gpu_slots": gpu_slots or None,
            "cpu_slot_queued": rng.random() < 0.5, "reserved_memory_per_gpu": rng.choice([0.0, 4.0])}


@pytest.mark.parametrize("seed", range(300))
def test_idle_machines_counted_as_laid_out(seed: int) -> None:
    """A pass with nothing to match counts the idle machines (IdleMachines.counted) instead of
    making them (IdleMachines.laid_out): the same count per kind, pools, slots and held machines included."""
    case = _random_case(random.Random(seed))
    assert IdleMachines(**case).counted() == dict(Counter(machine.kind for machine in IdleMachines(**case).laid_out()))  # type: ignore[arg-type]
