"""``kubectl cellfit why`` of an interchangeable Job AlloX refuses to start (its pods would run
outside AlloX's nodes: Placed=False, reason Refused, written by placer/controller.py) says it is
not started, not "queued by AlloX" (seen live by user23b, while ``kubectl cellfit queue`` said
the queue was empty)."""

from __future__ import annotations

import json

from scheduler.kubectl.objects import CellfitView, job_from
from scheduler.kubectl.why import explain_job

REFUSED = ("AlloX does not start this Job on cpu or gpu: its pods would run outside AlloX's nodes: "
           "spec.template.spec.nodeSelector[pool]: 'batch' is not 'allox', which AlloX's nodes carry "
           "(allox.nodeSelector: pool=allox); leave pool out (AlloX adds it) or set it to 'allox'")


def _job(reason: str, message: str) -> dict[str, object]:
    return {"metadata": {"name": "batch-est", "namespace": "alice", "uid": "uid-batch-est",
                         "annotations": {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "2"}}}),
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 60}})}},
            "spec": {"suspend": True},
            "status": {"conditions": [{"type": "Placed", "status": "False", "reason": reason, "message": message}]}}


def test_a_refused_job_is_said_not_started_not_queued() -> None:
    answer = explain_job(job_from(_job("Refused", REFUSED)), CellfitView())
    assert (answer.reason, answer.summary) == ("allox-refused", f"not started by AlloX (Refused): {REFUSED}")


def test_a_job_waiting_for_a_machine_is_still_queued() -> None:
    answer = explain_job(job_from(_job("NoMachine", "no machine of AlloX's is free for it")), CellfitView())
    assert answer.reason == "allox-queue"
