"""HiveD on a live cluster, with the chart's scheduler (its kube-scheduler and cellfit run here
with the chart's configs and RBAC; see chart_support) and cells discovered from the Nodes (the
chart configures no topology). Each scenario has fake 8-GPU nodes of its own, labelled
``cellfit.io/e2e-scenario=<scenario>``, and its pods select them.

(a) Growth: a GPU node added after cellfit started joins the cells (and the default VC) without a
    restart; pods are scheduled onto it by HiveD (bind-info annotation); deleted while a pod runs
    there it takes no new pods but keeps the pod, and once the pod is gone it leaves the cells.
(b) Reclaim: opportunistic pods fill a node's idle GPUs; a guaranteed pod of the VC that owns the
    node arrives: exactly the opportunistic pods on the GPUs HiveD gives it are preempted
    (deleted by kube-scheduler, which asks cellfit whom to take) and it is bound there; the other
    opportunistic pod runs on untouched.
(c) A deleted Job's gang booking: a gang of two 8-GPU pods whose second pod is never created (a
    ResourceQuota of one pod) holds both of its nodes; the Job is deleted, leaving its running pod
    (--cascade=orphan): the slot nobody took is released at once, with a BookingReleased Event
    on the Job, and another pod is bound on that node.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

from chart_support import (
    ChartScheduler,
    Cluster,
    Release,
    Scenarios,
    assert_no_double_booking,
    gang_job,
    gpu_pod,
    is_active,
    running_on,
    scenario_scheduler,
    wait_for,
)

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("hived-")
OPPORTUNISTIC = {"cellfit.io/priority": "opportunistic"}


selector = SCENARIOS.selector


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, ChartScheduler, Any]]:
    # The reclaim scenario's node exists before cellfit starts (discovered at startup); the
    # growth scenario adds its node later.
    workdir = tmp_path_factory.mktemp(f"hived-live-{SCENARIOS.run}")
    with scenario_scheduler(
        control_plane, workdir, SCENARIOS, nodes={"reclaim": 1, "orphan": 2}, name="hived-live", added_later=["grow"]
    ) as (cluster, release, procs):
        yield cluster, release, procs, control_plane


def node_cells(procs: ChartScheduler, node: str) -> list[dict[str, Any]]:
    return list(procs.cellfit.get("/v1/inspect/cells", node=node)["cells"])


def default_vc_cells(procs: ChartScheduler) -> int:
    """Cells the default VC is guaranteed, summed over cell types."""
    vc = procs.cellfit.get("/v1/inspect/virtual-clusters/default")
    return sum(int(row["quota"]) for row in vc["cells"])


def pod(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    return dict(cluster.kubectl_json("-n", ns, "get", "pod", name))


def gpu_indices(pod_object: dict[str, Any]) -> set[int]:
    raw = pod_object["metadata"].get("annotations", {}).get("cellfit.io/gpu-indices", "")
    return {int(i) for i in raw.split(",") if i}


def log_lines(procs: ChartScheduler, *needles: str) -> list[str]:
    return [line for line in procs.cellfit.log.read_text(errors="replace").splitlines() if all(n in line for n in needles)]


# ------------------------------------------------------------------------------ (a) growth


def test_a_gpu_node_added_after_start_joins_the_cells_and_takes_pods(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("grow")
    where = selector("grow")
    name = release.scheduler_name
    node = SCENARIOS.node("grow")
    assert node_cells(procs, node) == []
    guaranteed_before = default_vc_cells(procs)

    SCENARIOS.add_nodes(cluster, "grow")

    # The Node watch delivers it; HiveD adds its cell and grows the default VC, and says so.
    (cell,) = wait_for(lambda: node_cells(procs, node), 60, f"{node} in /v1/inspect/cells (cellfit log {procs.cellfit.log})")
    assert cell["id"] == node and cell["healthy"] is True and cell["gpus"]["total"] == 8, cell
    assert default_vc_cells(procs) == guaranteed_before + 1
    assert wait_for(lambda: log_lines(procs, "cells changed", node), 10, f"a 'cells changed' log line naming {node}")

    # HiveD places pods there: two 4-GPU pods share the node, each with its own GPUs.
    for pod_name in ("first", "second"):
        cluster.apply(gpu_pod(pod_name, scheduler_name=name, node_selector=where, gpus=4, priority_class="cellfit-best-effort"),
                      namespace=ns)
    for pod_name in ("first", "second"):
        assert wait_for(lambda pod_name=pod_name: running_on(cluster, ns, pod_name), 90,
                        f"{pod_name} running (cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log})") == node
    placed = [pod(cluster, ns, n) for n in ("first", "second")]
    for p in placed:
        info = json.loads(p["metadata"]["annotations"]["cellfit.io/bind-info"])
        assert info["node"] == node and info["vc"] == "default" and info["priority"] == "guaranteed", info
        assert info["vcCell"] == node and sorted(info["gpuIndices"]) == sorted(gpu_indices(p)), info
    assert gpu_indices(placed[0]) | gpu_indices(placed[1]) == set(range(8))
    assert_no_double_booking(cluster.pods(ns))

    # Deleted while "second" still runs: the node takes no new pod, the running one keeps its GPUs.
    cluster.kubectl("-n", ns, "delete", "pod", "first", "--wait=true", timeout=60)
    cluster.kubectl("delete", "node", node, "--wait=true", timeout=60)
    wait_for(lambda: log_lines(procs, "cells changed", f"node {node} was deleted while pods still hold GPUs"), 30,
             "cellfit noticing the deletion")
    (cell,) = node_cells(procs, node)
    assert cell["healthy"] is False, cell
    # Once the pod is gone (its node is gone, so nobody finishes it: force), the node leaves.
    cluster.kubectl("-n", ns, "delete", "pod", "second", "--grace-period=0", "--force", "--wait=true", timeout=60)
    wait_for(lambda: node_cells(procs, node) == [], 30, f"{node} gone from /v1/inspect/cells")
    assert default_vc_cells(procs) == guaranteed_before
    assert log_lines(procs, "cells changed", "cells removed", node)


# ------------------------------------------------------------------------------ (b) reclaim


def test_opportunistic_pods_on_the_needed_gpus_are_preempted_for_a_guaranteed_pod(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("reclaim")
    where = selector("reclaim")
    name = release.scheduler_name
    node = SCENARIOS.node("reclaim")
    # Opportunistic pods fill the node's idle GPUs: 2 + 2 + 4. They hold no VC cell.
    sizes = {"opp-a": 2, "opp-b": 2, "opp-c": 4}
    for pod_name, gpus in sizes.items():
        cluster.apply(gpu_pod(pod_name, scheduler_name=name, node_selector=where, gpus=gpus,
                              priority_class="cellfit-opportunistic", labels=OPPORTUNISTIC), namespace=ns)
        assert wait_for(lambda pod_name=pod_name: running_on(cluster, ns, pod_name), 90,
                        f"{pod_name} running (cellfit log {procs.cellfit.log})") == node
    opportunistic = {n: pod(cluster, ns, n) for n in sizes}
    for p in opportunistic.values():
        info = json.loads(p["metadata"]["annotations"]["cellfit.io/bind-info"])
        assert info["priority"] == "opportunistic" and info["vcCell"] is None, info
    assert set().union(*(gpu_indices(p) for p in opportunistic.values())) == set(range(8))
    uids = {n: p["metadata"]["uid"] for n, p in opportunistic.items()}

    # A guaranteed pod of the default VC, which owns the node's cell: HiveD binds the cell and
    # reclaims the 4 GPUs it picks (those of the fewest opportunistic pods).
    with cluster.watch_pods(ns) as versions:
        cluster.apply(gpu_pod("owner", scheduler_name=name, node_selector=where, gpus=4, priority_class="cellfit-best-effort"),
                      namespace=ns)
        assert wait_for(lambda: running_on(cluster, ns, "owner"), 120,
                        f"owner running (cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log})") == node
    owner = pod(cluster, ns, "owner")
    info = json.loads(owner["metadata"]["annotations"]["cellfit.io/bind-info"])
    assert info["priority"] == "guaranteed" and info["vc"] == "default" and info["vcCell"] == node, info
    taken = gpu_indices(owner)
    assert len(taken) == 4

    # Exactly the opportunistic pods on those GPUs were preempted, by kube-scheduler...
    expected = {n for n, p in opportunistic.items() if gpu_indices(p) & taken}
    assert expected and len(expected) < len(sizes), (expected, taken)
    deleted = {v.pod["metadata"]["name"] for v in versions if v.pod["metadata"].get("deletionTimestamp") and v.pod["metadata"]["uid"] in uids.values()}
    assert deleted == expected, (deleted, expected)
    for victim in expected:
        conditions = next(v.pod["status"].get("conditions", []) for v in versions
                          if v.pod["metadata"]["name"] == victim and v.pod["metadata"].get("deletionTimestamp"))
        assert any(c["type"] == "DisruptionTarget" and c.get("reason") == "PreemptionByScheduler" for c in conditions), conditions
    # ...and the others run on, untouched, on their GPUs.
    for survivor in set(sizes) - expected:
        current = pod(cluster, ns, survivor)
        assert current["metadata"]["uid"] == uids[survivor] and running_on(cluster, ns, survivor) == node
        assert gpu_indices(current) == gpu_indices(opportunistic[survivor]) and not gpu_indices(current) & taken
    assert_no_double_booking(cluster.pods(ns))


# ------------------------------------------------------------------------------ (c) a deleted Job's gang booking


def test_a_deleted_jobs_unused_gang_slot_is_released_with_an_event(env: Any) -> None:
    cluster, release, procs, cp = env
    ns = cp.create_namespace("orphan")
    where = selector("orphan")
    name = release.scheduler_name
    # One pod at most in the namespace: the Job's second pod is refused by the API server, so the
    # gang's second slot waits for a pod that never comes.
    cluster.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "one-pod"}, "spec": {"hard": {"pods": "1"}}},
                  namespace=ns)
    cluster.apply(gang_job("pair", scheduler_name=name, node_selector=where, gpus=8, size=2, priority_class="cellfit-best-effort"),
                  namespace=ns)

    def running_pod() -> dict[str, Any] | None:
        return next((p for p in cluster.pods(ns) if p["status"].get("phase") == "Running" and is_active(p)), None)

    first = wait_for(running_pod, 120, f"the Job's first pod running (cellfit log {procs.cellfit.log})")
    taken = first["spec"]["nodeName"]
    (free_node,) = {SCENARIOS.node("orphan", i) for i in range(2)} - {taken}
    info = json.loads(first["metadata"]["annotations"]["cellfit.io/bind-info"])
    assert info["gang"]["size"] == 2 and sorted(s["node"] for s in info["gang"]["placements"]) == sorted([taken, free_node]), info

    cluster.kubectl("-n", ns, "delete", "job", "pair", "--cascade=orphan", "--wait=true", timeout=60)
    (event,) = wait_for(lambda: [e for e in cluster.events(ns, "pair", kind="Job") if e["reason"] == "BookingReleased"], 30,
                        f"a BookingReleased Event on Job pair (cellfit log {procs.cellfit.log})")
    assert event["type"] == "Warning", event
    assert event["message"] == f"cellfit released the 1 slot (8 GPUs) booked for gang {ns}/pair: its Job was deleted", event
    assert wait_for(lambda: log_lines(procs, "booking released", f"{ns}/pair"), 10, "a 'booking released' log line")

    # The orphaned pod keeps its node and GPUs; the freed node takes another 8-GPU pod.
    assert running_on(cluster, ns, first["metadata"]["name"]) == taken
    other = cp.create_namespace("orphan-next")
    cluster.apply(gpu_pod("next", scheduler_name=name, node_selector=where, gpus=8, priority_class="cellfit-best-effort"),
                  namespace=other)
    assert wait_for(lambda: running_on(cluster, other, "next"), 90,
                    f"next running (cellfit log {procs.cellfit.log}, scheduler log {procs.scheduler.log})") == free_node
    assert_no_double_booking(cluster.pods(ns) + cluster.pods(other))
