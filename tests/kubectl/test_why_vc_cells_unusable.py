"""``kubectl cellfit why`` of a guaranteed pod whose VC cannot use its own guarantee now
(scheduler/kubectl/why.py): its free GPUs in a cell on a cordoned node (user24 F13: "quota used
(2 of 2 cells bound)" and nothing of the cordon), and its quota not bound with no free healthy
cell left after GPU nodes were deleted (F8: "Insufficient nvidia.com/gpu" alone). The views are
a real HiveD engine's inspect output; the FailedScheduling its filter's own reason."""

from __future__ import annotations

from typing import Any

from scheduler.cells import HivedEngine
from scheduler.cells.config import parse_cells_config
from scheduler.kube.names import filter_offered
from scheduler.kubectl.objects import CellfitView, events_from, pod_from
from scheduler.kubectl.why import explain_pod
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

NODES = node_names(1, 4)


def engine() -> HivedEngine:
    built = HivedEngine.from_config(parse_cells_config(rack_cluster(1, 4, vcs={
        "team-a": [{"cellType": "V100-NODE", "count": 2}], "team-b": [{"cellType": "V100-NODE", "count": 1}]})))
    for name in NODES:
        built.apply_node(node(name))
    return built


def place(built: HivedEngine, name: str, gpus: int, vc: str) -> str:
    placed = schedule(built, pod(name, gpus, vc=vc), NODES)
    assert placed is not None
    built.apply_pod(placed)
    return str(placed.node_name)


def pending(vc: str, message: str, *, priority: str | None = None) -> Any:
    labels = {"cellfit.io/virtual-cluster": vc, **({"cellfit.io/priority": priority} if priority else {})}
    body = {"metadata": {"name": "w-0", "namespace": "ml", "uid": "uid-w-0", "labels": labels},
            "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}}
    event = {"reason": "FailedScheduling", "type": "Warning", "count": 1, "lastTimestamp": "2026-11-28T18:59:40Z",
             "message": message, "involvedObject": {"kind": "Pod", "name": "w-0"},
             "metadata": {"creationTimestamp": "2026-11-28T18:59:40Z"}}
    return pod_from(body, events=events_from([event]))


def test_a_vcs_free_gpus_on_a_cordoned_node_are_named_beside_its_used_quota() -> None:
    built = engine()
    full = place(built, "a-0", 8, "team-a")
    half = place(built, "a-1", 4, "team-a")
    assert full != half
    built.apply_node(node(half, unschedulable=True))  # kubectl cordon
    (reason,) = set(filter_offered(built, pod("w-0", 4, vc="team-a"), [n for n in NODES if n != half]).unresolvable.values())
    assert "quota exhausted" in reason
    message = f"0/4 nodes are available: 1 node(s) were unschedulable, 3 {reason}."
    view = CellfitView(virtual_cluster=built.inspect_virtual_cluster("team-a"), node_states={half: "cordoned"})
    answer = explain_pod(pending("team-a", message), view)
    assert answer.reason == "quota", answer
    assert answer.summary.endswith(
        f"; virtual cluster 'team-a': 4 of its free GPUs are in its cell {half} on cordoned node {half}: uncordon it, or wait"), answer
    # The Node not read (the user may not get Nodes): the engine's own cause is said.
    unread = explain_pod(pending("team-a", message), CellfitView(virtual_cluster=built.inspect_virtual_cluster("team-a")))
    assert f"on cordoned node {half}: uncordon it, or wait" in unread.summary, unread


def test_a_vcs_quota_no_free_healthy_cell_can_back_is_said_after_kube_schedulers_counts() -> None:
    built = engine()
    used = {place(built, f"a-{i}", 8, "team-a") for i in range(2)}
    gone = [n for n in NODES if n not in used]
    for name in gone:
        built.delete_node(name)
    message = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    view = CellfitView(virtual_cluster=built.inspect_virtual_cluster("team-b"), cell_tree=built.inspect_cells(gpus=False),
                       node_states={gone[0]: "deleted"})
    answer = explain_pod(pending("team-b", message), view)
    assert answer.summary == (
        "pending: Insufficient nvidia.com/gpu; virtual cluster 'team-b': its guarantee cannot be met now: 1 'V100-NODE' cell "
        "of its quota is not bound and no free healthy one is left to bind (GPU nodes deleted or bad; bad nodes: "
        f"{gone[0]} (deleted), {gone[1]}); it is met again once nodes return"), answer


def test_an_opportunistic_pod_or_a_healthy_vc_gets_no_such_fact() -> None:
    built = engine()
    place(built, "a-0", 8, "team-a")
    message = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    healthy = CellfitView(virtual_cluster=built.inspect_virtual_cluster("team-b"), cell_tree=built.inspect_cells(gpus=False))
    assert explain_pod(pending("team-b", message), healthy).summary == "pending: Insufficient nvidia.com/gpu"
    for name in NODES:
        built.delete_node(name)
    broken = CellfitView(virtual_cluster=built.inspect_virtual_cluster("team-b"), cell_tree=built.inspect_cells(gpus=False))
    assert explain_pod(pending("team-b", message, priority="opportunistic"), broken).summary == "pending: Insufficient nvidia.com/gpu"


def test_the_fact_reader_tells_each_bad_nodes_state_from_its_node_object(tmp_path: Any, monkeypatch: Any) -> None:
    from scheduler.kubectl.api import Cellfit, InspectApi, KubeApi
    from scheduler.kubectl.facts import FactReader
    from scheduler.kubectl.kubeconfig import open_session
    from tests.kubectl.test_cli import FORBIDDEN, ApiServer, kubeconfig, status

    server = ApiServer(None)
    try:
        server.routes["/api/v1/nodes/gpu-2"] = (200, {"metadata": {"name": "gpu-2"}, "spec": {"unschedulable": True}})
        server.routes["/api/v1/nodes/gpu-3"] = (404, status(404, "NotFound", 'nodes "gpu-3" not found'))
        server.routes["/api/v1/nodes/gpu-4"] = (200, {"metadata": {"name": "gpu-4"}, "spec": {},
                                                      "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
        server.routes["/api/v1/nodes/gpu-5"] = (403, FORBIDDEN)
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "config", server.url, contexts={"alice": ("t", "ml")},
                                                        current="alice")))
        api = KubeApi(open_session(kubeconfig=None, context=None, namespace=None))
        reader = FactReader(api=api, inspect=InspectApi(api, Cellfit()))
        assert reader.node_states(["gpu-2", "gpu-3", "gpu-4", "gpu-5"]) == {
            "gpu-2": "cordoned", "gpu-3": "deleted", "gpu-4": "not ready"}
    finally:
        server.close()
