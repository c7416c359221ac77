"""The replica that binds a pod of a Job AlloX started writes the Job's pods-bound record
(``cellfit.io/pods-bound``, the run's ``status.startTime``), whichever replica kube-scheduler's
bind call reaches, leader or not (review28 on d33c558). Every binding of a pod of cellfit's
profile goes through a live replica's bind verb (the chart's extender binds, no managedResources),
so a pod that bound while no cellfit led, and left its node since (node deleted, pod evicted),
still leaves the record a restarted cellfit or a new leader reads: the Job is not suspended
again as one none of whose pods was bound. Before, only the leader that saw the pod bound wrote
it (placer/controller.py ``_record_bound``, still there for a record the binder could not make).

The write is off the binding's way (the bind writes' threads), once per run, guarded by the
Job's UID and start; nothing is asked of the API server for a pod of another Job, nor for a Job
whose record names this run. tests/placer/test_bound_while_no_cellfit_watched.py follows the
record to the restarted controller."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import ClusterCache, WatchedJob
from scheduler.constants import ANNOTATION_PODS_BOUND
from scheduler.errors import KubernetesApiError
from scheduler.extender.service import ExtenderService
from scheduler.kube import wire
from scheduler.kube.times import timestamp
from tests.cluster.test_gang_recovery_after_the_preemptors_binding import show
from tests.cluster.test_preemptor_record_write import replica
from tests.support.api_double import EventRecordingApi
from tests.support.json_patch import patched
from tests.support.kube_objects import node, pod

START = "2026-11-29T08:00:00Z"
EARLIER = "2026-11-29T07:00:00Z"
LATER = "2026-11-29T08:30:00Z"


def at(text: str, *, plus: float = 0.0) -> float:
    """Seconds since the epoch of an API timestamp, ``plus`` seconds later."""
    seconds = timestamp(text)
    assert seconds is not None
    return seconds + plus


@pytest.fixture(autouse=True)
def bound_a_minute_into_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bindings here are asked for a minute into the run that started at START (this replica's
    clock), whatever the day the tests run (raising=False: the code before had no such clock)."""
    monkeypatch.setattr(cache_module, "_wall_clock", lambda: at(START, plus=60), raising=False)


def allox_job(*, start: str | None = START, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
              name: str = "train") -> dict[str, Any]:
    """A Job AlloX started on gpu (its run began at ``start``), as the API server holds it."""
    return {"metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "resourceVersion": "5", "labels": labels or {},
                         "annotations": {"cellfit.io/placement": "gpu", **(annotations or {})}},
            "spec": {"suspend": False}, "status": {"startTime": start} if start else {}}


def pending(name: str = "train-0", *, job: str = "train", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return pod(name, uid=f"uid-{name}", gpus=1, job_uid=f"uid-{job}", labels=labels)


class JobsApi(EventRecordingApi):
    """Also holds the Jobs, applying JSON Patches to them as the API server does (a failed
    ``test``: HTTP 422), and says what was asked of them; ``refuse``: each Job write fails so."""

    def __init__(self, *, jobs: list[dict[str, Any]], refuse: int | None = None, **lists: Any) -> None:
        super().__init__(jobs=jobs, **lists)
        self.by_name = {job["metadata"]["name"]: job for job in jobs}
        self.asked: list[tuple[str, str]] = []
        self.refuse = refuse

    def get_job(self, *, namespace: str, name: str) -> Any:
        self.asked.append(("get", name))
        job = self.by_name.get(name)
        return None if job is None else msgspec.convert(job, wire.Job)

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        self.asked.append(("patch", name))
        if self.refuse is not None:
            raise KubernetesApiError(f"patch job {name}: HTTP {self.refuse}", status=self.refuse)
        self.by_name[name] = patched(self.by_name[name], operations)
        self.jobs[:] = list(self.by_name.values())

    def annotate_job(self, *, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.asked.append(("annotate", name))

    def recorded(self, name: str = "train") -> str | None:
        annotations: dict[str, str] = self.by_name[name]["metadata"]["annotations"]
        return annotations.get(ANNOTATION_PODS_BOUND)


def cluster(*jobs: dict[str, Any], pods: list[dict[str, Any]] | None = None, refuse: int | None = None) -> tuple[JobsApi, ClusterCache, ExtenderService]:
    """A replica (leading nothing: no AlloX controller here) that has listed the nodes, pods and Jobs."""
    api = JobsApi(jobs=list(jobs), refuse=refuse, nodes=[node("gpu-a", gpus=8)], pods=pods if pods is not None else [pending()])
    cache, service, _ = replica(api)  # type: ignore[arg-type]
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    return api, cache, service


def bind(service: ExtenderService, cache: ClusterCache, name: str = "train-0") -> None:
    args = {"PodName": name, "PodNamespace": "ml", "PodUID": f"uid-{name}", "Node": "gpu-a"}
    assert json.loads(asyncio.run(service.bind(json.dumps(args).encode())).body)["Error"] == ""
    assert cache._bind_writes.settle(timeout=30)


def watch_shows(cache: ClusterCache, job: dict[str, Any]) -> None:
    cache._apply_job(WatchedJob.decode(msgspec.Raw(json.dumps(job).encode())))
    assert cache._bind_writes.settle(timeout=30)


def test_the_replica_that_binds_records_the_run_on_the_job() -> None:
    api, cache, service = cluster(allox_job())
    bind(service, cache)
    assert api.recorded() == START
    assert api.asked == [("patch", "train")]  # one write, no read


def test_the_write_is_guarded_by_the_jobs_uid_and_run() -> None:
    api, cache, service = cluster(allox_job())
    api.by_name["train"]["status"]["startTime"] = "2026-11-29T08:05:00Z"  # suspended and started again since
    bind(service, cache)
    assert api.recorded() is None and api.asked == [("patch", "train")]


def test_one_write_per_run_however_many_pods_bind() -> None:
    api, cache, service = cluster(allox_job(), pods=[pending("train-0"), pending("train-1")])
    bind(service, cache, "train-0")
    bind(service, cache, "train-1")  # before the watch shows the record
    assert api.asked == [("patch", "train")]


@pytest.mark.parametrize("job", [
    allox_job(annotations={ANNOTATION_PODS_BOUND: START}),  # its record names this run already
    allox_job(annotations={}, labels={"cellfit.io/job-class": "trial"}),  # a trial Job: never suspended again
    {**allox_job(), "metadata": {**allox_job()["metadata"], "annotations": {}}},  # not AlloX's: unsuspended by its user
], ids=["recorded", "trial", "not-allox"])
def test_nothing_is_asked_of_the_api_server_for_a_job_that_needs_no_record(job: dict[str, Any]) -> None:
    api, cache, service = cluster(job)
    bind(service, cache)
    assert api.asked == [] and api.bindings == [("ml/train-0", "gpu-a")]


def test_nothing_is_asked_for_a_pod_of_another_job_or_of_none() -> None:
    lone = pending("lone-0", job="lone")
    del lone["metadata"]["ownerReferences"]
    api, cache, service = cluster(allox_job(), pods=[pending("other-0", job="other"), lone])
    bind(service, cache, "other-0")
    bind(service, cache, "lone-0")
    assert api.asked == []


def test_a_trial_pod_of_the_job_is_not_recorded() -> None:
    api, cache, service = cluster(allox_job(), pods=[pending(labels={"cellfit.io/job-class": "trial"})])
    bind(service, cache)
    assert api.asked == []


def test_a_run_the_jobs_watch_shows_after_the_binding_is_recorded_then() -> None:
    # The Job controller's update starting this run comes after the binding (the watch shows the
    # earlier run, its record naming it): written once the watch shows this run.
    earlier = allox_job(start=EARLIER, annotations={ANNOTATION_PODS_BOUND: EARLIER})
    api, cache, service = cluster(earlier)
    api.by_name["train"] = allox_job(annotations={ANNOTATION_PODS_BOUND: EARLIER})
    bind(service, cache)
    assert api.asked == []
    watch_shows(cache, api.by_name["train"])
    assert api.recorded() == START and api.asked == [("patch", "train")]


def test_a_pod_the_watch_had_not_shown_at_its_binding_is_recorded_when_it_does() -> None:
    api, cache, service = cluster(allox_job(), pods=[])
    body = pending()

    async def get_pod(namespace: str, name: str) -> wire.Pod | None:  # the bind verb reads it from the API server
        return wire.POD_DECODER.decode(json.dumps(body).encode())

    api.get_pod = get_pod  # type: ignore[method-assign,assignment]
    bind(service, cache)
    assert api.asked == []
    body["spec"]["nodeName"] = "gpu-a"
    show(cache, body)
    assert cache._bind_writes.settle(timeout=30)
    assert api.recorded() == START


def test_a_pod_of_an_earlier_run_being_deleted_records_nothing_of_the_next() -> None:
    api, cache, service = cluster(allox_job(start=EARLIER, annotations={ANNOTATION_PODS_BOUND: EARLIER}))
    bind(service, cache)
    leaving = pending()
    leaving["spec"]["nodeName"] = "gpu-a"
    leaving["metadata"]["deletionTimestamp"] = "2026-11-29T07:30:00Z"  # deleted by the Job's suspension
    show(cache, leaving)
    watch_shows(cache, allox_job())  # started again: none of this run's pods bound yet
    assert api.asked == []


def test_a_failed_write_is_logged_and_made_again_by_the_next_binding(caplog: pytest.LogCaptureFixture) -> None:
    api, cache, service = cluster(allox_job(), pods=[pending("train-0"), pending("train-1")], refuse=403)
    bind(service, cache, "train-0")
    assert "could not record on a Job that a pod of its run was bound" in caplog.text
    api.refuse = None
    bind(service, cache, "train-1")
    assert api.recorded() == START


def test_a_pod_bound_in_an_earlier_run_does_not_record_the_next_run() -> None:
    """review28b #1: the Job is suspended and started again (at LATER); the Jobs watch shows the
    new run before the pods watch shows the earlier run's pod being deleted (two streams). Before,
    that pod, bound here and not yet shown leaving, recorded the new run as bound: a run none of
    whose pods binds was let go, never suspended again (unsuspended, pending, holding nothing)."""
    api, cache, service = cluster(allox_job(annotations={ANNOTATION_PODS_BOUND: START}))
    bind(service, cache)  # bound a minute into the run, recorded already: nothing written
    assert api.asked == []
    api.by_name["train"]["status"]["startTime"] = LATER
    watch_shows(cache, allox_job(start=LATER, annotations={ANNOTATION_PODS_BOUND: START}))
    assert api.asked == [] and api.recorded() == START


def test_a_pod_bound_before_the_watch_showed_it_counts_only_toward_its_own_run() -> None:
    """The binding's time is kept for a pod the watch shows only after it: shown after the Job
    started again, it records nothing of the new run."""
    api, cache, service = cluster(allox_job(annotations={ANNOTATION_PODS_BOUND: START}), pods=[])
    body = pending()

    async def get_pod(namespace: str, name: str) -> wire.Pod | None:  # the bind verb reads it from the API server
        return wire.POD_DECODER.decode(json.dumps(body).encode())

    api.get_pod = get_pod  # type: ignore[method-assign,assignment]
    bind(service, cache)
    api.by_name["train"]["status"]["startTime"] = LATER
    watch_shows(cache, allox_job(start=LATER, annotations={ANNOTATION_PODS_BOUND: START}))
    body["spec"]["nodeName"] = "gpu-a"
    show(cache, body)  # still running: its deletion not shown yet
    assert cache._bind_writes.settle(timeout=30)
    assert api.asked == [] and api.recorded() == START


def test_a_pod_bound_in_the_runs_starting_second_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole seconds, as the API server writes startTime: a binding asked for within the second
    the run started (after its start, which the API rounds down) counts toward it."""
    monkeypatch.setattr(cache_module, "_wall_clock", lambda: at(LATER, plus=0.4))
    api, cache, service = cluster(allox_job(start=LATER, annotations={ANNOTATION_PODS_BOUND: START}))
    bind(service, cache)
    assert api.recorded() == LATER and api.asked == [("patch", "train")]


def test_a_run_a_skewed_clock_misses_is_recorded_by_the_next_binding_of_its_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    """This replica's clock a second behind the Job controller's: a pod of the run bound at once
    seems bound before it began and records nothing (the leader's _record_bound would); the next
    binding of a pod of the run, later, does."""
    monkeypatch.setattr(cache_module, "_wall_clock", lambda: at(LATER, plus=-0.5))
    api, cache, service = cluster(allox_job(start=LATER, annotations={ANNOTATION_PODS_BOUND: START}),
                                  pods=[pending("train-0"), pending("train-1")])
    bind(service, cache, "train-0")
    assert api.asked == []
    monkeypatch.setattr(cache_module, "_wall_clock", lambda: at(LATER, plus=5))
    bind(service, cache, "train-1")
    assert api.recorded() == LATER and api.asked == [("patch", "train")]
