"""The engine names the cause of each bad node in its VC views and logs, once per VC and node,
that a VC's cells there cannot be bound (scheduler/cells/node_troubles.py wired into
HivedEngine.apply_node, delete_node and the inspect views)."""

from __future__ import annotations

import logging

import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.config import parse_cells_config
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

NODES = node_names(1, 4)


def engine_with_vc_a_on_one_node() -> tuple[HivedEngine, str]:
    engine = HivedEngine.from_config(parse_cells_config(rack_cluster(1, 4, vcs={
        "vc-a": [{"cellType": "V100-NODE", "count": 1}], "vc-b": [{"cellType": "V100-NODE", "count": 1}]})))
    for name in NODES:
        engine.apply_node(node(name))
    placed = schedule(engine, pod("a-0", 4, vc="vc-a"), NODES)
    assert placed is not None
    engine.apply_pod(placed)
    return engine, str(placed.node_name)


def test_a_deleted_node_is_named_in_the_vc_views_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    engine, used = engine_with_vc_a_on_one_node()
    caplog.set_level(logging.WARNING, logger="scheduler.cells.node_troubles")
    engine.apply_node(node(used, unschedulable=True))
    engine.apply_node(node(used, unschedulable=True))
    engine.delete_node(used)
    told = [r.getMessage() for r in caplog.records if r.name == "scheduler.cells.node_troubles"]
    assert told == [f"virtual cluster vc-a's cells on node {used} cannot be bound: the node is cordoned"]
    view = engine.inspect_virtual_cluster("vc-a")
    assert view is not None and view["vcCells"][0]["badNodes"] == {used: "deleted"}
    assert [e["message"] for e in view["cannotBind"]] == [
        f"virtual cluster vc-a's cells on node {used} cannot be bound: the node was deleted"]
    engine.apply_node(node(used))  # it came back
    assert engine.inspect_virtual_cluster("vc-a")["cannotBind"] == []  # type: ignore[index]
