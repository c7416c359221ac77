"""Inspect views and metrics: plain JSON-serialisable dicts with the numbers operators need."""

from __future__ import annotations

import json

from scheduler.cells import HivedEngine
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

NODES = node_names()


def make() -> HivedEngine:
    engine = HivedEngine.from_config(
        rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 2}, {"cellType": "V100-SWITCH", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]})
    )
    schedule(engine, pod("a1", 2, "a"), NODES)
    schedule(engine, pod("a8", 8, "a"), NODES)
    schedule(engine, pod("o1", 4, "b", priority="opportunistic"), NODES)
    return engine


def test_virtual_clusters_view():
    view = make().inspect_virtual_clusters()
    json.dumps(view)
    by_name = {vc["name"]: vc for vc in view["virtualClusters"]}
    a = by_name["a"]
    assert a["configured"] is True
    assert {c["cellType"]: (c["quota"], c["bound"]) for c in a["cells"]} == {"V100-NODE": (2, 1), "V100-SWITCH": (1, 1)}
    assert a["pods"] == {"guaranteed": 2, "opportunistic": 0}
    assert a["gpus"] == {"guaranteed": 10, "opportunistic": 0}
    assert by_name["b"]["pods"] == {"guaranteed": 0, "opportunistic": 1}


def test_virtual_cluster_detail():
    engine = make()
    detail = engine.inspect_virtual_cluster("a")
    json.dumps(detail)
    cells = {c["cellType"]: c for c in detail["vcCells"]}
    assert cells["V100-NODE"]["pods"] == ["ns/a8"] and cells["V100-NODE"]["state"] == "bound"
    assert cells["V100-SWITCH"]["gpus"]["guaranteed"] == 2
    placements = {p["pod"]: p for p in detail["placements"]}
    assert placements["ns/a1"]["gpuIndices"] == [0, 1] and placements["ns/a1"]["cellType"] == "V100-SWITCH"
    assert engine.inspect_virtual_cluster("nope") is None


def test_cells_tree():
    engine = make()
    tree = engine.inspect_cells()
    json.dumps(tree)
    assert [c["cellType"] for c in tree["cells"]] == ["V100-RACK", "V100-RACK"]
    nodes = [n for rack in tree["cells"] for n in rack["children"]]
    a8_node = engine.allocator.by_pod["a8"].node
    entry = next(n for n in nodes if n["id"] == a8_node)
    assert entry["state"] == "bound" and entry["vc"] == "a" and entry["gpus"]["guaranteed"] == 8
    leaves = [leaf for socket in entry["children"] for switch in socket["children"] for leaf in switch["children"]]
    assert all(leaf["priority"] == "guaranteed" and leaf["pods"] == ["ns/a8"] for leaf in leaves)
    one = engine.inspect_cells(node="r1n3")
    assert len(one["cells"]) == 1 and one["cells"][0]["id"] == "r1n3"
    assert engine.inspect_cells(node="nope") == {"cells": []}


def test_metrics():
    engine = make()
    engine.apply_node(node("r1n3", ready=False))
    metrics = engine.metrics()
    json.dumps(metrics)
    rows = {(r["vc"], r["cellType"]): r for r in metrics["virtualClusters"]}
    assert rows[("a", "V100-NODE")] == {"vc": "a", "cellType": "V100-NODE", "used": 1, "free": 1, "opportunistic": 0, "bad": 0}
    assert rows[("b", "V100-RACK")]["free"] == 1
    physical = {r["cellType"]: r for r in metrics["physical"]}
    assert physical["V100-NODE"]["bad"] == 1
    assert physical["V100-NODE"]["used"] == 1
    assert physical["V100-SWITCH"]["used"] == 1
    # Nodes that cannot take a whole-node request: a1's node, a8's node, o1's node, the bad one.
    assert metrics["fragmentation"]["V100-NODE"] == 4 / 8
    assert metrics["fragmentationTotal"] == 4 / 8


def test_vc_gauges_count_opportunistic_and_bad_cells():
    """A VC's cell counts as bad while its node is NotReady (0 until then), and each cell once
    (user25 #9): its used cells whose idle GPUs other tenants' opportunistic pods use stay used,
    not opportunistic too."""
    engine = make()
    partial = schedule(engine, pod("a2", 2, "a", cell_type="V100-NODE"), NODES)  # binds a's 2nd node cell, 6 GPUs idle
    assert partial is not None
    rows = {(r["vc"], r["cellType"]): r for r in engine.metrics()["virtualClusters"]}
    assert rows[("a", "V100-NODE")] == {"vc": "a", "cellType": "V100-NODE", "used": 2, "free": 0, "opportunistic": 0, "bad": 0}
    filled = 0
    while schedule(engine, pod(f"opp-{filled}", 1, "b", priority="opportunistic"), NODES) is not None:
        filled += 1
    assert filled == 64 - 2 - 8 - 2 - 4  # every idle GPU, a's bound cell's included
    engine.apply_node(node(engine.allocator.by_pod["a1"].node, ready=False))
    rows = {(r["vc"], r["cellType"]): r for r in engine.metrics()["virtualClusters"]}
    assert rows[("a", "V100-NODE")] == {"vc": "a", "cellType": "V100-NODE", "used": 2, "free": 0, "opportunistic": 0, "bad": 0}
    assert rows[("a", "V100-SWITCH")]["bad"] == 1 and rows[("a", "V100-SWITCH")]["used"] == 0
    assert rows[("b", "V100-RACK")] == {"vc": "b", "cellType": "V100-RACK", "used": 0, "free": 1, "opportunistic": 0, "bad": 0}
