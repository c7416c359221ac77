"""Host ports and resources other than cores, memory and GPUs are not modelled by the reclaim's
node rules (scheduler/kube/node_rules.py): whether kube-scheduler accepts such a pod on a node
depends on the pods that stay there (NodePorts; NodeResourcesFit on, say, ``rdma/hca``), and the
reclaim knows only their cores, memory and GPUs. A pod booked on a node kube-scheduler never
accepts held its cells for 330 s, and the opportunistic pods on them were deleted for nothing;
such a pod is now left to kube-scheduler, named in a CellsNotReclaimed Event.

The pods are as the API server lists them: defaults filled in (tolerations, the service
account's projected volume, a hostNetwork pod's hostPort), requests defaulted from limits."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from scheduler.kube import node_rules
from tests.cluster.test_stranded import AFTER, Cluster, unschedulable

API_SERVER_POD: dict[str, Any] = {
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {
        "name": "train-0-x7k2p", "generateName": "train-0-", "namespace": "vision",
        "uid": "6f1c2a4e-0b7d-4c55-9a8e-2f3d1e5b7c90", "resourceVersion": "482913",
        "creationTimestamp": "2026-11-28T01:12:09Z",
        "labels": {"batch.kubernetes.io/job-name": "train-0", "cellfit.io/virtual-cluster": "vision"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train-0",
                             "uid": "0d4e7c1a-5b2f-4e8d-9c3a-7f6b1e2d4a55", "controller": True, "blockOwnerDeletion": True}],
    },
    "spec": {
        "volumes": [{"name": "kube-api-access-9xq2w", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
        "containers": [{
            "name": "train", "image": "registry.example/train:1.4",
            "resources": {"limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"},
                          "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"}},
            "volumeMounts": [{"name": "kube-api-access-9xq2w", "readOnly": True,
                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        }],
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {},
        "schedulerName": "cellfit",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ],
        "priority": 100, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
    },
    "status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                        "lastTransitionTime": "2026-11-28T01:12:09Z", "reason": "Unschedulable",
                        "message": "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are "
                                   "available: 8 No preemption victims found for incoming pod."}],
        "qosClass": "Guaranteed",
    },
}


def listed(pod: dict[str, Any]) -> node_rules.ConstrainedPodSpec:
    body = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "482950"}, "items": [pod]}
    (decoded,) = node_rules.pods_of(json.dumps(body).encode())
    return decoded.spec


def pod_with(**changes: Any) -> dict[str, Any]:
    """The API server's pod with fields of its first container changed (None: removed)."""
    pod = copy.deepcopy(API_SERVER_POD)
    container = pod["spec"]["containers"][0]
    for key, value in changes.items():
        if value is None:
            container.pop(key, None)
        else:
            container[key] = value
    return pod


def test_a_plain_gpu_pod_as_the_api_server_lists_it_is_modelled():
    assert node_rules.unmodelled(listed(API_SERVER_POD)) is None
    assert node_rules.unmodelled(listed(pod_with(ports=[{"containerPort": 8080, "protocol": "TCP"}]))) is None


