"""cellfit wired to a real kube-scheduler and kube-apiserver.

It runs once per policy (resource-fit; hived with cells discovered from the cluster's Nodes).
A second kube-scheduler runs with deploy/kube-scheduler-config.yaml (its own profile name, the
port of a local ``cellfit serve``, and GPU fit left to cellfit with ``ignoredByScheduler`` so
that cellfit's accounting alone decides where GPUs go). cellfit watches the cluster with the
kubeconfig, answers filter/prioritize/preempt and creates the bindings.

The scenario, on two dedicated 8-GPU nodes:
1. two 8-GPU pods are bound by cellfit, one per node;
2. a 4-GPU pod waits, and its FailedScheduling event carries cellfit's reason (hived: the
   bound pods carry the bind-info and GPU-index annotations recovery rebuilds from);
3. cellfit restarts, rebuilds its view from the watch, and a new 4-GPU pod still waits: no
   allocation was forgotten, so nothing is double-booked;
4. with cellfit down, freeing a node schedules nothing (the extender is not ignorable);
5. cellfit comes back and both waiting pods land on the freed node; no node ever holds more
   than its 8 GPUs.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from chart_support import CellfitProcess

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.e2e

RUN = uuid.uuid4().hex[:5]
# What a FailedScheduling event says when the two nodes' GPUs are taken, per policy.
NO_ROOM = {"resource-fit": r"not enough free GPUs", "hived": r"virtual cluster .* quota exhausted|no free cell"}


class Suite:
    """Names of one policy's run: its nodes, its kube-scheduler profile."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.name = f"wiring-{policy}-{RUN}"
        self.scheduler_name = f"cellfit-{self.name}"
        self.node_prefix = f"{self.name}-gpu"

    def scheduler_config(self, *, kubeconfig: Path, cellfit_port: int) -> dict[str, Any]:
        config = yaml.safe_load((ROOT / "deploy" / "kube-scheduler-config.yaml").read_text())
        config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
        config["leaderElection"] = {"leaderElect": False}
        config["profiles"][0]["schedulerName"] = self.scheduler_name
        extender = config["extenders"][0]
        extender["urlPrefix"] = f"http://127.0.0.1:{cellfit_port}/v1/extender"
        extender["managedResources"] = [{"name": "nvidia.com/gpu", "ignoredByScheduler": True}]
        return config

    def gpu_pod(self, name: str, gpus: int) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": self.name}},
            "spec": {
                "schedulerName": self.scheduler_name,
                "nodeSelector": {"cellfit.io/e2e-suite": self.name},
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "trainer", "image": "trainer:fake", "resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"}}}],
            },
        }


@pytest.fixture(scope="module", params=["resource-fit", "hived"])
def wiring(request, control_plane, tmp_path_factory) -> Iterator[tuple[Any, CellfitProcess, Suite]]:
    suite = Suite(request.param)
    work = tmp_path_factory.mktemp(suite.name)
    subprocess.run(
        [str(ROOT / "e2e/cluster/add-gpu-nodes.sh"), "2", "--prefix", suite.node_prefix, "--rack", suite.name, "--label", f"cellfit.io/e2e-suite={suite.name}"],
        env=control_plane.process_env(), check=True, capture_output=True, timeout=120,
    )
    cellfit = CellfitProcess(
        yaml.safe_dump({"policy": {"name": suite.policy}, "logging": {"format": "text"}}), control_plane.kubeconfig, work
    )
    scheduler: subprocess.Popen[bytes] | None = None
    try:  # a cellfit that never got ready is stopped and the nodes go, as after the test
        cellfit.start()
        config_file = work / "scheduler.yaml"
        config_file.write_text(yaml.safe_dump(suite.scheduler_config(kubeconfig=control_plane.kubeconfig, cellfit_port=cellfit.port)))
        with (work / "kube-scheduler.log").open("ab") as out:
            scheduler = subprocess.Popen(
                [control_plane.kube_scheduler_bin, "--config", str(config_file), "--secure-port", "0", "--v", "2"],
                stdout=out, stderr=subprocess.STDOUT,
            )
        yield control_plane, cellfit, suite
    finally:
        if scheduler is not None:
            scheduler.terminate()
            scheduler.wait(15)
        cellfit.stop()
        control_plane.kubectl("delete", "nodes", "-l", f"cellfit.io/e2e-suite={suite.name}", "--wait=false", check=False)


