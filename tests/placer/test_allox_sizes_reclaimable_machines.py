"""user25 #2's side effect: a VC's cells full of opportunistic pods are its free guarantee
(8d3d14a), but no node shows their GPUs free, so no queued GPU configuration 'fit' a node and the
VC's GPU machines were sized at 1 GPU: a 4-GPU Job took one 1-GPU machine, AlloX started more
4-GPU Jobs than the guarantee holds once HiveD reclaims it, and the extra pods waited in
kube-scheduler's queue until the NotBound rule suspended them again (SuspendedAgain cycles).
The real controller over the real HivedEngine's view."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import Guarantees, PlacerController
from placer.guarantee import gpus_per_pod, guarantees, pool_machines
from scheduler.cells import HivedEngine
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.matching.admission import RunningJob, WaitingJob, decide, pool_kind
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand
from tests.cells.helpers import node_names, pod, rack_cluster, schedule
from tests.placer.test_controller import Jobs, RecordingApi

NODES = node_names(1, 4)  # 8 GPUs each
FOUR_GPUS = {"gpu": {"resources": {"nvidia.com/gpu": "4", "cpu": "8", "memory": "32Gi"}}}


def four_gpu_job(name: str, created: int) -> Any:
    body = {
        "metadata": {
            "name": name,
            "namespace": "a",
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z",
            "annotations": {"cellfit.io/configurations": json.dumps(FOUR_GPUS), "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 60}})},
        },
        "spec": {"suspend": True, "template": {"metadata": {"labels": {"cellfit.io/virtual-cluster": "a"}}, "spec": {"containers": [{"name": "c"}]}}},
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


def engine_held_by_opportunistic_pods() -> HivedEngine:
    """VC a's two 8-GPU cells (of 4 nodes) free, but every GPU held by b's opportunistic pods."""
    cells = HivedEngine.from_config(
        rack_cluster(
            1, 4, vcs={"a": [{"cellType": "V100-NODE", "count": 2}], "b": [{"cellType": "V100-NODE", "count": 1}], "c": [{"cellType": "V100-NODE", "count": 1}]}
        )
    )
    for index in range(4):
        placed = schedule(cells, pod(f"b-opp-{index}", 8, "b", priority="opportunistic"), NODES)
        assert placed is not None
        cells.apply_pod(placed)
    return cells


def test_a_vcs_machines_are_sized_for_its_pods_on_cells_opportunistic_pods_hold() -> None:
    cells = engine_held_by_opportunistic_pods()
    placer = PlacerController(
        api=RecordingApi(),
        jobs=Jobs([four_gpu_job(f"j{index}", index) for index in range(6)]),
        settings=AlloxSettings(alpha=1.0),
        gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {name: Resources(cpu_millis=64000, memory_bytes=2**38, gpus=0) for name in NODES},
        capacity=lambda: Resources(cpu_millis=256000, memory_bytes=2**40, gpus=32),
        clock=lambda: 1767225700.0,
        guarantees=lambda running: Guarantees(cells=guarantees(cells.inspect_guarantees(within=frozenset(NODES))), default_vc=cells.default_vc),
    )
    decision = placer.admit()
    # a's 16 GPUs, reclaimed from b's pods, hold four pods of 4 GPUs: four machines of 4, not
    # sixteen of 1, and four Jobs start; the other two wait for a's GPUs.
    assert decision.idle_machines["gpu@a"] == 4
    assert sorted(start.key for start in decision.starts) == ["a/j0", "a/j1", "a/j2", "a/j3"]
    assert {start.kind for start in decision.starts} == {"gpu"}
    assert sorted(queued.key for queued in decision.queue) == ["a/j4", "a/j5"]


def test_a_running_4_gpu_job_holds_one_of_those_machines() -> None:
    """decide sizes the machines as the pools were sized: a running 4-GPU Job of a holds one
    machine of 4 (with machines of 1 it held four, or, waiting, took one of 1)."""
    cells = guarantees(engine_held_by_opportunistic_pods().inspect_guarantees(within=frozenset(NODES)))
    full = [NodeResources(name=name, cpu=64.0, gpu=0, memory=256.0) for name in NODES]
    demand = {"gpu": Demand(cpu=8.0, gpu=4, memory=32.0)}
    waiting = [WaitingJob(key=f"a/w{index}", user="u", arrival=float(index), seconds={"gpu": 60.0}, demand=demand, pool="a") for index in range(5)]
    running = [RunningJob(key="a/r", user="u", kind="gpu", started=0.0, seconds={"gpu": 600.0}, demand=demand, pool="a")]
    sizes = gpus_per_pod(waiting, free=full, cells=cells)
    assert sizes == {"a": 4}
    pools = pool_machines(cells, free=full, sizes=sizes)
    decision = decide(
        now=10.0,
        waiting=waiting,
        running=running,
        free_nodes=full,
        capacity=Capacity(cpu=256, gpu=32, memory=1024),
        gpu_pools=pools,
        gpu_slots={pool_kind(vc): size for vc, size in sizes.items()},
    )
    assert sorted(start.key for start in decision.starts) == ["a/w0", "a/w1", "a/w2"]


def test_a_node_with_fewer_gpus_free_leaves_the_vcs_4_gpu_machines_usable() -> None:
    """Another VC's 2 idle GPUs on one node made a 4-GPU pod 'more than any node has free', and
    the VC's four 4-GPU machines on its reclaimable cells took no Job (each GPU-only Job was
    unplaceable)."""
    cells = guarantees(engine_held_by_opportunistic_pods().inspect_guarantees(within=frozenset(NODES)))
    free = [NodeResources(name=name, cpu=64.0, gpu=2 if name == NODES[0] else 0, memory=256.0) for name in NODES]
    demand = {"gpu": Demand(cpu=8.0, gpu=4, memory=32.0)}
    waiting = [WaitingJob(key=f"a/w{index}", user="u", arrival=float(index), seconds={"gpu": 60.0}, demand=demand, pool="a") for index in range(5)]
    sizes = gpus_per_pod(waiting, free=free, cells=cells)
    decision = decide(
        now=10.0,
        waiting=waiting,
        running=[],
        free_nodes=free,
        capacity=Capacity(cpu=256, gpu=32, memory=1024),
        gpu_pools=pool_machines(cells, free=free, sizes=sizes),
        gpu_slots={pool_kind(vc): size for vc, size in sizes.items()},
    )
    assert sorted(start.key for start in decision.starts) == ["a/w0", "a/w1", "a/w2", "a/w3"]
    assert decision.unplaceable == ()
