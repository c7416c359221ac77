"""user26 #7: a ``cellfit.io/*`` key cellfit does not know in a configuration's ``annotations``
was warned "cellfit knows no such annotation; it is ignored", while the placer copies it onto the
Job's pods (placer/rewrite.py): the warning says what happens to it."""

from __future__ import annotations

import json

from placer.configuration import parse_configurations
from placer.rewrite import apply_configuration
from tests.support.admission_reviews import job
from tests.unit.test_validation import VISION, answer, validation

CONFIGURATIONS = {"cpu": {"resources": {"cpu": "4"}, "annotations": {"cellfit.io/gang_size": "2"}},
                  "gpu": {"resources": {"nvidia.com/gpu": "1"}}}


def test_the_warning_says_the_key_is_copied_onto_the_pods_unread() -> None:
    body = job("t", annotations={"cellfit.io/iterations": "10", "cellfit.io/configurations": json.dumps(CONFIGURATIONS)},
               template_labels=VISION, gpus=0, suspend=True)
    assert answer(validation()[0], body).get("warnings") == [
        "cellfit: metadata.annotations[cellfit.io/configurations].cpu.annotations[cellfit.io/gang_size]: cellfit knows no "
        "such annotation: it is copied onto the pods of this configuration, where cellfit does not read it (a misspelling?)"]


def test_it_is_copied_onto_the_pods() -> None:
    configuration = parse_configurations(json.dumps(CONFIGURATIONS))["cpu"]
    template = {"metadata": {}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert apply_configuration(template, configuration)["metadata"]["annotations"]["cellfit.io/gang_size"] == "2"


def test_on_the_template_it_is_still_ignored() -> None:
    body = job("t", template_labels=VISION, template_annotations={"cellfit.io/gang_size": "2"})
    assert answer(validation()[0], body).get("warnings") == [
        "cellfit: spec.template.metadata.annotations[cellfit.io/gang_size]: cellfit knows no such annotation; it is ignored "
        "(a misspelling?)"]
