"""The pods the pod-create webhook rewrites: only the containers the Job's template has take the
configuration (a sidecar another mutating webhook injected keeps its own), and a Job whose pods
the API server would refuse for their pod-level resources is refused before it starts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from placer.configuration import parse_configurations
from placer.controller import PlacerController
from placer.patch import PodsRefused, check_pod_level_resources, configured_containers, placement_patch
from placer.rewrite import apply_configuration
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.kube import wire
from scheduler.kube.translate import pod_requests
from tests.placer.test_controller import Jobs
from tests.placer.test_review_61 import ServerApi
from tests.placer.test_review_92 import WithoutKep5440
from tests.support import json_patch

GPU = {"gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"}, "env": {"CUDA": "1"}}}
# What Istio's injector adds to each pod before cellfit's webhook sees it (its MutatingWebhookConfiguration,
# istio-sidecar-injector, runs first where its name sorts first, or reinvokes cellfit's).
ISTIO_PROXY = {"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.24.0", "args": ["proxy", "sidecar"],
               "env": [{"name": "CUDA", "value": "0"}],
               "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}
ISTIO_INIT = {"name": "istio-init", "image": "docker.io/istio/proxyv2:1.24.0", "args": ["istio-iptables"],
              "resources": {"requests": {"cpu": "10m", "memory": "40Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}
TEMPLATE_SPEC = {"restartPolicy": "Never", "schedulerName": "cellfit",
                 "containers": [{"name": "trainer", "image": "train:1", "resources": {"requests": {"cpu": "1"}}}]}


def stored(name: str, configurations: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    kinds = {kind: {"seconds": 100} for kind in configurations}
    return json.loads(json.dumps({
        "metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "1",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/estimate": json.dumps(kinds)}},
        "spec": {"suspend": True, "template": {"metadata": {"labels": {"app": "train"}}, "spec": spec}}}))


def gpu_controller(api: ServerApi, *, mechanism: str) -> PlacerController:
    node = Resources(cpu_millis=16000, memory_bytes=64 * 2**30, gpus=1)
    return PlacerController(
        api=api, jobs=Jobs(api.watched()), settings=AlloxSettings(alpha=1.0, mechanism=mechanism, solver_process=False),
        gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=lambda: 1767225700.0,
    )


def created_pod(template: dict[str, Any]) -> dict[str, Any]:
    """The pod the Job controller makes of ``template``, as Istio's injector leaves it for cellfit's webhook."""
    pod = json.loads(json.dumps({"metadata": template["metadata"], "spec": template["spec"]}))
    pod["spec"]["containers"].append(json.loads(json.dumps(ISTIO_PROXY)))
    pod["spec"]["initContainers"] = [json.loads(json.dumps(ISTIO_INIT))]
    pod["metadata"]["annotations"]["sidecar.istio.io/status"] = '{"containers":["istio-proxy"],"initContainers":["istio-init"]}'
    return pod


def webhook_rewrite(pod: dict[str, Any]) -> dict[str, Any]:
    """What scheduler/extender/admission.py answers for the pod, applied as the API server applies it."""
    kind = pod["metadata"]["labels"]["cellfit.io/placement"]
    configuration = parse_configurations(pod["metadata"]["annotations"]["cellfit.io/configurations"])[kind]
    return json_patch.patched(pod, placement_patch(pod, configuration))


def gpus_asked(pod: dict[str, Any]) -> int:
    return pod_requests(wire.decode(wire.POD_DECODER, json.dumps(pod).encode()).spec, gpu_resource="nvidia.com/gpu", field="Pod").gpus


# ---------------------------------------------------------------------- injected containers


def test_only_the_named_containers_take_the_configuration() -> None:
    gpu = parse_configurations(json.dumps(GPU))["gpu"]
    pod = {"spec": {"containers": [{"name": "trainer", "image": "train:1"}, ISTIO_PROXY]}}
    trainer, proxy = apply_configuration(pod, gpu, containers=frozenset({"trainer"}))["spec"]["containers"]
    assert trainer["resources"] == {"requests": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": "1"}}
    assert proxy == ISTIO_PROXY


@pytest.mark.parametrize("mechanism", ["webhook", "template"])
def test_a_sidecar_injected_before_cellfits_webhook_keeps_its_resources_and_the_pod_asks_the_gpus_allox_booked(mechanism: str) -> None:
    # The proxy Istio injected into each pod of a placed Job got the configuration too: a GPU,
    # so the pod asked 2 where AlloX booked 1 (it may never fit), and 4 more cores.
    api = ServerApi([stored("train", GPU, TEMPLATE_SPEC)])
    (start,) = gpu_controller(api, mechanism=mechanism).admit().starts
    assert start.kind == "gpu"
    template = api.jobs["train"]["spec"]["template"]
    assert template["metadata"]["annotations"]["cellfit.io/configured-containers"] == "trainer"
    pod = webhook_rewrite(created_pod(template))
    trainer, proxy = pod["spec"]["containers"]
    assert trainer["resources"]["limits"] == {"nvidia.com/gpu": "1"} and {"name": "CUDA", "value": "1"} in trainer["env"]
    assert proxy == ISTIO_PROXY  # its resources, and its own CUDA=0, as it came
    assert pod["spec"]["initContainers"] == [ISTIO_INIT]
    assert gpus_asked(pod) == 1


def test_a_pod_of_a_job_placed_before_the_record_has_every_container_rewritten_as_before() -> None:
    # A Job a cellfit without the record placed: its template names no containers, and the webhook
    # cannot tell an injected one from the template's, so it rewrites them all, as that cellfit did.
    gpu = parse_configurations(json.dumps(GPU))["gpu"]
    template = apply_configuration({"spec": TEMPLATE_SPEC}, gpu, extra_labels={"cellfit.io/placement": "gpu"},
                                   extra_annotations={"cellfit.io/configurations": json.dumps(GPU)})
    pod = created_pod(template)
    assert configured_containers(pod) is None
    assert [c["resources"]["limits"] for c in webhook_rewrite(pod)["spec"]["containers"]] == [{"nvidia.com/gpu": "1"}] * 2


def test_a_recorded_name_the_pod_lacks_changes_nothing_else() -> None:
    gpu = parse_configurations(json.dumps(GPU))["gpu"]
    pod = {"metadata": {"annotations": {"cellfit.io/configured-containers": "trainer,gone"}},
           "spec": {"containers": [{"name": "trainer", "image": "train:1"}, ISTIO_PROXY]}}
    trainer, proxy = json_patch.patched(pod, placement_patch(pod, gpu))["spec"]["containers"]
    assert trainer["resources"]["limits"] == {"nvidia.com/gpu": "1"} and proxy == ISTIO_PROXY


# ---------------------------------------------------------------------- pod-level resources

CPU = {"cpu": {"resources": {"cpu": "4", "memory": "8Gi"}}}
TWO_CORES_A_POD = {**TEMPLATE_SPEC, "resources": {"requests": {"cpu": "2", "memory": "32Gi"}}}


@pytest.mark.parametrize("api", [
    ServerApi([stored("small", CPU, TWO_CORES_A_POD)]),  # allox.mechanism webhook
    WithoutKep5440([stored("small", CPU, TWO_CORES_A_POD)]),  # auto on a cluster without KEP-5440
], ids=["webhook", "auto-without-kep-5440"])
def test_a_job_whose_pods_ask_more_than_its_pod_level_resources_is_refused_before_it_starts(api: ServerApi) -> None:
    # The template's pod asks 2 cores; its container in the configuration 4. The webhook's patch
    # (labels, annotations) went through, the Job was unsuspended and told it runs, and the API
    # server refused each pod the webhook rewrote: FailedCreate for ever, AlloX's machine held.
    mechanism = "auto" if isinstance(api, WithoutKep5440) else "webhook"
    gpu_controller(api, mechanism=mechanism).admit()
    job = api.jobs["small"]
    assert job["spec"]["suspend"] is True and "cellfit.io/placement" not in job["metadata"]["annotations"]
    told = api.told["small"]
    assert told["reason"] == "Refused"
    assert "cellfit.io/configurations.cpu.resources.cpu" in told["message"]
    assert "spec.template.spec.resources.requests[cpu] of 2" in told["message"]
    assert any(reason == "PlacementRefused" for _, reason, _ in api.events)


def test_a_job_within_its_pod_level_resources_starts_with_the_webhook() -> None:
    api = ServerApi([stored("roomy", CPU, {**TEMPLATE_SPEC, "resources": {"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}}})])
    (start,) = gpu_controller(api, mechanism="webhook").admit().starts
    assert start.kind == "cpu" and api.jobs["roomy"]["spec"]["suspend"] is False


def spec_of(configuration: dict[str, Any], pod_level: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The pod of a template with two containers and ``pod_level`` resources, in ``configuration``."""
    template = {"spec": {"containers": [{"name": "a"}, {"name": "b"}], "resources": pod_level, **extra}}
    parsed = parse_configurations(json.dumps({"cpu": configuration}))["cpu"]
    return dict(apply_configuration(template, parsed)["spec"])


