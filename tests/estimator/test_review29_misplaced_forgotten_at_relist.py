"""A Job with cellfit's annotations on its pod template (an AnnotationMisplaced Event, ce77b11)
that is deleted while the Job watch is down is gone from the relist: the estimator forgets it
there as it does at its watched deletion. Before, the relist forgot only the Jobs with
configurations: the misplaced one's record stayed for the process's life (one per such Job
deleted in a watch gap), and one not yet told was told after its deletion (an Event on a Job
that no longer exists)."""

from __future__ import annotations

from tests.estimator.test_controller import RecordingApi
from tests.estimator.test_user29b_misplaced_annotations import CONFIGURATIONS, following, job_bytes, misplaced_events, watched


def misplaced_job() -> bytes:
    raw = watched(job_bytes(on_job={}, on_template={"cellfit.io/configurations": CONFIGURATIONS}))
    assert raw is not None
    return raw


def test_a_misplaced_job_gone_at_the_relist_is_not_told_and_not_kept() -> None:
    api = RecordingApi()
    estimator, feed = following(api)
    feed.apply("uid-t", misplaced_job())
    feed.replace({})  # the watch relisted without it: deleted while it was down
    estimator.reconcile()
    assert misplaced_events(api) == []
    assert estimator._misplaced == {} and estimator._misplaced_untold == {}


def test_a_told_misplaced_job_gone_at_the_relist_is_forgotten() -> None:
    api = RecordingApi()
    estimator, feed = following(api)
    feed.apply("uid-t", misplaced_job())
    estimator.reconcile()
    assert len(misplaced_events(api)) == 1
    feed.replace({})
    estimator.reconcile()
    assert estimator._misplaced == {} and estimator._misplaced_untold == {}


def test_a_misplaced_job_still_listed_is_told_once() -> None:
    api = RecordingApi()
    estimator, feed = following(api)
    for _ in range(3):
        feed.replace({"uid-t": misplaced_job()})
        estimator.reconcile()
    assert len(misplaced_events(api)) == 1
