"""The cause of each bad node, and the VCs whose cells on it cannot be bound
(scheduler/cells/node_troubles.py, the inspection views in scheduler/cells/inspection.py).

Live session: after node gpu-3 was deleted, a pending pod of the VC whose cell was bound there
was told nothing of the node by ``kubectl cellfit why`` (the user may not read Nodes, and the
inspect views said only that the cell's GPUs were bad), and no log line said that the VC's
guarantee could not be used. The engine here is a real HiveD engine; the troubles are fed the
causes the engine's apply_node and delete_node see (where a test reads the log, the node is
marked bad on the allocator directly, as those verbs do, so that only these troubles speak)."""

from __future__ import annotations

import logging

import pytest

from scheduler.cells import HivedEngine, inspection
from scheduler.cells.config import parse_cells_config
from scheduler.cells.node_troubles import NodeTroubles, bad_node_cause
from scheduler.core.model import NodeInfo
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

NODES = node_names(1, 4)


def engine_with_a_half_used_cell() -> tuple[HivedEngine, str]:
    """vc-a's node cell bound on one node, half of it used; vc-b has a cell quota of its own."""
    engine = HivedEngine.from_config(
        parse_cells_config(rack_cluster(1, 4, vcs={"vc-a": [{"cellType": "V100-NODE", "count": 1}], "vc-b": [{"cellType": "V100-NODE", "count": 1}]}))
    )
    for name in NODES:
        engine.apply_node(node(name))
    placed = schedule(engine, pod("a-0", 4, vc="vc-a"), NODES)
    assert placed is not None
    engine.apply_pod(placed)
    return engine, str(placed.node_name)


@pytest.mark.parametrize(
    ("info", "cause"),
    [
        (node(NODES[0]), None),
        (node(NODES[0], unschedulable=True), "cordoned"),
        (node(NODES[0], ready=False, unschedulable=True), "not ready"),
        (node(NODES[0], gpus=6), "short of GPUs (6 of 8)"),
    ],
)
def test_the_cause_is_given_exactly_where_the_engine_marks_the_node_bad(info: NodeInfo, cause: str | None) -> None:
    engine = HivedEngine.from_config(parse_cells_config(rack_cluster(1, 4)))
    engine.apply_node(info)
    cell = engine.topology.nodes[info.name]
    assert bad_node_cause(info, cell=cell) == cause
    assert (cell.bad > 0) == (cause is not None)


def test_a_vcs_cells_on_a_deleted_node_are_named_with_the_cause_in_its_views() -> None:
    engine, used = engine_with_a_half_used_cell()
    troubles = NodeTroubles()
    engine.delete_node(used)
    troubles.node_seen(engine.allocator, used, "deleted")
    summary = inspection.virtual_clusters(engine.allocator, troubles=troubles.causes)["virtualClusters"]
    by_vc = {vc["name"]: vc["cannotBind"] for vc in summary}
    assert by_vc["vc-b"] == []
    assert by_vc["vc-a"] == [
        {
            "cell": used,
            "cellType": "V100-NODE",
            "node": used,
            "cause": "deleted",
            "message": f"virtual cluster vc-a's cells on node {used} cannot be bound: the node was deleted",
        }
    ]
    view = inspection.virtual_cluster(engine.allocator, "vc-a", troubles=troubles.causes)
    assert view is not None
    assert [cell["badNodes"] for cell in view["vcCells"]] == [{used: "deleted"}]
    # Without the engine's causes the views are as before: the GPUs bad, no cause.
    plain = inspection.virtual_cluster(engine.allocator, "vc-a")
    assert plain is not None and plain["cannotBind"] == [] and plain["vcCells"][0]["badNodes"] == {}


def test_the_warning_is_logged_once_per_vc_and_node_and_again_after_a_recovery(caplog: pytest.LogCaptureFixture) -> None:
    engine, used = engine_with_a_half_used_cell()
    troubles = NodeTroubles()
    caplog.set_level(logging.WARNING, logger="scheduler.cells.node_troubles")
    engine.allocator.set_node_bad(used, True)  # what the engine's apply_node does to a cordoned node's cells
    for _ in range(3):  # a node's status arrives every few seconds
        said = troubles.node_seen(engine.allocator, used, "cordoned")
    first = [r for r in caplog.records if r.name == "scheduler.cells.node_troubles"]
    assert [r.getMessage() for r in first] == [f"virtual cluster vc-a's cells on node {used} cannot be bound: the node is cordoned"]
    assert (first[0].virtualCluster, first[0].node, first[0].cause) == ("vc-a", used, "cordoned")  # type: ignore[attr-defined]
    assert said == []  # told on the first call only
    # A free node of no VC: nothing to tell.
    free = next(n for n in NODES if n != used)
    assert troubles.node_seen(engine.allocator, free, "deleted") == []
    # Healthy again, then deleted: told again, with the new cause.
    troubles.node_seen(engine.allocator, used, None)
    assert troubles.causes == {free: "deleted"}
    assert troubles.node_seen(engine.allocator, used, "deleted") == [f"virtual cluster vc-a's cells on node {used} cannot be bound: the node was deleted"]


def test_quota_the_free_healthy_cells_left_cannot_back_is_told_once_per_vc_and_node(caplog: pytest.LogCaptureFixture) -> None:
    engine, used = engine_with_a_half_used_cell()  # vc-b's 1 node cell is not bound; 3 free nodes
    troubles = NodeTroubles()
    troubles.pods_recovered(engine.allocator)  # the watch's pods list applied: the bindings are known
    caplog.set_level(logging.WARNING, logger="scheduler.cells.node_troubles")
    free = [n for n in NODES if n != used]
    said = []
    for name in free:
        engine.allocator.set_node_bad(name, True)  # what the engine's delete_node does to its cells
        said += troubles.node_seen(engine.allocator, name, "deleted")
        said += troubles.node_seen(engine.allocator, name, "deleted")  # its deletion seen again: nothing new
    # Only the last free node's deletion leaves vc-b's quota with no free healthy cell to bind.
    assert said == [
        "virtual cluster vc-b's guarantee cannot be bound: 1 'V100-NODE' cell of its quota is not bound and "
        f"0 free healthy cells of the type are left for 1 not bound in all virtual clusters (node {free[-1]} was deleted)"
    ]
    assert [r.getMessage() for r in caplog.records if r.name == "scheduler.cells.node_troubles"] == said
