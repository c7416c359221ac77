"""The pod-create webhook puts AlloX's pool (``allox.nodeSelector``) in each placed pod's node
selector. The placer writes it into a Job's template since da1a305, but a Job placed by an
older cellfit keeps a template without it: each pod it still creates (a retry, the next of its
completions) ran wherever kube-scheduler put it, outside the nodes AlloX booked its machine on.

Idempotent under ``reinvocationPolicy: IfNeeded``; a pod the pool's selector would leave no node
for (a Job an older cellfit placed with its template's ``pool: batch``, or a required affinity
excluding the pool: the placer refuses such a Job now) is admitted in its configuration with its
own selector, never refused: its Job would never get a pod again."""

from __future__ import annotations

import base64
import json
import logging
import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

from scheduler.config import parse_settings
from scheduler.constants import ADMISSION_PODS_PATH, ADMISSION_VALIDATE_JOBS_PATH
from scheduler.extender.admission import PodAdmission
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.runtime import build_runtime
from tests.support import kube_objects as k
from tests.support.admission_reviews import job, validating_review
from tests.unit.test_admission_reinvocation import CONFIGURATIONS, admitted, called, created_pod, injected

POOL = {"pool": "allox"}


def webhook(pool: dict[str, str] | None = POOL) -> PodAdmission:
    return PodAdmission(preemption=None, lock=threading.RLock(), metrics=ExtenderMetrics(), resumed_class=None, pool=pool)


def older(spec: dict[str, Any] | None = None, *, kind: str = "gpu", configurations: dict[str, Any] = CONFIGURATIONS) -> dict[str, Any]:
    """A pod of a Job an older cellfit placed on ``kind``: its template without the pool."""
    pod = created_pod()
    pod["metadata"]["labels"]["cellfit.io/placement"] = kind
    pod["metadata"]["annotations"]["cellfit.io/configurations"] = json.dumps(configurations)
    pod["spec"].pop("nodeSelector", None)
    pod["spec"].update(json.loads(json.dumps(spec or {})))
    return pod


def test_a_pod_of_a_job_placed_before_the_pool_was_carried_is_created_on_the_pool() -> None:
    pod = admitted(webhook(), older({"nodeSelector": {"disk": "ssd"}}))
    assert pod["spec"]["nodeSelector"] == {"disk": "ssd", "pool": "allox"}
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}  # and in its configuration


def test_with_a_configurations_selector_the_pod_gets_both() -> None:
    configurations = {**CONFIGURATIONS, "gpu": {**CONFIGURATIONS["gpu"], "nodeSelector": {"accelerator": "a100"}}}
    pod = admitted(webhook(), older(configurations=configurations))
    assert pod["spec"]["nodeSelector"] == {"pool": "allox", "accelerator": "a100"}


def test_called_again_it_patches_nothing_and_a_pod_placed_with_the_pool_gets_no_selector_patch() -> None:
    service = webhook()
    first = admitted(service, older())
    assert "patch" not in called(service, first)
    assert "patch" not in called(service, injected(first))  # after Istio's injector
    # A Job placed since da1a305: its template, so its pod, carries the pool already.
    patch = json.loads(base64.b64decode(called(service, older({"nodeSelector": {"pool": "allox"}}))["patch"]))
    assert [op for op in patch if op["path"] == "/spec/nodeSelector"] == []


@pytest.mark.parametrize("spec", [
    {"nodeSelector": {"pool": "batch"}},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["allox"]}]}]}}}},
])
def test_a_pod_whose_own_selection_excludes_the_pool_is_admitted_as_its_job_was_placed(
        spec: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="scheduler.extender.admission"):
        pod = admitted(webhook(), older(spec))
    assert pod["spec"].get("nodeSelector") == spec.get("nodeSelector")
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    (record,) = [r for r in caplog.records if r.getMessage() == "placed pod left outside AlloX's pool"]
    assert "spec." in record.__dict__["reason"] and "allox.nodeSelector" in record.__dict__["reason"]


def test_without_a_pool_or_a_placement_no_selector_is_added() -> None:
    assert "nodeSelector" not in admitted(webhook(pool={}), older())["spec"]
    assert "nodeSelector" not in admitted(webhook(pool=None), older())["spec"]
    unplaced = older()
    del unplaced["metadata"]["labels"]["cellfit.io/placement"]
    assert "nodeSelector" not in admitted(webhook(), unplaced)["spec"]
    sample = older()
    sample["metadata"]["labels"]["cellfit.io/sample"] = "cpu-0"  # the estimator places its own
    assert "nodeSelector" not in admitted(webhook(), sample)["spec"]


def test_the_extender_wires_allox_node_selector_into_both_webhooks() -> None:
    settings = parse_settings("admission: {enabled: true, certFile: /tls/crt, keyFile: /tls/key}\n"
                              "allox: {nodeSelector: {pool: allox}}")
    app = build_runtime(settings, standalone=True).admission_app
    assert app is not None
    client = TestClient(app)

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = client.post(path, content=k.dumps(body), headers={"content-type": "application/json"})
        assert answer.status_code == 200, answer.text
        response: dict[str, Any] = answer.json()["response"]
        return response

    patch = json.loads(base64.b64decode(post(ADMISSION_PODS_PATH, k.admission_review(older()))["patch"]))
    assert {"op": "add", "path": "/spec/nodeSelector", "value": POOL} in patch
    outside = job("train", gpus=0, suspend=True,
                  annotations={"cellfit.io/iterations": "10", "cellfit.io/configurations": json.dumps(CONFIGURATIONS)})
    outside["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "batch"}
    warnings = post(ADMISSION_VALIDATE_JOBS_PATH, validating_review(outside)).get("warnings") or []
    assert any(w.startswith("cellfit: spec.template.spec.nodeSelector[pool]: 'batch' is not 'allox'") for w in warnings)
