"""AlloX's ``Placed`` condition follows the Job after its start (user21's hand session): a Failed
Job kept "Placed=True reason=Started: running on gpu: AlloX chose gpu (estimated 27 s; cpu 101 s)",
and so did a preempted Job whose next pod was pending (round 4, ij-v). Now an ended Job's condition
says where it ran and how it ended, a preempted one's that it waits to resume, and ``kubectl
cellfit why``, which reads the condition's "running on <kind>", reads what the placer writes."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from placer.holding import JobPods
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.kubectl.objects import CellfitView, job_from, pod_from
from scheduler.kubectl.why import explain_job
from tests.placer.test_controller import CONFIGURATIONS, Jobs, RecordingApi

NOW = 1767225700.0  # 2026-01-01T00:01:40Z
CHOSE = "AlloX chose gpu (estimated 27 s; cpu 101 s)"
STARTED = {"type": "Placed", "status": "True", "reason": "Started", "message": f"running on gpu: {CHOSE}"}
FAILED = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}


def started_job(name: str, *, conditions: list[dict[str, str]], preemptions: int = 0, kind: str = "gpu") -> dict[str, Any]:
    """An interchangeable Job AlloX started on ``kind`` 60 s ago, as the API server holds it."""
    annotations = {"cellfit.io/configurations": json.dumps(CONFIGURATIONS), "cellfit.io/placement": kind,
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 101}, "gpu": {"seconds": 27}})}
    if preemptions:
        annotations["cellfit.io/preemptions"] = str(preemptions)
    return {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "9",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": annotations},
            "spec": {"suspend": False, "backoffLimit": 0,
                     "template": {"metadata": {"labels": {"cellfit.io/placement": kind}},
                                  "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}},
            "status": {"startTime": "2026-01-01T00:00:40Z", "conditions": conditions}}


def controller(api: RecordingApi, bodies: list[dict[str, Any]], pods: dict[str, JobPods] | None = None) -> PlacerController:
    jobs = [JOB_DECODER.decode(json.dumps(body).encode()) for body in bodies]
    free = Resources(cpu_millis=4000, memory_bytes=64 * 2**30, gpus=0)
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=False),
        gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {"n1": free},
        capacity=lambda: Resources(cpu_millis=5000, memory_bytes=64 * 2**30, gpus=1), clock=lambda: NOW,
        job_pods=lambda uids: {uid: found for uid, found in (pods or {}).items() if uid in uids},
    )


def told(api: RecordingApi, name: str) -> dict[str, Any]:
    return [condition for job, condition in api.conditions if job == name][-1]


def with_condition(body: dict[str, Any], condition: dict[str, Any]) -> dict[str, Any]:
    kept = [c for c in body["status"]["conditions"] if c["type"] != condition["type"]]
    return {**body, "status": {**body["status"], "conditions": [*kept, condition]}}


def test_a_failed_job_is_told_it_ran_and_how_it_ended_not_that_it_runs() -> None:
    api = RecordingApi()
    body = started_job("ij-4", conditions=[STARTED, FAILED])
    controller(api, [body]).admit()
    condition = told(api, "ij-4")
    assert (condition["status"], condition["reason"]) == ("True", "Ran")
    assert condition["message"] == f"ran on gpu: {CHOSE}; the Job failed (BackoffLimitExceeded)"
    # Written once: the next pass finds it said.
    again = RecordingApi()
    controller(again, [with_condition(body, condition)]).admit()
    assert again.conditions == []
    # kubectl cellfit why: failed, and where it ran.
    answer = explain_job(job_from(with_condition(body, condition)), CellfitView())
    assert answer.summary == "failed: Job has reached the specified backoff limit"
    assert answer.details == (f"Placed: ran on gpu: {CHOSE}; the Job failed (BackoffLimitExceeded)",)


def test_a_completed_job_is_told_it_completed() -> None:
    api = RecordingApi()
    complete = {"type": "Complete", "status": "True", "reason": "CompletionsReached"}
    controller(api, [started_job("done", conditions=[STARTED, complete])]).admit()
    assert told(api, "done")["message"] == f"ran on gpu: {CHOSE}; the Job completed"


def test_a_job_told_it_holds_no_machine_is_told_where_it_ran_when_it_ends() -> None:
    api = RecordingApi()
    unbound = {"type": "Placed", "status": "True", "reason": "NotBound", "message": "started on gpu, and none of its pods was bound"}
    controller(api, [started_job("late", conditions=[unbound, FAILED])]).admit()
    assert told(api, "late")["message"] == "ran on gpu; the Job failed (BackoffLimitExceeded)"


def test_a_job_that_ended_while_waiting_is_told_so() -> None:
    api = RecordingApi()
    queued = {"type": "Placed", "status": "False", "reason": "Queued", "message": "1st on cpu, expected start at 2026-01-01T00:01:00Z (AlloX)"}
    controller(api, [started_job("gone", conditions=[queued, FAILED])]).admit()
    condition = told(api, "gone")
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False", "Ended", "the Job failed (BackoffLimitExceeded) before AlloX started it")


def test_a_preempted_job_whose_next_pod_waits_is_not_told_it_runs_and_is_told_again_when_it_resumes() -> None:
    api = RecordingApi()
    body = started_job("ij-v", conditions=[STARTED], preemptions=1)
    controller(api, [body], pods={"uid-ij-v": JobPods(unbound=1)}).admit()
    condition = told(api, "ij-v")
    assert (condition["status"], condition["reason"]) == ("True", "Preempted")
    assert condition["message"] == "preempted: no pod of it runs now; its next pod waits to be placed, to resume on gpu"
    assert not condition["message"].startswith("running on ")
    # Bound again: running, on the kind it was placed in.
    resumed = RecordingApi()
    controller(resumed, [with_condition(body, condition)], pods={"uid-ij-v": JobPods(here=1)}).admit()
    assert told(resumed, "ij-v")["message"] == "running on gpu: resumed after a preemption"


def test_a_preempted_job_still_on_its_node_and_one_never_preempted_are_left_running() -> None:
    api = RecordingApi()
    never = started_job("never", conditions=[STARTED])
    leaving = started_job("leaving", conditions=[STARTED], preemptions=1)
    controller(api, [never, leaving], pods={"uid-never": JobPods(unbound=1), "uid-leaving": JobPods(here=1, unbound=1)}).admit()
    assert api.conditions == []


def test_why_says_a_preempted_job_waits_not_that_it_runs() -> None:
    api = RecordingApi()
    body = started_job("ij-v", conditions=[STARTED], preemptions=1, kind="cpu")
    controller(api, [body], pods={"uid-ij-v": JobPods(unbound=1)}).admit()
    pending = {"metadata": {"name": "ij-v-x2k9q", "namespace": "alice"}, "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}}
    answer = explain_job(job_from(with_condition(body, told(api, "ij-v")), pods=(pod_from(pending),)), CellfitView())
    assert answer.reason == "preempted"
    assert answer.summary.startswith("preempted 1 time; now pod ij-v-x2k9q: pending")
    assert "running" not in answer.summary
