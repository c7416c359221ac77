"""FitGpp's victim index keys its node arrays by the placement engine's node index (issue 14:
one node name -> slot map in the composition). That index reuses a removed node's slot, so the
index must never let a node inherit the usage or the pods of the node that held its slot."""

from __future__ import annotations

import random

import pytest

from preemption_helpers import BEST_EFFORT, NODE, te_pod
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.nodeindex import NodeIndex
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from scheduler.preemption.fitgpp import choose_victims
from scheduler.preemption.table import PreemptionIndex

FULL = Resources(8000, 64 * 2**30, 8)


def _holding(uid: str, *, node: str, requests: Resources = FULL) -> PodInfo:
    return PodInfo(uid=uid, namespace="ns", name=uid, requests=requests, labels=BEST_EFFORT, node_name=node, phase="Running")


def _victim_nodes(index: PreemptionIndex) -> set[str]:
    """The nodes of the valid candidate rows of the index's table."""
    table = index.table()
    return {str(table.node_names[int(table.node_of[row])]) for row in range(len(table.uids)) if table.valid[row]}


def test_the_index_reads_the_placement_engines_slots() -> None:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NodeInfo(name="a", allocatable=NODE))
    engine.apply_pod(_holding("p", node="a"))
    table = engine._index.table()
    assert table.node_index is engine.node_index
    assert table.node_names[engine.node_index.get("a") or 0] == "a"


def test_a_node_reusing_a_deleted_nodes_slot_starts_empty() -> None:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NodeInfo(name="a", allocatable=NODE))
    engine.apply_pod(_holding("p", node="a"))  # a's pod outlives its node for a while
    slot = engine.node_index.get("a")
    engine.delete_node("a")
    engine.apply_node(NodeInfo(name="b", allocatable=NODE))
    assert engine.node_index.get("b") == slot  # the slot is reused
    assert engine._index.free_on("b") == NODE
    assert _victim_nodes(engine._index) == set()
    assert not choose_victims(preemptor=te_pod(1, 1, 8), table=engine._index.table(), settings=FitGppSettings()).found
    engine.apply_node(NodeInfo(name="a", allocatable=NODE))  # back, in a new slot: its pod counts again
    assert engine._index.free_on("a") == NODE - FULL and engine._index.free_on("b") == NODE
    assert _victim_nodes(engine._index) == {"a"}


def test_a_slot_handed_on_before_the_index_heard_of_the_deletion_starts_empty() -> None:
    nodes = NodeIndex()
    index = PreemptionIndex(node_index=nodes)
    nodes.add("a")
    index.apply_node(NodeInfo(name="a", allocatable=NODE))
    index.apply_pod(_holding("p", node="a"))
    nodes.remove("a")  # the placement engine dropped the name without the index being told
    nodes.add("b")
    index.apply_node(NodeInfo(name="b", allocatable=NODE))
    assert index.free_on("b") == NODE
    assert _victim_nodes(index) == set()
    assert index.stats()["nodes"] == 1
    with pytest.raises(KeyError):
        index.free_on("a")


def test_a_deleted_node_whose_name_the_placement_engine_keeps_comes_back_with_its_pods() -> None:
    nodes = NodeIndex()  # HiveD keeps a cell node's name after the Node is deleted
    index = PreemptionIndex(node_index=nodes)
    nodes.add("a")
    index.apply_node(NodeInfo(name="a", allocatable=NODE))
    index.apply_pod(_holding("p", node="a"))
    index.delete_node("a")
    assert "a" in nodes and _victim_nodes(index) == set()
    with pytest.raises(KeyError):
        index.free_on("a")
    index.apply_node(NodeInfo(name="a", allocatable=NODE))
    assert index.free_on("a") == NODE - FULL and _victim_nodes(index) == {"a"}


def test_a_node_the_placement_engine_does_not_hold_is_refused_by_name() -> None:
    index = PreemptionIndex(node_index=NodeIndex())
    with pytest.raises(LookupError, match="'a'"):
        index.apply_node(NodeInfo(name="a", allocatable=NODE))


@pytest.mark.parametrize("seed", range(20))
def test_free_resources_follow_random_node_churn_through_reused_slots(seed: int) -> None:
    """After random node adds and deletes (reusing slots) and pods that come and go, each node's
    free resources are its allocatable less the pods bound to it, counted from scratch."""
    churn = random.Random(seed)
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    names = [f"n{i}" for i in range(6)]
    present: set[str] = set()
    pods: dict[str, PodInfo] = {}
    for step in range(80):
        action = churn.random()
        name = churn.choice(names)
        if action < 0.3:
            engine.apply_node(NodeInfo(name=name, allocatable=NODE))
            present.add(name)
        elif action < 0.5:
            engine.delete_node(name)
            present.discard(name)
        elif action < 0.8:
            pod = _holding(f"p{step}", node=name, requests=Resources(1000, 2**30, churn.randint(0, 2)))
            engine.apply_pod(pod)
            pods[pod.uid] = pod
        elif pods:
            uid = churn.choice(sorted(pods))
            engine.delete_pod(uid)
            del pods[uid]
        for node in present:
            free = NODE
            for pod in pods.values():
                if pod.node_name == node:
                    free = free - pod.requests
            assert engine._index.free_on(node) == free
        assert _victim_nodes(engine._index) == {pod.node_name for pod in pods.values() if pod.node_name in present}
