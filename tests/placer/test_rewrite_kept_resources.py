"""The rewrite sets the resources a Job's configurations state and keeps the others: the chosen
configuration's names take its amounts, a name another configuration of the Job states is taken
out (a template written for GPUs never keeps its GPU on a CPU start), and a name no configuration
states (a template's ``ephemeral-storage`` or ``hugepages-2Mi``, a request another mutating webhook
added for a ResourceQuota) is kept as the container has it, request and limit each. Both
mechanisms (the template's rewrite, the webhook's patch) give the same pod, and a second call
changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from placer.configuration import parse_configurations
from placer.patch import PodsRefused, check_pod_level_resources, containers_record, placement_patch
from placer.rewrite import apply_configuration, without_configuration
from tests.support.json_patch import patched

TEXT = json.dumps({"cpu": {"resources": {"cpu": "16", "memory": "32Gi"}},
                   "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "2", "memory": "16Gi"}}})
CONFIGURATIONS = parse_configurations(TEXT)
WRITTEN = {"requests": {"cpu": "1", "ephemeral-storage": "10Gi", "hugepages-2Mi": "256Mi"},
           "limits": {"cpu": "1", "nvidia.com/gpu": "4", "hugepages-2Mi": "256Mi"},
           "claims": [{"name": "scratch"}]}


def template(resources: dict[str, Any] = WRITTEN) -> dict[str, Any]:
    return {"metadata": {"annotations": {"cellfit.io/configurations": TEXT}},
            "spec": {"containers": [{"name": "trainer", "image": "t", "resources": json.loads(json.dumps(resources))}]}}


def trainer(pod: dict[str, Any]) -> Any:
    return pod["spec"]["containers"][0]["resources"]


def test_a_cpu_start_takes_the_gpu_out_and_keeps_what_no_configuration_states() -> None:
    pod = apply_configuration(template(), CONFIGURATIONS["cpu"])
    assert trainer(pod) == {"requests": {"ephemeral-storage": "10Gi", "hugepages-2Mi": "256Mi", "cpu": "16", "memory": "32Gi"},
                            "limits": {"hugepages-2Mi": "256Mi"}, "claims": [{"name": "scratch"}]}


def test_a_gpu_start_sets_the_gpu_and_a_stated_name_on_both_sides() -> None:
    # The template's cpu limit of 1 is the configuration's name: taken out, not left below its request of 2.
    pod = apply_configuration(template(), CONFIGURATIONS["gpu"])
    assert trainer(pod) == {"requests": {"ephemeral-storage": "10Gi", "hugepages-2Mi": "256Mi", "nvidia.com/gpu": "1",
                                         "cpu": "2", "memory": "16Gi"},
                            "limits": {"hugepages-2Mi": "256Mi", "nvidia.com/gpu": "1"}, "claims": [{"name": "scratch"}]}


def test_a_job_with_no_gpu_configuration_still_never_keeps_a_device_on_cpu() -> None:
    only_cpu = parse_configurations('{"cpu": {"resources": {"cpu": "16"}}}')["cpu"]
    pod = apply_configuration(template(), only_cpu)
    assert trainer(pod).get("limits") == {"hugepages-2Mi": "256Mi"}
    assert "nvidia.com/gpu" not in trainer(pod)["requests"]


def test_both_mechanisms_give_the_same_pod_and_a_second_call_patches_nothing() -> None:
    for kind in ("cpu", "gpu"):
        written = template()
        operations = placement_patch(written, CONFIGURATIONS[kind])
        rewritten = apply_configuration(written, CONFIGURATIONS[kind], extra_annotations=containers_record(written))
        assert patched(written, operations) == rewritten
        assert apply_configuration(rewritten, CONFIGURATIONS[kind]) == rewritten
        assert placement_patch(rewritten, CONFIGURATIONS[kind]) == []


def test_a_template_placed_again_sheds_the_resources_only_the_earlier_configurations_stated() -> None:
    # Placed on gpu in configurations whose gpu stated ephemeral-storage, then edited to state none
    # and placed on cpu: the template mechanism's template holds the first gpu's 50Gi, which no
    # configuration of the Job states now.
    earlier = parse_configurations(json.dumps({"cpu": {"resources": {"cpu": "16"}},
                                               "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "2", "ephemeral-storage": "50Gi"}}}))
    placed = apply_configuration(template({"requests": {"cpu": "1", "hugepages-2Mi": "256Mi", "memory": "1Gi"}}), earlier["gpu"])
    assert trainer(placed)["requests"]["ephemeral-storage"] == "50Gi"
    again = apply_configuration(without_configuration(placed, earlier["gpu"]), CONFIGURATIONS["cpu"])
    assert trainer(again) == {"requests": {"hugepages-2Mi": "256Mi", "cpu": "16", "memory": "32Gi"}}


def test_the_pod_level_check_counts_a_kept_name_and_names_the_containers_field() -> None:
    # The template's own hugepages, kept, exceed its pod-level limit: the API server refuses every
    # pod, and the field to change is the container's, not the configuration's (which states none).
    written = template({"requests": {"cpu": "1", "hugepages-2Mi": "256Mi"}, "limits": {"hugepages-2Mi": "256Mi"}})
    written["spec"]["resources"] = {"limits": {"cpu": "32", "memory": "64Gi", "hugepages-2Mi": "128Mi"}}
    rewritten = apply_configuration(written, CONFIGURATIONS["cpu"])["spec"]
    with pytest.raises(PodsRefused) as caught:
        check_pod_level_resources(rewritten, CONFIGURATIONS["cpu"])
    # The pod-level request defaults to the limit: the containers' 256Mi together is over it.
    assert caught.value.field == "spec.template.spec.containers[0].resources.requests[hugepages-2Mi]"
    assert "their own hugepages-2Mi: no configuration of the Job states it" in str(caught.value)
    # A container's own memory beside configurations that size cores alone is not kept (AlloX
    # books no memory for it: review21c), so its limit beyond the pod-level one refuses nothing.
    cores = parse_configurations('{"cpu": {"resources": {"cpu": "16"}}, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "2"}}}')
    written = template({"requests": {"memory": "1Gi"}, "limits": {"memory": "8Gi"}})
    written["spec"]["resources"] = {"requests": {"memory": "4Gi"}, "limits": {"cpu": "32", "memory": "4Gi"}}
    rewritten = apply_configuration(written, cores["cpu"])["spec"]
    assert rewritten["containers"][0]["resources"] == {"requests": {"cpu": "16"}}
    check_pod_level_resources(rewritten, cores["cpu"])
