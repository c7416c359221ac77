"""A Job created unsuspended with cellfit.io/configurations on its pod template only: moving the
annotation to metadata.annotations, as the warning said, is not enough: the Job has started as
written by then, and an interchangeable Job must be created with spec.suspend: true. The warning
says both, as ``kubectl cellfit why`` does."""

from __future__ import annotations

from tests.support.admission_reviews import job
from tests.unit.test_validation import CONFIGURATIONS, VISION, answer, validation

MOVE = "a Job-level annotation, which cellfit reads from the Job itself, never from its pod template; move it to metadata.annotations"
FIELD = "spec.template.metadata.annotations[cellfit.io/configurations]"


def test_an_unsuspended_job_is_also_told_to_be_created_suspended() -> None:
    service, _ = validation()
    body = job("train", template_labels=VISION, suspend=False, template_annotations={"cellfit.io/configurations": CONFIGURATIONS})
    warning = f"cellfit: {FIELD}: {MOVE} and create the Job with spec.suspend: true"
    assert answer(service, body)["warnings"] == [warning]
    assert len(warning) <= 256  # the API server cuts each warning there


def test_a_suspended_job_or_an_update_is_told_to_move_it_only() -> None:
    service, _ = validation()
    annotations = {"cellfit.io/configurations": CONFIGURATIONS}
    suspended = job("train", template_labels=VISION, suspend=True, template_annotations=annotations)
    assert answer(service, suspended)["warnings"] == [f"cellfit: {FIELD}: {MOVE}"]
    unsuspended = job("train", template_labels=VISION, suspend=False, template_annotations=annotations)
    assert answer(service, unsuspended, operation="UPDATE", old=unsuspended)["warnings"] == [f"cellfit: {FIELD}: {MOVE}"]