def test_a_host_port_is_not_modelled():
    spec = listed(pod_with(ports=[{"name": "metrics", "containerPort": 9400, "protocol": "TCP"},
                                  {"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]))
    assert node_rules.unmodelled(spec) == "spec.containers[0].ports[1].hostPort (8080, a host port)"


def test_a_host_network_pod_has_its_ports_on_the_host():
    pod = pod_with(ports=[{"containerPort": 29500, "hostPort": 29500, "protocol": "TCP"}])  # hostPort filled in by the API server
    pod["spec"]["hostNetwork"] = True
    assert node_rules.unmodelled(listed(pod)) == "spec.containers[0].ports[0].hostPort (29500, a host port)"


def test_a_sidecars_host_port_is_not_modelled_either():
    pod = copy.deepcopy(API_SERVER_POD)
    pod["spec"]["initContainers"] = [{"name": "proxy", "image": "registry.example/proxy:2", "restartPolicy": "Always",
                                      "ports": [{"containerPort": 15001, "hostPort": 15001, "protocol": "TCP"}]}]
    assert node_rules.unmodelled(listed(pod)) == "spec.initContainers[0].ports[0].hostPort (15001, a host port)"


@pytest.mark.parametrize(
    ("resources", "named"),
    [
        ({"limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4", "rdma/hca": "1"},
          "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4", "rdma/hca": "1"}},
         "spec.containers[0].resources.requests['rdma/hca']"),
        ({"limits": {"nvidia.com/gpu": "4", "hugepages-2Mi": "1Gi", "memory": "64Gi"},
          "requests": {"cpu": "8", "nvidia.com/gpu": "4", "hugepages-2Mi": "1Gi", "memory": "64Gi"}},
         "spec.containers[0].resources.requests['hugepages-2Mi']"),
        ({"limits": {"nvidia.com/gpu": "4", "example.com/fpga": "1"}},  # a limit the requests take as theirs
         "spec.containers[0].resources.limits['example.com/fpga']"),
    ],
)
def test_a_resource_other_than_cores_memory_and_gpus_is_not_modelled(resources: dict[str, Any], named: str):
    found = node_rules.unmodelled(listed(pod_with(resources=resources)))
    assert found == f"{named} (a resource the reclaim does not check: cellfit checks cpu, memory and nvidia.com/gpu)"


def test_ephemeral_storage_is_assumed_to_fit():
    # A LimitRange's default request: were it unmodelled, no pod of the namespace would be reclaimed for.
    resources = {"limits": {"nvidia.com/gpu": "4", "ephemeral-storage": "40Gi"},
                 "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4", "ephemeral-storage": "20Gi"}}
    assert node_rules.unmodelled(listed(pod_with(resources=resources))) is None


def test_pod_level_resources_and_an_init_containers_are_read_too():
    pod = copy.deepcopy(API_SERVER_POD)
    pod["spec"]["initContainers"] = [{"name": "fetch", "image": "registry.example/fetch:1",
                                      "resources": {"requests": {"cpu": "1", "rdma/hca": "1"}, "limits": {"rdma/hca": "1"}}}]
    assert node_rules.unmodelled(listed(pod)).startswith("spec.initContainers[0].resources.requests['rdma/hca']")
    pod = copy.deepcopy(API_SERVER_POD)
    pod["spec"]["resources"] = {"requests": {"cpu": "8", "memory": "64Gi", "example.com/nic": "2"}}
    assert node_rules.unmodelled(listed(pod)).startswith("spec.resources.requests['example.com/nic']")


def test_the_gpu_resource_is_the_one_cellfit_counts():
    pod = pod_with(resources={"limits": {"amd.com/gpu": "4"}, "requests": {"cpu": "8", "amd.com/gpu": "4"}})
    assert node_rules.unmodelled(listed(pod), gpu_resource="amd.com/gpu") is None
    assert node_rules.unmodelled(listed(pod)) is not None  # not a GPU where cellfit counts nvidia.com/gpu


def test_a_stranded_pod_with_a_host_port_keeps_its_squatters_and_its_owner_is_told():
    cluster = Cluster()
    cluster.api.pending = [unschedulable(cluster.g, containers=[
        {"name": "main", "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]}])]
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and not cluster.engine.has_booking(cluster.g)
    (event,) = cluster.api.events
    assert (event["pod_name"], event["reason"]) == ("g", "CellsNotReclaimed")
    assert "spec.containers[0].ports[0].hostPort (8080, a host port)" in event["message"], event["message"]


def test_a_stranded_pod_asking_for_rdma_keeps_its_squatters():
    cluster = Cluster()
    cluster.api.pending = [unschedulable(cluster.g, containers=[
        {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "4", "rdma/hca": "1"},
                                       "requests": {"nvidia.com/gpu": "4", "rdma/hca": "1"}}}])]
    cluster.look_at(0)
    assert cluster.look_at(AFTER) == [] and not cluster.engine.has_booking(cluster.g)
    (event,) = cluster.api.events
    assert "spec.containers[0].resources.requests['rdma/hca']" in event["message"], event["message"]
