"""A best-effort Job whose podFailurePolicy ignores DisruptionTarget, but after a rule on exit
codes that counts 143 (or fails the Job on it): the Job controller applies the first rule that
matches, exit codes and conditions alike, so a preempted pod that exits with 143, what a process
stopped by SIGTERM usually returns, is counted (or fails the Job) instead of resuming. The
webhook said nothing of it; it now warns at apply, naming the rule. A rule on other codes (the
Kubernetes documentation's FailJob on 42 before the Ignore rule) is left alone: cellfit cannot
know a workload's exit code before it exits, only what a stopped process usually returns."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.extender.validating import MAX_WARNING_CHARS
from scheduler.wording import exit_code_rules_before_disruption
from tests.extender.test_review_user21_preempted_jobs import warnings
from tests.support.admission_reviews import RESUMES, job
from tests.unit.test_validation import VISION

IGNORE_RULE = RESUMES["rules"]


def on_exit_codes(action: str, operator: str, values: list[int]) -> dict[str, Any]:
    return {"action": action, "onExitCodes": {"operator": operator, "values": values}}


def test_a_count_rule_on_143_before_the_ignore_rule_is_warned_of() -> None:
    policy = {"rules": [on_exit_codes("Count", "In", [143]), *IGNORE_RULE]}
    (told,) = warnings(job("be", template_labels=VISION, pod_failure_policy=policy, backoff_limit=2))
    assert told == ("cellfit: spec.podFailurePolicy.rules[0]: Count on exit code 143 (SIGTERM's usual) precedes rules[1], "
                    "the Ignore on DisruptionTarget, and the first match applies: a preempted pod exiting so counts as failed; "
                    "move rules[1] first")
    assert len(told) <= MAX_WARNING_CHARS and not told.endswith("…")  # kept whole by the API server


def test_a_not_in_fail_job_rule_matches_the_signal_codes_it_does_not_list() -> None:
    policy = {"rules": [on_exit_codes("FailJob", "NotIn", [1, 143]), *IGNORE_RULE]}
    (told,) = warnings(job("be", template_labels=VISION, pod_failure_policy=policy))
    assert told.startswith("cellfit: spec.podFailurePolicy.rules[0]: FailJob on exit code 137 (SIGKILL's usual) precedes rules[1], ")
    assert told.endswith("a preempted pod exiting so fails the Job; move rules[1] first"), told


def test_both_signal_codes_fit_in_a_warning() -> None:
    filler = [{"action": "Count", "onPodConditions": [{"type": f"Custom{n}"}]} for n in range(11)]
    policy = {"rules": [*filler, on_exit_codes("FailIndex", "In", [137, 143]), *IGNORE_RULE]}
    body = job("be", template_labels=VISION, pod_failure_policy=policy)
    body["spec"].update(completionMode="Indexed", backoffLimitPerIndex=1)
    (told,) = warnings(body)
    assert told == ("cellfit: spec.podFailurePolicy.rules[11]: FailIndex on exit code 143 or 137 (SIGTERM's, SIGKILL's usual) "
                    "precedes rules[12], the Ignore on DisruptionTarget, and the first match applies: a preempted pod exiting so "
                    "fails its index; move rules[12] first")
    assert len(told) <= MAX_WARNING_CHARS and not told.endswith("…"), len(told)


@pytest.mark.parametrize("rules", [
    [on_exit_codes("FailJob", "In", [42]), *IGNORE_RULE],  # the Kubernetes documentation's example
    [*IGNORE_RULE, on_exit_codes("Count", "In", [143])],  # after the Ignore rule: never reached for a preempted pod
    [on_exit_codes("Ignore", "In", [143]), *IGNORE_RULE],  # ignored either way
    [on_exit_codes("Count", "NotIn", [137, 143]), *IGNORE_RULE],
])
def test_rules_that_leave_a_preempted_pod_to_the_ignore_rule_are_not_warned_of(rules: list[dict[str, Any]]) -> None:
    assert warnings(job("be", template_labels=VISION, pod_failure_policy={"rules": rules})) == []


def test_only_the_rules_before_the_first_rule_on_disruption_target_are_read() -> None:
    policy = {"rules": [on_exit_codes("Count", "In", [137]), on_exit_codes("FailIndex", "In", [143, 137]),
                        *IGNORE_RULE, on_exit_codes("FailJob", "In", [143])]}
    assert exit_code_rules_before_disruption(policy) == ((0, "Count", (137,)), (1, "FailIndex", (143, 137)))


def test_without_the_ignore_rule_a_fail_job_rule_on_143_is_warned_of_too() -> None:
    policy = {"rules": [on_exit_codes("FailJob", "In", [143])]}
    first, second = warnings(job("be", template_labels=VISION, pod_failure_policy=policy, backoff_limit=2))
    assert first.startswith("cellfit: spec.podFailurePolicy: no rule ignores DisruptionTarget, so each pod a trial Job preempts ")
    assert second == ("cellfit: spec.podFailurePolicy.rules[0]: FailJob on exit code 143 (SIGTERM's usual) comes first, and the "
                      "first match applies: a preempted pod exiting so fails the Job; put the Ignore rule on DisruptionTarget "
                      "before it")


def test_a_count_rule_on_exit_codes_before_a_count_rule_on_disruption_target_adds_nothing() -> None:
    policy = {"rules": [on_exit_codes("Count", "In", [143]), {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    (told,) = warnings(job("be", template_labels=VISION, pod_failure_policy=policy, backoff_limit=2))
    assert told.startswith("cellfit: spec.podFailurePolicy: its first rule on DisruptionTarget counts it (Count)")
