"""AdmissionReviews as kube-apiserver POSTs them to a *validating* webhook, and the batch/v1 Jobs
inside them as the API server has defaulted them by then.

A validating webhook is called after the object got its system fields (the registry's
BeforeCreate: uid, name from generateName, creationTimestamp; for a Job its selector and the
controller-uid labels), unlike a mutating one (kube_objects.admission_review strips them)."""

from __future__ import annotations

import copy
import uuid
from typing import Any, Literal

from tests.support.kube_objects import CREATED

# The README's rule for a best-effort Job: a preempted pod is not counted against backoffLimit.
RESUMES: dict[str, Any] = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}

ADMIN = {"username": "kubernetes-admin", "groups": ["kubeadm:cluster-admins", "system:authenticated"]}


def job(
    name: str,
    *,
    namespace: str = "ml",
    uid: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    template_labels: dict[str, str] | None = None,
    template_annotations: dict[str, str] | None = None,
    gpus: int = 1,
    parallelism: int = 1,
    completions: int | None = None,
    suspend: bool = False,
    pod_failure_policy: dict[str, Any] | None = RESUMES,
    backoff_limit: int = 6,
) -> dict[str, Any]:
    """``pod_failure_policy``: the README's for a best-effort Job unless given (None: none)."""
    uid = uid or str(uuid.uuid4())
    resources: dict[str, Any] = {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    controller_labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                         "controller-uid": uid, "job-name": name}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "generation": 1,
            "creationTimestamp": CREATED,
            "labels": dict(labels or {}),
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", **(annotations or {})},
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "batch/v1",
                               "time": CREATED, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}}],
        },
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism if completions is None else completions,
            "backoffLimit": backoff_limit,
            "completionMode": "NonIndexed",
            "suspend": suspend,
            "manualSelector": False,
            # The API server's default: Failed with a podFailurePolicy, else TerminatingOrFailed.
            "podReplacementPolicy": "Failed" if pod_failure_policy is not None else "TerminatingOrFailed",
            **({"podFailurePolicy": copy.deepcopy(pod_failure_policy)} if pod_failure_policy is not None else {}),
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
            "template": {
                "metadata": {
                    "creationTimestamp": None,
                    "labels": {**controller_labels, **(template_labels or {})},
                    "annotations": dict(template_annotations or {}),
                },
                "spec": {
                    "containers": [{
                        "name": "trainer",
                        "image": "ghcr.io/example/trainer:1.4",
                        "resources": resources,
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "imagePullPolicy": "IfNotPresent",
                    }],
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 30,
                    "dnsPolicy": "ClusterFirst",
                    "securityContext": {},
                    "schedulerName": "cellfit",
                },
            },
        },
        "status": {},
    }


def validating_review(
    body: dict[str, Any],
    *,
    operation: Literal["CREATE", "UPDATE", "DELETE"] = "CREATE",
    old: dict[str, Any] | None = None,
    user: dict[str, Any] = ADMIN,
) -> dict[str, Any]:
    """``body`` (a Pod of kube_objects.pod, or a :func:`job`) in a v1 AdmissionReview."""
    obj = copy.deepcopy(body)
    kind = obj.get("kind") or "Pod"
    group, version, resource = ("batch", "v1", "jobs") if kind == "Job" else ("", "v1", "pods")
    obj.setdefault("apiVersion", f"{group}/{version}" if group else version)
    obj.setdefault("kind", kind)
    meta = obj["metadata"]
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", "ml"),
            "operation": operation,
            "userInfo": user,
            "object": None if operation == "DELETE" else obj,
            "oldObject": copy.deepcopy(old) if old is not None else None,
            "dryRun": False,
            "options": {"kind": f"{operation.title()}Options", "apiVersion": "meta.k8s.io/v1"},
        },
    }