def refusal(configuration: dict[str, Any], pod_level: dict[str, Any], **extra: Any) -> PodsRefused | None:
    parsed = parse_configurations(json.dumps({"cpu": configuration}))["cpu"]
    try:
        check_pod_level_resources(spec_of(configuration, pod_level, **extra), parsed)
    except PodsRefused as refused:
        return refused
    return None


def test_containers_asking_more_than_a_pod_level_request_together_are_refused_naming_both_fields() -> None:
    refused = refusal({"resources": {"cpu": "4", "memory": "1Gi"}}, {"requests": {"cpu": "6"}})
    assert refused is not None and refused.field == "cellfit.io/configurations.cpu.resources.cpu"
    assert "ask 8 of cpu together" in str(refused) and "spec.template.spec.resources.requests[cpu] of 6" in str(refused)
    assert refusal({"resources": {"cpu": "3", "memory": "1Gi"}}, {"requests": {"cpu": "6", "memory": "2Gi"}}) is None


def test_a_pod_level_limit_stands_in_for_a_missing_pod_level_request() -> None:
    # The API server defaults the pod's request to its limit, then compares the containers with it.
    refused = refusal({"resources": {"memory": "3Gi"}}, {"limits": {"memory": "4Gi"}})
    assert refused is not None and "6Gi of memory together" in str(refused)
    assert "spec.template.spec.resources.limits[memory] of 4Gi" in str(refused)


