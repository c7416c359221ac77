"""A replica finishing a killed replica's preemption record tells the victim's Job (PodPreempted,
a4414b4) when the victim is gone from the watch too: the finisher read the victim's owner from
the pods the watch holds, and a victim already deleted (kube-scheduler's deletion done while
the replica restarted: the usual case) left its Job told nothing. The record's resume hold names
the victim under its Job: that Job is told."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.preemption import records
from tests.cluster.test_preemption_finished_after_kill import killed_after_the_record, restarted


def told(api: Any, reason: str) -> list[dict[str, Any]]:
    return [e for e in api.events if e["reason"] == reason]


def test_the_job_of_a_victim_gone_before_the_finish_is_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))
    record = killed_after_the_record()
    owed = records.decode(record).owed  # type: ignore[union-attr]
    assert owed is not None and "uid-be-0" in owed.jobs["uid-be"].holds  # the record names it under its Job
    api, cache, _, _ = restarted(record, victim_left=False)
    cache._writes.shutdown(wait=True)
    (on_pod,) = told(api, "Preempted")
    (on_job,) = told(api, "PodPreempted")
    assert (on_job["kind"], on_job["namespace"], on_job["pod_name"], on_job["pod_uid"]) == ("Job", "ml", "be", "uid-be")
    assert on_job["message"] == f"pod be-0 {on_pod['message']}"


def test_the_job_of_a_victim_still_watched_is_told_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))
    api, cache, _, _ = restarted(killed_after_the_record())
    cache._writes.shutdown(wait=True)
    (on_job,) = told(api, "PodPreempted")
    assert (on_job["pod_name"], on_job["pod_uid"]) == ("be", "uid-be")
