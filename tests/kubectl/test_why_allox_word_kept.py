"""What cellfit's controllers said of an interchangeable Job stays in ``why``'s answer after
another state is written over it.

M6 (live session): an AlloX Job on CPU whose pods ran outside AlloX's nodes was told "on CPU
instead of GPU: its pods run on nodes outside AlloX's" (its PodsElsewhere condition) where its
Placed Event said why AlloX chose CPU ("no GPU of virtual cluster 'vc-a' was free ...").
M5: an unsuspended Job with cellfit.io/configurations was told only "running: 1 pod on
ax-gpu-0", not the estimator's "running without an estimate: ..."."""

from __future__ import annotations

from estimator.controller import not_estimated_message
from placer.holding import explain as holding_explain
from scheduler.kubectl.objects import CellfitView, Facts, JobFacts, events_from, job_from
from scheduler.kubectl.why import explain, explain_job
from tests.estimator.test_review_user21_what_users_read import job as estimator_job
from tests.kubectl.test_why import a_pod, event, interchangeable

WHY_CPU = ("AlloX chose cpu (estimated 101 s; gpu 27 s) because no GPU of virtual cluster 'vc-a' was free for it, the "
           "first expected free in 9 min")


def job_event(reason: str, message: str, *, warning: bool = False) -> dict[str, object]:
    found = event(reason, message, warning=warning, name="ij")
    found["involvedObject"] = {"kind": "Job", "name": "ij"}
    return found


def on_cpu(condition: dict[str, str], *events: dict[str, object]) -> JobFacts:
    return job_from(interchangeable(suspend=False, placement="cpu", conditions=[{"type": "Placed", "status": "True", **condition}],
                                    estimate=True),
                    events=events_from(list(events)), pods=(a_pod("ij-abcde", node="outside-1", phase="Running"),))


def test_pods_elsewhere_is_a_fact_beside_allox_reason_for_cpu() -> None:
    elsewhere = holding_explain("cpu", "elsewhere", unbound_hold_seconds=60)
    job = on_cpu({"reason": "PodsElsewhere", "message": elsewhere}, job_event("Placed", f"started on cpu: {WHY_CPU}"))
    answer = explain_job(job, CellfitView())
    assert answer.reason == "cpu-instead-of-gpu"
    assert answer.summary == f"on CPU instead of GPU: {WHY_CPU}"
    assert f"Placed (PodsElsewhere): {elsewhere}" in answer.details
    assert answer.details[-1] == "now: running: 1 pod on outside-1"


def test_without_its_placed_event_allox_chose_cpu_is_all_that_is_known() -> None:
    elsewhere = holding_explain("cpu", "elsewhere", unbound_hold_seconds=60)
    answer = explain_job(on_cpu({"reason": "PodsElsewhere", "message": elsewhere}), CellfitView())
    assert answer.summary == "on CPU instead of GPU: AlloX chose cpu"
    assert f"Placed (PodsElsewhere): {elsewhere}" in answer.details


def test_a_resumed_job_is_told_allox_reason_not_that_it_resumed() -> None:
    job = on_cpu({"reason": "Started", "message": "running on cpu: resumed after a preemption"},
                 job_event("Placed", f"started on cpu: {WHY_CPU}"))
    assert explain_job(job, CellfitView()).summary == f"on CPU instead of GPU: {WHY_CPU}"


# The estimator's own words for a Job created unsuspended.
NOT_ESTIMATED = not_estimated_message(estimator_job(suspend=False, conditions=[]))  # type: ignore[arg-type]


def started_by_its_user(*events: dict[str, object]) -> JobFacts:
    return job_from(interchangeable(suspend=False), events=events_from(list(events)),
                    pods=(a_pod("ij-abcde", node="ax-gpu-0", phase="Running"),))


def test_an_unsuspended_job_says_the_estimators_word_from_its_view() -> None:
    entry = {"namespace": "ns", "name": "ij", "state": "unsuspended", "message": NOT_ESTIMATED, "samples": []}
    answer = explain_job(started_by_its_user(), CellfitView(estimator_entry=entry))
    assert answer.reason == "running"
    assert answer.summary == f"running: 1 pod on ax-gpu-0; {NOT_ESTIMATED}"


def test_an_unsuspended_job_says_the_estimators_word_from_its_event() -> None:
    """The estimator's view unread (cellfit's leader not answering, AlloX off): its Event says it."""
    job = started_by_its_user(job_event("NotEstimated", NOT_ESTIMATED, warning=True))
    answer = explain_job(job, CellfitView(unavailable={"estimates": "cellfit's estimator is off"}))
    assert answer.summary == f"running: 1 pod on ax-gpu-0; {NOT_ESTIMATED}"
    assert answer.details[-1].startswith("NotEstimated, last ")


def test_the_view_decides_over_an_old_event() -> None:
    entry = {"namespace": "ns", "name": "ij", "state": "estimated", "message": "", "samples": []}
    job = started_by_its_user(job_event("NotEstimated", NOT_ESTIMATED, warning=True))
    assert explain_job(job, CellfitView(estimator_entry=entry)).summary == "running: 1 pod on ax-gpu-0"


def test_a_pod_of_an_unsuspended_job_says_it_too() -> None:
    entry = {"namespace": "ns", "name": "ij", "state": "unsuspended", "message": NOT_ESTIMATED, "samples": []}
    answer = explain(Facts(pod=a_pod("ij-abcde", node="ax-gpu-0", phase="Running"), job=started_by_its_user(),
                           cellfit=CellfitView(estimator_entry=entry)))
    assert (answer.reason, answer.summary) == ("running", f"running on node ax-gpu-0; {NOT_ESTIMATED}")
