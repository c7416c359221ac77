"""A VC whose bound cell's node is cordoned: where its next guaranteed pod goes.

Seen in a live session: the new pod of the VC went to a healthy free cell instead of the VC's
cell on the cordoned node. That is HiveD's dynamic binding (hived.txt §3: a VC's logical cells
are bound to physical cells as they are allocated, and the cluster may spare cells "to handle
hardware failure"; §3.1: an allocation takes any free physical cell of its level, within the
VC's quota r_{t,k}), not a defect, as long as the quota holds: a new cell is bound only while
the VC has quota not bound (a_{t,k} <= r_{t,k}, Theorem 1's legality), and a cell that still
holds a pod on the cordoned node stays bound (its pods are not moved). These pin that."""

from __future__ import annotations

from typing import Any

import msgspec

from scheduler.cells import HivedEngine
from scheduler.cells.config import parse_cells_config
from scheduler.kube.names import filter_offered
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

NODES = node_names(1, 4)


def engine_with_a_cordoned_bound_cell(quota: int) -> tuple[HivedEngine, Any]:
    """VC a's first pod (4 GPUs) binds one of its ``quota`` node cells; that node is then cordoned."""
    engine = HivedEngine.from_config(
        parse_cells_config(rack_cluster(1, 4, vcs={"a": [{"cellType": "V100-NODE", "count": quota}], "b": [{"cellType": "V100-NODE", "count": 4 - quota}]}))
    )
    for name in NODES:
        engine.apply_node(node(name))
    placed = schedule(engine, pod("a-0", 4, vc="a"), NODES)
    assert placed is not None
    engine.apply_pod(placed)
    engine.apply_node(node(str(placed.node_name), unschedulable=True))
    return engine, placed


def bound(engine: HivedEngine) -> dict[str, list[str]]:
    view = engine.inspect_virtual_cluster("a")
    assert view is not None
    return {cell["id"]: cell["pods"] for cell in view["vcCells"]}


def test_with_quota_not_bound_the_next_pod_binds_a_healthy_cell_within_the_quota() -> None:
    engine, first = engine_with_a_cordoned_bound_cell(2)
    placed = schedule(engine, pod("a-1", 4, vc="a"), NODES)
    assert placed is not None and placed.node_name != first.node_name
    engine.apply_pod(placed)
    assert bound(engine) == {first.node_name: ["ns/a-0"], placed.node_name: ["ns/a-1"]}  # 2 of 2: no more


def test_with_its_quota_bound_on_the_cordoned_node_the_next_pod_waits_for_it() -> None:
    engine, first = engine_with_a_cordoned_bound_cell(1)
    decision = filter_offered(engine, pod("a-1", 4, vc="a"), NODES)
    assert decision.feasible == []
    assert all("quota exhausted" in reason for reason in decision.unresolvable.values()), decision
    assert bound(engine) == {first.node_name: ["ns/a-0"]}  # no second cell bound over the quota


def test_once_the_cordoned_cell_empties_it_is_given_back_and_a_healthy_one_bound() -> None:
    engine, first = engine_with_a_cordoned_bound_cell(1)
    engine.apply_pod(msgspec.structs.replace(first, phase="Succeeded"))
    assert bound(engine) == {}
    placed = schedule(engine, pod("a-1", 4, vc="a"), NODES)
    assert placed is not None and placed.node_name != first.node_name
