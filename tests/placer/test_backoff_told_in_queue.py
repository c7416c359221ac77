"""A Job AlloX suspended again and backs off in one kind, queued in its other kind meanwhile, is
told the back-off with its queue place (live hand session): its Placed condition, its Queued
Event (what ``kubectl describe job`` shows) and ``kubectl cellfit queue`` said only "1st on cpu,
expected start at ...", and the SuspendedAgain condition that had said the back-off was written
over, so a restarted cellfit no longer knew it and started the Job on the same GPU room at once.
Now the Queued condition says "backing off on gpu until ... after none of its pods was bound
within 300 s (suspended again 1 time); 1st on cpu, ...", the queue lists it with it, and a
restarted cellfit reads the back-off back from that condition."""

from __future__ import annotations

import json
from typing import Any

from msgspec import json as msgjson

from estimator.objects import JOB_DECODER
from placer.controller import queued_message, queued_said, still_says
from placer.holding import JobPods
from scheduler.kubectl.objects import CellfitView
from scheduler.kubectl.views import queue_rows
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_review_97_queued_condition import WRITTEN, queued_job
from tests.placer.test_backoff24_suspended_again import starts
from tests.placer.test_controller import job
from tests.placer.test_holding import NOW, placer_with
from tests.placer.test_placer24_suspend_again import LONG_AGO, SuspendingApi

BUSY_SINCE = "2026-01-01T00:01:00Z"  # the Job on the CPU slot started 40 s before NOW
BACKING_OFF = "backing off on gpu until 2026-01-01T00:07:00Z after none of its pods was bound within 300 s (suspended again 1 time)"


def with_placed(body: Any, condition: dict[str, str]) -> Any:
    """``body`` (a decoded Job) with ``condition`` as its Placed condition."""
    document = json.loads(msgjson.encode(body))
    document["status"] = {**(document.get("status") or {}), "conditions": [{"type": "Placed", **condition}]}
    return JOB_DECODER.decode(json.dumps(document).encode())


def busy_cpu() -> Any:
    """A Job running on the one CPU slot, its pod bound: a Job waiting on cpu queues behind it."""
    return job("busy", gpu=5000, cpu=600, suspend=False, placement="cpu", started=BUSY_SINCE, version="3")


def backed_off_and_queued_on_cpu() -> tuple[SuspendingApi, Any]:
    """q, started on the GPU and none of its pods bound in 300 s, suspended again at NOW; the
    watch then shows it suspended, the CPU slot busy: backed off on gpu, queued on cpu."""
    api = SuspendingApi()
    pods = {"uid-q": JobPods(unbound=1), "uid-busy": JobPods(here=1)}
    stuck = job("q", gpu=120, cpu=300, suspend=False, placement="gpu", started=LONG_AGO, version="7")
    placer = placer_with(api, [stuck, busy_cpu()], pods)
    placer.admit()
    assert [name for name, _ in api.suspends] == ["q"]
    placer._jobs.jobs = [job("q", gpu=120, cpu=300, suspend=True, placement="gpu", version="8"), busy_cpu()]  # type: ignore[attr-defined]
    placer._clock = lambda: NOW + 1.5
    return api, placer


def test_a_job_backed_off_on_gpu_and_queued_on_cpu_is_told_both() -> None:
    api, placer = backed_off_and_queued_on_cpu()
    assert starts(placer.admit()) == []
    placed = [c for name, c in api.conditions if name == "q"][-1]
    assert (placed["reason"], placed["message"]) == ("Queued", f"{BACKING_OFF}; 1st on cpu, expected start at 2026-01-01T00:11:42Z (AlloX)")
    # kubectl describe job shows Events: its Queued Event says the back-off too.
    (queued,) = [message for name, reason, message in api.events if name == "q" and reason == "Queued"]
    assert queued.startswith(f"queued by AlloX: {BACKING_OFF}; 1st on cpu, expected start at 2026-01-01T00:11:42Z")
    # kubectl cellfit queue reads /v1/inspect/allox: its row says it.
    (row,) = [row for row in queue_rows(placer.inspect()) if row["job"] == "alice/q"]
    assert (row["kind"], row["position"], row["waiting"]) == ("cpu", 1, BACKING_OFF)
    # The place is read back as before (its Event is not sent again, its condition not rewritten).
    assert queued_said(placed["message"]) == ("1st on cpu", 1767226302.0)
    assert still_says(placed["message"], place="1st on cpu", starts_at=1767226302.0, tolerance_seconds=60, backing_off=BACKING_OFF)
    assert not still_says(placed["message"], place="1st on cpu", starts_at=1767226302.0, tolerance_seconds=60)  # it ended
    told = len(api.conditions)
    placer.admit()
    assert len(api.conditions) == told


def test_once_the_back_off_ends_the_place_is_told_without_it() -> None:
    api, placer = backed_off_and_queued_on_cpu()
    placer.admit()
    placer._clock = lambda: NOW + 320  # 00:07:00 passed; the GPU is free: it starts there
    assert starts(placer.admit()) == [("alice/q", "gpu")]


def test_a_restarted_cellfit_reads_the_back_off_from_the_queued_condition() -> None:
    # The condition the cellfit before the restart wrote over SuspendedAgain; the GPU is free.
    said = {"status": "False", "reason": "Queued", "message": f"{BACKING_OFF}; 1st on cpu, expected start at 2026-01-01T00:11:42Z (AlloX)"}
    waiting = with_placed(job("q", gpu=120, cpu=300, suspend=True, placement="gpu", version="8"), said)
    api = SuspendingApi()
    placer = placer_with(api, [waiting, busy_cpu()], {"uid-busy": JobPods(here=1)})
    placer._clock = lambda: NOW + 60
    assert starts(placer.admit()) == []  # not on the GPU before 00:07
    assert [c for name, c in api.conditions if name == "q"] == []  # its condition already says it
    placer._clock = lambda: NOW + 330
    assert starts(placer.admit()) == [("alice/q", "gpu")]


def test_kubectl_cellfit_why_reads_the_back_off_from_the_condition() -> None:
    message = queued_message(place="1st on cpu", starts_at=WRITTEN + 12 * 60, backing_off=BACKING_OFF)
    answer = explain_job(queued_job(message).job, CellfitView(), now=WRITTEN)  # type: ignore[arg-type]
    assert answer.summary == f"queued by AlloX: {BACKING_OFF}; 1st on cpu, expected start in ~12 min"
