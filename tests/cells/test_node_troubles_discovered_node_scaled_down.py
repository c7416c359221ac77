"""HiveD's node troubles (438097a, wired by a579f93) on discovered cells.

Without a configured topology the cells follow the nodes (HivedEngine.from_nodes: VC `default`
owns them all, its quota growing and shrinking with them). A cluster autoscaler adds an empty GPU
node and removes it later. HivedEngine.delete_node tells NodeTroubles the node was deleted
before membership.leave takes it (and its quota) out, so NodeTroubles counts the free cells
without it against the quota still with it, and logs a WARNING "virtual cluster default's
guarantee cannot be bound: 3 ... cells of its quota are not bound and 2 free healthy cells ...
(node n-2 was deleted)" for every scale-down, while after it the VC's quota is 2 with 2 free
cells and `kubectl cellfit vcs` shows nothing to bind. The node's cause also stays in
NodeTroubles.causes (and its (VC, node) in _told) for ever once the node left the cells: one
entry per node name the autoscaler ever used.
"""

from __future__ import annotations

import logging

import pytest

from scheduler.cells import HivedEngine
from tests.cells.helpers import node


def test_an_empty_discovered_node_scaled_down_is_no_guarantee_warning(caplog: pytest.LogCaptureFixture) -> None:
    engine = HivedEngine.from_nodes([node("n-0"), node("n-1")])
    engine.apply_node(node("n-2"))  # scaled up
    with caplog.at_level(logging.WARNING, logger="scheduler.cells.node_troubles"):
        engine.delete_node("n-2")  # scaled down, empty
    assert engine.inspect_virtual_clusters()["virtualClusters"][0]["cannotBind"] == []
    assert [r.getMessage() for r in caplog.records] == []


def test_the_cause_of_a_node_no_longer_in_the_cells_is_forgotten() -> None:
    engine = HivedEngine.from_nodes([node("n-0"), node("n-1")])
    for i in range(2, 50):
        engine.apply_node(node(f"n-{i}"))
        engine.delete_node(f"n-{i}")
    assert sorted(engine.topology.nodes) == ["n-0", "n-1"]
    assert engine.node_troubles.causes == {}
