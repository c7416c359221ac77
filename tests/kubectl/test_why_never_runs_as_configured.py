"""user26 #5: ``kubectl cellfit why`` called a Job AlloX can never start "queued by AlloX
(NoMachine): ... it never fits". Queued it is not: no node of AlloX's ever holds a pod of any of
its configurations, so it waits for good until its configurations change. Said so; a NoMachine
Job one of whose kinds may still fit (free room later, pods to leave, a kind no node offers now)
stays queued."""

from __future__ import annotations

import json

from scheduler.kubectl.objects import CellfitView, job_from
from scheduler.kubectl.why import explain_job

CPU_NEVER = ("cellfit.io/configurations.cpu.resources, 100 cores a pod, more than any one of them has (62 cores at most, "
             "beside the cores kept for its GPUs): it never fits")
GPU_NEVER = "cellfit.io/configurations.gpu.resources, 16 GPUs a pod, more than any one of them has (8 GPUs at most): it never fits"
GPU_LATER = "cellfit.io/configurations.gpu.resources, 4 GPUs a pod, more than any of them has free now"
HEAD = "AlloX's nodes (allox.nodeSelector) cannot start this Job: "


def _job(message: str) -> dict[str, object]:
    return {"metadata": {"name": "train", "namespace": "alice", "uid": "uid-train",
                         "annotations": {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "100"}},
                                                                                   "gpu": {"resources": {"nvidia.com/gpu": "16"}}}),
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 600}, "gpu": {"seconds": 60}})}},
            "spec": {"suspend": True},
            "status": {"conditions": [{"type": "Placed", "status": "False", "reason": "NoMachine", "message": message}]}}


def test_a_job_no_configuration_of_which_ever_fits_cannot_run_as_configured() -> None:
    message = HEAD + CPU_NEVER + "; " + GPU_NEVER
    answer = explain_job(job_from(_job(message)), CellfitView())
    assert answer.reason == "cannot-run", answer
    assert answer.summary == f"cannot run as configured (AlloX's NoMachine): {message}; change its cellfit.io/configurations"
    assert "queued" not in answer.summary


def test_a_job_one_kind_of_which_may_fit_later_is_still_queued() -> None:
    for message in (HEAD + CPU_NEVER + "; " + GPU_LATER, HEAD + CPU_NEVER + "; and no node offers its gpu configuration"):
        answer = explain_job(job_from(_job(message)), CellfitView())
        assert answer.reason == "allox-queue", answer
