"""review28 #3 (LOW): NodeTroubles told each sentence once per (VC, node), and the two kinds of sentence
-- "vc's cells on node N cannot be bound" and "vc's guarantee cannot be bound: ... (node N is
cordoned)" (438097a) -- shared that key. When the node going bad holds a cell of a VC whose quota
not bound it also leaves unbackable, the first sentence is told and the second, the one kubectl
cellfit vcs marks CANNOT-BIND by, was swallowed: the log never said the VC's guarantee is lost. Now each kind
of sentence is told once per (VC, node).

rack_cluster(1, 2) (two 8-GPU nodes); vc-a's quota is two 4-GPU sockets, vc-b's one node. vc-b's
b-0 fills one node; vc-a's a-0 takes a socket of the other, whose second socket is the only free
cell left for vc-a's socket not bound. That node is cordoned.
"""

from __future__ import annotations

import logging

import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.config import parse_cells_config
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

NODES = node_names(1, 2)


def test_the_guarantee_sentence_is_told_beside_the_cells_sentence(caplog: pytest.LogCaptureFixture) -> None:
    engine = HivedEngine.from_config(parse_cells_config(rack_cluster(
        1, 2, vcs={"vc-a": [{"cellType": "V100-SOCKET", "count": 2}], "vc-b": [{"cellType": "V100-NODE", "count": 1}]})))
    for name in NODES:
        engine.apply_node(node(name))
    for p in (pod("b-0", 8, vc="vc-b"), pod("a-0", 4, vc="vc-a")):
        placed = schedule(engine, p, NODES)
        assert placed is not None
        engine.apply_pod(placed)
    used = str(engine.allocator.by_pod["a-0"].node)
    engine.pods_listed()  # the bindings are recovered: nothing waits
    with caplog.at_level(logging.WARNING, logger="scheduler.cells.node_troubles"):
        engine.apply_node(node(used, unschedulable=True))
    said = [record.getMessage() for record in caplog.records]
    assert f"virtual cluster vc-a's cells on node {used} cannot be bound: the node is cordoned" in said
    assert any(s.startswith("virtual cluster vc-a's guarantee cannot be bound") for s in said), said
