"""Topology discovery from Nodes, for clusters without a hand-written topology."""

from __future__ import annotations

import random

from scheduler.cells import HivedEngine, check_config, describe_topology, discover_topology
from tests.cells.helpers import node, pod, schedule
from scheduler.kube.names import filter_offered

A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
T4 = {"nvidia.com/gpu.product": "Tesla T4"}


def cluster() -> list:
    nodes = []
    for rack in range(3):
        for i in range(4 if rack < 2 else 2):
            nodes.append(node(f"a{rack}{i}", 8, labels={**A100, "topology.kubernetes.io/rack": f"rack{rack}"}))
    nodes.append(node("a-loose", 8, labels=A100))
    nodes.append(node("t0", 4, labels=T4))
    nodes.append(node("t1", 1, labels=T4))
    nodes.append(node("cpu0", 0))
    nodes.append(node("mystery", 2))
    return nodes


def test_groups_by_product_and_count_with_racks():
    topology = discover_topology(cluster(), rack_label="topology.kubernetes.io/rack")
    types = topology.cell_types
    assert types["NVIDIA-A100-SXM4-80GB-8GPU-NODE"].child_type == "NVIDIA-A100-SXM4-80GB-8GPU"
    assert types["NVIDIA-A100-SXM4-80GB-8GPU-NODE"].child_count == 8 and types["NVIDIA-A100-SXM4-80GB-8GPU-NODE"].is_node_level
    assert types["NVIDIA-A100-SXM4-80GB-8GPU-RACK"].child_count == 4
    # One product in two node sizes: two hierarchies, named by size.
    assert {"Tesla-T4-4GPU-NODE", "Tesla-T4-1GPU-NODE", "gpu-2GPU-NODE"} <= set(types)
    tops = [(c.cell_type, c.cell_id, c.node_name) for c in topology.physical_cells]
    assert ("NVIDIA-A100-SXM4-80GB-8GPU-RACK", "NVIDIA-A100-SXM4-80GB-8GPU-RACK@rack0", None) in tops
    # The 2-node rack does not match the common size: its nodes stand alone, like unlabelled ones.
    standalone = {n for t, _, n in tops if t == "NVIDIA-A100-SXM4-80GB-8GPU-NODE"}
    assert standalone == {"a20", "a21", "a-loose"}
    assert all(n != "cpu0" for _, _, n in tops)


def test_without_rack_label_every_node_stands_alone():
    topology = discover_topology(cluster(), rack_label=None)
    assert not any(name.endswith("-RACK") for name in topology.cell_types)
    assert len(topology.physical_cells) == 14


def test_deterministic_whatever_the_order():
    nodes = cluster()
    shuffled = list(nodes)
    random.Random(7).shuffle(shuffled)
    assert discover_topology(nodes, rack_label="topology.kubernetes.io/rack") == discover_topology(
        shuffled, rack_label="topology.kubernetes.io/rack"
    )


def test_summary_says_what_was_found():
    nodes = cluster()
    checked = check_config({}, nodes=nodes, rack_label="topology.kubernetes.io/rack")
    assert "NVIDIA-A100-SXM4-80GB-8GPU-NODE (8 GPUs each): 11 nodes, 2 NVIDIA-A100-SXM4-80GB-8GPU-RACK of 4 nodes, 3 standalone" in checked.summary
    assert "1 node without GPUs is not part of any cell" in checked.summary
    assert "virtual clusters: default" in checked.summary
    assert describe_topology(discover_topology([node("cpu", 0)])).startswith("no GPU nodes")


def test_engine_from_nodes_uses_a_default_vc():
    nodes = cluster()
    engine = HivedEngine.from_nodes(nodes, rack_label="topology.kubernetes.io/rack")
    names = [n.name for n in nodes]
    placed = schedule(engine, pod("p", 8, vc=None), names)
    assert placed is not None
    assert schedule(engine, pod("t", 4, vc=None), ["t0", "t1"]).node_name == "t0"  # a nodeSelector on the product
    assert "unknown virtual cluster 'x'" in filter_offered(engine, pod("x", 1, vc="x"), names).unresolvable["t0"]
    assert filter_offered(engine, pod("cpu", 0, vc=None), names).feasible == names


def test_configured_vcs_on_discovered_topology_are_checked():
    nodes = cluster()
    ok = {"virtualClusters": {"a": [{"cellType": "NVIDIA-A100-SXM4-80GB-8GPU-RACK", "count": 2}], "t": [{"cellType": "Tesla-T4-4GPU-NODE", "count": 1}]}}
    check_config(ok, nodes=nodes, rack_label="topology.kubernetes.io/rack")
    # A VC naming a cell type the cluster has not is left unserved (its pods told why), not the
    # whole scheduler: tests/cells/test_discovered_names.py.
    bad = {"virtualClusters": {"a": [{"cellType": "A100-NODE", "count": 1}]}}
    assert check_config(bad, nodes=nodes).unserved["a"].startswith("virtualClusters.a[0].cellType: unknown cell type 'A100-NODE'")


def test_no_gpu_nodes_at_all():
    engine = HivedEngine.from_nodes([node("cpu", 0)])
    decision = filter_offered(engine, pod("p", 1, vc=None), ["cpu"])
    assert decision.unresolvable["cpu"] == "node cpu has no HiveD GPU cells"


def test_reconfigure_vcs_on_a_discovered_topology():
    nodes = cluster()
    engine = HivedEngine.from_nodes(nodes, rack_label="topology.kubernetes.io/rack")
    engine.reconfigure({"virtualClusters": {"a": [{"cellType": "NVIDIA-A100-SXM4-80GB-8GPU-RACK", "count": 2}]}})
    names = [n.name for n in nodes]
    assert schedule(engine, pod("p", 8, vc="a"), names).node_name.startswith("a")
    assert "no cellfit.io/virtual-cluster label" in filter_offered(engine, pod("q", 1, vc=None), names).unresolvable["t0"]
