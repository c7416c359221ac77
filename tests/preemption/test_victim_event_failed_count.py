"""A victim's Preempted Event reads its Job's status.failed: a Job without the resume rule at
backoffLimit - 1 failed pods fails because of this preemption, and was told only that the
preemption "counts against" its backoffLimit; one with failures to spare is told how many are
left. A victim whose Job the watch has not shown was promised the resume ("quickest to
resume") that only its Job's podFailurePolicy, unread, can give; one whose Job is deleted too."""

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
NOT_IGNORING = "as its spec.podFailurePolicy does not ignore DisruptionTarget"
CHOSEN = "preempted by ml/te-1 on node n1: the best-effort pod there cheapest to suspend"


def watched_job(*, backoff_limit: int = 3, failed: int | None = None, policy: dict[str, Any] | None = None) -> wire.Job:
    """The Job as the watch decodes it from the API server's JSON, its status included."""
    spec: dict[str, Any] = {"backoffLimit": backoff_limit, "template": {"spec": {"containers": [{"name": "train"}]}}}
    if policy is not None:
        spec["podFailurePolicy"] = policy
    status = {} if failed is None else {"failed": failed}
    body = {"metadata": {"uid": "job-be", "namespace": "ml", "name": "be"}, "spec": spec, "status": status}
    return msgspec.json.decode(msgspec.json.encode(body), type=wire.Job)


def victim_message(*jobs: wire.Job, deleted: bool = False) -> str:
    """The Preempted Event of the one best-effort pod of Job ml/be, the watch having shown
    ``jobs`` in turn (none: not yet), and then the Job's deletion if ``deleted``."""
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NodeInfo(name="n1", allocatable=Resources(32000, 256 * GI, 8)))
    for job in jobs:
        engine.apply_job(translate.job_info(job))
    engine.apply_pod(
        PodInfo(
            uid="be-0",
            namespace="ml",
            name="be-0",
            requests=Resources(4000, 32 * GI, 8),
            labels={"cellfit.io/job-class": "best-effort"},
            node_name="n1",
            phase="Running",
            grace_period_seconds=60,
            owner=OwnerRef("Job", "be", "job-be"),
        )
    )
    if deleted:
        engine.delete_job("job-be")
    trial = PodInfo(
        uid="te-1",
        namespace="ml",
        name="te-1",
        requests=Resources(4000, 32 * GI, 4),
        labels={"cellfit.io/job-class": "trial"},
        owner=OwnerRef("Job", "te", "job-te"),
    )
    choice = engine.decide_preemption(trial, {"n1": ["be-0"]}, {})
    assert choice.victims == {"n1": ["be-0"]}
    message = choice.victim_message()
    assert message is not None
    found = PREEMPTED_WHERE.match(message)  # kubectl cellfit why still reads the score from it
    assert found is not None and (found["why"] or "").startswith("score "), message
    return message


def test_a_job_at_its_last_tolerated_failure_is_told_it_fails() -> None:
    message = victim_message(watched_job(backoff_limit=3, failed=3))
    assert message.startswith(
        f"{CHOSEN}; its Job fails instead of resuming, {NOT_IGNORING} and this is its 4th failed pod, over its backoffLimit 3 (FitGpp score "
    ), message


def test_a_job_with_failures_to_spare_is_told_how_many_are_left() -> None:
    counted = f"{CHOSEN}; its Job counts it as a failed pod against its backoffLimit 3, {NOT_IGNORING}: "
    assert victim_message(watched_job(failed=1)).startswith(f"{counted}its 2nd failed pod, after which it tolerates 1 more (FitGpp ")
    assert victim_message(watched_job(failed=2)).startswith(f"{counted}its 3rd failed pod, so the next one fails the Job (FitGpp ")


def test_the_latest_status_the_watch_showed_is_read() -> None:
    message = victim_message(watched_job(failed=0), watched_job(failed=3))
    assert "its Job fails instead of resuming" in message, message


def test_a_job_that_ignores_disruption_resumes_whatever_its_failures() -> None:
    resumes = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    message = victim_message(watched_job(failed=3, policy=resumes))
    assert message.startswith(f"{CHOSEN} and quickest to resume (FitGpp score "), message


def test_a_victim_whose_job_the_watch_has_not_shown_is_promised_no_resume() -> None:
    message = victim_message()
    assert "quickest to resume" not in message, message
    assert message.startswith(
        f"{CHOSEN}; cellfit has not read its Job yet, so it does not know whether the Job's "
        "spec.podFailurePolicy ignores DisruptionTarget: the Job resumes it only if it does (FitGpp "
    ), message


def test_a_victim_whose_job_is_deleted_is_told_nothing_creates_it_again() -> None:
    message = victim_message(watched_job(failed=0), deleted=True)
    assert message.startswith(f"{CHOSEN}; its Job is deleted, so nothing creates it again (FitGpp score "), message
