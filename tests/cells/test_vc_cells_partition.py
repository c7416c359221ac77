"""user25 #9: ``cellfit_vc_cells`` counts each of a VC's cells in one state. With vc-b's only
cell (quota 1) used on a node then cordoned, it read state="used" 1 and state="bad" 1, two
cells of a quota of one. Now the states are a partition, the first that holds: bad, used,
opportunistic, free; they add up to the quota (and pinned cells). Driven through the real
HivedEngine, its counts kept as cells change checked against a walk over the cells."""

from __future__ import annotations

from typing import Any

from scheduler.cells import HivedEngine
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule
from tests.cells.metrics_walk import metrics_by_walk

NODES = node_names(1, 4)


def row(engine: HivedEngine, vc: str) -> dict[str, Any]:
    figures = engine.metrics()
    assert figures == metrics_by_walk(engine.allocator)
    (found,) = [r for r in figures["virtualClusters"] if r["vc"] == vc]
    return dict(found)


def test_a_used_cell_on_a_cordoned_node_is_counted_once_as_bad() -> None:
    engine = HivedEngine.from_config(rack_cluster(1, 4, vcs={"vc-a": [{"cellType": "V100-NODE", "count": 2}],
                                                             "vc-b": [{"cellType": "V100-NODE", "count": 1}],
                                                             "vc-c": [{"cellType": "V100-NODE", "count": 1}]}))
    for name in NODES:
        engine.apply_node(node(name))
    placed = schedule(engine, pod("b-guar", 8, "vc-b"), NODES)
    assert placed is not None
    engine.apply_pod(placed)
    assert {k: v for k, v in row(engine, "vc-b").items() if k not in ("vc", "cellType")} == {
        "used": 1, "free": 0, "opportunistic": 0, "bad": 0}
    engine.apply_node(node(str(placed.node_name), unschedulable=True))
    counts = {k: v for k, v in row(engine, "vc-b").items() if k not in ("vc", "cellType")}
    assert counts == {"used": 0, "free": 0, "opportunistic": 0, "bad": 1}
    assert sum(counts.values()) == 1  # the quota
    engine.apply_node(node(str(placed.node_name)))  # uncordoned: used again
    assert row(engine, "vc-b")["used"] == 1 and row(engine, "vc-b")["bad"] == 0


def test_a_cell_with_guaranteed_and_opportunistic_pods_is_counted_once_as_used() -> None:
    engine = HivedEngine.from_config(rack_cluster(1, 4, vcs={"vc-a": [{"cellType": "V100-NODE", "count": 2}],
                                                             "vc-b": [{"cellType": "V100-NODE", "count": 1}]}))
    held = schedule(engine, pod("a-1", 1, "vc-a"), NODES)
    assert held is not None
    engine.apply_pod(held)
    for index in range(3):
        placed = schedule(engine, pod(f"b-opp-{index}", 8, "vc-b", priority="opportunistic"), NODES)
        assert placed is not None
        engine.apply_pod(placed)
    on_a = schedule(engine, pod("b-opp-on-a", 4, "vc-b", priority="opportunistic"), NODES)
    assert on_a is not None and on_a.node_name == held.node_name
    engine.apply_pod(on_a)
    counts = {k: v for k, v in row(engine, "vc-a").items() if k not in ("vc", "cellType")}
    assert counts == {"used": 1, "free": 1, "opportunistic": 0, "bad": 0}
