"""A best-effort Job that a preemption fails instead of suspending, told at ``kubectl apply``
(user21's hand session: ij-4, ij-2 and ij-3, interchangeable Jobs of ``backoffLimit: 0`` and no
``podFailurePolicy``, ended ``BackoffLimitExceeded`` when a trial Job preempted them, while their
Preempted Event promised them the quickest resume; nothing had warned their user).

Kubernetes counts a preempted pod as a failed one unless the Job's podFailurePolicy ignores the
DisruptionTarget condition kube-scheduler gives it: the webhook says so for every Job cellfit may
preempt (best-effort under FitGpp; opportunistic under HiveD's reclaim), what to add, and what
happens otherwise."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.validating import MAX_WARNING_CHARS, ObjectValidation
from scheduler.extender.validation import LiveCells
from scheduler.wording import ignores_disruption
from tests.extender.test_validating_cronjobs import answer as cronjob_answer
from tests.extender.test_validating_cronjobs import cronjob, cronjob_review
from tests.support.admission_reviews import RESUMES, job
from tests.unit.test_validation import VISION, answer, hived

RULE = "add the rule {action: Ignore, onPodConditions: [{type: DisruptionTarget}]}"


def service(*, cells: bool = True, preempts_best_effort: bool = True) -> ObjectValidation:
    live = LiveCells(hived(), lock=threading.RLock()) if cells else None
    return ObjectValidation(cells=live, metrics=ExtenderMetrics(), gpu_resource="nvidia.com/gpu", reject_invalid=True,
                            preempts_best_effort=preempts_best_effort)


def warnings(body: dict[str, Any], *, review: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
    response = answer(service(**kwargs), body, **(review or {}))
    assert response["allowed"], response  # a warning only, even with rejectInvalid
    return list(response.get("warnings") or [])


def test_a_best_effort_job_of_backoff_limit_0_is_told_a_preemption_fails_it_and_what_to_add() -> None:
    body = job("ij-4", template_labels=VISION, pod_failure_policy=None, backoff_limit=0)
    (told,) = warnings(body)
    assert told == ("cellfit: spec.podFailurePolicy: missing, so with backoffLimit 0 the first pod a trial Job preempts fails "
                    f"the Job instead of resuming; {RULE}")
    assert len(told) <= MAX_WARNING_CHARS and not told.endswith("…")  # kept whole by the API server


def test_a_larger_backoff_limit_is_told_each_preemption_counts_against_it() -> None:
    (told,) = warnings(job("be", template_labels=VISION, pod_failure_policy=None))
    assert told == f"cellfit: spec.podFailurePolicy: missing, so each pod a trial Job preempts counts as a failure against backoffLimit 6; {RULE}"
    assert len(told) <= MAX_WARNING_CHARS


def test_a_policy_without_the_ignore_rule_is_told_so() -> None:
    counted = {"rules": [{"action": "Count", "onPodConditions": [{"type": "ContainersReady"}]}]}
    (told,) = warnings(job("be", template_labels=VISION, pod_failure_policy=counted, backoff_limit=2))
    assert told == ("cellfit: spec.podFailurePolicy: no rule ignores DisruptionTarget, so each pod a trial Job preempts "
                    f"counts as a failure against backoffLimit 2; {RULE}")


def test_a_count_rule_before_the_ignore_rule_is_the_one_to_change() -> None:
    """The Job controller applies the first rule that matches: an Ignore rule after a Count rule
    on DisruptionTarget is never reached, and the warning said "no rule ignores DisruptionTarget
    ... add the rule" of a policy that had it."""
    counted = {"rules": [{"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]}, *RESUMES["rules"]]}
    (told,) = warnings(job("be", template_labels=VISION, pod_failure_policy=counted, backoff_limit=2))
    assert told == ("cellfit: spec.podFailurePolicy: its first rule on DisruptionTarget counts it (Count), so each pod a "
                    "trial Job preempts counts as a failure against backoffLimit 2; make that rule "
                    "{action: Ignore, onPodConditions: [{type: DisruptionTarget}]}")


def test_an_indexed_jobs_limit_per_index_is_the_one_named() -> None:
    body = job("be", template_labels=VISION, pod_failure_policy=None)
    body["spec"].update(completionMode="Indexed", backoffLimitPerIndex=0)
    (told,) = warnings(body)
    assert "with backoffLimitPerIndex 0 the first pod" in told


def test_the_readmes_job_and_a_trial_job_are_told_nothing() -> None:
    assert warnings(job("be", template_labels=VISION)) == []
    trial = job("te", template_labels={**VISION, "cellfit.io/job-class": "trial"}, pod_failure_policy=None, backoff_limit=0)
    trial["spec"]["template"]["spec"]["priorityClassName"] = "cellfit-trial"
    assert warnings(trial) == []


def test_an_opportunistic_job_is_told_even_as_a_trial_under_hived() -> None:
    labels = {**VISION, "cellfit.io/job-class": "trial", "cellfit.io/priority": "opportunistic"}
    body = job("te", template_labels=labels, pod_failure_policy=None, backoff_limit=0)
    body["spec"]["template"]["spec"]["priorityClassName"] = "cellfit-trial"
    (told,) = warnings(body)
    assert "the first pod its cells' VC reclaims fails the Job" in told
    assert warnings(body, cells=False) == []  # no HiveD: nothing reclaims it


def test_without_fitgpps_preemption_a_best_effort_job_is_told_nothing() -> None:
    assert warnings(job("be", template_labels=VISION, pod_failure_policy=None), preempts_best_effort=False) == []


def test_an_update_is_not_told_what_kubernetes_does_not_let_it_change() -> None:
    body = job("be", template_labels=VISION, pod_failure_policy=None)
    assert warnings(body, review={"operation": "UPDATE", "old": copy.deepcopy(body)}) == []


def test_a_cronjob_is_told_at_its_job_template() -> None:
    validation = service()
    (told,) = cronjob_answer(validation, cronjob_review(cronjob(template_labels=VISION, pod_failure_policy=None)))["warnings"]
    assert told.startswith("cellfit: spec.jobTemplate.spec.podFailurePolicy: missing, so each pod a trial Job preempts")


@pytest.mark.parametrize("labels", [{}, {"cellfit.io/job-class": "trial", "cellfit.io/priority": "opportunistic"}])
@pytest.mark.parametrize("limits", [{"backoffLimit": 0}, {"backoffLimit": 6}, {"backoffLimitPerIndex": 100}])
def test_every_wording_is_kept_whole_by_the_api_server_even_under_a_cronjob(labels: dict[str, str], limits: dict[str, int]) -> None:
    body = cronjob(template_labels={**VISION, **labels}, pod_failure_policy={"rules": []})
    body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["priorityClassName"] = "cellfit-trial"
    body["spec"]["jobTemplate"]["spec"].update(limits)
    (told,) = cronjob_answer(service(), cronjob_review(body))["warnings"]
    assert len(told) <= MAX_WARNING_CHARS and told.endswith(RULE), told


@pytest.mark.parametrize(("policy", "ignored"), [
    (None, False),
    ({"rules": []}, False),
    (RESUMES, True),
    ({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}, True),  # status defaults to True
    ({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "False"}]}]}, False),
    # The first rule that matches applies: a FailJob on the condition before the Ignore wins.
    ({"rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}, *RESUMES["rules"]]}, False),
    # A rule on exit codes first does not match the condition: the Ignore after it applies.
    ({"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}, *RESUMES["rules"]]}, True),
])
def test_which_policies_let_a_preempted_job_resume(policy: Any, ignored: bool) -> None:
    assert ignores_disruption(policy) is ignored
