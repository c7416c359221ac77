"""A HiveD gang counts its free cells before any victim, on the chart's kube-scheduler (v1.37:
its preempt verb is offered only nodes where its dry run found a victim). vc-a's gang of two
8-GPU pods, one free node, vc-b's opportunistic pods on two others, vc-b's guaranteed pod on the
fourth: the gang takes the free node and reclaims exactly one opportunistic pod. Before 3fe8558
(user26 H2) its filter answered the free node unresolvable and it reclaimed both."""

from __future__ import annotations

from typing import Any, Iterator

import pytest
import yaml

from chart_support import Cluster, Release, Scenarios, CellfitProcess, ensure_release, gang_job, gpu_pod, local_extender, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
SCENARIOS = Scenarios("gangmin-")
SCENARIO = SCENARIOS.name("g")
WHERE = SCENARIOS.selector("g")
NODES = [SCENARIOS.node("g", i) for i in range(4)]


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, CellfitProcess, Any]]:
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    cluster.add_gpu_nodes(4, f"{SCENARIO}-gpu", labels=WHERE, gpus=8)
    config = yaml.safe_load(release.cellfit_config_text)
    config["policy"] = {**config.get("policy", {}), "name": "hived"}
    config["cells"] = {**config.get("cells", {}), "topology": {
        "cellTypes": {"E2E-NODE": {"childType": "E2E-GPU", "childCount": 8, "isNodeLevel": True}},
        "physicalCells": [{"cellType": "E2E-NODE", "nodeName": n} for n in NODES]},
        "virtualClusters": {"vc-a": [{"cellType": "E2E-NODE", "count": 2}], "vc-b": [{"cellType": "E2E-NODE", "count": 2}]}}
    try:
        with local_extender(cluster, release, tmp_path_factory.mktemp(SCENARIO), name=SCENARIO, config_text=yaml.safe_dump(config)) as cellfit:
            yield cluster, release, cellfit, control_plane
    finally:
        SCENARIOS.delete_nodes(cluster, ["g"])


def on(node: str) -> dict[str, str]:
    return {**WHERE, "kubernetes.io/hostname": node}


def test_gang_takes_free_node_and_one_victim(env: Any) -> None:
    cluster, release, cellfit, cp = env
    ns = cp.create_namespace("gangmin")
    name = release.scheduler_name
    b = {"cellfit.io/virtual-cluster": "vc-b"}
    cluster.apply(gpu_pod("b-owner", scheduler_name=name, node_selector=on(NODES[1]), gpus=8, labels=b), namespace=ns)
    for i in (0, 3):
        cluster.apply(gpu_pod(f"opp-{i}", scheduler_name=name, node_selector=on(NODES[i]), gpus=8, priority_class="cellfit-opportunistic",
                              labels={**b, "cellfit.io/priority": "opportunistic"}), namespace=ns)
    for pod_name in ("b-owner", "opp-0", "opp-3"):
        wait_for(lambda pod_name=pod_name: (lambda p: p["status"].get("phase") == "Running")(cluster.kubectl_json("-n", ns, "get", "pod", pod_name)),
                 90, f"{pod_name} running ({cellfit.log})")
    uids = {n: cluster.kubectl_json("-n", ns, "get", "pod", n)["metadata"]["uid"] for n in ("opp-0", "opp-3")}
    job = gang_job("gang", scheduler_name=name, node_selector=WHERE, gpus=8, size=2, priority_class="cellfit-best-effort")
    job["spec"]["template"]["metadata"]["labels"] = {"cellfit.io/virtual-cluster": "vc-a"}
    with cluster.watch_pods(ns) as versions:
        cluster.apply(job, namespace=ns)

        def both() -> Any:
            pods = [p for p in cluster.pods(ns, "batch.kubernetes.io/job-name=gang") if p["status"].get("phase") == "Running"]
            return pods if len(pods) == 2 else None

        pods = wait_for(both, 180, f"gang running (cellfit log {cellfit.log})")
    nodes = sorted(p["spec"]["nodeName"] for p in pods)
    deleted = {v.pod["metadata"]["name"] for v in versions if v.pod["metadata"].get("deletionTimestamp") and v.pod["metadata"]["uid"] in uids.values()}
    assert NODES[2] in nodes, (nodes, deleted)
    assert len(deleted) == 1, (nodes, deleted)
