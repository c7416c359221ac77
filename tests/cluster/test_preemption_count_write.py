"""The victim Job's preemption count (FitGpp's P, the only record of it that survives a restart)
is written again when the API server fails for a moment, and not when it refuses for good."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import ClusterCache
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, PodInfo
from scheduler.core.pods import PodStore
from scheduler.core.resources import Resources
from scheduler.errors import KubernetesApiError
from tests.support.api_double import ListingApi


class FailingWrites(ListingApi):
    """Answers each count write with the next status of ``failures`` (None: it is written)."""

    def __init__(self, failures: list[int | None]) -> None:
        super().__init__(nodes=[])
        self.failures = failures
        self.tries = 0
        self.written: dict[str, str] = {}
        self.events: list[str] = []

    def annotate_job(self, *, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.tries += 1
        status = self.failures.pop(0) if self.failures else None
        if status is not None:
            raise KubernetesApiError(f"annotate job {namespace}/{name}: HTTP {status}", status=status if status else None)
        self.written.update(annotations)

    def create_event(self, *, reason: str, **_: Any) -> None:
        self.events.append(reason)


def record(failures: list[int | None], monkeypatch: pytest.MonkeyPatch) -> FailingWrites:
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))
    api = FailingWrites(failures)
    cache = ClusterCache(api=api, engine=ResourceFitEngine(), lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=PodStore(), jobs=None)
    victim = PodInfo(uid="uid-be-0", namespace="ml", name="be-0", requests=Resources(1000, 2**30, 1), node_name="n1", phase="Running")
    trial = PodInfo(uid="uid-te-0", namespace="ml", name="te-0", requests=Resources(1000, 2**30, 1))
    job = JobInfo(uid="uid-be", namespace="ml", name="be")
    cache.record_preemption(preemptor=trial, preemptor_messages=["preempting ml/be-0"], victims=[victim],
                            victim_message="preempted", job_counts=[(job, 1)])
    cache._writes.shutdown(wait=True)  # the background writes, done
    return api


@pytest.mark.parametrize("status", [0, 429, 503])  # 0: no answer at all
def test_a_count_the_api_server_fails_to_write_for_a_moment_is_written_again(status: int, monkeypatch: pytest.MonkeyPatch) -> None:
    api = record([status, status], monkeypatch)
    assert api.tries == 3 and api.written == {"cellfit.io/preemptions": "1"}
    assert api.events == ["Preempting", "Preempted"]  # and the Events after it still go


def test_a_count_refused_for_good_is_tried_once_and_the_events_still_go(monkeypatch: pytest.MonkeyPatch) -> None:
    api = record([404], monkeypatch)  # the Job was deleted meanwhile
    assert api.tries == 1 and api.written == {}
    assert api.events == ["Preempting", "Preempted"]


def test_a_count_failing_past_the_pauses_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    api = record([503, 503, 503, 503], monkeypatch)
    assert api.tries == 3 and api.written == {}
