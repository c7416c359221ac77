"""kubectl cellfit why of a running preempted Job whose spec.podFailurePolicy counts exit code 137
before its FailJob rule on DisruptionTarget tells the Count rule, as the victims' Preempted Events
do (``otherwise_if_exits``; review24 F6). The Job did not fail: its preempted pod was taken by the
Count rule first. Before, the details held only the preemption lines and 'now: running': a Job
with a FailJob rule on DisruptionTarget was taken to have failed ("the failed Job's answer says
so")."""

from __future__ import annotations

from scheduler.kubectl.objects import CellfitView
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why_exit_code_rules import COUNT_137, FAIL_JOB_137, USUALLY, preempted_job

FAIL_JOB_ON_DISRUPTION = {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}
TOLD = ("each preempted pod fails the Job, as its spec.podFailurePolicy fails the Job on DisruptionTarget; but if it exits "
        f"with 137, its spec.podFailurePolicy's rule 1 counts it against its backoffLimit 2 first: {USUALLY}: 1 failed pod "
        "so far of the 2 it tolerates")


def test_a_running_job_is_told_its_count_rule_on_137_before_its_fail_job_rule() -> None:
    answer = explain_job(preempted_job(COUNT_137, FAIL_JOB_ON_DISRUPTION), CellfitView())
    assert (answer.reason, TOLD in answer.details) == ("preempted", True), answer.details


def test_no_rule_on_exit_codes_or_one_that_fails_the_job_too_is_not_told() -> None:
    for rules in ((FAIL_JOB_ON_DISRUPTION,), (FAIL_JOB_137, FAIL_JOB_ON_DISRUPTION)):
        answer = explain_job(preempted_job(*rules), CellfitView())
        assert not any("each preempted pod" in line for line in answer.details), answer.details
