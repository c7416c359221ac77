"""AlloX counts a VC's free guarantee that other VCs' opportunistic pods hold (8d3d14a, bf1bb66,
b3dc45c), and sizes its GPU machines for its queued pods on it. That room was judged by GPUs
alone and by a cell's total: a 16-GPU pod 'fit' a rack cell of two 8-GPU nodes, and a 4-GPU pod
of 32 cores 'fit' a node whose cores other pods hold, so AlloX started Jobs whose pods no node
takes once HiveD reclaims the cell (they wait, NotBound, and are suspended again). Now the room
is judged node by node, by GPUs, cores and memory: the node's free cores and memory plus what the
opportunistic pods there ask (the cluster snapshot's requests), which free with them.
The real HivedEngine's view, through placer/guarantee.py, into decide."""

from __future__ import annotations

from typing import Mapping

import msgspec

from placer.guarantee import gpus_per_pod, guarantees, pool_machines
from scheduler.cells import HivedEngine
from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from scheduler.matching.admission import AdmissionDecision, WaitingJob, decide, pool_kind
from scheduler.matching.capacity import GuaranteeCell, NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand
from tests.cells.helpers import node_names, pod, rack_cluster, schedule

GIB = 2**30


def held_by_opportunistic_pods(vcs: dict[str, list[dict[str, object]]], nodes: list[str], *, racks: int, per_rack: int,
                               asks: Resources) -> tuple[HivedEngine, dict[str, PodInfo]]:
    """Every GPU of ``nodes`` held by vc b's opportunistic pods of 8 GPUs, each asking ``asks``."""
    cells = HivedEngine.from_config(rack_cluster(racks, per_rack, vcs=vcs))
    placed: dict[str, PodInfo] = {}
    for index, _ in enumerate(nodes):
        asking = msgspec.structs.replace(pod(f"b-opp-{index}", 8, "b", priority="opportunistic"), requests=asks)
        bound = schedule(cells, asking, nodes)
        assert bound is not None
        cells.apply_pod(bound)
        placed[bound.uid] = bound
    return cells, placed


def waiting(demand: Demand, count: int = 1) -> list[WaitingJob]:
    return [WaitingJob(key=f"a/w{index}", user="u", arrival=float(index), seconds={"gpu": 60.0}, demand={"gpu": demand}, pool="a")
            for index in range(count)]


def decided(jobs: list[WaitingJob], *, free: list[NodeResources], cells: Mapping[str, list[GuaranteeCell]]) -> tuple[dict[str, int], list[str]]:
    sizes, decision = deciding(jobs, free=free, cells=cells)
    return sizes, sorted(start.key for start in decision.starts)


def deciding(jobs: list[WaitingJob], *, free: list[NodeResources], cells: Mapping[str, list[GuaranteeCell]]) -> tuple[dict[str, int], AdmissionDecision]:
    sizes = gpus_per_pod(jobs, free=free, cells=cells)
    return sizes, decide(now=10.0, waiting=jobs, running=[], free_nodes=free, capacity=Capacity(cpu=256, gpu=32, memory=1024),
                         gpu_pools=pool_machines(cells, free=free, sizes=sizes), gpu_slots={pool_kind(vc): size for vc, size in sizes.items()})


