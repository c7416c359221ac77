"""``kubectl cellfit why`` of a preempted Job whose podFailurePolicy has a rule on exit codes
before its rule on DisruptionTarget that takes a preempted pod exiting as a stopped process
usually does (``{action: Count, onExitCodes: {operator: In, values: [137]}}`` before the Ignore
rule, or a FailJob on 137): the Job controller applies the first rule that matches, so such a
pod is counted, or fails the Job, though the Ignore rule is there. The victims' Events say it
(02b8e33, e65286e); ``why`` said nothing (live hand session): a running Job read no word of the
rule, and a Job failed by it read only the Job controller's reason. The Job is read from the
API server's JSON, its failed condition as the Job controller writes it."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl.objects import CellfitView
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why_failed_count import preempted_job as preempted

IGNORE = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
COUNT_137 = {"action": "Count", "onExitCodes": {"operator": "In", "values": [137]}}
FAIL_JOB_137 = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [137]}}
USUALLY = "a process stopped by SIGTERM usually exits with 143, by SIGKILL with 137"
BACKOFF = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
# The Job controller's words (pkg/controller/job/pod_failure_policy.go) for a FailJob rule on exit codes.
FAIL_JOB_ON_137 = {
    "type": "Failed",
    "status": "True",
    "reason": "PodFailurePolicy",
    "message": "Container train for pod ns/be-7xk2p failed with exit code 137 matching FailJob rule at index 0",
}


def preempted_job(*rules: dict[str, Any], failed: int = 1, conditions: list[dict[str, str]] | None = None) -> Any:
    """Job ns/be (backoffLimit 2, ``rules``), preempted once by cellfit (its pod be-7xk2p), with a
    pod running again unless ``conditions`` end it."""
    return preempted(failed=failed, spec={"backoffLimit": 2, "podFailurePolicy": {"rules": list(rules)}}, conditions=conditions)


def test_a_running_job_is_told_a_count_rule_on_137_before_its_ignore_rule() -> None:
    answer = explain_job(preempted_job(COUNT_137, IGNORE), CellfitView())
    assert answer.reason == "preempted"
    assert (
        "each preempted pod: its Job resumes it unless it exits with 137, on which its spec.podFailurePolicy's rule 1 counts "
        f"it against its backoffLimit 2 before its Ignore rule on DisruptionTarget is reached: {USUALLY}: 1 failed pod so far "
        "of the 2 it tolerates"
    ) in answer.details, answer.details


def test_a_running_job_counting_preemptions_is_told_a_fail_job_rule_on_137_comes_first() -> None:
    answer = explain_job(preempted_job(FAIL_JOB_137), CellfitView())
    assert (
        "the Job counts each preempted pod as a failed one against its backoffLimit 2, as its spec.podFailurePolicy does not "
        "ignore DisruptionTarget: 1 failed pod so far of the 2 it tolerates; but if it exits with 137, its "
        f"spec.podFailurePolicy's rule 1 fails the Job first: {USUALLY}"
    ) in answer.details, answer.details


def test_a_job_failed_by_a_fail_job_rule_on_its_preempted_pods_exit_code_is_told_so() -> None:
    answer = explain_job(preempted_job(FAIL_JOB_137, IGNORE, conditions=[FAIL_JOB_ON_137]), CellfitView())
    assert answer.reason == "failed"
    assert answer.summary == (
        f"failed: {FAIL_JOB_ON_137['message']}: cellfit preempted it 1 time (last by ns/te-862bk), and Kubernetes failed the "
        "Job, as its spec.podFailurePolicy's rule 1 fails the Job on exit code 137, which its preempted pod ns/be-7xk2p exited "
        f"with before its Ignore rule on DisruptionTarget is reached: {USUALLY}"
    )
    assert answer.details[0].startswith(
        "to have it resume after a preemption instead (its next pod goes first among best-effort pods), create it again with "
        "{action: Ignore, onPodConditions: [{type: DisruptionTarget}]} before its spec.podFailurePolicy's rule 1, on exit codes"
    ), answer.details


def test_a_job_failed_over_its_backoff_limit_is_told_the_count_rule_may_have_counted_its_preempted_pods() -> None:
    answer = explain_job(preempted_job(COUNT_137, IGNORE, failed=3, conditions=[BACKOFF]), CellfitView())
    assert answer.summary == (
        "failed: Job has reached the specified backoff limit: cellfit preempted it 1 time (last by ns/te-862bk), and a preempted "
        "pod may have counted against it: its Job resumes it unless it exits with 137, on which its spec.podFailurePolicy's rule "
        f"1 counts it against its backoffLimit 2 before its Ignore rule on DisruptionTarget is reached: {USUALLY}"
    )


def test_a_fail_job_on_another_pods_exit_code_is_not_laid_on_the_preemption() -> None:
    other = {**FAIL_JOB_ON_137, "message": FAIL_JOB_ON_137["message"].replace("be-7xk2p", "be-n3w9x")}
    answer = explain_job(preempted_job(FAIL_JOB_137, IGNORE, conditions=[other]), CellfitView())
    assert answer.summary == f"failed: {other['message']}"


def test_rules_on_other_exit_codes_add_nothing() -> None:
    rule_42 = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}
    answer = explain_job(preempted_job(rule_42, IGNORE), CellfitView())
    assert not any("exits with" in line for line in answer.details), answer.details
