"""AlloX admission (helper-72): pods of several GPUs take that many GPUs of one node, waiting or
running, with and without virtual clusters; fairness counts such a pod once."""

from __future__ import annotations

import pytest

from scheduler.matching.admission import RunningJob, WaitingJob, decide
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand

ONE_GPU = Demand(gpu=1, cpu=1, memory=1)
FOUR_GPUS = Demand(gpu=4, cpu=1, memory=1)
NODES = [NodeResources(name="n1", cpu=16, gpu=8, memory=64)]
CAPACITY = Capacity(cpu=16, gpu=8, memory=64)


def small(index: int, pool: str | None) -> WaitingJob:
    return WaitingJob(key=f"a/small{index}", user="a", arrival=float(index), seconds={"gpu": 100}, demand={"gpu": ONE_GPU}, pool=pool)


def wide_running(pool: str | None, *, pods: int = 1) -> RunningJob:
    return RunningJob(key="b/wide", user="b", kind="gpu", started=0.0, seconds={"gpu": 1000}, demand={"gpu": FOUR_GPUS}, pods=pods,
                      pool=pool)


@pytest.mark.parametrize(("pool", "kind", "gpu_pools"), [(None, "gpu", None), ("v", "gpu@v", {"v": 8})])
def test_a_running_pod_of_four_gpus_holds_four_machines_of_one(pool: str | None, kind: str, gpu_pools: dict[str, int] | None) -> None:
    # The node's 8 GPUs, the running pod's 4 counted free (it is a busy machine of its own):
    # as one machine it left 7 idle for 1-GPU Jobs where 4 are.
    decision = decide(now=10.0, waiting=[small(index, pool) for index in range(6)], running=[wide_running(pool)], free_nodes=NODES,
                      capacity=CAPACITY, gpu_pools=gpu_pools)
    assert decision.busy_machines == {kind: 4} and decision.idle_machines[kind] == 4
    assert len(decision.starts) == 4


def test_a_running_job_of_two_pods_of_four_gpus_holds_eight_and_counts_two_pods_for_fairness() -> None:
    running = wide_running(None, pods=2)
    decision = decide(now=10.0, waiting=[small(0, None)], running=[running], free_nodes=NODES, capacity=CAPACITY)
    assert decision.busy_machines == {"gpu": 8} and decision.starts == ()
    # Two pods of 4 GPUs of the cluster's 8 each: its user's progress is 2 × 4/8, not 8 × 4/8.
    assert decision.progress["b"] == pytest.approx(1.0)


def test_waiting_pods_of_four_gpus_take_four_gpus_of_one_node() -> None:
    # A node with 8 GPUs free holds two pods of 4: as 8 machines of one GPU, all three and the
    # 1-GPU Job were started, and the third pod of 4 never bound. The 1-GPU Job takes a machine of
    # 4, as a small CPU configuration takes a whole CPU slot.
    wide = [WaitingJob(key=f"a/wide{index}", user="a", arrival=float(index), seconds={"gpu": 100}, demand={"gpu": FOUR_GPUS})
            for index in range(3)]
    decision = decide(now=10.0, waiting=[*wide, small(9, None)], running=[], free_nodes=NODES, capacity=CAPACITY)
    assert decision.idle_machines["gpu"] == 2
    assert len(decision.starts) == 2 and len(decision.queue) == 2
