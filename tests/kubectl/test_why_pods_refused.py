"""``kubectl cellfit why job/NAME`` for a Job the API server creates no pod of (scheduler/kubectl/why.py):
the Job controller's last ``FailedCreate`` says why, here cellfit's pod-create webhook refusing a
pod an injected sidecar tips over its pod-level resources (tests/unit/test_admission_reinvocation.py).
The answer used to be "no pod yet: the Job controller has not created one", while it tried and
was refused every time."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl.objects import CellfitView, events_from, job_from
from scheduler.kubectl.why import explain_job
from tests.unit.test_admission_reinvocation import admitted, called, created_pod, injected, webhook

RUNNING_ON_GPU = {"type": "Placed", "status": "True", "reason": "Started", "message": "running on gpu: AlloX chose gpu"}


def webhook_refusal() -> str:
    """What cellfit's webhook answers when called again after Istio injected its proxy."""
    service, _ = webhook()
    rewritten = admitted(service, created_pod(pod_level={"requests": {"cpu": "4", "memory": "20Gi"}}))
    response = called(service, injected(rewritten))
    assert response["allowed"] is False
    message: str = response["status"]["message"]
    return message


def job_event(reason: str, message: str, *, at: str, count: int = 1) -> dict[str, Any]:
    """A core/v1 Event the Job controller records on the Job (record.EventRecorder)."""
    return {"apiVersion": "v1", "kind": "Event", "reason": reason, "message": message,
            "type": "Warning" if reason == "FailedCreate" else "Normal", "count": count, "firstTimestamp": "2026-11-28T09:00:00Z",
            "lastTimestamp": at, "source": {"component": "job-controller"},
            "involvedObject": {"kind": "Job", "namespace": "ml", "name": "train", "uid": "uid-train", "apiVersion": "batch/v1"},
            "metadata": {"name": "train.187c3a", "namespace": "ml", "creationTimestamp": "2026-11-28T09:00:00Z"}}


def train_job(events: list[dict[str, Any]]) -> Any:
    body = {"metadata": {"name": "train", "namespace": "ml", "uid": "uid-train", "annotations": {}},
            "spec": {"suspend": False}, "status": {"conditions": [RUNNING_ON_GPU]}}
    return job_from(body, events=events_from(events), pods=())


def test_a_job_whose_every_pod_is_refused_is_told_the_refusal() -> None:
    refusal = f'admission webhook "placed-pods.admission.cellfit.io" denied the request: {webhook_refusal()}'
    answer = explain_job(train_job([job_event("FailedCreate", f"Error creating: {refusal}", at="2026-11-28T09:05:00Z", count=7)]),
                         CellfitView())
    assert answer.reason == "pods-refused", answer
    assert answer.summary == f"no pod: the API server refuses each pod the Job controller creates: {refusal}", answer
    assert "container 'istio-proxy' 100m, its own" in answer.summary


def test_a_refusal_before_a_pod_was_created_is_history() -> None:
    events = [job_event("FailedCreate", "Error creating: pods \"train-x\" is forbidden: exceeded quota", at="2026-11-28T09:01:00Z"),
              job_event("SuccessfulCreate", "Created pod: train-x7k2q", at="2026-11-28T09:02:00Z")]
    answer = explain_job(train_job(events), CellfitView())
    assert answer.reason == "pending" and answer.summary.startswith("no pod yet"), answer
