"""The pod-create webhook called again (``reinvocationPolicy: IfNeeded``) after a later mutating
webhook added a resource to the configured container (an ``ephemeral-storage`` request Kyverno
or GKE Autopilot adds so that a ResourceQuota requiring it admits the pod): the resource is no
configuration's, so the second call keeps it (it replaced the container's whole ``resources``,
dropped the request, and the quota refused every pod). A resource the template itself asks that
no configuration states (``ephemeral-storage``, ``hugepages-2Mi``) is kept likewise, and one
another configuration states (the GPU a template written for GPUs asks) is taken out."""

from __future__ import annotations

import json
from typing import Any

from tests.support import kube_objects as k
from tests.unit.test_admission_reinvocation import admitted, called, webhook

CONFIGURATIONS = {"cpu": {"resources": {"cpu": "8", "memory": "16Gi"}},
                  "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"}}}


def created_pod(kind: str, resources: dict[str, Any]) -> dict[str, Any]:
    pod = k.pod("train-k2v9q", gpus=0, labels={"cellfit.io/placement": kind})
    pod["metadata"]["annotations"] = {"cellfit.io/configurations": json.dumps(CONFIGURATIONS),
                                      "cellfit.io/configured-containers": "trainer"}
    (trainer,) = pod["spec"]["containers"]
    trainer["name"], trainer["resources"] = "trainer", resources
    return pod


def quota_mutated(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` after a later webhook (a Kyverno policy's) gave each container an ephemeral-storage
    request and limit, for a ResourceQuota on ``requests.ephemeral-storage``."""
    after = json.loads(json.dumps(pod))
    for container in after["spec"]["containers"]:
        resources = container.setdefault("resources", {})
        resources.setdefault("requests", {})["ephemeral-storage"] = "1Gi"
        resources.setdefault("limits", {})["ephemeral-storage"] = "2Gi"
    return after


def test_a_resource_a_later_webhook_added_survives_the_reinvocation() -> None:
    service, _ = webhook()
    rewritten = admitted(service, created_pod("cpu", {"requests": {"cpu": "1"}}))
    assert rewritten["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "8", "memory": "16Gi"}}
    again = quota_mutated(rewritten)
    response = called(service, again)
    assert response == {"uid": response["uid"], "allowed": True}, response  # nothing to patch
    # Had a configuration been edited back in its way (an amount changed), the request stays too.
    again["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    pod = admitted(service, again)
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "8", "memory": "16Gi", "ephemeral-storage": "1Gi"}, "limits": {"ephemeral-storage": "2Gi"}}


def test_the_templates_own_unconfigured_resources_are_kept_and_the_gpu_is_taken_out_on_cpu() -> None:
    service, _ = webhook()
    written = {"requests": {"cpu": "1", "ephemeral-storage": "10Gi", "hugepages-2Mi": "256Mi"},
               "limits": {"nvidia.com/gpu": "2", "hugepages-2Mi": "256Mi", "memory": "64Gi"}}
    pod = admitted(service, created_pod("cpu", written))
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"ephemeral-storage": "10Gi", "hugepages-2Mi": "256Mi", "cpu": "8", "memory": "16Gi"},
        "limits": {"hugepages-2Mi": "256Mi"}}
    again = called(service, pod)
    assert again == {"uid": again["uid"], "allowed": True}, again
    on_gpu = admitted(service, created_pod("gpu", written))
    assert on_gpu["spec"]["containers"][0]["resources"] == {
        "requests": {"ephemeral-storage": "10Gi", "hugepages-2Mi": "256Mi", "nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"},
        "limits": {"hugepages-2Mi": "256Mi", "nvidia.com/gpu": "1"}}
