"""A restarted cellfit sends no second ``Queued`` Event for the kind a Job's condition already
said it waits for, also when its first word to that Job after the restart is another waiting
condition (WaitingForMachine while the watch fills, say), which overwrites the Queued one.
Live: "queued by AlloX: 1st on cpu" after a restart, although "3rd on cpu" was already said."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from scheduler.matching.admission import Queued
from tests.placer.test_controller import CONFIGURATIONS, RecordingApi, controller

QUEUED = {"type": "Placed", "status": "False", "reason": "Queued", "message": "3rd on cpu, expected start at 2026-01-01T00:09:00Z (AlloX)"}
WAITING = {"type": "Placed", "status": "False", "reason": "WaitingForMachine", "message": "its machines are held by pods AlloX did not start"}


def with_condition(condition: dict[str, str]) -> Any:
    """The Job ``w`` (tests/placer/test_controller.py's) as the watch shows it with ``condition``."""
    body = {"metadata": {"name": "w", "namespace": "alice", "uid": "uid-w", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(CONFIGURATIONS),
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 100}, "gpu": {"seconds": 10}})}},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {"conditions": [condition]}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def queued_events(api: RecordingApi) -> list[str]:
    return [message for _, reason, message in api.events if reason == "Queued"]


def test_a_restart_that_first_writes_another_waiting_condition_sends_no_second_queued_event() -> None:
    api = RecordingApi()
    placer = controller(api, [])  # a new process: nothing told in memory
    shown = with_condition(QUEUED)
    placer._tell(shown, status="False", reason=WAITING["reason"], message=WAITING["message"])
    placer._tell_queued(with_condition(WAITING), Queued(key="alice/w", kind="cpu", position=1, expected_start_seconds=60.0), now=1767225700.0)
    assert queued_events(api) == []
    # Waiting for another kind is news: told once.
    placer._tell_queued(with_condition(WAITING), Queued(key="alice/w", kind="gpu", position=1, expected_start_seconds=60.0), now=1767225700.0)
    assert [m.split(",")[0] for m in queued_events(api)] == ["queued by AlloX: 1st on gpu"]


def test_a_job_never_told_queued_gets_its_event() -> None:
    api = RecordingApi()
    placer = controller(api, [])
    placer._tell(with_condition(WAITING), status="False", reason=WAITING["reason"], message="another")
    placer._tell_queued(with_condition(WAITING), Queued(key="alice/w", kind="cpu", position=1, expected_start_seconds=60.0), now=1767225700.0)
    assert [m.split(",")[0] for m in queued_events(api)] == ["queued by AlloX: 1st on cpu"]
