"""A placed Job's pods carry AlloX's pool selector (``allox.nodeSelector``): a live session
(H3) configured the pool ``pool: allox`` and submitted Jobs whose templates had no node
selector; AlloX started 8 of alice's on GPU, their pods ran on a GPU node outside the pool,
held no machine of AlloX's, and alice's progress stayed nil while she got 9 starts before bob or
carol had any. The e2e tests always put the pool's selector in the template themselves.

Both mechanisms: the template patch's template carries it, and so does the webhook mechanism's
(a suspended Job's node selector may always change), from which each pod is created and which
the pod-create webhook's rewrite keeps. A template, configuration or required node affinity
that asks for other nodes is refused naming the field, never overwritten."""

from __future__ import annotations

import json
from typing import Any

import pytest

from estimator.objects import JOB_DECODER
from placer.configuration import parse_configurations
from placer.controller import PlacerController
from placer.patch import checked_placement_patch
from placer.rewrite import PoolConflict, apply_configuration, pool_conflict
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import RecordingApi, Jobs, template_of
from tests.support.json_patch import patched

POOL = {"pool": "allox"}
CONFIGURATIONS = {"cpu": {"resources": {"cpu": "4", "memory": "8Gi"}},
                  "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}, "nodeSelector": {"accelerator": "a100"}}}


def template(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": {"job-name": "a"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}], **(spec or {})}}


def configured(kind: str, configurations: dict[str, Any] = CONFIGURATIONS) -> Any:
    return parse_configurations(json.dumps(configurations))[kind]  # type: ignore[index]


# ---------------------------------------------------------------------------- the pure rewrite


def test_a_template_without_a_selector_gets_the_pools() -> None:
    assert apply_configuration(template(), configured("cpu"), pool=POOL)["spec"]["nodeSelector"] == POOL


def test_the_pools_selector_is_merged_with_the_templates_and_the_configurations() -> None:
    placed = apply_configuration(template({"nodeSelector": {"disk": "ssd", "pool": "allox"}}), configured("gpu"), pool=POOL)
    assert placed["spec"]["nodeSelector"] == {"disk": "ssd", "pool": "allox", "accelerator": "a100"}


def test_without_a_pool_the_rewrite_adds_no_selector() -> None:
    assert "nodeSelector" not in apply_configuration(template(), configured("cpu"))["spec"]
    assert "nodeSelector" not in apply_configuration(template(), configured("cpu"), pool={})["spec"]


def test_a_template_selecting_other_nodes_is_refused_naming_its_field() -> None:
    with pytest.raises(PoolConflict) as refused:
        apply_configuration(template({"nodeSelector": {"pool": "batch"}}), configured("cpu"), pool=POOL)
    assert refused.value.field == "spec.template.spec.nodeSelector[pool]"
    assert str(refused.value).startswith("spec.template.spec.nodeSelector[pool]: 'batch' is not 'allox', which AlloX's nodes "
                                         "carry (allox.nodeSelector: pool=allox)")


def test_a_configuration_selecting_other_nodes_is_refused_naming_its_field() -> None:
    configurations = {**CONFIGURATIONS, "gpu": {**CONFIGURATIONS["gpu"], "nodeSelector": {"pool": "gpu-farm"}}}
    with pytest.raises(PoolConflict) as refused:
        apply_configuration(template(), configured("gpu", configurations), pool=POOL)
    assert refused.value.field == "cellfit.io/configurations.gpu.nodeSelector[pool]"
    # The other kind of the same Job is not refused.
    assert apply_configuration(template(), configured("cpu", configurations), pool=POOL)["spec"]["nodeSelector"] == POOL


def test_a_configuration_overriding_the_templates_label_with_the_pools_is_no_conflict() -> None:
    # The configuration wins over the template (as it always has), and its value is the pool's.
    configurations = {**CONFIGURATIONS, "cpu": {**CONFIGURATIONS["cpu"], "nodeSelector": {"pool": "allox"}}}
    placed = apply_configuration(template({"nodeSelector": {"pool": "batch"}}), configured("cpu", configurations), pool=POOL)
    assert placed["spec"]["nodeSelector"] == POOL


def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": term} for term in terms]}}}}


@pytest.mark.parametrize("expression", [
    {"key": "pool", "operator": "In", "values": ["batch"]},
    {"key": "pool", "operator": "NotIn", "values": ["allox", "x"]},
    {"key": "pool", "operator": "DoesNotExist"},
])
def test_a_required_node_affinity_excluding_the_pool_is_refused(expression: dict[str, Any]) -> None:
    spec = affinity([{"key": "zone", "operator": "Exists"}, expression])
    conflict = pool_conflict(template(spec)["spec"], configured("cpu"), POOL)
    assert conflict is not None
    assert conflict.field == ("spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                              ".nodeSelectorTerms[0].matchExpressions[1]")


def test_node_affinity_that_admits_the_pool_by_one_term_or_names_other_labels_is_no_conflict() -> None:
    either = affinity([{"key": "pool", "operator": "In", "values": ["batch"]}], [{"key": "pool", "operator": "In", "values": ["allox"]}])
    assert pool_conflict(template(either)["spec"], configured("cpu"), POOL) is None
    other = affinity([{"key": "zone", "operator": "In", "values": ["a"]}])
    assert apply_configuration(template(other), configured("cpu"), pool=POOL)["spec"]["nodeSelector"] == POOL
    both = affinity([{"key": "pool", "operator": "In", "values": ["batch"]}], [{"key": "pool", "operator": "DoesNotExist"}])
    conflict = pool_conflict(template(both)["spec"], configured("cpu"), POOL)
    assert conflict is not None and conflict.field == ("spec.template.spec.affinity.nodeAffinity"
                                                       ".requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")


# ---------------------------------------------------------------------------- the controller


def job(name: str, *, created: int = 0, spec: dict[str, Any] | None = None, configurations: dict[str, Any] = CONFIGURATIONS,
        cpu: float = 100, gpu: float = 10, namespace: str = "alice") -> Any:
    annotations = {"cellfit.io/configurations": json.dumps(configurations),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": cpu}, "gpu": {"seconds": gpu}})}
    body = {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "annotations": annotations,
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z", "resourceVersion": "1"},
            "spec": {"suspend": True, "template": template(spec)}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def controller(api: RecordingApi, jobs: list[Any], *, mechanism: str = "auto", gpus: int = 1) -> PlacerController:
    return PlacerController(
        api=api, jobs=Jobs(jobs),
        settings=AlloxSettings(alpha=1.0, mechanism=mechanism, solver_process=False, node_selector=POOL),
        gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=(gpus + 4) * 1000, memory_bytes=64 * 2**30, gpus=gpus)},
        capacity=lambda: Resources(cpu_millis=(gpus + 4) * 1000, memory_bytes=64 * 2**30, gpus=gpus),
        clock=lambda: 1767225700.0,
    )


def test_the_template_mechanism_starts_pods_on_the_pool_of_a_template_with_no_selector() -> None:
    api = RecordingApi()
    controller(api, [job("a", cpu=100, gpu=10), job("b", cpu=50, gpu=40, created=1)]).admit()
    placed = {name: template_of(operations)["spec"] for name, operations in api.patches}
    assert placed["a"]["nodeSelector"] == {"pool": "allox", "accelerator": "a100"}  # gpu
    assert placed["b"]["nodeSelector"] == POOL  # cpu


def test_the_webhook_mechanism_creates_every_pod_on_the_pool_and_the_pod_webhook_keeps_it() -> None:
    api = RecordingApi()
    controller(api, [job("a", cpu=100, gpu=10, spec={"nodeSelector": {"disk": "ssd"}})], mechanism="webhook").admit()
    (name, operations), = api.patches
    stored = template_of(operations)
    assert stored["spec"]["nodeSelector"] == {"disk": "ssd", "pool": "allox", "accelerator": "a100"}
    assert stored["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "500m"}}  # left to the pod webhook
    # A pod created from that template, as the pod-create webhook rewrites it.
    pod = {"metadata": {**stored["metadata"], "name": "a-x1"}, "spec": stored["spec"]}
    created = patched(pod, checked_placement_patch(pod, configured("gpu")))
    assert created["spec"]["nodeSelector"] == {"disk": "ssd", "pool": "allox", "accelerator": "a100"}
    assert created["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


@pytest.mark.parametrize("mechanism", ["auto", "webhook"])
def test_a_template_selecting_other_nodes_is_refused_in_every_kind_and_told_why_once(mechanism: str) -> None:
    api = RecordingApi()
    jobs = [job("a", spec={"nodeSelector": {"pool": "batch"}})]
    placer = controller(api, jobs, mechanism=mechanism)
    placer.admit()
    assert api.patches == []  # started nowhere: its pods would hold no machine of AlloX's
    (name, condition), = api.conditions
    assert (condition["status"], condition["reason"]) == ("False", "Refused")
    assert condition["message"] == (
        "AlloX does not start this Job on cpu or gpu: its pods would run outside AlloX's nodes: "
        "spec.template.spec.nodeSelector[pool]: 'batch' is not 'allox', which AlloX's nodes carry (allox.nodeSelector: "
        "pool=allox): its pods could run on none of the nodes AlloX books its machines on; leave pool out (AlloX adds it) "
        "or set it to 'allox'")
    assert [(reason, message) for _, reason, message in api.events] == [("PlacementRefused", condition["message"])]
    placer.admit()
    assert api.patches == [] and len(api.conditions) == 1 and len(api.events) == 1  # not chosen again, nor told again
    # Its user drops the label: it starts, on the pool.
    placer._jobs = Jobs([job("a")])
    placer.admit()
    (_, operations), = api.patches
    assert template_of(operations)["spec"]["nodeSelector"]["pool"] == "allox"


def test_a_configuration_selecting_other_nodes_refuses_that_kind_and_the_job_starts_on_the_other() -> None:
    configurations = {**CONFIGURATIONS, "gpu": {**CONFIGURATIONS["gpu"], "nodeSelector": {"pool": "gpu-farm"}}}
    api = RecordingApi()
    placer = controller(api, [job("a", cpu=100, gpu=10, configurations=configurations)])
    placer.admit()
    assert api.patches == []
    assert api.conditions[0][1]["message"].startswith(
        "AlloX does not start this Job on gpu: its pods would run outside AlloX's nodes: "
        "cellfit.io/configurations.gpu.nodeSelector[pool]: 'gpu-farm' is not 'allox'")
    placer.admit()
    (_, operations), = api.patches
    assert {"op": "add", "path": "/metadata/annotations/cellfit.io~1placement", "value": "cpu"} in operations
    assert template_of(operations)["spec"]["nodeSelector"] == POOL
