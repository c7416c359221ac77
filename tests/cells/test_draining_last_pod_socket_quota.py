"""Preempting the last guaranteed pod on a cell its VC is draining helps the VC's pods when the
VC has quota of a smaller type of that chain left unbound (review24 F1 of 6fa04ef, which judged
it never helps): the pod's leaving unbinds the node (bookkeeping.release: guaranteed_used == 0),
which hands its cells back to the buddy allocator, where the VC may bind that smaller cell.
vc-a: one V100-NODE and one V100-SOCKET after a shrink from two nodes; n-b drains with g-half
(4 GPUs, guaranteed) and an opportunistic pod of vc-b. te-x (4 GPUs, guaranteed, vc-a) fits
nowhere; preempting g-half lets HiveD place it on n-b's freed socket."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.cells import HivedEngine
from tests.cells.helpers import V100_TYPES, node, pod, schedule
from tests.cells.test_preemption_helps_draining import place

NODES = ["n-a", "n-b"]


def config(vc_a: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "topology": {"cellTypes": copy.deepcopy(V100_TYPES), "physicalCells": [{"cellType": "V100-NODE", "nodeName": n} for n in NODES]},
        "virtualClusters": {"vc-a": vc_a, "vc-b": []},
    }


def shrunk() -> HivedEngine:
    engine = HivedEngine.from_config(config([{"cellType": "V100-NODE", "count": 2}]))
    for name in NODES:
        engine.apply_node(node(name))
    assert place(engine, "g-full", 8, "vc-a", ["n-a"]) == "n-a"
    assert place(engine, "g-half", 4, "vc-a", ["n-b"]) == "n-b"
    assert place(engine, "opp", 4, "vc-b", ["n-b"], priority="opportunistic") == "n-b"
    engine.reconfigure(config([{"cellType": "V100-NODE", "count": 1}, {"cellType": "V100-SOCKET", "count": 1}]))
    assert [root.node for root in engine.allocator.vcs["vc-a"].draining] == ["n-b"]
    return engine


def test_preempting_the_last_guaranteed_pod_of_a_draining_node_does_make_room() -> None:
    # What HiveD does: te-x fits nowhere now, and fits once g-half is gone.
    engine = shrunk()
    assert schedule(engine, pod("te-x", 4, "vc-a"), NODES) is None
    engine.delete_pod("g-half")
    placed = schedule(engine, pod("te-x", 4, "vc-a"), NODES)
    assert placed is not None and placed.node_name == "n-b"


def test_preemption_helps_counts_that_pod() -> None:
    engine = shrunk()
    judge = engine.preemption_helps(pod("te-x", 4, "vc-a"))
    assert judge is not None
    assert judge(pod("g-half", 4, "vc-a")), "g-half's preemption is what lets te-x run, but it is judged not to help"
