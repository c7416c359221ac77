"""A best-effort Job whose podFailurePolicy ignores DisruptionTarget only after a rule that
counts exit code 143 (``{action: Count, onExitCodes: {operator: In, values: [143]}}`` first):
the Job controller applies the first rule that matches, so a preempted pod that exits with 143,
what a process stopped by SIGTERM usually returns, is counted. Its Preempted Event promised it
"quickest to resume". cellfit cannot know the exit code before the pod exits; the Event now says
the Job resumes it unless it exits so, naming the rule (1-based, as read) and what it does.

On FitGppEngine around the real HivedEngine: vc-a's best-effort Job be-q (one 8-GPU pod) and
its trial pod te-x."""

from __future__ import annotations

from typing import Any

import msgspec

from scheduler.kube import translate, wire
from scheduler.kubectl.objects import PREEMPTED_WHERE
from tests.preemption.test_hived_fitgpp_candidates import NODES, engine, job_pod, run

IGNORE_RULE = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
CHOSEN = "the best-effort pod there cheapest to suspend"
USUALLY = "a process stopped by SIGTERM usually exits with 143, by SIGKILL with 137"


def victim_message(*rules: dict[str, Any], backoff_limit: int = 2) -> str:
    made = engine()
    run(made, job_pod("be-q-0", 8, "vc-a", "be-q", "best-effort"))
    body = {"metadata": {"uid": "uid-be-q", "namespace": "ns", "name": "be-q"},
            "spec": {"backoffLimit": backoff_limit, "podFailurePolicy": {"rules": list(rules)},
                     "template": {"spec": {"containers": [{"name": "train"}]}}}}
    made.apply_job(translate.job_info(msgspec.json.decode(msgspec.json.encode(body), type=wire.Job)))
    te_x = job_pod("te-x-0", 8, "vc-a", "te-x", "trial")
    made.apply_pod(te_x)
    choice = made.decide_preemption(te_x, {name: [] for name in NODES}, {})
    assert choice.rule == "fitgpp" and choice.victim_uids == ("be-q-0",)
    message = choice.victim_message()
    assert message is not None and choice.victim_messages() == {"be-q-0": message}
    found = PREEMPTED_WHERE.match(message)  # kubectl cellfit why still reads the score from it
    assert found is not None and (found["why"] or "").startswith("score "), message
    return message.split(": ", 1)[1]


def test_a_count_rule_on_143_before_the_ignore_rule_is_told() -> None:
    said = victim_message({"action": "Count", "onExitCodes": {"operator": "In", "values": [143]}}, IGNORE_RULE)
    assert said.startswith(
        f"{CHOSEN}; its Job resumes it unless it exits with 143, on which its spec.podFailurePolicy's rule 1 counts it "
        f"against its backoffLimit 2 before its Ignore rule on DisruptionTarget is reached: {USUALLY} (FitGpp score "), said


def test_a_fail_job_rule_not_in_is_told_with_the_codes_it_matches() -> None:
    said = victim_message({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}},
                          {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [137]}}, IGNORE_RULE)
    assert said.startswith(f"{CHOSEN}; its Job resumes it unless it exits with 143, on which its spec.podFailurePolicy's "
                           "rule 2 fails the Job before its Ignore rule"), said


def test_rules_on_other_codes_leave_the_resume_promised() -> None:
    said = victim_message({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}, IGNORE_RULE)
    assert said.startswith(f"{CHOSEN} and quickest to resume (FitGpp score "), said


def test_a_counted_pod_is_told_a_fail_job_rule_on_143_comes_first() -> None:
    """A Job without the Ignore rule counts a preempted pod, unless a FailJob rule on its exit code
    takes it first: "counts it ... after which it tolerates 1 more" was not all."""
    said = victim_message({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [143]}})
    assert said.startswith(
        f"{CHOSEN}; its Job counts it as a failed pod against its backoffLimit 2, as its spec.podFailurePolicy does not ignore "
        "DisruptionTarget: its 1st failed pod, after which it tolerates 1 more; but if it exits with 143, its "
        f"spec.podFailurePolicy's rule 1 fails the Job first: {USUALLY} (FitGpp score "), said


def test_a_count_rule_on_exit_codes_before_a_count_rule_on_disruption_target_changes_nothing() -> None:
    said = victim_message({"action": "Count", "onExitCodes": {"operator": "In", "values": [143]}},
                          {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]})
    assert "but if it exits" not in said and "its 1st failed pod, after which it tolerates 1 more (FitGpp score " in said, said
