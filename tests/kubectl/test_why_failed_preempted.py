"""``kubectl cellfit why`` of a Job that failed because cellfit preempted it (user21's session:
ij-4, ``backoffLimit: 0`` and no podFailurePolicy, preempted by a trial Job, answered only
"failed: Job has reached the specified backoff limit" with ``cellfit.io/preemptions: 1`` on it)."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl.objects import CellfitView, events_from, job_from, preemption_from
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why import T0, job_json, preemption_events

BACKOFF = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
RULE = "{rules: [{action: Ignore, onPodConditions: [{type: DisruptionTarget}]}]}"
BREAKDOWN = "score 5.00 = size 1.00 + 4.0 x GP 1.00"


def failed_job(*, spec: dict[str, Any], failed: dict[str, str] = BACKOFF, preemptions: int = 1) -> Any:
    body = job_json("ij-4", annotations={"cellfit.io/preemptions": str(preemptions)} if preemptions else {}, conditions=[failed])
    body["spec"].update(spec)
    preempted, preempting = preemption_events("ns/ij-4-7xk2p", "ns/ij-trial-862bk", "gpu-0", BREAKDOWN)
    found = preemption_from(victim="ns/ij-4-7xk2p", preempted=events_from([preempted])[0], preemptor_events=events_from([preempting]))
    return job_from(body, preemptions=(found,) if preemptions else ())


def test_a_job_failed_by_a_preemption_is_told_so_and_what_makes_the_next_one_resume() -> None:
    answer = explain_job(failed_job(spec={"backoffLimit": 0}), CellfitView())
    assert answer.reason == "failed"  # the tag scripts read is unchanged
    assert answer.summary == (
        "failed: Job has reached the specified backoff limit: cellfit preempted it 1 time (last by ns/ij-trial-862bk), and "
        "Kubernetes counted each preempted pod as a failed one against its backoffLimit 0, as its spec.podFailurePolicy "
        "does not ignore DisruptionTarget")
    assert answer.details[0] == (
        "to have it resume after a preemption instead (its next pod goes first among best-effort pods), create it again with "
        f"spec.podFailurePolicy: {RULE} (a Job's podFailurePolicy cannot be changed)")
    assert answer.details[1] == f"ns/ij-4-7xk2p preempted by ns/ij-trial-862bk on node gpu-0 ({BREAKDOWN}) at {T0}"


def test_an_indexed_jobs_limit_per_index_is_named() -> None:
    failed = {**BACKOFF, "reason": "FailedIndexes", "message": "Job has failed indexes"}
    answer = explain_job(failed_job(spec={"backoffLimitPerIndex": 1, "completionMode": "Indexed"}, failed=failed), CellfitView())
    assert "against its backoffLimitPerIndex 1" in answer.summary


def test_a_job_whose_policy_ignores_preemptions_failed_of_something_else() -> None:
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    answer = explain_job(failed_job(spec={"backoffLimit": 0, "podFailurePolicy": policy}), CellfitView())
    assert answer.summary == "failed: Job has reached the specified backoff limit"
    assert answer.details[0] == "preempted 1 time by cellfit"


def test_a_failure_not_on_the_count_of_failed_pods_is_not_laid_on_the_preemption() -> None:
    deadline = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "Job was active longer than specified deadline"}
    answer = explain_job(failed_job(spec={"backoffLimit": 0}, failed=deadline), CellfitView())
    assert answer.summary == "failed: Job was active longer than specified deadline"


def test_a_job_never_preempted_fails_as_before() -> None:
    answer = explain_job(failed_job(spec={"backoffLimit": 0}, preemptions=0), CellfitView())
    assert (answer.reason, answer.summary, answer.details) == ("failed", "failed: Job has reached the specified backoff limit", ())
