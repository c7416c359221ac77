"""Job-level annotations (cellfit.io/configurations, estimate, iterations) written on the Job's
pod template instead of the Job's own metadata: cellfit reads them from the Job only, so such a
Job, created suspended, would stay suspended forever without a word. The webhook says so,
naming the path and where to move it."""

from __future__ import annotations

import json

from tests.support.admission_reviews import job
from tests.unit.test_validation import CONFIGURATIONS, VISION, answer, validation

MOVE = "a Job-level annotation, which cellfit reads from the Job itself, never from its pod template; move it to metadata.annotations"


def test_job_level_annotations_on_the_template_are_pointed_at_the_job() -> None:
    service, _ = validation(reject=True)
    estimate = json.dumps({"cpu": {"seconds": 600}, "gpu": {"seconds": 60}})
    body = job("train", template_labels=VISION, suspend=True, template_annotations={
        "cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/estimate": estimate, "cellfit.io/iterations": "500"})
    response = answer(service, body)
    # A warning, never a refusal: the placer itself writes the configurations on a placed Job's template.
    assert response["allowed"] is True
    assert response["warnings"] == [
        f"cellfit: spec.template.metadata.annotations[cellfit.io/{key}]: {MOVE}" for key in ("configurations", "estimate", "iterations")
    ]


def test_the_template_copy_of_the_jobs_own_annotation_is_no_mistake() -> None:
    # The placer's webhook mechanism copies the configurations onto the template of a Job that has them.
    service, _ = validation(reject=True)
    body = job("train", template_labels=VISION, suspend=True,
               annotations={"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "500"},
               template_annotations={"cellfit.io/configurations": CONFIGURATIONS})
    assert "warnings" not in answer(service, body)
