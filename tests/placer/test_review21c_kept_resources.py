"""Review of 72a7290 (a configured container's resources set name by name, the others kept):
what the rewrite keeps must be what AlloX books and what the node can hold.

- AlloX books a Job's machine from the pod the rewrite makes of its template's *shape*
  (placer/controller.py ``_pod_shape``: its containers without their resources), so a ``cpu`` or
  ``memory`` a configured container kept from its template would be asked by every pod and
  booked by none: a template's own 64Gi beside configurations that size cores alone. Cores and
  memory are what AlloX books: a configuration sizes them whole, stated or not.
- A template written for another vendor's GPU (``amd.com/gpu``) kept it beside the GPU
  configuration's ``nvidia.com/gpu``: a pod asking two accelerators, which no node holds. Every
  configuration states every device its pods hold, as a ``cpu`` one already did.
- The kinds' resource names (``job_resource_names``) made a configuration unequal to itself
  once its Job's *other* configuration was edited, so a sample of the kind the Job was placed
  in was built from its template less that same configuration: its env variables taken out and
  appended again, after a ``$(NAME)`` that then no longer expands.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from estimator.planner import CreateSample, SampleKey
from estimator.sample_pod import build_sample_pod
from placer.configuration import parse_configurations
from placer.controller import _demands, _pod_shape
from placer.patch import PodsRefused, checked_placement_patch, containers_record, placement_patch
from placer.rewrite import apply_configuration
from scheduler.kube import wire
from scheduler.kube.translate import pod_requests
from tests.support.json_patch import patched

GIB = 2**30
CORES_ONLY = json.dumps({"cpu": {"resources": {"cpu": "16"}}, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "2"}}})


def template(resources: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"annotations": {"cellfit.io/configurations": CORES_ONLY}},
            "spec": {"containers": [{"name": "trainer", "image": "t", "resources": resources}]}}


def trainer(pod: dict[str, Any]) -> Any:
    return pod["spec"]["containers"][0]["resources"]


@pytest.mark.parametrize("resources", [
    {"requests": {"memory": "64Gi"}},
    {"limits": {"memory": "64Gi"}},
    {"requests": {"memory": "8Gi", "ephemeral-storage": "10Gi", "hugepages-2Mi": "256Mi"}, "limits": {"memory": "64Gi"}},
])
@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_allox_books_what_each_pod_of_the_rewrite_asks(resources: dict[str, Any], kind: str) -> None:
    written = template(resources)
    booked = _demands(CORES_ONLY, "nvidia.com/gpu", _pod_shape(json.dumps(written).encode()))[kind]
    pod = apply_configuration(written, parse_configurations(CORES_ONLY)[kind])
    asked = pod_requests(msgspec.convert(pod["spec"], wire.PodSpec), gpu_resource="nvidia.com/gpu", field="spec")
    assert (asked.cpu_millis / 1000, asked.memory_bytes / GIB, asked.gpus) == (booked.cpu, booked.memory, booked.gpu)


def test_a_template_s_cores_and_memory_no_configuration_states_are_not_kept_but_its_storage_is() -> None:
    written = template({"requests": {"cpu": "1", "memory": "8Gi", "ephemeral-storage": "10Gi"},
                        "limits": {"memory": "64Gi", "hugepages-2Mi": "256Mi"}})
    memory_only = parse_configurations('{"cpu": {"resources": {"memory": "32Gi"}}}')["cpu"]
    assert trainer(apply_configuration(written, memory_only)) == {
        "requests": {"ephemeral-storage": "10Gi", "memory": "32Gi"}, "limits": {"hugepages-2Mi": "256Mi"}}
    assert trainer(apply_configuration(written, parse_configurations(CORES_ONLY)["gpu"])) == {
        "requests": {"ephemeral-storage": "10Gi", "nvidia.com/gpu": "1", "cpu": "2"},
        "limits": {"hugepages-2Mi": "256Mi", "nvidia.com/gpu": "1"}}


def test_a_gpu_start_keeps_no_other_vendor_s_gpu_nor_any_device_it_does_not_state() -> None:
    written = template({"limits": {"amd.com/gpu": "1", "rdma/hca": "1", "hugepages-2Mi": "256Mi"}})
    gpu = parse_configurations(CORES_ONLY)["gpu"]
    pod = apply_configuration(written, gpu)
    assert trainer(pod) == {"requests": {"nvidia.com/gpu": "1", "cpu": "2"},
                            "limits": {"hugepages-2Mi": "256Mi", "nvidia.com/gpu": "1"}}
    # The webhook's patch gives the same pod, and a reinvocation patches nothing.
    rewritten = apply_configuration(written, gpu, extra_annotations=containers_record(written))
    assert patched(written, placement_patch(written, gpu)) == rewritten
    assert placement_patch(rewritten, gpu) == []


def test_a_configuration_is_itself_whatever_its_job_s_other_configuration_states() -> None:
    before = {"cpu": {"resources": {"cpu": "16"}, "env": {"DATA": "/data"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}}
    after = {**before, "gpu": {"resources": {"nvidia.com/gpu": "1", "ephemeral-storage": "50Gi"}}}
    assert parse_configurations(json.dumps(before))["cpu"] == parse_configurations(json.dumps(after))["cpu"]
    # Placed on cpu under `before`, suspended again, its gpu configuration edited: a cpu sample
    # keeps the template's env in its order, so $(DATA) still expands.
    placed = {"metadata": {"labels": {"cellfit.io/placement": "cpu"},
                           "annotations": {"cellfit.io/configurations": json.dumps(before)}},
              "spec": {"containers": [{"name": "trainer", "image": "t", "resources": {"requests": {"cpu": "16"}},
                                       "env": [{"name": "DATA", "value": "/data"}, {"name": "OUT", "value": "$(DATA)/out"}]}]}}
    sample = build_sample_pod(job_name="train", job_namespace="ns", job_uid="0123456789abcdef", template=placed,
                              configuration=parse_configurations(json.dumps(after))["cpu"],
                              run=CreateSample(key=SampleKey(configuration="cpu", pilot=0, length="short"), attempt=0, iterations=10),
                              indexed=False, scheduler_name="s", priority_class_name=None)
    names = [entry["name"] for entry in sample["spec"]["containers"][0]["env"]]
    assert names.index("DATA") < names.index("OUT")


def test_a_refusal_calls_a_kept_amount_the_template_s_own_not_the_configuration_s() -> None:
    # The webhook's check of a pod whose injected sidecar tips the pod-level hugepages limit: the
    # trainer's 256Mi is its template's own (no configuration states hugepages), not the
    # configuration's, and the field to change is the container's.
    pod = {"metadata": {"annotations": {"cellfit.io/configurations": CORES_ONLY, "cellfit.io/configured-containers": "trainer"}},
           "spec": {"resources": {"limits": {"cpu": "32", "hugepages-2Mi": "256Mi"}},
                    "containers": [{"name": "trainer", "resources": {"limits": {"hugepages-2Mi": "256Mi"}}},
                                   {"name": "istio-proxy", "resources": {"limits": {"hugepages-2Mi": "64Mi"}}}]}}
    with pytest.raises(PodsRefused) as caught:
        checked_placement_patch(pod, parse_configurations(CORES_ONLY)["cpu"])
    message = str(caught.value)
    assert caught.value.field == "spec.containers[0].resources.requests[hugepages-2Mi]"
    assert "the configuration's" not in message
    assert ("in this configuration (container 'trainer' 256Mi, the Job template's own: no configuration of the Job states "
            "hugepages-2Mi; container 'istio-proxy' 64Mi, its own: not the Job template's") in message


def test_a_kept_hugepages_never_stands_without_cores_or_memory() -> None:
    # The API server refuses a container whose hugepages have no cpu or memory beside them
    # ("HugePages require cpu or memory"): a GPU configuration of the GPU alone, the template's
    # own cores and memory taken out (the cpu configuration states them), kept its hugepages.
    text = json.dumps({"cpu": {"resources": {"cpu": "16", "memory": "32Gi"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}})
    written = template({"requests": {"cpu": "1", "memory": "2Gi", "hugepages-2Mi": "256Mi", "ephemeral-storage": "1Gi"},
                        "limits": {"hugepages-2Mi": "256Mi"}})
    for kind in ("cpu", "gpu"):
        resources = trainer(apply_configuration(written, parse_configurations(text)[kind]))
        names = {name for side in ("requests", "limits") for name in resources.get(side, {})}
        assert "ephemeral-storage" in names
        assert not any(name.startswith("hugepages-") for name in names) or names & {"cpu", "memory"}, resources
    assert trainer(apply_configuration(written, parse_configurations(text)["cpu"]))["limits"] == {"hugepages-2Mi": "256Mi"}
