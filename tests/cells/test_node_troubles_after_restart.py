"""user25 #8: right after a restart with one node cordoned and one deleted, cellfit warned for
all three VCs "virtual cluster vc-b's guarantee cannot be bound: 1 ... cell of its quota is not
bound and 2 free healthy cells ... for 3 not bound in all virtual clusters", though vc-b and
vc-c were bound with running pods: the nodes arrive before the pods, whose bindings HiveD
recovers as the watch relists them, so every VC looked unbound. Now a VC's quota not bound is
judged once the pods are known: at the first node seen after them, on the VCs as recovered."""

from __future__ import annotations

import logging

import pytest

from scheduler.cells import HivedEngine
from scheduler.core.model import PodInfo
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

NODES = node_names(1, 4)
CONFIG = rack_cluster(1, 4, vcs={"vc-a": [{"cellType": "V100-NODE", "count": 2}], "vc-b": [{"cellType": "V100-NODE", "count": 1}],
                                 "vc-c": [{"cellType": "V100-NODE", "count": 1}]})
A_NODE, C_NODE, B_NODE, GONE = NODES


def running_pods() -> list[PodInfo]:
    """vc-a's pod on r0n0, vc-c's on r0n1, vc-b's on r0n2, as the first cellfit bound them."""
    engine = HivedEngine.from_config(CONFIG)
    for name in NODES:
        engine.apply_node(node(name))
    placed = []
    for uid, vc, where in (("a-0", "vc-a", A_NODE), ("c-0", "vc-c", C_NODE), ("b-0", "vc-b", B_NODE)):
        bound = schedule(engine, pod(uid, 8, vc), [where])
        assert bound is not None and bound.node_name == where
        engine.apply_pod(bound)
        placed.append(bound)
    return placed


def told(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "scheduler.cells.node_troubles"]


def test_a_restart_judges_the_quota_not_bound_after_the_pods_bindings_are_recovered(caplog: pytest.LogCaptureFixture) -> None:
    pods = running_pods()
    caplog.set_level(logging.WARNING, logger="scheduler.cells.node_troubles")
    restarted = HivedEngine.from_config(CONFIG)  # cellfit restarted: the nodes first, as listed
    for name in (A_NODE, C_NODE):
        restarted.apply_node(node(name))
    restarted.apply_node(node(B_NODE, unschedulable=True))
    restarted.delete_node(GONE)
    assert told(caplog) == []  # no VC bound yet: nothing judged
    for bound in pods:  # the watch relists the pods: their bindings are recovered
        restarted.apply_pod(bound)
    restarted.apply_node(node(A_NODE))  # a node status seen before the list is applied whole: still waits
    assert told(caplog) == []
    restarted.pods_listed()  # the watch cache's list applied whole (ClusterCache.on_pods_listed)
    shortfalls = [s for s in told(caplog) if "guarantee cannot be bound" in s]
    # vc-b and vc-c are bound; only vc-a's second cell has no free healthy cell left to bind.
    assert {s.split("'s guarantee")[0] for s in shortfalls} == {"virtual cluster vc-a"}, told(caplog)
    assert shortfalls == [
        "virtual cluster vc-a's guarantee cannot be bound: 1 'V100-NODE' cell of its quota is not bound and 0 free healthy "
        f"cells of the type are left for 1 not bound in all virtual clusters (node {B_NODE} is cordoned)",
        "virtual cluster vc-a's guarantee cannot be bound: 1 'V100-NODE' cell of its quota is not bound and 0 free healthy "
        f"cells of the type are left for 1 not bound in all virtual clusters (node {GONE} was deleted)",
    ]
    # vc-b's bound cell on the cordoned node, known only once its pod was recovered, is told too.
    assert f"virtual cluster vc-b's cells on node {B_NODE} cannot be bound: the node is cordoned" in told(caplog)
    restarted.apply_node(node(A_NODE))
    assert len(told(caplog)) == 3  # each once


def test_a_cluster_without_pods_is_judged_after_the_settling_time() -> None:
    from scheduler.cells.node_troubles import NodeTroubles

    now = [0.0]
    engine = HivedEngine.from_config(CONFIG)
    troubles = NodeTroubles(clock=lambda: now[0], settle_seconds=120.0)
    for name in NODES[:3]:
        engine.apply_node(node(name))
        assert troubles.node_seen(engine.allocator, name, None) == []
    engine.allocator.set_node_bad(GONE, True)
    assert troubles.node_seen(engine.allocator, GONE, "deleted") == []  # no pod known yet: it waits
    now[0] = 120.0
    said = troubles.node_seen(engine.allocator, A_NODE, None)
    assert said == [
        f"virtual cluster {vc}'s guarantee cannot be bound: {n} 'V100-NODE' cell{'s' if n > 1 else ''} of its quota "
        f"{'are' if n > 1 else 'is'} not bound and 3 free healthy cells of the type are left for 4 not bound in all "
        f"virtual clusters (node {GONE} was deleted)"
        for vc, n in (("vc-a", 2), ("vc-b", 1), ("vc-c", 1))
    ]
