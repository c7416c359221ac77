"""A Job placed in a configuration stating ``ephemeral-storage``, then placed again after its user
edited its configurations to state it no more, runs pods without it whichever mechanism placed
it each time (placer/README.md: a name the Job's configurations state no more is taken out on
re-placement). The template mechanism wrote the first configuration's amount into the template's
containers and took it out again; the webhook mechanism leaves the containers as stored, and its
pods kept what they held (the template's own amount, or the first configuration's written by an
earlier template placement) where the template mechanism's had none."""

from __future__ import annotations

import json
from typing import Any

import pytest

from estimator.objects import JOB_DECODER
from estimator.planner import CreateSample, SampleKey
from estimator.sample_pod import build_sample_pod
from placer.configuration import parse_configurations
from placer.controller import PlacerController
from placer.patch import checked_placement_patch
from placer.rewrite import ANNOTATION_STATED_NO_MORE
from scheduler.config import AlloxSettings
from scheduler.constants import ANNOTATION_CONFIGURATIONS, LABEL_PLACEMENT
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi
from tests.support.json_patch import patched

FIRST = {"cpu": {"resources": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi"}}}
EDITED = {"cpu": {"resources": {"cpu": "2", "memory": "4Gi"}}}


def job_body(configurations: dict[str, Any], *, own: dict[str, str]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "resources": {"requests": own} if own else {}}
    return {"metadata": {"name": "j", "namespace": "alice", "uid": "uid-j", "resourceVersion": "1",
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {ANNOTATION_CONFIGURATIONS: json.dumps(configurations),
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 60}})}},
            "spec": {"suspend": True, "template": {"spec": {"containers": [container]}}}, "status": {}}


def placed(body: dict[str, Any], *, mechanism: str) -> dict[str, Any]:
    """The Job after one AlloX pass started it by ``mechanism`` (the patch applied as the API
    server would)."""
    api = RecordingApi()
    PlacerController(
        api=api, jobs=Jobs([JOB_DECODER.decode(json.dumps(body).encode())]),
        settings=AlloxSettings(alpha=1.0, mechanism=mechanism, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=0)},
        capacity=lambda: Resources(cpu_millis=8000, memory_bytes=64 * 2**30, gpus=0), clock=lambda: 1767225700.0,
    ).admit()
    (_, operations), = api.patches
    return patched(body, operations)


def suspended_again(body: dict[str, Any], configurations: dict[str, Any]) -> dict[str, Any]:
    """The Job its user suspended again with edited configurations."""
    edited = json.loads(json.dumps(body))
    edited["spec"]["suspend"] = True
    edited["metadata"]["resourceVersion"] = "2"
    edited["metadata"]["annotations"][ANNOTATION_CONFIGURATIONS] = json.dumps(configurations)
    return edited


def through_webhook(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` as cellfit's pod-create webhook leaves it (scheduler/extender/admission.py)."""
    kind = pod["metadata"]["labels"][LABEL_PLACEMENT]
    configuration = parse_configurations(pod["metadata"]["annotations"][ANNOTATION_CONFIGURATIONS])[kind]
    return patched(pod, checked_placement_patch(pod, configuration))


def pod_of(body: dict[str, Any]) -> dict[str, Any]:
    """A pod the Job controller creates from the template, after cellfit's pod-create webhook."""
    template = body["spec"]["template"]
    return through_webhook({"metadata": json.loads(json.dumps(template.get("metadata") or {})),
                            "spec": json.loads(json.dumps(template["spec"]))})


def placed_twice(first: str, second: str, *, own: dict[str, str]) -> dict[str, Any]:
    """The Job placed in FIRST by ``first``, then in EDITED by ``second`` (``template`` or
    ``webhook``), its template's container asking ``own`` before either."""
    body = placed(job_body(FIRST, own=own), mechanism=first)
    return placed(suspended_again(body, EDITED), mechanism=second)


def pod_resources(first: str, second: str, *, own: dict[str, str]) -> Any:
    """The configured container's resources in a pod of :func:`placed_twice`."""
    return pod_of(placed_twice(first, second, own=own))["spec"]["containers"][0]["resources"]


WITHOUT = {"requests": {"cpu": "2", "memory": "4Gi"}}


@pytest.mark.parametrize("own", [{}, {"ephemeral-storage": "5Gi"}], ids=["template-without-it", "template-with-its-own"])
@pytest.mark.parametrize("first,second", [("template", "template"), ("webhook", "webhook"), ("template", "webhook"),
                                          ("webhook", "template")])
def test_a_name_the_configurations_state_no_more_is_taken_out_whichever_mechanism_placed_it(
        first: str, second: str, own: dict[str, str]) -> None:
    assert pod_resources(first, second, own=own) == WITHOUT


def test_the_first_placement_gives_the_configurations_amount_either_way() -> None:
    for mechanism in ("template", "webhook"):
        body = job_body(FIRST, own={})
        resources = pod_of(placed(body, mechanism=mechanism))["spec"]["containers"][0]["resources"]
        assert resources == {"requests": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi"}}, mechanism


def test_a_reinvocation_keeps_the_name_a_later_webhook_added() -> None:
    body = placed_twice("webhook", "webhook", own={"ephemeral-storage": "5Gi"})
    assert body["spec"]["template"]["metadata"]["annotations"][ANNOTATION_STATED_NO_MORE] == "ephemeral-storage"
    pod = pod_of(body)
    assert ANNOTATION_STATED_NO_MORE not in pod["metadata"]["annotations"]  # taken out on the first call
    # A later webhook adds an ephemeral-storage request for a ResourceQuota; the API server calls
    # cellfit's again (reinvocationPolicy: IfNeeded), which keeps it and patches nothing.
    pod["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "1Gi"
    assert through_webhook(pod) == pod


def test_a_configuration_stating_the_name_again_sets_it() -> None:
    body = placed(suspended_again(placed_twice("webhook", "webhook", own={}), FIRST), mechanism="webhook")
    assert ANNOTATION_STATED_NO_MORE not in body["spec"]["template"]["metadata"]["annotations"]
    assert pod_of(body)["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi"}}


@pytest.mark.parametrize("first,second", [("template", "webhook"), ("webhook", "webhook")])
def test_a_sample_of_the_edited_configuration_asks_what_its_placed_pods_ask(first: str, second: str) -> None:
    # Placed again, then suspended again and sampled in the edited configuration: a Job runs on
    # exactly what it was sampled on (estimator/sample_pod.py rewrites through the same shedding).
    body = placed_twice(first, second, own={"ephemeral-storage": "5Gi"})
    sample = build_sample_pod(
        job_name="j", job_namespace="alice", job_uid="uid-j", template=body["spec"]["template"],
        configuration=parse_configurations(json.dumps(EDITED))["cpu"],
        run=CreateSample(key=SampleKey(configuration="cpu", pilot=0, length="short"), attempt=0, iterations=10),
        indexed=False, scheduler_name="cellfit", priority_class_name=None,
    )
    assert sample["spec"]["containers"][0]["resources"] == WITHOUT == pod_of(body)["spec"]["containers"][0]["resources"]
