"""review22 F5: a FitGpp victim whose Job's podFailurePolicy has a rule on DisruptionTarget of
action FailJob (the whole Job fails at once) or FailIndex (the index fails at once) was told in its
Preempted Event that "its Job counts it as a failed pod against its backoffLimit 6", as if it would
retry; ``kubectl cellfit why`` of the failed Job and the webhook's warning at apply read the same
rule. Each now says what the rule does, from one phrase source (scheduler/wording.py)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.kubectl.objects import CellfitView
from scheduler.kubectl.why import explain_job
from scheduler.wording import disruption_action
from tests.extender.test_review_user21_preempted_jobs import warnings
from tests.kubectl.test_why_failed_preempted import BACKOFF, failed_job
from tests.preemption.test_victim_event_without_resume_rule import preempted_message
from tests.support.admission_reviews import RESUMES, job
from tests.unit.test_validation import VISION


def on_disruption(action: str) -> dict[str, Any]:
    return {"rules": [{"action": action, "onPodConditions": [{"type": "DisruptionTarget"}]}, *RESUMES["rules"]]}


INDEXED = {"completionMode": "Indexed", "completions": 4, "backoffLimitPerIndex": 2}


@pytest.mark.parametrize(("policy", "action"), [
    (None, None),
    ({"rules": []}, None),
    (RESUMES, "Ignore"),
    (on_disruption("FailJob"), "FailJob"),
    (on_disruption("FailIndex"), "FailIndex"),
    (on_disruption("Count"), "Count"),
    ({"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}, *on_disruption("FailIndex")["rules"]]},
     "FailIndex"),
])
def test_the_first_rule_on_the_condition_gives_the_action(policy: Any, action: str | None) -> None:
    assert disruption_action(policy) == action


def test_a_failjob_victim_is_told_its_job_fails() -> None:
    message = preempted_message(policy=on_disruption("FailJob"), limits={})
    assert ("cheapest to suspend; its Job fails, as its spec.podFailurePolicy fails the Job on DisruptionTarget (FitGpp score "
            in message), message
    assert "backoffLimit" not in message


def test_a_failindex_victim_is_told_its_index_fails() -> None:
    message = preempted_message(policy=on_disruption("FailIndex"), limits=INDEXED)
    assert ("cheapest to suspend; its index fails, as its spec.podFailurePolicy fails the index on DisruptionTarget (FitGpp score "
            in message), message
    assert "backoffLimitPerIndex" not in message


def test_a_count_rule_is_still_counted() -> None:
    assert "its Job counts it as a failed pod against its backoffLimit 6, as its spec.podFailurePolicy does not ignore " \
        "DisruptionTarget: its 1st failed pod, after which it tolerates 5 more (FitGpp score " \
        in preempted_message(policy=on_disruption("Count"), limits={})


FAILED_BY_POLICY = {"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
                    "message": "Pod ns/ij-4-7xk2p has condition DisruptionTarget matching FailJob rule at index 0"}


def test_why_of_a_job_its_failjob_rule_failed_names_the_rule() -> None:
    answer = explain_job(failed_job(spec={"podFailurePolicy": on_disruption("FailJob")}, failed=FAILED_BY_POLICY), CellfitView())
    assert answer.reason == "failed"
    assert answer.summary == (
        f"failed: {FAILED_BY_POLICY['message']}: cellfit preempted it 1 time (last by ns/ij-trial-862bk), and Kubernetes "
        "failed the Job, as its spec.podFailurePolicy fails the Job on DisruptionTarget")
    assert answer.details[0] == (
        "to have it resume after a preemption instead (its next pod goes first among best-effort pods), create it again with "
        "{action: Ignore, onPodConditions: [{type: DisruptionTarget}]} as its spec.podFailurePolicy's rule on DisruptionTarget "
        "(a Job's podFailurePolicy cannot be changed)")


def test_why_does_not_lay_a_failjob_rule_on_exit_codes_on_the_preemption() -> None:
    by_code = {**FAILED_BY_POLICY, "message": "Container trainer for pod ns/ij-4-7xk2p failed with exit code 42 matching FailJob rule at index 0"}
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}, *on_disruption("FailJob")["rules"]]}
    answer = explain_job(failed_job(spec={"podFailurePolicy": policy}, failed=by_code), CellfitView())
    assert answer.summary == f"failed: {by_code['message']}"
    assert answer.details[0] == "preempted 1 time by cellfit"


def test_why_of_a_job_whose_failindex_rule_failed_its_indexes() -> None:
    failed = {**BACKOFF, "reason": "FailedIndexes", "message": "Job has failed indexes"}
    answer = explain_job(failed_job(spec={**INDEXED, "podFailurePolicy": on_disruption("FailIndex")}, failed=failed), CellfitView())
    assert answer.summary.endswith(
        "and Kubernetes failed each preempted pod's index, as its spec.podFailurePolicy fails the index on DisruptionTarget")
    assert "backoffLimitPerIndex" not in answer.summary


def test_why_of_an_indexed_job_over_its_max_failed_indexes_is_laid_on_the_count() -> None:
    failed = {**BACKOFF, "reason": "MaxFailedIndexesExceeded", "message": "Job has exceeded the specified maximal number of failed indexes"}
    answer = explain_job(failed_job(spec={**INDEXED, "backoffLimitPerIndex": 0, "maxFailedIndexes": 0}, failed=failed), CellfitView())
    assert "counted each preempted pod as a failed one against its backoffLimitPerIndex 0" in answer.summary


def test_the_webhook_warns_of_a_failjob_rule() -> None:
    (told,) = warnings(job("be", template_labels=VISION, pod_failure_policy=on_disruption("FailJob")))
    assert told == ("cellfit: spec.podFailurePolicy: fails the Job on DisruptionTarget (FailJob), so the first pod a trial Job "
                    "preempts fails the Job instead of resuming; make that rule {action: Ignore, onPodConditions: "
                    "[{type: DisruptionTarget}]}")


def test_the_webhook_warns_of_a_failindex_rule() -> None:
    body = job("be", template_labels=VISION, pod_failure_policy=on_disruption("FailIndex"), completions=4)
    body["spec"].update(completionMode="Indexed", backoffLimitPerIndex=2)
    (told,) = warnings(body)
    assert told.startswith("cellfit: spec.podFailurePolicy: fails the index on DisruptionTarget (FailIndex), so each pod a "
                           "trial Job preempts fails its index instead of resuming; make that rule ")
