"""The webhook mechanism and a pod-level request the template leaves out (KEP-2837): the API server
defaults a pod's missing pod-level cpu or memory request, when it has a pod-level limit, to what
its containers ask together *as the Job controller creates it* (SetDefaults_Pod, defaultPodRequests:
the pod-level limit only where no container asks), before any admission webhook runs. The
webhook then gives the template's containers the configuration, and a configuration asking more
than the template's own containers makes every pod one the API server refuses. Such a Job is
refused before it starts, naming the field to set; not started with its every pod refused."""

from __future__ import annotations

import json
from typing import Any

from placer.configuration import parse_configurations
from placer.patch import PodsRefused, checked_placement_patch, pod_level_as_created
from tests.placer.test_review_61 import ServerApi
from tests.placer.test_webhook_pods import CPU, TEMPLATE_SPEC, gpu_controller, stored

# The template caps the pod at 8 cores and names no pod-level request; its container asks 1 core,
# its configuration 4.
CAPPED_AT_EIGHT = {**TEMPLATE_SPEC, "resources": {"limits": {"cpu": "8"}}}


def created(template: dict[str, Any]) -> dict[str, Any]:
    """The pod the Job controller makes of ``template``, as the API server has defaulted it when
    cellfit's webhook sees it: the containers' 1 core together is the pod-level request (written by
    hand, as kube-apiserver's defaults_test.go has it; not by the code under test)."""
    pod = json.loads(json.dumps({"metadata": template["metadata"], "spec": template["spec"]}))
    pod["spec"]["resources"]["requests"] = {"cpu": "1"}
    return pod


def test_the_pod_the_api_server_makes_of_such_a_template_is_one_the_webhook_refuses() -> None:
    # What the Job's pods meet, so what the placement must foresee.
    cpu = parse_configurations(json.dumps(CPU))["cpu"]
    template = {"metadata": {"labels": {"cellfit.io/placement": "cpu"},
                             "annotations": {"cellfit.io/configurations": json.dumps(CPU),
                                             "cellfit.io/configured-containers": "trainer"}},
                "spec": json.loads(json.dumps(CAPPED_AT_EIGHT))}
    try:
        checked_placement_patch(created(template), cpu)
    except PodsRefused as refused:
        assert "spec.resources.requests[cpu] of 1" in str(refused)
    else:
        raise AssertionError("the API server refuses this pod: 4 cores asked, a pod-level request of 1")


def test_a_job_whose_defaulted_pod_level_request_its_configuration_exceeds_is_refused_before_it_starts() -> None:
    # Before: the check read the missing request as the limit (8 cores), the Job was unsuspended
    # and told it runs on cpu, and the API server (or cellfit's webhook) refused every pod.
    api = ServerApi([stored("capped", CPU, CAPPED_AT_EIGHT)])
    gpu_controller(api, mechanism="webhook").admit()
    job = api.jobs["capped"]
    assert job["spec"]["suspend"] is True and "cellfit.io/placement" not in job["metadata"]["annotations"]
    told = api.told["capped"]
    assert told["reason"] == "Refused"
    assert "cellfit.io/configurations.cpu.resources.cpu" in told["message"]
    # What to change: the request the template leaves to the API server's default.
    assert "spec.template.spec.resources.requests[cpu] of 1 (not set in the template" in told["message"], told["message"]


def test_a_template_naming_its_pod_level_request_starts_with_the_webhook() -> None:
    api = ServerApi([stored("named", CPU, {**TEMPLATE_SPEC, "resources": {"requests": {"cpu": "6"}, "limits": {"cpu": "8"}}})])
    (start,) = gpu_controller(api, mechanism="webhook").admit().starts
    assert start.kind == "cpu" and api.jobs["named"]["spec"]["suspend"] is False


def test_a_template_whose_containers_ask_nothing_defaults_the_request_to_the_limit() -> None:
    # No container asks cpu: the pod-level request is the pod-level limit, as before.
    api = ServerApi([stored("bare", CPU, {"restartPolicy": "Never", "schedulerName": "cellfit",
                                          "containers": [{"name": "trainer", "image": "train:1"}],
                                          "resources": {"limits": {"cpu": "8"}}})])
    (start,) = gpu_controller(api, mechanism="webhook").admit().starts
    assert start.kind == "cpu"


def test_the_defaults_follow_kube_apiservers() -> None:
    # pkg/apis/core/v1/defaults.go: a container's limit is its missing request; cpu and memory
    # requests the containers' together (sidecars summed, an init container's the max); the
    # limit where no container asks; hugepages' request their limit, never the containers'.
    spec = {"containers": [{"name": "a", "resources": {"limits": {"cpu": "2"}}}, {"name": "b", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "5"}}},
                               {"name": "log", "restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}}],
            "resources": {"limits": {"cpu": "8", "memory": "4Gi", "hugepages-2Mi": "64Mi"}}}
    assert pod_level_as_created(spec) == {"limits": {"cpu": "8", "memory": "4Gi", "hugepages-2Mi": "64Mi"},
                                          "requests": {"cpu": "5", "memory": "1Gi", "hugepages-2Mi": "64Mi"}}
    # No pod-level limit: no request is defaulted.
    assert pod_level_as_created({**spec, "resources": {"requests": {"memory": "2Gi"}}}) == {"requests": {"memory": "2Gi"}}
    # A container's hugepages limit with a pod-level request of another resource: the pod-level
    # hugepages limit is the containers' together.
    huge = {"containers": [{"name": "a", "resources": {"limits": {"hugepages-2Mi": "32Mi"}}}], "resources": {"requests": {"cpu": "1"}}}
    assert pod_level_as_created(huge) == {"limits": {"hugepages-2Mi": "32Mi"}, "requests": {"cpu": "1", "hugepages-2Mi": "32Mi"}}


def test_a_sidecar_beyond_a_defaulted_request_is_refused_saying_where_the_request_came_from() -> None:
    # The template sets only a pod-level limit; the API server gave the pod a request of the
    # template's container's 4 cores; Istio's 100m tips it over. The user, reading the template,
    # finds no request: the refusal says the API server set it from the template's containers.
    cpu = parse_configurations(json.dumps({"cpu": {"resources": {"cpu": "4"}}}))["cpu"]
    pod = {"metadata": {"labels": {"cellfit.io/placement": "cpu"},
                        "annotations": {"cellfit.io/configured-containers": "trainer"}},
           "spec": {"containers": [{"name": "trainer", "resources": {"requests": {"cpu": "4"}}},
                                   {"name": "istio-proxy", "resources": {"requests": {"cpu": "100m"}}}],
                    "resources": {"limits": {"cpu": "8"}, "requests": {"cpu": "4"}}}}
    try:
        checked_placement_patch(pod, cpu)
    except PodsRefused as refused:
        assert "or, for a request it leaves out, by the API server from the template's own containers" in str(refused), str(refused)
    else:
        raise AssertionError("4100m asked of a pod-level request of 4")
