"""The pod-create webhook called again (``reinvocationPolicy: IfNeeded``, charts/cellfit/templates/
webhook.yaml) after a mutating webhook that runs after cellfit's injected a sidecar: the call
patches nothing it patched already, leaves the sidecar as it came, and refuses the pod, naming
the fields and the sidecar, where the sidecar makes it ask more than its pod-level resources
(KEP-2837), which the API server would refuse with neither named.

Each call is the AdmissionReview the API server POSTs (tests/support/kube_objects.admission_review:
the pod as the Job controller creates it), answered by scheduler/extender/admission.py, its
patch applied as the API server applies it."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from scheduler.extender.admission import PodAdmission
from scheduler.extender.metrics import ExtenderMetrics
from tests.support import json_patch
from tests.support import kube_objects as k

CONFIGURATIONS = {"cpu": {"resources": {"cpu": "8", "memory": "16Gi"}},
                  "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"}, "env": {"CUDA": "1"}}}
# What Istio's injector (istio-sidecar-injector, named after cellfit's, so run after it) adds.
ISTIO_PROXY = {"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.24.0", "args": ["proxy", "sidecar"],
               "env": [{"name": "CUDA", "value": "0"}],
               "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
               "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
               "imagePullPolicy": "IfNotPresent"}


def webhook() -> tuple[PodAdmission, ExtenderMetrics]:
    metrics = ExtenderMetrics()
    # No preemption: only the placer's rewrite answers (the resumed class is another test's).
    return PodAdmission(preemption=None, lock=threading.RLock(), metrics=metrics, resumed_class=None), metrics


def created_pod(*, recorded: bool = True, pod_level: dict[str, Any] | None = None) -> dict[str, Any]:
    """The pod the Job controller makes of the template of a Job AlloX placed on gpu under the webhook
    mechanism: its container as written, the placement's label and annotations copied from the template."""
    pod = k.pod("train-p4x2z", gpus=0, labels={"cellfit.io/placement": "gpu"})
    pod["metadata"]["annotations"] = {"cellfit.io/configurations": json.dumps(CONFIGURATIONS)}
    if recorded:
        pod["metadata"]["annotations"]["cellfit.io/configured-containers"] = "trainer"
    (trainer,) = pod["spec"]["containers"]
    trainer["name"], trainer["resources"] = "trainer", {"requests": {"cpu": "1"}}
    if pod_level is not None:
        pod["spec"]["resources"] = pod_level
    return pod


