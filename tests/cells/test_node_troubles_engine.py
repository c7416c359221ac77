"""The engine names the cause of each bad node in its VC views and logs, once per VC and node,
that a VC's cells there cannot be bound (scheduler/cells/node_troubles.py wired into
HivedEngine.apply_node, delete_node and the inspect views)."""

from __future__ import annotations

import logging

import pytest

from tests.cells.helpers import node
from tests.cells.test_node_troubles import engine_with_a_half_used_cell

def test_a_deleted_node_is_named_in_the_vc_views_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    engine, used = engine_with_a_half_used_cell()
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
