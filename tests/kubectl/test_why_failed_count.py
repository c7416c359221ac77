"""``kubectl cellfit why`` of a preempted Job whose podFailurePolicy does not ignore
DisruptionTarget reads its status.failed, as FitGpp's Preempted Event now does
(scheduler/wording.py preemption_outcome): a Job still running is told how many failed pods
it has had of those its backoffLimit tolerates (the Event told each victim the same as it was
preempted), and a failed Job how many failed pods it had in all (its own among them), not only
that its preemptions were counted."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl.objects import CellfitView, events_from, job_from, preemption_from
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why import a_pod, job_json, preemption_events

NOT_IGNORING = "as its spec.podFailurePolicy does not ignore DisruptionTarget"
COUNTED = f"the Job counts each preempted pod as a failed one against its backoffLimit 3, {NOT_IGNORING}"
BACKOFF = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
RESUMES = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}


def preempted_job(*, failed: int, spec: dict[str, Any] | None = None, conditions: list[dict[str, str]] | None = None) -> Any:
    """Job ns/be, preempted once by cellfit, with ``failed`` failed pods in its status and a pod
    running again unless ``conditions`` end it."""
    body = job_json("be", annotations={"cellfit.io/preemptions": "1"}, conditions=conditions)
    body["spec"].update({"backoffLimit": 3, **(spec or {})})
    body["status"]["failed"] = failed
    preempted, preempting = preemption_events("ns/be-7xk2p", "ns/te-862bk", "gpu-0", "score 0.50 = size 0.40 + 4.0 x GP 0.02")
    found = preemption_from(victim="ns/be-7xk2p", preempted=events_from([preempted])[0], preemptor_events=events_from([preempting]))
    pods = () if conditions else (a_pod("be-n3w9x", node="gpu-1", phase="Running"),)
    return job_from(body, pods=pods, preemptions=(found,))


def test_a_running_job_is_told_its_failed_pods_against_its_backoff_limit() -> None:
    answer = explain_job(preempted_job(failed=2), CellfitView())
    assert answer.reason == "preempted"
    assert f"{COUNTED}: 2 failed pods so far of the 3 it tolerates" in answer.details
    assert answer.details[0].startswith("ns/be-7xk2p preempted by ns/te-862bk on node gpu-0")  # the preemptions first, as before


def test_a_running_job_at_its_limit_is_told_the_next_failure_fails_it() -> None:
    answer = explain_job(preempted_job(failed=3), CellfitView())
    assert f"{COUNTED}: 3 failed pods so far of the 3 it tolerates: the next one fails the Job" in answer.details
    assert f"{COUNTED}: 1 failed pod so far of the 3 it tolerates" in explain_job(preempted_job(failed=1), CellfitView()).details


def test_a_job_that_ignores_disruption_or_counts_per_index_is_not_given_a_job_count() -> None:
    resuming = explain_job(preempted_job(failed=2, spec={"podFailurePolicy": RESUMES}), CellfitView())
    assert not any("counts each preempted pod" in line for line in resuming.details)
    per_index = explain_job(preempted_job(failed=2, spec={"backoffLimitPerIndex": 1, "completionMode": "Indexed"}), CellfitView())
    assert f"the Job counts each preempted pod as a failed one against its backoffLimitPerIndex 1, {NOT_IGNORING}" in per_index.details


def test_a_failed_job_is_told_its_failed_pods_in_all() -> None:
    answer = explain_job(preempted_job(failed=4, conditions=[BACKOFF]), CellfitView())
    assert answer.reason == "failed"
    assert answer.summary == (
        "failed: Job has reached the specified backoff limit: cellfit preempted it 1 time (last by ns/te-862bk), and Kubernetes "
        f"counted each preempted pod as a failed one against its backoffLimit 3, {NOT_IGNORING}: 4 failed pods in all, over the limit"
    )
