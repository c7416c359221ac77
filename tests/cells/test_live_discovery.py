"""Discovered cells follow the cluster's Nodes while cellfit runs: nodes that join, nodes that are
deleted (idle or still running pods), racks that form or dissolve, and a restart afterwards
rebuilding exactly the same allocations from the pods' bind-info."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cells import HivedEngine
from scheduler.cells.discovery import discover_layout
from scheduler.core.model import NodeInfo, PodInfo
from tests.cells.helpers import node, pod, rack_cluster, schedule, snapshot
from scheduler.kube.names import filter_offered

A100 = {"nvidia.com/gpu.product": "A100"}
T4 = {"nvidia.com/gpu.product": "T4"}
RACK = "topology.kubernetes.io/rack"


def a100(name: str, rack: str | None = None, **kwargs: Any) -> NodeInfo:
    labels = {**A100, **({RACK: rack} if rack else {})}
    return node(name, 8, labels=labels, **kwargs)


def shapes(engine: HivedEngine) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(c.cell_type, c.id, tuple(n.node or "" for n in c.node_cells)) for c in engine.topology.top_cells}


def layout_shapes(nodes: list[NodeInfo], rack_label: str | None = None) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(c.cell_type, c.cell_id, c.nodes) for c in discover_layout(nodes, rack_label=rack_label).cells}


def quota(engine: HivedEngine, vc: str = "default") -> dict[str, int]:
    return dict(engine.allocator.vcs[vc].quota)


def assert_invariant(engine: HivedEngine) -> None:
    for chain in engine.topology.used_chains:
        for wanted, free, capacity in engine.allocator.invariant(chain):
            assert wanted <= free + capacity, (chain, engine.allocator.invariant(chain))


# ---------------------------------------------------------------------------- nodes joining


def test_a_new_gpu_node_joins_the_cells_and_the_default_vc():
    log: list[str] = []
    engine = HivedEngine.from_nodes([a100("a0"), a100("a1")], on_change=log.append)
    assert quota(engine) == {"A100-8GPU-NODE": 2}
    names = ["a0", "a1", "a2"]
    for i in range(2):
        assert schedule(engine, pod(f"p{i}", 8, vc=None), names) is not None
    assert "quota exhausted" in filter_offered(engine, pod("late", 8, vc=None), names).unresolvable["a0"]

    engine.apply_node(a100("a2"))

    assert "a2" in engine.topology.nodes and quota(engine) == {"A100-8GPU-NODE": 3}
    assert log == ["cells added: a2 (A100-8GPU-NODE, 8 GPUs); virtual cluster 'default' now owns 3 A100-8GPU-NODE"]
    assert list(engine.changes) == log
    assert "A100-8GPU-NODE (8 GPUs each): 3 nodes" in engine.summary and "default (3 A100-8GPU-NODE)" in engine.summary
    placed = schedule(engine, pod("late", 8, vc=None), names)
    assert placed is not None and placed.node_name == "a2"
    assert_invariant(engine)
    # Status updates of a node already in the cells change nothing.
    engine.apply_node(a100("a2"))
    assert len(log) == 1


def test_a_node_of_a_new_product_gets_its_own_hierarchy():
    engine = HivedEngine.from_nodes([a100("a0")])
    engine.apply_node(node("t0", 4, labels=T4))
    assert quota(engine) == {"A100-8GPU-NODE": 1, "T4-4GPU-NODE": 1}
    placed = schedule(engine, pod("t", 4, vc=None, cell_type="T4-4GPU-NODE"), ["a0", "t0"])
    assert placed is not None and placed.node_name == "t0"


def test_the_first_gpu_node_of_a_cluster_that_had_none():
    engine = HivedEngine.from_nodes([node("cpu", 0)])
    assert filter_offered(engine, pod("p", 1, vc=None), ["cpu"]).unresolvable["cpu"] == "node cpu has no HiveD GPU cells"
    engine.apply_node(a100("a0"))
    assert schedule(engine, pod("p", 1, vc=None), ["cpu", "a0"]).node_name == "a0"


def test_a_late_device_plugin_turns_a_cpu_node_into_a_gpu_node():
    engine = HivedEngine.from_nodes([a100("a0"), node("a1", 0, labels=A100)])
    assert "a1" not in engine.topology.nodes
    engine.apply_node(a100("a1"))  # the device plugin now advertises nvidia.com/gpu
    assert "a1" in engine.topology.nodes and quota(engine) == {"A100-8GPU-NODE": 2}


def test_a_joining_node_that_is_not_ready_takes_no_pods():
    engine = HivedEngine.from_nodes([a100("a0")])
    engine.apply_node(a100("a1", ready=False))
    assert "a1" in engine.topology.nodes
    assert schedule(engine, pod("p", 8, vc=None), ["a1"]) is None
    engine.apply_node(a100("a1"))
    assert schedule(engine, pod("p", 8, vc=None), ["a1"]).node_name == "a1"


def test_a_hand_written_topology_keeps_unknown_nodes_out():
    engine = HivedEngine.from_config(rack_cluster(racks=1, vcs={"a": [{"cellType": "V100-NODE", "count": 4}]}))
    engine.apply_node(a100("stranger"))
    assert "stranger" not in engine.topology.nodes and engine.membership is None
    assert any("stranger has 8 GPUs but is in no HiveD cell" in note for note in engine.allocator.anomalies)
    assert filter_offered(engine, pod("p", 1, "a"), ["stranger"]).unresolvable["stranger"] == "node stranger has no HiveD GPU cells"
    engine.delete_node("r0n0")  # a configured node that goes away is bad, never removed
    assert "r0n0" in engine.topology.nodes


def test_configured_vcs_on_discovered_cells_keep_their_quota():
    config = {"virtualClusters": {"a": [{"cellType": "A100-8GPU-NODE", "count": 1}]}}
    engine = HivedEngine.from_config(config, nodes=[a100("a0"), a100("a1")])
    engine.apply_node(a100("a2"))
    assert "a2" in engine.topology.nodes and quota(engine, "a") == {"A100-8GPU-NODE": 1}
    assert "not assigned to any virtual cluster" in engine.changes[-1]
    # Opportunistic pods use the new cells at once; a reconfiguration can hand them out.
    names = ["a0", "a1", "a2"]
    for i in range(3):
        assert schedule(engine, pod(f"o{i}", 8, "a", priority="opportunistic"), names) is not None
    engine.reconfigure({"virtualClusters": {"a": [{"cellType": "A100-8GPU-NODE", "count": 3}]}})
    assert_invariant(engine)


# ---------------------------------------------------------------------------- nodes leaving


def test_an_idle_deleted_node_leaves_the_cells():
    log: list[str] = []
    engine = HivedEngine.from_nodes([a100("a0"), a100("a1")], on_change=log.append)
    engine.delete_node("a1")
    assert "a1" not in engine.topology.nodes and quota(engine) == {"A100-8GPU-NODE": 1}
    assert log == ["cells removed (their nodes were deleted): a1 (A100-8GPU-NODE); virtual cluster 'default' now owns 1 A100-8GPU-NODE"]
    assert engine.inspect_cells(node="a1") == {"cells": []}
    assert filter_offered(engine, pod("p", 8, vc=None), ["a1"]).unresolvable["a1"] == "node a1 has no HiveD GPU cells"
    assert_invariant(engine)
    # The same node registering again (a reinstall) joins again.
    engine.apply_node(a100("a1"))
    assert "a1" in engine.topology.nodes and quota(engine) == {"A100-8GPU-NODE": 2}


def test_a_deleted_node_with_running_pods_stays_bad_until_they_finish():
    log: list[str] = []
    engine = HivedEngine.from_nodes([a100("a0"), a100("a1")], on_change=log.append)
    placed = schedule(engine, pod("p", 4, vc=None), ["a1"])
    assert placed is not None
    engine.apply_pod(placed)
    before = snapshot(engine)

    engine.delete_node("a1")

    assert "a1" in engine.topology.nodes and snapshot(engine)["gpus"] == before["gpus"]  # the pod keeps its GPUs
    assert "a1 was deleted while pods still hold GPUs" in log[-1]
    assert schedule(engine, pod("q", 4, vc=None), ["a1"]) is None  # no new placement there
    engine.delete_pod("p")
    assert "a1" not in engine.topology.nodes and quota(engine) == {"A100-8GPU-NODE": 1}
    assert log[-1].startswith("cells removed (their nodes were deleted): a1")
    assert_invariant(engine)


def test_a_deleted_node_recreated_before_its_pods_finish_stays():
    engine = HivedEngine.from_nodes([a100("a0"), a100("a1")])
    placed = schedule(engine, pod("p", 8, vc=None), ["a1"])
    engine.apply_pod(placed)
    engine.delete_node("a1")
    engine.apply_node(a100("a1"))  # the Node object was recreated (same name)
    engine.delete_pod("p")
    assert "a1" in engine.topology.nodes and quota(engine) == {"A100-8GPU-NODE": 2}
    assert schedule(engine, pod("q", 8, vc=None), ["a1"]).node_name == "a1"


# ---------------------------------------------------------------------------- racks


def rack_nodes(rack: str, count: int, first: int = 0) -> list[NodeInfo]:
    return [a100(f"{rack}-n{i}", rack) for i in range(first, first + count)]


def test_a_rack_forms_when_its_last_node_joins():
    nodes = rack_nodes("r0", 4)
    engine = HivedEngine.from_nodes(nodes, rack_label=RACK)
    assert quota(engine) == {"A100-8GPU-RACK": 1}
    new = rack_nodes("r1", 4)
    for n in new[:3]:
        engine.apply_node(n)
    # Three of four: a restart would leave them standalone too.
    assert quota(engine) == {"A100-8GPU-RACK": 1, "A100-8GPU-NODE": 3}
    engine.apply_node(new[3])
    assert quota(engine) == {"A100-8GPU-RACK": 2}
    assert "cells regrouped as a restart would discover them" in engine.changes[-1] and "A100-8GPU-RACK@r1" in engine.changes[-1]
    assert shapes(engine) == layout_shapes(nodes + new, RACK)
    assert_invariant(engine)


def test_a_rack_waits_for_its_busy_nodes_and_forms_once_they_are_idle():
    nodes = rack_nodes("r0", 4)
    engine = HivedEngine.from_nodes(nodes, rack_label=RACK)
    new = rack_nodes("r1", 4)
    for n in new[:3]:
        engine.apply_node(n)
    busy = schedule(engine, pod("p", 2, vc=None), [new[0].name])
    engine.apply_pod(busy)
    engine.apply_node(new[3])
    # The last node is usable at once, standalone; the rack waits for the pod.
    assert "as a standalone node; a restart would place it otherwise" in engine.changes[-1]
    assert quota(engine) == {"A100-8GPU-RACK": 1, "A100-8GPU-NODE": 4}
    assert schedule(engine, pod("q", 8, vc=None), [new[3].name]) is not None
    engine.delete_pod("q")
    assert quota(engine) == {"A100-8GPU-RACK": 1, "A100-8GPU-NODE": 4}  # p still runs
    engine.delete_pod("p")
    assert quota(engine) == {"A100-8GPU-RACK": 2}
    assert shapes(engine) == layout_shapes(nodes + new, RACK)
    assert_invariant(engine)


def test_a_rack_missing_a_node_dissolves_once_idle():
    nodes = rack_nodes("r0", 4) + rack_nodes("r1", 4)
    engine = HivedEngine.from_nodes(nodes, rack_label=RACK)
    p = schedule(engine, pod("p", 8, vc=None), ["r1-n2"])
    engine.apply_pod(p)
    engine.delete_node("r1-n0")
    assert "r1-n0" in engine.topology.nodes  # its rack still runs p
    assert schedule(engine, pod("q", 8, vc=None), ["r1-n0"]) is None
    engine.delete_pod("p")
    remaining = [n for n in nodes if n.name != "r1-n0"]
    assert shapes(engine) == layout_shapes(remaining, RACK)
    assert quota(engine) == {"A100-8GPU-RACK": 1, "A100-8GPU-NODE": 3}
    assert_invariant(engine)


def test_racks_of_a_new_size_wait_for_a_restart():
    # Two racks of 2, then three racks of 3 join: 3 becomes the most common size, which would
    # change the running A100-RACK type. The running chain keeps its shape; the new nodes
    # join standalone and stay usable.
    nodes = rack_nodes("r0", 2) + rack_nodes("r1", 2)
    engine = HivedEngine.from_nodes(nodes, rack_label=RACK)
    for rack in ("r2", "r3", "r4"):
        for n in rack_nodes(rack, 3):
            engine.apply_node(n)
    assert engine.topology.config.cell_types["A100-8GPU-RACK"].child_count == 2
    assert sum(1 for c in engine.topology.top_cells if c.cell_type == "A100-8GPU-NODE") == 9
    assert_invariant(engine)
    assert schedule(engine, pod("p", 8, vc=None), ["r4-n2"]) is not None


# ---------------------------------------------------------------------------- restart


def test_restart_after_growth_rebuilds_the_same_allocations():
    engine = HivedEngine.from_nodes(rack_nodes("r0", 4) + [a100("solo")], rack_label=RACK)
    new = rack_nodes("r1", 4) + [a100("solo2"), node("t0", 4, labels=T4)]
    for n in new:
        engine.apply_node(n)
    everything = rack_nodes("r0", 4) + [a100("solo")] + new
    names = [n.name for n in everything]
    bound: list[PodInfo] = []
    for i, gpus in enumerate([8, 8, 4, 2, 1, 1, 8]):
        placed = schedule(engine, pod(f"p{i}", gpus, vc=None), names)
        assert placed is not None
        bound.append(placed)
    for k in range(2):
        placed = schedule(engine, pod(f"g-{k}", 8, vc=None, gang=("g", 2)), names)
        assert placed is not None
        bound.append(placed)
    assert {p.node_name for p in bound} & {n.name for n in new}  # the new nodes are used
    expected = snapshot(engine)

    restarted = HivedEngine.from_nodes(everything, rack_label=RACK)
    assert shapes(restarted) == shapes(engine) and quota(restarted) == quota(engine)
    for p in reversed(bound):
        restarted.apply_pod(p)
    assert snapshot(restarted) == expected
    assert not restarted.allocator.anomalies


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.integers(5, 60))
def test_random_joins_and_deletions_keep_the_guarantee_and_survive_a_restart(seed: int, steps: int) -> None:
    rng = random.Random(seed)
    nodes = {n.name: n for n in rack_nodes("r0", 2) + [a100("s0")]}
    engine = HivedEngine.from_nodes(list(nodes.values()), rack_label=RACK)
    pods: dict[str, PodInfo] = {}
    for counter in range(1, steps + 1):
        action = rng.random()
        if action < 0.25:
            rack = rng.choice(["r0", "r1", "r2", None])
            kind = rng.random()
            new = node(f"n{counter}", 4, labels=T4) if kind < 0.2 else a100(f"n{counter}", rack)
            nodes[new.name] = new
            engine.apply_node(new)
        elif action < 0.4 and nodes:
            gone = rng.choice(sorted(nodes))
            del nodes[gone]
            engine.delete_node(gone)
        elif action < 0.6 and pods:
            uid = rng.choice(sorted(pods))
            engine.delete_pod(uid)
            del pods[uid]
        else:
            p = pod(f"p{counter}", rng.choice([1, 2, 4, 8]), vc=None, priority=rng.choice([None, None, "opportunistic"]))
            placed = schedule(engine, p, sorted(nodes))
            if placed is None:
                engine.delete_pod(p.uid)
            else:
                engine.apply_pod(placed)
                pods[placed.uid] = placed
        assert_invariant(engine)
        assert set(engine.topology.nodes) >= set(nodes)  # every live GPU node is offered
        for uid, p in pods.items():
            assert engine.allocator.by_pod[uid].node == p.node_name
    # Once the deleted nodes' pods are gone, the cells are what a restart discovers.
    for uid in sorted(pods):
        if pods[uid].node_name not in nodes:
            engine.delete_pod(uid)
            del pods[uid]
    expected = snapshot(engine)
    restarted = HivedEngine.from_nodes(list(nodes.values()), rack_label=RACK)
    for p in pods.values():
        restarted.apply_pod(p)
    if shapes(engine) == layout_shapes(list(nodes.values()), RACK):
        assert shapes(restarted) == shapes(engine) and quota(restarted) == quota(engine)
        assert snapshot(restarted) == expected
        assert not restarted.allocator.anomalies
    else:
        # A change still waits for busy cells (e.g. a rack that cannot form under running
        # pods): each pod is still recovered onto exactly its node and GPUs.
        for uid in pods:
            mine, theirs = restarted.allocator.by_pod[uid], engine.allocator.by_pod[uid]
            assert (mine.node, mine.gpu_indices) == (theirs.node, theirs.gpu_indices)


# ---------------------------------------------------------------------------- implausible nodes


def test_a_node_reporting_a_billion_gpus_is_left_out_of_discovered_cells_and_said_so():
    # Building its cells (an object a GPU) would take the extender's memory: it is refused at
    # once, at startup as at runtime, and the other nodes' cells are untouched.
    huge = node("huge", 10**9, labels=A100)
    layout = discover_layout([a100("a0"), huge])
    assert [c.cell_id for c in layout.cells] == ["a0"]
    assert layout.left_out == (
        "node huge: status.allocatable reports 1,000,000,000 GPUs, more than the 1,024 a node may have; "
        "it is left out of the cells (check its device plugin)",
    )

    log: list[str] = []
    engine = HivedEngine.from_nodes([a100("a0"), huge], on_change=log.append)
    engine.apply_node(huge)
    engine.apply_node(huge)  # status updates every few seconds: said once
    assert set(engine.topology.nodes) == {"a0"} and quota(engine) == {"A100-8GPU-NODE": 1}
    assert [line for line in log if "huge" in line] == [layout.left_out[0]]
    assert layout.left_out[0] in engine.allocator.anomalies
    assert "has no HiveD GPU cells" in filter_offered(engine, pod("p", 8, vc=None), ["huge"]).unresolvable["huge"]

    # Once its device plugin reports a count a node can have, it joins like any new node.
    engine.apply_node(node("huge", 8, labels=A100))
    assert "huge" in engine.topology.nodes and quota(engine) == {"A100-8GPU-NODE": 2}


def test_nodes_join_discovered_cells_only_while_the_cells_stay_within_the_topology_bound():
    from scheduler.cells.config import MAX_GPUS
    from scheduler.cells.discovery import MAX_NODE_GPUS, gpu_count_problem

    nodes = [node(f"n{i:03d}", MAX_NODE_GPUS, labels=A100) for i in range(MAX_GPUS // MAX_NODE_GPUS + 2)]
    layout = discover_layout(nodes)  # the layout only: no cell is built
    assert len(layout.cells) == MAX_GPUS // MAX_NODE_GPUS
    assert [line.split(":")[0] for line in layout.left_out] == ["node n256", "node n257"]
    assert "would take the discovered cells past 262,144 GPUs" in layout.left_out[0]
    assert gpu_count_problem(node("x", 8), discovered_gpus=MAX_GPUS - 8) is None
    assert gpu_count_problem(node("x", 8), discovered_gpus=MAX_GPUS - 7) is not None