def node_of(cp, namespace: str, name: str) -> str | None:
    return cp.kubectl_json("-n", namespace, "get", "pod", name)["spec"].get("nodeName")


def gpus_per_node(cp, namespace: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    for pod in cp.kubectl_json("-n", namespace, "get", "pods")["items"]:
        node = pod["spec"].get("nodeName")
        if node and pod["status"].get("phase") not in ("Succeeded", "Failed"):
            limit = pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
            totals[node] = totals.get(node, 0) + int(limit)
    return totals


def no_room_event(cp, namespace: str, name: str, pattern: str) -> str:
    for event in cp.events_for(namespace, name):
        if event["reason"] == "FailedScheduling" and re.search(pattern, event["message"]):
            return event["message"]
    return ""


def test_cellfit_binds_accounts_recovers_and_is_waited_for(wiring):
    cp, cellfit, suite = wiring
    ns = cp.create_namespace("wiring")
    no_room = NO_ROOM[suite.policy]

    # 1. bound by cellfit, one per node
    cp.apply(suite.gpu_pod("full-a", 8), namespace=ns)
    cp.apply(suite.gpu_pod("full-b", 8), namespace=ns)
    nodes = cp.wait_until(lambda: (node_of(cp, ns, "full-a"), node_of(cp, ns, "full-b")) if node_of(cp, ns, "full-a") and node_of(cp, ns, "full-b") else None, 60, "full-a and full-b bound")
    assert set(nodes) == {f"{suite.node_prefix}-0", f"{suite.node_prefix}-1"}
    assert cellfit.metric('cellfit_bindings_total{result="bound"}') >= 2
    if suite.policy == "hived":
        annotations = cp.kubectl_json("-n", ns, "get", "pod", "full-a")["metadata"]["annotations"]
        assert annotations["cellfit.io/gpu-indices"] == "0,1,2,3,4,5,6,7"
        assert '"node":"%s"' % nodes[0] in annotations["cellfit.io/bind-info"]

    # 2. no room: cellfit's reason reaches the pod's events
    cp.apply(suite.gpu_pod("waits-c", 4), namespace=ns)
    cp.wait_until(lambda: no_room_event(cp, ns, "waits-c", no_room), 60, "FailedScheduling for waits-c")
    assert node_of(cp, ns, "waits-c") is None

    # 3. restart: the watch rebuilds the bookings; a new pod still finds no room
    cellfit.stop()
    cellfit.start()
    assert cellfit.metric('cellfit_cache_objects{kind="pods"}') >= 2
    cp.apply(suite.gpu_pod("waits-d", 4), namespace=ns)
    cp.wait_until(lambda: no_room_event(cp, ns, "waits-d", no_room), 60, "FailedScheduling for waits-d")
    assert node_of(cp, ns, "waits-d") is None and node_of(cp, ns, "waits-c") is None

    # 4. cellfit down: freeing a node schedules nothing
    cellfit.stop()
    freed = node_of(cp, ns, "full-a")
    cp.kubectl("-n", ns, "delete", "pod", "full-a", "--wait=true", timeout=60)
    time.sleep(8)
    assert node_of(cp, ns, "waits-c") is None and node_of(cp, ns, "waits-d") is None

    # 5. back: both waiting pods land on the freed node, within its 8 GPUs
    cellfit.start()
    cp.wait_until(lambda: node_of(cp, ns, "waits-c") and node_of(cp, ns, "waits-d"), 90, "waits-c and waits-d bound")
    assert node_of(cp, ns, "waits-c") == node_of(cp, ns, "waits-d") == freed
    assert all(total <= 8 for total in gpus_per_node(cp, ns).values()), gpus_per_node(cp, ns)
