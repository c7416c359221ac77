"""``HivedEngine.preemption_helps`` on a draining VC cell (review): a cell the VC holds over
its quota (a shrink by a reload, or the cell exchange lending its quota) drains: no pod of the
VC is placed in it, so preempting an opportunistic pod there frees nothing the preemptor can
use, and the VC's own guaranteed pod there helps only where its leaving unbinds the cell and the
VC may bind a smaller one of that chain (tests/cells/test_draining_last_pod_socket_quota.py).
Before, an opportunistic pod on it counted as helping (the cell was the VC's, bound, of the
request's level).

vc-a owns two V100 nodes, its guaranteed g-full fills n-a and g-half takes half of n-b, an
opportunistic pod of vc-b the other half; a reload shrinks vc-a to one node: n-b, the emptier,
drains."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.cells import HivedEngine
from tests.cells.helpers import V100_TYPES, node, pod, schedule

NODES = ["n-a", "n-b"]


def config(nodes: int) -> dict[str, Any]:
    return {
        "topology": {"cellTypes": copy.deepcopy(V100_TYPES), "physicalCells": [{"cellType": "V100-NODE", "nodeName": name} for name in NODES]},
        "virtualClusters": {"vc-a": [{"cellType": "V100-NODE", "count": nodes}], "vc-b": []},
    }


def place(engine: HivedEngine, uid: str, gpus: int, vc: str, nodes: list[str], *, priority: str | None = None) -> str:
    placed = schedule(engine, pod(uid, gpus, vc, priority=priority), nodes)
    assert placed is not None and placed.node_name is not None, uid
    engine.apply_pod(placed)
    return placed.node_name


def shrunk() -> HivedEngine:
    engine = HivedEngine.from_config(config(2))
    for name in NODES:
        engine.apply_node(node(name))
    assert place(engine, "g-full", 8, "vc-a", ["n-a"]) == "n-a"
    assert place(engine, "g-half", 4, "vc-a", ["n-b"]) == "n-b"
    assert place(engine, "opp", 4, "vc-b", ["n-b"], priority="opportunistic") == "n-b"
    engine.reconfigure(config(1))
    vc = engine.allocator.vcs["vc-a"]
    assert [root.node for root in vc.draining] == ["n-b"]
    return engine


def test_an_opportunistic_pod_on_a_draining_cell_does_not_help() -> None:
    engine = shrunk()
    judge = engine.preemption_helps(pod("te-x", 4, "vc-a"))
    assert judge is not None
    assert not judge(pod("opp", 4, "vc-b"))


def test_the_vcs_own_guaranteed_pod_on_a_draining_cell_does_not_help() -> None:
    engine = shrunk()
    judge = engine.preemption_helps(pod("te-x", 4, "vc-a"))
    assert judge is not None
    assert not judge(pod("g-half", 4, "vc-a"))
    assert judge(pod("g-full", 8, "vc-a"))  # on the cell vc-a keeps


def test_before_the_shrink_both_help() -> None:
    engine = HivedEngine.from_config(config(2))
    for name in NODES:
        engine.apply_node(node(name))
    place(engine, "g-full", 8, "vc-a", ["n-a"])
    place(engine, "g-half", 4, "vc-a", ["n-b"])
    place(engine, "opp", 4, "vc-b", ["n-b"], priority="opportunistic")
    judge = engine.preemption_helps(pod("te-x", 4, "vc-a"))
    assert judge is not None
    assert judge(pod("opp", 4, "vc-b")) and judge(pod("g-half", 4, "vc-a"))
