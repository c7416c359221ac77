"""Bad cells (NotReady / cordoned nodes) and VC reconfiguration that never evicts."""

from __future__ import annotations

import json

import pytest

from scheduler.cells import HivedEngine
from scheduler.errors import ConfigError
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule, snapshot
from scheduler.kube.names import filter_offered

NODES = node_names()


def test_not_ready_node_is_skipped_but_its_pods_stay():
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 8}]}))
    running = schedule(engine, pod("p", 4, "a"), NODES)
    before = snapshot(engine)
    engine.apply_node(node(running.node_name, ready=False))
    # The pod keeps its GPUs: nothing released, nothing moved.
    assert snapshot(engine)["gpus"] == before["gpus"]
    decision = filter_offered(engine, pod("q", 4, "a"), NODES)
    assert decision.feasible and decision.feasible[0] != running.node_name
    engine.apply_node(node(running.node_name))
    assert filter_offered(engine, pod("q", 4, "a"), NODES).feasible == [running.node_name]  # packs again


def test_cordoned_and_shrunk_nodes_are_bad():
    engine = HivedEngine.from_config(rack_cluster(racks=1, vcs={"a": [{"cellType": "V100-NODE", "count": 4}]}))
    engine.apply_node(node("r0n0", unschedulable=True))
    engine.apply_node(node("r0n1", gpus=7))  # a GPU fell off the bus
    engine.apply_node(node("r0n2", ready=False))
    assert filter_offered(engine, pod("p", 1, "a"), node_names(racks=1)).feasible == ["r0n3"]
    engine.apply_node(node("r0n3", ready=False))
    decision = filter_offered(engine, pod("p", 1, "a"), node_names(racks=1))
    assert not decision.feasible
    assert "no free cell of type 'V100-NODE'" in decision.unresolvable["r0n0"]
    metrics = engine.metrics()
    node_row = next(r for r in metrics["physical"] if r["cellType"] == "V100-NODE")
    assert node_row["bad"] == 4


def test_bad_cells_never_break_other_vcs_guarantee():
    # a: 1 rack, b: 4 nodes. With one node of the spare rack bad, b can still get 3 nodes, and
    # a's rack must remain bindable: the safe-split check refuses to break the other rack.
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 4}]}))
    for i in range(3):
        assert schedule(engine, pod(f"b{i}", 8, "b"), NODES) is not None
    used_rack = {p[:2] for p in engine.inspect_virtual_cluster("b")["vcCells"][0]["nodes"]}
    spare = next(n for n in NODES if n[:2] in used_rack and all(n not in c["nodes"] for c in engine.inspect_virtual_cluster("b")["vcCells"]))
    engine.apply_node(node(spare, ready=False))
    decision = filter_offered(engine, pod("b3", 8, "b"), NODES)
    assert not decision.feasible  # taking a node of the other rack would break a's rack
    assert schedule(engine, pod("a0", 8, "a"), NODES) is not None


def test_delete_node_makes_it_bad():
    engine = HivedEngine.from_config(rack_cluster(racks=1, vcs={"a": [{"cellType": "V100-NODE", "count": 4}]}))
    engine.apply_node(node("r0n0"))
    engine.delete_node("r0n0")
    assert "r0n0" not in filter_offered(engine, pod("p", 8, "a"), node_names(racks=1)).feasible


def vcs(a_nodes: int, b_nodes: int) -> dict:
    return {"virtualClusters": {"a": [{"cellType": "V100-NODE", "count": a_nodes}], "b": [{"cellType": "V100-NODE", "count": b_nodes}]}}