def test_a_container_limit_above_the_pod_level_limit_is_refused() -> None:
    configuration = {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "8"}}}
    refused = refusal(configuration, {"requests": {"cpu": "4"}, "limits": {"cpu": "6"}})
    assert refused is not None and "container 'a' is limited to 8 of cpu" in str(refused)
    # A container's limit with no request is its request too (the API server defaults it so).
    refused = refusal({"resources": {"limits": {"cpu": "3"}}}, {"requests": {"cpu": "5"}, "limits": {"cpu": "6"}})
    assert refused is not None and "ask 6 of cpu together" in str(refused)


def test_init_containers_count_as_kube_scheduler_counts_them() -> None:
    sidecar = {"name": "log", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
    setup = {"name": "setup", "resources": {"requests": {"cpu": "7"}}}
    two_by_three = {"resources": {"cpu": "3", "memory": "1Gi"}}
    # A sidecar runs beside the containers: 3 + 3 + 1.
    assert refusal(two_by_three, {"requests": {"cpu": "6"}}, initContainers=[sidecar]) is not None
    # An init container runs before them: max(6, 7) = 7 asks more than 6; max(6, 5) does not.
    assert refusal(two_by_three, {"requests": {"cpu": "6"}}, initContainers=[setup]) is not None
    assert refusal(two_by_three, {"requests": {"cpu": "6"}}, initContainers=[{**setup, "resources": {"requests": {"cpu": "5"}}}]) is None


def test_resources_the_pod_level_resources_do_not_name_are_not_compared() -> None:
    assert refusal({"resources": {"cpu": "4", "memory": "64Gi", "nvidia.com/gpu": "1"}}, {"requests": {"cpu": "8"}}) is None


def test_hugepages_limited_together_beyond_the_pod_level_limit_are_refused() -> None:
    configuration = {"resources": {"cpu": "1", "hugepages-2Mi": "64Mi"}}
    refused = refusal(configuration, {"requests": {"cpu": "2"}, "limits": {"hugepages-2Mi": "100Mi"}})
    assert refused is not None and refused.field == "cellfit.io/configurations.cpu.resources.hugepages-2Mi"
    assert refusal(configuration, {"requests": {"cpu": "2"}, "limits": {"hugepages-2Mi": "128Mi"}}) is None
