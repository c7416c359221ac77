"""``kubectl cellfit why`` and ``vcs`` name the node a VC's cells cannot be bound on, and why,
from the engine's own knowledge (``cannotBind`` and ``badNodes`` in the inspect views,
scheduler/cells/inspection.py), for a user who may not read Node objects: the answer read
"(cordoned, not ready, deleted or short of GPUs)" and ``vcs`` the cell id alone. The views are
a real HiveD engine's inspect output, its node troubles fed the causes it sees."""

from __future__ import annotations

from typing import Any

from scheduler.cells import HivedEngine, inspection
from scheduler.cells.node_troubles import NodeTroubles
from scheduler.kubectl import output, views
from scheduler.kubectl.objects import CellfitView, events_from, pod_from
from scheduler.kubectl.why import explain_pod
from tests.cells.test_node_troubles import engine_with_a_half_used_cell

def deleted_under_vc_a() -> tuple[HivedEngine, NodeTroubles, str]:
    engine, used = engine_with_a_half_used_cell()
    troubles = NodeTroubles()
    engine.delete_node(used)
    troubles.node_seen(engine.allocator, used, "deleted")
    return engine, troubles, used


def pending(message: str) -> Any:
    body = {
        "metadata": {"name": "a-1", "namespace": "ml", "uid": "uid-a-1", "labels": {"cellfit.io/virtual-cluster": "vc-a"}},
        "spec": {"schedulerName": "cellfit"},
        "status": {"phase": "Pending"},
    }
    event = {
        "reason": "FailedScheduling",
        "type": "Warning",
        "count": 1,
        "lastTimestamp": "2026-11-28T18:59:40Z",
        "message": message,
        "involvedObject": {"kind": "Pod", "name": "a-1"},
        "metadata": {"creationTimestamp": "2026-11-28T18:59:40Z"},
    }
    return pod_from(body, events=events_from([event]))


def test_why_names_the_deleted_node_of_the_vcs_cell_without_reading_nodes() -> None:
    engine, troubles, used = deleted_under_vc_a()
    view = CellfitView(virtual_cluster=inspection.virtual_cluster(engine.allocator, "vc-a", troubles=troubles.causes))
    answer = explain_pod(pending("0/4 nodes are available: 3 Insufficient nvidia.com/gpu."), view)
    assert answer.summary.endswith(
        f"; virtual cluster 'vc-a': 4 of its free GPUs are in its cell {used} on deleted node {used}: it serves again only if it comes back"
    ), answer
    # What the Node object says, when the user may read it, still comes first.
    read = CellfitView(virtual_cluster=view.virtual_cluster, node_states={used: "cordoned"})
    assert f"on cordoned node {used}: uncordon it" in explain_pod(pending("0/4 nodes are available: 3 x."), read).summary


def test_vcs_names_the_node_and_its_cause_beside_the_bound_cell() -> None:
    engine, troubles, used = deleted_under_vc_a()
    summary = inspection.virtual_clusters(engine.allocator, troubles=troubles.causes)
    rows = views.vc_rows(summary, cells=engine.inspect_cells(gpus=False))
    lines = output.table(rows, views.vc_columns(rows), empty="none").splitlines()
    (vc_a,) = [line for line in lines if line.startswith("vc-a")]
    assert vc_a.endswith(f"1 bound on bad nodes ({used} deleted)"), lines
