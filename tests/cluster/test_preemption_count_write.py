"""The victim Job's preemption count (FitGpp's P, the only record of it that survives a restart)
is written again when the API server fails for a moment, and not when it refuses for good; it
never goes down (a replica that led a moment ago writing an older count last), and a writer in
between the read and the write is read again."""

from __future__ import annotations

import threading
from typing import Any

import msgspec
import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import ClusterCache
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, PodInfo
from scheduler.core.pods import PodStore
from scheduler.core.resources import Resources
from scheduler.errors import KubernetesApiError
from scheduler.kube import wire
from tests.support.api_double import ListingApi
from tests.support.json_patch import patched

ANNOTATION = "cellfit.io/preemptions"
POINTER = "/metadata/annotations/cellfit.io~1preemptions"


class JobServer(ListingApi):
    """One Job as the API server holds it: reads answer it, JSON Patches change it and its
    resourceVersion. Each write first meets the next status of ``failures``
    (None: it goes through); ``before_write`` plays another writer between a read and a write."""

    def __init__(self, *, annotations: dict[str, str] | None, uid: str = "uid-be", failures: list[int | None] | None = None) -> None:
        super().__init__(nodes=[])
        self.job: dict[str, Any] = {"metadata": {"name": "be", "namespace": "ml", "uid": uid, "resourceVersion": "1"}}
        if annotations is not None:
            self.job["metadata"]["annotations"] = dict(annotations)
        self.failures = list(failures or ())
        self.before_write: list[dict[str, str]] = []  # annotations another writer sets, one per write
        self.tries = 0
        self.events: list[str] = []

    @property
    def annotations(self) -> dict[str, str] | None:
        return self.job["metadata"].get("annotations")

    def _changed(self, annotations: dict[str, str]) -> None:
        self.job["metadata"].setdefault("annotations", {}).update(annotations)
        self.job["metadata"]["resourceVersion"] = str(int(self.job["metadata"]["resourceVersion"]) + 1)

    def get_job(self, *, namespace: str, name: str) -> wire.Job | None:
        return msgspec.convert(self.job, wire.Job)

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        self.tries += 1
        if self.before_write:
            self._changed(self.before_write.pop(0))
        status = self.failures.pop(0) if self.failures else None
        if status is not None:
            raise KubernetesApiError(f"patch job {namespace}/{name}: HTTP {status}", status=status if status else None)
        self.job = patched(self.job, operations)
        self._changed({})

    def create_event(self, *, reason: str, **_: Any) -> None:
        self.events.append(reason)


def record(api: JobServer, monkeypatch: pytest.MonkeyPatch, *, count: int = 1) -> JobServer:
    monkeypatch.setattr(cache_module, "COUNT_WRITE_PAUSES_SECONDS", (0.0, 0.0))
    cache = ClusterCache(api=api, engine=ResourceFitEngine(), lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=PodStore(), jobs=None)
    victim = PodInfo(uid="uid-be-0", namespace="ml", name="be-0", requests=Resources(1000, 2**30, 1), node_name="n1", phase="Running")
    trial = PodInfo(uid="uid-te-0", namespace="ml", name="te-0", requests=Resources(1000, 2**30, 1))
    job = JobInfo(uid="uid-be", namespace="ml", name="be")
    cache.record_preemption(preemptor=trial, preemptor_messages=["preempting ml/be-0"], victims=[victim],
                            victim_message="preempted", job_counts=[(job, count)])
    cache._writes.shutdown(wait=True)  # the background writes, done
    return api


@pytest.mark.parametrize("status", [0, 429, 503])  # 0: no answer at all
def test_a_count_the_api_server_fails_to_write_for_a_moment_is_written_again(status: int, monkeypatch: pytest.MonkeyPatch) -> None:
    api = record(JobServer(annotations={}, failures=[status, status]), monkeypatch)
    assert api.tries == 3 and api.annotations == {ANNOTATION: "1"}
    assert api.events == ["Preempting", "Preempted"]  # and the Events after it still go


def test_a_count_refused_for_good_is_tried_once_and_the_events_still_go(monkeypatch: pytest.MonkeyPatch) -> None:
    api = record(JobServer(annotations={}, failures=[403]), monkeypatch)
    assert api.tries == 1 and api.annotations == {}
    assert api.events == ["Preempting", "Preempted"]


def test_a_count_failing_past_the_pauses_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    api = record(JobServer(annotations={}, failures=[503, 503, 503, 503]), monkeypatch)
    assert api.tries == 3 and api.annotations == {}


def test_a_count_lower_than_the_one_written_leaves_it_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    # The replica that led a moment ago writes its count after the new leader wrote a higher one.
    api = record(JobServer(annotations={ANNOTATION: "4"}), monkeypatch, count=2)
    assert api.tries == 0 and api.annotations == {ANNOTATION: "4"}


def test_a_count_written_before_the_answer_was_lost_is_not_written_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    api = record(JobServer(annotations={ANNOTATION: "3"}), monkeypatch, count=3)
    assert api.tries == 0 and api.annotations == {ANNOTATION: "3"}


def test_another_writer_between_the_read_and_the_write_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    server = JobServer(annotations={"team": "nlp"})
    server.before_write = [{ANNOTATION: "1"}, {"team": "vision"}]  # then a writer of something else
    api = record(server, monkeypatch, count=2)
    assert api.tries == 3 and api.annotations == {"team": "vision", ANNOTATION: "2"}


def test_a_job_without_annotations_gets_its_first(monkeypatch: pytest.MonkeyPatch) -> None:
    api = record(JobServer(annotations=None), monkeypatch)
    assert api.annotations == {ANNOTATION: "1"}


def test_a_malformed_count_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    api = record(JobServer(annotations={ANNOTATION: "many"}), monkeypatch, count=2)
    assert api.annotations == {ANNOTATION: "2"}


def test_a_job_of_the_same_name_created_since_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    api = record(JobServer(annotations={}, uid="uid-be-recreated"), monkeypatch)
    assert api.tries == 0 and api.annotations == {}


def test_writers_that_never_stop_coming_first_end_the_write(monkeypatch: pytest.MonkeyPatch) -> None:
    server = JobServer(annotations={})
    server.before_write = [{"n": str(i)} for i in range(10)]
    api = record(server, monkeypatch)
    assert api.tries == cache_module.COUNT_WRITE_CONFLICTS and ANNOTATION not in (api.annotations or {})
    assert api.events == ["Preempting", "Preempted"]
