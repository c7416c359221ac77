"""A Job's ``Ran`` condition says AlloX's reason for its kind even when a later condition wrote
over the ``Started`` one (a live session, L2: "ran on gpu; the Job completed" beside "ran on gpu:
AlloX chose gpu (…); the Job completed"): its pods ran outside AlloX's nodes (``PodsElsewhere``),
were not bound in time (``NotBound``), or were preempted and resumed ("running on gpu: resumed
after a preemption", which the Ran condition read as the reason)."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from placer.holding import JobPods
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi, job
from tests.placer.test_review_user21_placed_lifecycle import CHOSE, STARTED, controller, started_job, told, with_condition

COMPLETE = {"type": "Complete", "status": "True", "reason": "CompletionsReached"}


def decoded(body: dict[str, Any], version: str) -> Any:
    """``body`` as the watch shows it after a change (at ``version``)."""
    return JOB_DECODER.decode(json.dumps({**body, "metadata": {**body["metadata"], "resourceVersion": version}}).encode())


def test_a_job_whose_pods_ran_elsewhere_is_told_allox_chose_its_kind_when_it_ends() -> None:
    api = RecordingApi()
    body = started_job("elsewhere", conditions=[STARTED])
    pods = {"uid-elsewhere": JobPods(elsewhere=1)}
    placer = controller(api, [body], pods=pods)
    placer.admit()
    elsewhere = told(api, "elsewhere")
    assert elsewhere["reason"] == "PodsElsewhere"
    placer._jobs = Jobs([decoded(with_condition(with_condition(body, elsewhere), COMPLETE), "10")])
    placer.admit()
    assert told(api, "elsewhere")["message"] == f"ran on gpu: {CHOSE}; the Job completed"


def test_a_preempted_job_that_resumed_is_told_allox_chose_its_kind_not_that_it_resumed() -> None:
    api = RecordingApi()
    body = started_job("ij-v", conditions=[STARTED], preemptions=1)
    pods = {"uid-ij-v": JobPods(unbound=1)}
    placer = controller(api, [body], pods=pods)
    placer.admit()
    assert told(api, "ij-v")["reason"] == "Preempted"
    pods["uid-ij-v"] = JobPods(here=1)
    body = with_condition(body, told(api, "ij-v"))
    placer._jobs = Jobs([decoded(body, "10")])
    placer.admit()
    resumed = told(api, "ij-v")
    assert resumed["message"] == "running on gpu: resumed after a preemption"
    placer._jobs = Jobs([decoded(with_condition(with_condition(body, resumed), COMPLETE), "11")])
    placer.admit()
    assert told(api, "ij-v")["message"] == f"ran on gpu: {CHOSE}; the Job completed"


def test_a_job_this_cellfit_started_keeps_the_reason_its_start_gave() -> None:
    api = RecordingApi()
    started: dict[str, JobPods] = {}
    waiting = job("a", cpu=100, gpu=10, version="1")
    gpu = Resources(cpu_millis=5000, memory_bytes=64 * 2**30, gpus=1)
    placer = PlacerController(
        api=api, jobs=Jobs([waiting]), settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=False),
        gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {"n1": gpu}, capacity=lambda: gpu, clock=lambda: 1767225700.0,
        job_pods=lambda uids: {uid: found for uid, found in started.items() if uid in uids})
    placer.admit()
    (_, condition), = api.conditions
    assert condition["message"] == "running on gpu: AlloX chose gpu (estimated 10 s; cpu 100 s)"
    # The watch: running, its pods not bound in time (told NotBound), then completed.
    not_bound = {"type": "Placed", "status": "True", "reason": "NotBound", "message": "none of its pods was bound"}
    body = {"metadata": {"name": "a", "namespace": "alice", "uid": "uid-a", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {**waiting.annotations, "cellfit.io/placement": "gpu"}},
            "spec": {"suspend": False, "template": {"metadata": {"labels": {"cellfit.io/placement": "gpu"}},
                                                    "spec": {"containers": [{"name": "c"}]}}},
            "status": {"startTime": "2026-01-01T00:00:00Z", "conditions": [not_bound, COMPLETE]}}
    placer._jobs = Jobs([decoded(body, "2")])
    placer.admit()
    assert told(api, "a")["message"] == "ran on gpu: AlloX chose gpu (estimated 10 s; cpu 100 s); the Job completed"