def injected(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` after Istio's injector: its proxy appended, as it appends it."""
    after = json.loads(json.dumps(pod))
    after["spec"]["containers"].append(json.loads(json.dumps(ISTIO_PROXY)))
    after["metadata"]["annotations"]["sidecar.istio.io/status"] = '{"containers":["istio-proxy"]}'
    return after


def called(service: PodAdmission, pod: dict[str, Any]) -> dict[str, Any]:
    answer = service.review(k.dumps(k.admission_review(pod)))
    assert answer.status == 200
    response: dict[str, Any] = json.loads(answer.body)["response"]
    return response


def admitted(service: PodAdmission, pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as the API server keeps it after this call: the webhook's patch applied."""
    response = called(service, pod)
    assert response["allowed"] is True, response
    object_sent = k.admission_review(pod)["request"]["object"]
    return json_patch.patched(object_sent, json.loads(base64.b64decode(response["patch"]))) if "patch" in response else object_sent


def test_called_again_after_a_sidecar_was_injected_it_patches_nothing_twice_and_leaves_the_sidecar() -> None:
    service, metrics = webhook()
    rewritten = admitted(service, created_pod())
    trainer = rewritten["spec"]["containers"][0]
    assert trainer["resources"]["limits"] == {"nvidia.com/gpu": "1"} and {"name": "CUDA", "value": "1"} in trainer["env"]
    again = called(service, injected(rewritten))
    assert again == {"uid": again["uid"], "allowed": True}  # no patch: the proxy keeps its resources and CUDA=0
    assert metrics.admission_reviews.labels(result="placed")._value.get() == 1
    assert metrics.admission_reviews.labels(result="unchanged")._value.get() == 1


def test_a_pod_of_a_job_placed_before_the_record_keeps_a_sidecar_injected_after_the_first_call_as_it_came() -> None:
    # No record: the first call rewrites every container present then, and records them; the
    # second must not give the proxy injected since a GPU (the pod would ask two, AlloX booked one).
    service, _ = webhook()
    rewritten = admitted(service, created_pod(recorded=False))
    assert rewritten["metadata"]["annotations"]["cellfit.io/configured-containers"] == "trainer"
    pod = admitted(service, injected(rewritten))
    assert pod["spec"]["containers"][1] == ISTIO_PROXY
    assert pod == injected(rewritten) | {"metadata": pod["metadata"]}  # nothing else patched either


def test_a_sidecar_that_tips_the_pod_over_its_pod_level_request_is_refused_naming_the_fields_and_the_sidecar() -> None:
    # The template's pod-level request holds the configuration's 4 cores exactly, which the
    # placement checked; the proxy's 100m makes 4100m, which the API server refuses after the
    # webhooks, naming neither the configuration nor the proxy: FailedCreate for ever.
    service, metrics = webhook()
    rewritten = admitted(service, created_pod(pod_level={"requests": {"cpu": "4", "memory": "20Gi"}}))
    response = called(service, injected(rewritten))
    assert response["allowed"] is False and "patch" not in response
    message = response["status"]["message"]
    assert message.startswith("cellfit refuses this pod in the configuration its Job was placed in: "
                              "cellfit.io/configurations.gpu.resources.cpu: the pod's containers ask 4100m of cpu together"), message
    assert "container 'istio-proxy' 100m, its own: not the Job template's, another mutating webhook added it" in message
    assert "container 'trainer' 4, the configuration's" in message
    assert "pod-level spec.resources.requests[cpu] of 4 of the pod" in message
    assert metrics.admission_reviews.labels(result="refused")._value.get() == 1


def test_a_sidecar_limited_beyond_the_pod_level_limit_is_named_as_its_own() -> None:
    service, _ = webhook()
    rewritten = admitted(service, created_pod(pod_level={"requests": {"cpu": "6"}, "limits": {"cpu": "1500m"}}))
    message = called(service, injected(rewritten))["status"]["message"]
    # Its own limit against the template's: the configuration is not the field to change.
    assert ("spec.resources.limits[cpu]: container 'istio-proxy' is limited to 2 of cpu (its own: not the Job template's, "
            "another mutating webhook added it), more than the pod-level spec.resources.limits[cpu] of 1500m") in message, message


def test_a_sidecar_within_the_pod_level_resources_is_admitted() -> None:
    service, _ = webhook()
    rewritten = admitted(service, created_pod(pod_level={"requests": {"cpu": "5", "memory": "20Gi"}, "limits": {"cpu": "4"}}))
    assert called(service, injected(rewritten))["allowed"] is True


def test_a_sidecar_init_container_is_named_without_saying_who_added_it() -> None:
    # The record names the template's containers only: a sidecar init container may be the
    # template's own (a log shipper) or injected (Istio's native sidecar); the message claims neither.
    service, _ = webhook()
    pod = created_pod(pod_level={"requests": {"cpu": "5"}})
    pod["spec"]["initContainers"] = [{"name": "log-shipper", "image": "fluent-bit:3", "restartPolicy": "Always",
                                      "resources": {"requests": {"cpu": "1"}}}]
    rewritten = admitted(service, pod)
    message = called(service, injected(rewritten))["status"]["message"]
    assert ("ask 5100m of cpu together in this configuration (container 'trainer' 4, the configuration's; container "
            "'istio-proxy' 100m, its own: not the Job template's, another mutating webhook added it; sidecar init container "
            "'log-shipper' 1, its own), more than the pod-level spec.resources.requests[cpu] of 5") in message, message
