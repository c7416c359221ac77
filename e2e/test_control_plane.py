"""Smoke tests: the local control plane is a real Kubernetes API with a real kube-scheduler.

They prove what cellfit's own e2e tests rely on: fake GPU nodes that are Ready and carry GPU
feature discovery labels, the default scheduler placing pods by nvidia.com/gpu, kwok running
pods and completing them after `cellfit.io/e2e-run-for`, and FailedScheduling events for
requests no node can hold.
"""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

# The fixture's type lives in e2e/conftest.py, which test modules cannot import.
ControlPlane = Any
KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
RUN_FOR_ANNOTATION = "cellfit.io/e2e-run-for"

GPUS_PER_NODE = 8


def gpu_pod(name: str, gpus: int, run_for: str | None = None) -> dict[str, Any]:
    annotations = {RUN_FOR_ANNOTATION: run_for} if run_for else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "tolerations": [KWOK_TOLERATION],
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "cellfit.io/e2e/fake:latest",
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"}
                    },
                }
            ],
        },
    }


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def get_pod(cp: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    return cp.kubectl_json("-n", ns, "get", "pod", name)


def test_gpu_nodes_are_ready_with_gfd_labels(control_plane: ControlPlane) -> None:
    nodes = control_plane.kubectl_json("get", "nodes", "-l", "cellfit.io/e2e-node=true")["items"]
    assert len(nodes) >= 2, f"expected the GPU nodes created by up.sh, got {len(nodes)}"
    for node in nodes:
        name = node["metadata"]["name"]
        labels = node["metadata"]["labels"]
        conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
        assert conditions.get("Ready") == "True", f"{name} not Ready: {conditions}"
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
        assert labels["nvidia.com/gpu.count"] == str(GPUS_PER_NODE)
        assert labels["topology.cellfit.io/rack"].startswith("rack-")
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == str(GPUS_PER_NODE)
        assert node["status"]["capacity"]["nvidia.com/gpu"] == str(GPUS_PER_NODE)
        assert any(t["key"] == "kwok.x-k8s.io/node" for t in node["spec"].get("taints", []))
    version = control_plane.kubectl_json("version")["serverVersion"]
    assert version["gitVersion"] == control_plane.env["CELLFIT_E2E_KUBE_VERSION"]


def test_gpu_pod_is_scheduled_runs_and_succeeds(control_plane: ControlPlane) -> None:
    cp = control_plane
    ns = cp.create_namespace("smoke")
    cp.apply(gpu_pod("train-2gpu", gpus=2, run_for="5s"), namespace=ns)

    # Running lasts its 5 s: a poll late by that much sees it Succeeded, which ran_for checks below.
    running = cp.wait_until(
        lambda: (p := get_pod(cp, ns, "train-2gpu"))["status"].get("phase") in ("Running", "Succeeded") and p,
        60,
        "pod train-2gpu Running",
    )
    node_name = running["spec"].get("nodeName")
    assert node_name, "a Running pod must be bound to a node"
    node = cp.kubectl_json("get", "node", node_name)
    assert node["metadata"]["labels"].get("cellfit.io/e2e-node") == "true"
    scheduled = [e for e in cp.events_for(ns, "train-2gpu") if e["reason"] == "Scheduled"]
    assert scheduled, "no Scheduled event"
    reporters = {scheduled[0].get("reportingComponent"), scheduled[0].get("source", {}).get("component")}
    assert "default-scheduler" in reporters, scheduled[0]

    done = cp.wait_until(
        lambda: (p := get_pod(cp, ns, "train-2gpu"))["status"].get("phase") == "Succeeded" and p,
        60,
        "pod train-2gpu Succeeded after its 5s run",
    )
    (status,) = done["status"]["containerStatuses"]
    terminated = status["state"]["terminated"]
    assert terminated["exitCode"] == 0
    assert terminated["reason"] == "Completed"
    # kwok honoured the 5s: Running (startTime) to finishedAt, at 1s timestamp resolution.
    ran_for = parse_time(terminated["finishedAt"]) - parse_time(done["status"]["startTime"])
    assert 4 <= ran_for.total_seconds() <= 15, f"pod ran for {ran_for}, expected about 5s"


def test_pod_larger_than_any_node_stays_pending(control_plane: ControlPlane) -> None:
    cp = control_plane
    ns = cp.create_namespace("smoke")
    cp.apply(gpu_pod("too-big", gpus=GPUS_PER_NODE + 1, run_for="5s"), namespace=ns)

    failed = cp.wait_until(
        lambda: [e for e in cp.events_for(ns, "too-big") if e["reason"] == "FailedScheduling"],
        60,
        "a FailedScheduling event for pod too-big",
    )
    assert any("nvidia.com/gpu" in e.get("message", "") for e in failed), [
        e.get("message") for e in failed
    ]
    pod = get_pod(cp, ns, "too-big")
    assert pod["status"].get("phase") == "Pending"
    assert not pod["spec"].get("nodeName")
    cond = {c["type"]: c for c in pod["status"].get("conditions", [])}
    assert cond["PodScheduled"]["status"] == "False"
    assert cond["PodScheduled"]["reason"] == "Unschedulable"


def test_second_kube_scheduler_from_env_file_schedules_its_pods(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """What cellfit's tests do: start their own kube-scheduler next to default-scheduler."""
    cp = control_plane
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        f"clientConnection:\n  kubeconfig: {cp.kubeconfig}\n"
        "leaderElection:\n  leaderElect: false\n"
        "profiles:\n- schedulerName: e2e-second-scheduler\n"
    )
    ns = cp.create_namespace("smoke")
    log = (tmp_path / "scheduler.log").open("w")
    proc = subprocess.Popen(
        [cp.kube_scheduler_bin, "--config", str(config), "--secure-port=0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=cp.process_env(),
    )
    try:
        pod = gpu_pod("second", gpus=1)
        pod["spec"]["schedulerName"] = "e2e-second-scheduler"
        cp.apply(pod, namespace=ns)
        cp.wait_until(
            lambda: get_pod(cp, ns, "second")["status"].get("phase") == "Running",
            60,
            "pod scheduled by the second kube-scheduler to be Running",
        )
        scheduled = [e for e in cp.events_for(ns, "second") if e["reason"] == "Scheduled"]
        assert scheduled and scheduled[0].get("reportingComponent") == "e2e-second-scheduler"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_helm_installs_into_the_cluster(control_plane: ControlPlane, tmp_path: Path) -> None:
    cp = control_plane
    chart = tmp_path / "smoke"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: smoke\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n"
        "data:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n"
    )
    ns = cp.create_namespace("helm")
    env = cp.process_env()
    subprocess.run(
        [cp.helm_bin, "lint", "--strict", str(chart)], env=env, check=True, capture_output=True
    )
    proc = subprocess.run(
        [cp.helm_bin, "install", "smoke", str(chart), "-n", ns, "--wait", "--timeout", "60s"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    cm = cp.kubectl_json("-n", ns, "get", "configmap", "smoke-cm")
    assert cm["data"]["kube"] == cp.env["CELLFIT_E2E_KUBE_VERSION"]