def test_a_rack_cell_of_two_8_gpu_nodes_holds_no_16_gpu_pod() -> None:
    """vc a's quota is a rack of two 8-GPU nodes; b's opportunistic pods hold every GPU. The rack
    has 16 GPUs, no node more than 8: a 16-GPU pod never binds there (before: a's machines were
    sized 16 and the Job started)."""
    nodes = node_names(2, 2)
    cells, placed = held_by_opportunistic_pods({"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]},
                                               nodes, racks=2, per_rack=2, asks=Resources(cpu_millis=2000, memory_bytes=8 * GIB, gpus=8))
    view = guarantees(cells.inspect_guarantees(within=frozenset(nodes)), requests=lambda uid: placed[uid].requests if uid in placed else None)
    free = [NodeResources(name=name, cpu=60.0, gpu=0, memory=200.0) for name in nodes]
    sizes, decision = deciding(waiting(Demand(cpu=8.0, gpu=16, memory=32.0)), free=free, cells=view)
    assert sizes.get("a", 1) == 1 and decision.starts == ()
    # Not onto a's machines of 1 GPU either (its pod would wait unbound): it waits for a's GPUs.
    assert decision.waiting_for_pool == ("a/w0",)
    # An 8-GPU pod binds on one of the rack's nodes: a's machines are of 8, two of them (the
    # rack's 16 GPUs), and two of three such Jobs start.
    sizes, started = decided(waiting(Demand(cpu=8.0, gpu=8, memory=32.0), count=3), free=free, cells=view)
    assert sizes == {"a": 8} and started == ["a/w0", "a/w1"]


def test_a_node_whose_cores_other_pods_hold_takes_no_pod_asking_more_than_the_reclaimed_pods_free() -> None:
    """vc a's node cells are held by b's opportunistic pods of 8 GPUs and 2 cores each; the
    nodes' other cores are held by pods HiveD does not reclaim (4 cores left free). A 4-GPU pod
    of 32 cores finds 6 cores once the pods are reclaimed: not started (before: sized 4 and
    started, judged by GPUs)."""
    nodes = node_names(1, 4)
    vcs = {"a": [{"cellType": "V100-NODE", "count": 2}], "b": [{"cellType": "V100-NODE", "count": 1}], "c": [{"cellType": "V100-NODE", "count": 1}]}
    cells, placed = held_by_opportunistic_pods(vcs, nodes, racks=1, per_rack=4, asks=Resources(cpu_millis=2000, memory_bytes=16 * GIB, gpus=8))
    view = guarantees(cells.inspect_guarantees(within=frozenset(nodes)), requests=lambda uid: placed[uid].requests if uid in placed else None)
    free = [NodeResources(name=name, cpu=4.0, gpu=0, memory=200.0) for name in nodes]
    sizes, started = decided(waiting(Demand(cpu=32.0, gpu=4, memory=32.0)), free=free, cells=view)
    assert sizes.get("a", 1) == 1 and started == []
    # 6 cores a pod, what the reclaimed pod's 2 and the node's 4 make: sized 4 and started.
    sizes, started = decided(waiting(Demand(cpu=6.0, gpu=4, memory=32.0)), free=free, cells=view)
    assert sizes == {"a": 4} and started == ["a/w0"]


def test_the_cores_and_memory_the_reclaimed_pods_ask_count_beside_the_nodes_free_ones() -> None:
    """b's opportunistic pods ask 40 cores and 200 GiB each, the nodes have 4 cores and 40 GiB
    free: a 4-GPU pod of 32 cores and 160 GiB fits once they are reclaimed; without their
    requests known it would not (the room is then the nodes' free cores and memory alone)."""
    nodes = node_names(1, 4)
    vcs = {"a": [{"cellType": "V100-NODE", "count": 2}], "b": [{"cellType": "V100-NODE", "count": 1}], "c": [{"cellType": "V100-NODE", "count": 1}]}
    cells, placed = held_by_opportunistic_pods(vcs, nodes, racks=1, per_rack=4, asks=Resources(cpu_millis=40_000, memory_bytes=200 * GIB, gpus=8))
    free = [NodeResources(name=name, cpu=4.0, gpu=0, memory=40.0) for name in nodes]
    jobs = waiting(Demand(cpu=32.0, gpu=4, memory=160.0))
    known = guarantees(cells.inspect_guarantees(within=frozenset(nodes)), requests=lambda uid: placed[uid].requests if uid in placed else None)
    assert decided(jobs, free=free, cells=known) == ({"a": 4}, ["a/w0"])
    unknown = guarantees(cells.inspect_guarantees(within=frozenset(nodes)))
    assert decided(jobs, free=free, cells=unknown)[1] == []


def test_the_runtime_reads_the_opportunistic_pods_requests_from_the_cluster_snapshot() -> None:
    """cellfit serve: speech's opportunistic pod of 8 GPUs and 40 cores on vision's node cell
    (gpu-a, its quota not bound yet); the placer's view of vision's room there counts the pod's
    cores and memory, read from the pods the watch cache applied."""
    from scheduler.config import parse_settings
    from scheduler.extender.runtime import build_runtime
    from scheduler.kube import wire
    from placer.controller import PlacerController
    from placer.guarantee import VcCell
    from tests.support import kube_objects as k
    from tests.support.api_double import ListingApi
    from tests.support.hived import CONFIG, NODES

    text = CONFIG + "nudge: {enabled: false}\nexchange: {enabled: false}\nleaderElection: {enabled: false}\n"
    runtime = build_runtime(parse_settings(text), api=ListingApi(nodes=NODES))  # type: ignore[arg-type]
    assert runtime.terms is not None and runtime.cache is not None
    for node in NODES:
        runtime.cache._apply_node(msgspec.convert(node, wire.Node))
    opportunistic = k.pod("opp-0", uid="uid-opp-0", gpus=8, cpu="40", memory="200Gi", node_name="gpu-a", phase="Running",
                          labels={"cellfit.io/virtual-cluster": "speech", "cellfit.io/priority": "opportunistic"})
    runtime.cache._apply_pod(msgspec.convert(opportunistic, wire.Pod))
    runtime.terms.begin()
    try:
        (live,) = [driver for driver in runtime.terms.drivers if isinstance(driver, PlacerController)]
        assert live._guarantees is not None
        vision = live._guarantees(frozenset()).cells["vision"]
        rooms = [room for cell in vision if isinstance(cell, VcCell) for room in cell.nodes]
        assert [(room.node, room.gpus, room.reclaimable, room.cpu, room.memory) for room in rooms] == [("gpu-a", 8, 8, 40.0, 200.0)]
    finally:
        runtime.terms.end()
