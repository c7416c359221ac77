"""The pod-create webhook: a preempted best-effort Job's new pod gets the resumed PriorityClass."""

from __future__ import annotations

import base64
import json
import threading

import pytest

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo
from scheduler.errors import InvalidRequest
from scheduler.extender.admission import PodAdmission
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.preemption import FitGppSettings, ResumedPriorityClass
from scheduler.preemption.engine import FitGppEngine
from tests.support import kube_objects as k

RESUMED = ResumedPriorityClass(name="cellfit-resumed", value=750)


class FixedClass:
    """The lookup's interface with the class already read (the lookup has tests of its own)."""

    name = RESUMED.name

    def __init__(self, value: ResumedPriorityClass | None = RESUMED) -> None:
        self.value = value

    def get(self) -> ResumedPriorityClass | None:
        return self.value


def admission(engine=None, resumed=FixedClass()) -> tuple[PodAdmission, FitGppEngine | ResourceFitEngine, ExtenderMetrics]:
    engine = engine if engine is not None else FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    metrics = ExtenderMetrics()
    # What the composition hands the webhook: FitGpp's preemption, or none under resource fit alone.
    preemption = engine if isinstance(engine, FitGppEngine) else None
    return PodAdmission(preemption=preemption, lock=threading.RLock(), metrics=metrics, resumed_class=resumed), engine, metrics


def preempted_once(engine: FitGppEngine) -> None:
    engine.apply_job(JobInfo(uid=k.JOB_UID, namespace="ml", name="train", annotations={"cellfit.io/preemptions": "1"}))


def review(service: PodAdmission, body: dict) -> dict:
    answer = service.review(k.dumps(body))
    assert answer.status == 200
    return json.loads(answer.body)


def test_new_pod_of_a_preempted_job_is_patched_onto_the_resumed_class():
    service, engine, metrics = admission()
    preempted_once(engine)
    body = k.admission_review(k.pod("train-x7k2q", gpus=4, priority=500, labels={"cellfit.io/job-class": "best-effort"}))
    result = review(service, body)
    assert result["apiVersion"] == "admission.k8s.io/v1" and result["kind"] == "AdmissionReview"
    response = result["response"]
    assert response["uid"] == body["request"]["uid"] and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {op["path"]: op["value"] for op in patch} == {
        "/spec/priorityClassName": "cellfit-resumed", "/spec/priority": 750, "/spec/preemptionPolicy": "PreemptLowerPriority",
    }
    assert metrics.admission_reviews.labels(result="resumed")._value.get() == 1


@pytest.mark.parametrize("case", ["never-preempted", "trial", "update", "no-class", "placement-only"])
def test_everything_else_is_allowed_unchanged(case):
    engine = ResourceFitEngine() if case == "placement-only" else None
    service, engine, metrics = admission(engine, FixedClass(None) if case == "no-class" else FixedClass())
    if case != "never-preempted" and isinstance(engine, FitGppEngine):
        preempted_once(engine)
    labels = {"cellfit.io/job-class": "trial" if case == "trial" else "best-effort"}
    body = k.admission_review(k.pod("train-x7k2q", priority=500, labels=labels), operation="UPDATE" if case == "update" else "CREATE")
    response = review(service, body)["response"]
    assert response == {"uid": body["request"]["uid"], "allowed": True}
    assert metrics.admission_reviews.labels(result="unchanged")._value.get() == 1


def test_pods_without_a_job_are_left_alone():
    service, engine, _ = admission()
    preempted_once(engine)
    pod = k.pod("notebook-0", priority=0)
    pod["metadata"]["ownerReferences"] = []
    body = k.admission_review(pod)
    assert review(service, body)["response"] == {"uid": body["request"]["uid"], "allowed": True}


@pytest.mark.parametrize(
    ("body", "field"),
    [(b"{", "malformed JSON"), (b'{"kind": "AdmissionReview"}', "request"), (b'{"request": {"uid": ""}}', "request.uid"),
     (b'{"request": {"uid": "u", "object": {"spec": {"priority": "high"}}}}', "request.object.spec.priority")],
)
def test_a_body_that_is_not_an_admission_review_is_refused_naming_the_field(body, field):
    service, _, _ = admission()
    with pytest.raises(InvalidRequest, match=field.replace(".", r"\.")):
        service.review(body)


# ---------------------------------------------------------------------- the placer's webhook mechanism

PLACED_CONFIGURATIONS = json.dumps({"cpu": {"resources": {"cpu": "8", "memory": "16Gi"}, "env": {"OMP_NUM_THREADS": "8"}},
                                    "gpu": {"resources": {"nvidia.com/gpu": "1"}}})


def placed_pod(kind: str, configurations: str = PLACED_CONFIGURATIONS) -> dict:
    pod = k.pod("train-p4x2z", gpus=1, labels={"cellfit.io/placement": kind, "batch.kubernetes.io/job-name": "train"})
    pod["metadata"]["annotations"] = {"cellfit.io/configurations": configurations}
    return pod


def test_a_placed_jobs_pod_is_rewritten_into_the_chosen_configuration():
    from placer.configuration import parse_configurations
    from placer.rewrite import apply_configuration
    from tests.support.json_patch import patched as apply_patch

    service, _, metrics = admission()
    pod = placed_pod("cpu")
    response = review(service, k.admission_review(pod))["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    operations = json.loads(base64.b64decode(response["patch"]))
    # Applied as the API server applies it, the pod is exactly the cpu configuration: no GPU left.
    patched = apply_patch(pod, operations)
    assert patched == apply_configuration(pod, parse_configurations(PLACED_CONFIGURATIONS)["cpu"])
    assert patched["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "8", "memory": "16Gi"}}
    assert metrics.admission_reviews.labels(result="placed")._value.get() == 1


@pytest.mark.parametrize("configurations", ["{broken", json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "1"}}})])
def test_a_placed_pod_whose_configuration_is_unusable_is_admitted_unchanged(configurations, caplog):
    service, _, metrics = admission()
    response = review(service, k.admission_review(placed_pod("cpu", configurations)))["response"]
    assert response["allowed"] is True and "patch" not in response
    assert "placed pod left as created" in caplog.text
    assert metrics.admission_reviews.labels(result="unchanged")._value.get() == 1
