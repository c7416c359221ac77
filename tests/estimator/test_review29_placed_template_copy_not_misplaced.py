"""A Job cellfit placed carries, on its pod template, cellfit's own copy of the configurations it
was placed in (both mechanisms write it, with the template label cellfit.io/placement, in the
start's patch). Its user taking cellfit.io/configurations off the Job (AnnotationMisplaced,
ce77b11) was then told the annotation was misplaced on the template, where cellfit, not they,
had written it. Only what the user wrote there is told.

The Job is started by the real placer, the patch applied as the API server applies it, the
Job's configurations taken off by its user, and its bytes passed on as the watch cache passes
them (cache._interchangeable, the feed) to the estimator, whose passes write the Events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.estimator.test_controller import RecordingApi as EstimatorApi
from tests.estimator.test_user29b_misplaced_annotations import following, misplaced_events, watched
from tests.placer.test_review29_pod_webhook_off_told import started


def placed_by_cellfit(mechanism: str) -> dict[str, Any]:
    """The Job as the API server holds it after the placer's start."""
    placed = started("a", mechanism)
    assert "cellfit.io/configurations" in placed["spec"]["template"]["metadata"]["annotations"]  # cellfit's copy
    return placed


def told_after_passes(body: dict[str, Any]) -> list[str]:
    api = EstimatorApi()
    estimator, feed = following(api)
    raw = watched(json.dumps(body).encode())
    if raw is not None:
        feed.apply("uid-a", raw)
    estimator.reconcile()
    estimator.reconcile()
    return misplaced_events(api)


@pytest.mark.parametrize("mechanism", ["webhook", "template"])
def test_configurations_taken_off_a_placed_job_are_not_called_misplaced(mechanism: str) -> None:
    body = placed_by_cellfit(mechanism)
    del body["metadata"]["annotations"]["cellfit.io/configurations"]  # its user's edit
    assert told_after_passes(body) == []


def test_what_its_user_wrote_on_a_placed_template_is_still_told() -> None:
    body = placed_by_cellfit("webhook")
    del body["metadata"]["annotations"]["cellfit.io/configurations"]
    body["spec"]["template"]["metadata"]["annotations"]["cellfit.io/iterations"] = "1000"
    assert told_after_passes(body) == [  # the iterations alone, not cellfit's configurations beside them
        "cellfit.io/iterations is on spec.template.metadata.annotations; cellfit reads it from the Job's metadata.annotations, "
        "with cellfit.io/configurations, which this Job does not have"]