def test_shrink_takes_effect_as_pods_finish():
    engine = HivedEngine.from_config(rack_cluster(**{"vcs": vcs(4, 4)["virtualClusters"]}))
    running = [schedule(engine, pod(f"a{i}", 8, "a"), NODES) for i in range(3)]
    before = snapshot(engine)
    assert "a (4 V100-NODE)" in engine.summary
    engine.reconfigure(vcs(1, 7))
    assert "a (1 V100-NODE), b (7 V100-NODE)" in engine.summary  # /v1/inspect/engine says so
    assert snapshot(engine)["gpus"] == before["gpus"]  # nobody was evicted
    assert "quota exhausted" in filter_offered(engine, pod("new", 8, "a"), NODES).unresolvable["r0n0"]
    summary = engine.inspect_virtual_cluster("a")["cells"][0]
    assert summary == {"cellType": "V100-NODE", "gpusPerCell": 8, "quota": 1, "bound": 3, "draining": 2, "pinned": 0}
    # b may grow into what a frees, as a's pods finish.
    for i in range(5):
        assert schedule(engine, pod(f"b{i}", 8, "b"), NODES) is not None
    assert not filter_offered(engine, pod("b5", 8, "b"), NODES).feasible
    engine.delete_pod(running[0].uid)
    assert schedule(engine, pod("b5", 8, "b"), NODES) is not None
    engine.delete_pod(running[1].uid)
    assert not filter_offered(engine, pod("new", 8, "a"), NODES).feasible  # a still holds 1 = its quota
    engine.delete_pod(running[2].uid)
    assert schedule(engine, pod("new", 8, "a"), NODES) is not None


def test_draining_cells_take_no_new_pods():
    engine = HivedEngine.from_config(rack_cluster(vcs=vcs(2, 6)["virtualClusters"]))
    first = schedule(engine, pod("x", 4, "a"), NODES)
    schedule(engine, pod("y", 8, "a"), NODES)
    third = schedule(engine, pod("z", 2, "a"), NODES)  # packed next to x
    assert third.node_name == first.node_name
    engine.reconfigure(vcs(1, 6))
    # The fuller cell (y's, 8 GPUs) is kept; x/z's cell drains and takes nothing new.
    assert not filter_offered(engine, pod("w", 1, "a"), NODES).feasible
    engine.delete_pod("y")
    engine.delete_pod("x")
    engine.delete_pod("z")
    assert schedule(engine, pod("w", 8, "a"), NODES) is not None


def test_reconfigure_checks_feasibility_and_topology():
    engine = HivedEngine.from_config(rack_cluster(vcs=vcs(4, 4)["virtualClusters"]))
    with pytest.raises(ConfigError, match="virtualClusters: over-committed at level 'V100-NODE'"):
        engine.reconfigure(vcs(5, 4))
    changed = rack_cluster(racks=3, vcs=vcs(4, 4)["virtualClusters"])
    with pytest.raises(ConfigError, match="topology: changes need a restart"):
        engine.reconfigure(changed)


def test_removed_vc_keeps_running_pods():
    engine = HivedEngine.from_config(rack_cluster(vcs=vcs(4, 4)["virtualClusters"]))
    p = schedule(engine, pod("a0", 8, "a"), NODES)
    engine.reconfigure({"virtualClusters": {"b": [{"cellType": "V100-NODE", "count": 4}]}})
    assert json.loads(p.annotations["cellfit.io/bind-info"])["vc"] == "a"
    assert engine.inspect_virtual_cluster("a")["configured"] is False
    assert "unknown virtual cluster 'a' (known: b)" in filter_offered(engine, pod("a1", 1, "a"), NODES).unresolvable["r0n0"]
    engine.delete_pod("a0")
    assert engine.inspect_virtual_cluster("a") is None


def test_busy_pinned_cell_cannot_change_hands():
    config = rack_cluster(vcs={"a": {"pinnedCells": ["p"]}, "b": [{"cellType": "V100-RACK", "count": 1}, {"cellType": "V100-NODE", "count": 3}]})
    config["topology"]["physicalCells"][0]["cellChildren"][0]["pinnedCellId"] = "p"
    engine = HivedEngine.from_config(config)
    placed = schedule(engine, pod("a0", 2, "a"), NODES)
    assert placed.node_name == "r0n0"  # a owns only its pinned node
    before = snapshot(engine)
    moved = {"virtualClusters": {"a": [], "b": {"cells": config["virtualClusters"]["b"], "pinnedCells": ["p"]}}}
    with pytest.raises(ConfigError, match="pinned cell 'p' still runs pods of virtual cluster 'a'"):
        engine.reconfigure(moved)
    assert snapshot(engine) == before
    engine.delete_pod("a0")
    engine.reconfigure(moved)
    assert schedule(engine, pod("b0", 8, "b", cell_type="V100-NODE"), ["r0n0"]).node_name == "r0n0"
