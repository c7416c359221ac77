"""Kubernetes objects and extender payloads shaped exactly as the API server and kube-scheduler
serialise them: full v1.Pod / v1.Node JSON (managedFields, status, conditions and all), wrapped
in the extender types with Go's field names. Tests build on these instead of hand-trimmed dicts
so that cellfit's narrow decoding is proven against what really arrives."""

from __future__ import annotations

import json
import uuid
from typing import Any

CREATED = "2026-11-20T09:14:07Z"
# Every pod built here belongs to a Job with this UID (its name follows the pod's).
JOB_UID = "5f1f2a0e-8d3b-4c1e-9d55-0c3f6f1d7a10"


def pod(
    name: str,
    *,
    namespace: str = "ml",
    uid: str | None = None,
    gpus: int = 0,
    cpu: str = "2",
    memory: str = "8Gi",
    node_name: str | None = None,
    phase: str = "Pending",
    priority: int = 0,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    init_cpu: str | None = None,
    grace_period_seconds: int = 30,
    job_uid: str = JOB_UID,
) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {"memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
        limits["nvidia.com/gpu"] = str(gpus)
    job = name.rsplit("-", 1)[0]
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "generateName": f"{job}-",
            "namespace": namespace,
            "uid": uid or str(uuid.uuid4()),
            "resourceVersion": "48213",
            "creationTimestamp": CREATED,
            "labels": {"batch.kubernetes.io/job-name": job, "job-name": job, **(labels or {})},
            "annotations": annotations or {},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": job_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": CREATED,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}}}},
                }
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-7xk2p",
                    "projected": {
                        "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                {
                    "name": "trainer",
                    "image": "ghcr.io/example/trainer:1.4",
                    "command": ["python", "train.py"],
                    "env": [{"name": "EPOCHS", "value": "10"}],
                    "resources": {"limits": limits, "requests": requests},
                    "volumeMounts": [
                        {"name": "kube-api-access-7xk2p", "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": grace_period_seconds,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "cellfit",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "priority": priority,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": phase,
            "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": CREATED, "reason": "Unschedulable"}],
            "qosClass": "Burstable",
        },
    }
    if init_cpu is not None:
        body["spec"]["initContainers"] = [
            {"name": "fetch-data", "image": "busybox:1.36", "resources": {"requests": {"cpu": init_cpu}}}
        ]
    if node_name is not None:
        body["spec"]["nodeName"] = node_name
    return body


def node(
    name: str,
    *,
    gpus: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    ready: bool = True,
    product: str = "NVIDIA-A100-SXM4-80GB",
) -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "1Ti", "hugepages-2Mi": "0"}
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "topology.cellfit.io/rack": "rack-1",
    }
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
        labels.update({"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus)})
    return {
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid4()),
            "resourceVersion": "91234",
            "creationTimestamp": CREATED,
            "labels": labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": CREATED, "fieldsType": "FieldsV1", "fieldsV1": {}}],
        },
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": CREATED, "lastTransitionTime": CREATED, "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available"},
                {"type": "Ready", "status": "True" if ready else "False", "lastHeartbeatTime": CREATED, "lastTransitionTime": CREATED, "reason": "KubeletReady", "message": "kubelet is posting ready status"},
            ],
            "addresses": [{"type": "InternalIP", "address": "172.18.0.4"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "0b1c", "systemUUID": "0b1c", "bootID": "a1", "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": "v1.32.13", "kubeProxyVersion": "v1.32.13", "operatingSystem": "linux", "architecture": "amd64",
            },
            "images": [{"names": ["ghcr.io/example/trainer:1.4"], "sizeBytes": 3_221_225_472}],
        },
    }


def node_list(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": "91240"}, "items": nodes}


def extender_args(pod_body: dict[str, Any], nodes: list[dict[str, Any]], *, node_cache_capable: bool) -> dict[str, Any]:
    """kube-scheduler's ExtenderArgs: Go field names, the unused pointer field null."""
    if node_cache_capable:
        return {"Pod": pod_body, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]}
    return {"Pod": pod_body, "Nodes": node_list(nodes), "NodeNames": None}


def preemption_args(
    pod_body: dict[str, Any], victims: dict[str, list[dict[str, Any]]], *, node_cache_capable: bool
) -> dict[str, Any]:
    """kube-scheduler's ExtenderPreemptionArgs: full victims, or only their UIDs."""
    if node_cache_capable:
        meta = {
            node_name: {"Pods": [{"UID": p["metadata"]["uid"]} for p in pods], "NumPDBViolations": 0}
            for node_name, pods in victims.items()
        }
        return {"Pod": pod_body, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
    full = {node_name: {"Pods": pods, "NumPDBViolations": 0} for node_name, pods in victims.items()}
    return {"Pod": pod_body, "NodeNameToVictims": full, "NodeNameToMetaVictims": None}


def dumps(body: Any) -> bytes:
    return json.dumps(body).encode()


def admission_review(pod_body: dict[str, Any], *, operation: str = "CREATE") -> dict[str, Any]:
    """An admission.k8s.io/v1 AdmissionReview as kube-apiserver POSTs it to a mutating webhook
    when the Job controller creates a pod: the object has no uid, resourceVersion or
    creationTimestamp yet, and its priority is already set by the Priority admission plugin."""
    created = json.loads(json.dumps(pod_body))
    for key in ("uid", "resourceVersion", "creationTimestamp", "name"):
        created["metadata"].pop(key, None)
    created.pop("status", None)
    namespace = created["metadata"].pop("namespace", "ml")
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": operation,
            "userInfo": {
                "username": "system:serviceaccount:kube-system:job-controller",
                "uid": "0e5c7b7e-1f4c-4a3f-9d2a-6b1b7f0c2d11",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
            },
            "object": created,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }
