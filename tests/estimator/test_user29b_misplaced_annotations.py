"""A Job whose user wrote cellfit.io/configurations (and cellfit.io/iterations) on its pod template
instead of the Job's own metadata is told so by an Event on the Job, once. Seen live (user29):
the estimator never saw it, kubectl describe job said nothing while it stayed suspended forever;
only kubectl cellfit why explained it.

The Job goes the way the watch cache passes Jobs on: its bytes through cache._interchangeable
into the feed (feed.InterchangeableJobs), to the estimator subscribed to it, whose passes write."""

from __future__ import annotations

import json
from typing import Any

from estimator.controller import EstimatorController
from scheduler.cluster.cache import WatchedJob, _interchangeable
from scheduler.cluster.feed import InterchangeableJobs
from tests.estimator.test_controller import RecordingApi, controller

CONFIGURATIONS = json.dumps({"cpu": {"resources": {"cpu": "2"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}})


def job_bytes(*, on_job: dict[str, str], on_template: dict[str, str], suspend: bool = True, version: int = 1) -> bytes:
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "t", "namespace": "ml", "uid": "uid-t", "resourceVersion": str(version),
                     "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": on_job,
                     "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:template": {"f:metadata": {
                         "f:annotations": {f"f:{key}": {} for key in on_template}}}}}}]},
        "spec": {"suspend": suspend, "template": {"metadata": {"annotations": on_template},
                                                   "spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }).encode()


def following(api: RecordingApi) -> tuple[EstimatorController, InterchangeableJobs]:
    estimator = controller(api)
    feed = estimator._feed
    feed.subscribe(estimator)
    return estimator, feed


def watched(raw: bytes) -> bytes | None:
    return _interchangeable(WatchedJob.decode(raw))  # type: ignore[arg-type]


def misplaced_events(api: RecordingApi) -> list[str]:
    return [message for reason, message in api.events if reason == "AnnotationMisplaced"]


def test_configurations_on_the_template_are_told_once_on_the_job() -> None:
    api = RecordingApi()
    estimator, feed = following(api)
    template = {"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "1000"}
    for version in range(1, 5):  # the Job changes (its status, a label): each change reaches the estimator
        raw = watched(job_bytes(on_job={}, on_template=template, version=version))
        assert raw is not None
        feed.apply("uid-t", raw)
        estimator.reconcile()
    assert misplaced_events(api) == [
        "cellfit.io/configurations and cellfit.io/iterations are on spec.template.metadata.annotations; cellfit reads them "
        "from the Job's metadata.annotations: the Job stays suspended, never estimated nor started by AlloX, until they are "
        "moved there"]
    assert api.created == [] and estimator.interchangeable_jobs() == []  # still no interchangeable Job


def test_iterations_alone_on_the_template_of_an_interchangeable_job_are_told() -> None:
    api = RecordingApi()
    estimator, feed = following(api)
    raw = watched(job_bytes(on_job={"cellfit.io/configurations": CONFIGURATIONS}, on_template={"cellfit.io/iterations": "1000"}))
    assert raw is not None
    feed.apply("uid-t", raw)
    estimator.reconcile()
    estimator.reconcile()
    assert misplaced_events(api) == [
        "cellfit.io/iterations is on spec.template.metadata.annotations; cellfit reads it from the Job's "
        "metadata.annotations: move it there"]


def test_an_unsuspended_job_is_told_it_runs_as_written() -> None:
    api = RecordingApi()
    estimator, feed = following(api)
    raw = watched(job_bytes(on_job={}, on_template={"cellfit.io/configurations": CONFIGURATIONS}, suspend=False))
    assert raw is not None
    feed.apply("uid-t", raw)
    estimator.reconcile()
    [told] = misplaced_events(api)
    assert told.startswith("cellfit.io/configurations is on spec.template.metadata.annotations; cellfit reads it from the "
                           "Job's metadata.annotations: the Job runs as its template says")


def test_jobs_without_cellfit_annotations_are_not_passed_on() -> None:
    ordinary: dict[str, Any] = {"example.com/owner": "carol"}
    assert watched(job_bytes(on_job={}, on_template=ordinary)) is None
    # On the Job itself and on its template alike: nothing misplaced, an ordinary interchangeable Job.
    both = {"cellfit.io/configurations": CONFIGURATIONS}
    api = RecordingApi()
    estimator, feed = following(api)
    raw = watched(job_bytes(on_job=both, on_template=both))
    assert raw is not None
    feed.apply("uid-t", raw)
    estimator.reconcile()
    assert misplaced_events(api) == []
