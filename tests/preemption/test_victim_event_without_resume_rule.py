"""A victim's Preempted Event promises a resume only where its Job resumes: a Job whose
podFailurePolicy does not ignore DisruptionTarget counts the preempted pod as failed (with
backoffLimit 0 the Job fails), and its Event says so instead of "quickest to resume"."""

from __future__ import annotations

from typing import Any

import msgspec

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.kube import translate, wire
from scheduler.kubectl.objects import PREEMPTED_WHERE
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine

GI = 2**30
RESUMING_POLICY: dict[str, Any] = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}


def job_from_api(*, policy: dict[str, Any] | None, limits: dict[str, int]) -> wire.Job:
    """The Job as the watch decodes it from the API server's JSON."""
    spec: dict[str, Any] = {**limits, "template": {"spec": {"containers": [{"name": "train"}]}}}
    if policy is not None:
        spec["podFailurePolicy"] = policy
    body = {"metadata": {"uid": "job-be", "namespace": "ml", "name": "be"}, "spec": spec}
    return msgspec.json.decode(msgspec.json.encode(body), type=wire.Job)


def preempted_message(*, policy: dict[str, Any] | None, limits: dict[str, int] | None = None) -> str:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NodeInfo(name="n1", allocatable=Resources(32000, 256 * GI, 8)))
    engine.apply_job(translate.job_info(job_from_api(policy=policy, limits={"backoffLimit": 0} if limits is None else limits)))
    engine.apply_pod(PodInfo(uid="be-0", namespace="ml", name="be-0", requests=Resources(4000, 32 * GI, 8),
                             labels={"cellfit.io/job-class": "best-effort"}, node_name="n1", phase="Running",
                             grace_period_seconds=60, owner=OwnerRef("Job", "be", "job-be")))
    trial = PodInfo(uid="te-1", namespace="ml", name="te-1", requests=Resources(4000, 32 * GI, 4),
                    labels={"cellfit.io/job-class": "trial"}, owner=OwnerRef("Job", "te", "job-te"))
    choice = engine.decide_preemption(trial, {"n1": ["be-0"]}, {})
    assert choice.victims == {"n1": ["be-0"]}
    message = choice.victim_message()
    assert message is not None
    return message


def test_a_victim_whose_job_lacks_the_rule_is_not_told_it_resumes() -> None:
    message = preempted_message(policy=None)
    assert "resume (" not in message and "quickest to resume" not in message, message
    assert message.startswith("preempted by ml/te-1 on node n1: the best-effort pod there cheapest to suspend; its Job fails "
                              "instead of resuming, as its spec.podFailurePolicy does not ignore DisruptionTarget and its "
                              "backoffLimit is 0 (FitGpp score "), message
    # kubectl cellfit why still reads the score from the victim's own Event.
    found = PREEMPTED_WHERE.match(message)
    assert found is not None and found["node"] == "n1" and (found["why"] or "").startswith("score ")


def test_a_rule_on_exit_codes_alone_does_not_resume_it() -> None:
    exit_codes = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
    assert "its Job fails instead of resuming" in preempted_message(policy=exit_codes)


def test_a_job_that_tolerates_failures_is_told_the_preemption_counts_against_them() -> None:
    said = ": the best-effort pod there cheapest to suspend; its Job counts it as a failed pod against its {}, as its "
    assert (said.format("backoffLimit 3") + "spec.podFailurePolicy does not ignore DisruptionTarget: its 1st failed pod, "
            "after which it tolerates 2 more (FitGpp score " in preempted_message(policy=None, limits={"backoffLimit": 3}))
    assert said.format("backoffLimit 6") in preempted_message(policy=None, limits={})  # the API server's default
    # An index's own count of failed pods is not in the Job's status: the limit alone is said.
    assert (said.format("backoffLimitPerIndex 2") + "spec.podFailurePolicy does not ignore DisruptionTarget (FitGpp score "
            in preempted_message(policy=None, limits={"backoffLimit": 0, "backoffLimitPerIndex": 2}))


def test_a_victim_whose_job_ignores_disruption_is_told_it_resumes() -> None:
    message = preempted_message(policy=RESUMING_POLICY)
    assert ": the best-effort pod there cheapest to suspend and quickest to resume (FitGpp score " in message, message


def test_a_victim_without_a_controller_is_not_told_it_resumes() -> None:
    """A bare best-effort pod: nothing creates it again, so "quickest to resume" was false."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NodeInfo(name="n1", allocatable=Resources(32000, 256 * GI, 8)))
    engine.apply_pod(PodInfo(uid="be-0", namespace="ml", name="be-0", requests=Resources(4000, 32 * GI, 8),
                             labels={"cellfit.io/job-class": "best-effort"}, node_name="n1", phase="Running",
                             grace_period_seconds=60))
    trial = PodInfo(uid="te-1", namespace="ml", name="te-1", requests=Resources(4000, 32 * GI, 4),
                    labels={"cellfit.io/job-class": "trial"}, owner=OwnerRef("Job", "te", "job-te"))
    choice = engine.decide_preemption(trial, {"n1": ["be-0"]}, {})
    assert choice.victims == {"n1": ["be-0"]}
    message = choice.victim_message()
    assert message is not None and message.startswith(
        "preempted by ml/te-1 on node n1: the best-effort pod there cheapest to suspend; it has no controller (a Job) "
        "to create it again, so nothing resumes it (FitGpp score "), message
    found = PREEMPTED_WHERE.match(message)
    assert found is not None and (found["why"] or "").startswith("score ")
