"""user26 #6: the webhooks stopped at the first mistake of a configuration: an unknown key
(``envv``) hid its other mistakes (``nvidia.com/gpu: "1.5"``, a negative cpu), which the user
then met one resubmission at a time; and a bare pod's ``cellfit.io/gang-size: "two"`` was not
warned of beside ``cellfit.io/gang: "yes"``. Every independent mistake is told at once (as
3f43e43 made HiveD's filter do), the placer's parser still refusing on the first
(``parse_configurations`` raises exactly when ``configuration_errors`` finds one)."""

from __future__ import annotations

import json

import pytest

from placer.configuration import configuration_errors, parse_configurations
from scheduler.errors import InvalidAnnotation
from tests.support.admission_reviews import job
from tests.unit.test_validation import VISION, answer, validation

FIELD = "metadata.annotations[cellfit.io/configurations]"


def test_every_mistake_of_every_configuration_is_warned_at_once() -> None:
    configurations = {"cpu": {"resources": {"cpu": "-4", "memory": "lots"}, "envv": {"A": "1"}, "env": {"B=": "2"}},
                      "gpu": {"resources": {"nvidia.com/gpu": "1.5"}, "tolerations": "none"}}
    body = job("t", annotations={"cellfit.io/iterations": "many", "cellfit.io/configurations": json.dumps(configurations)},
               template_labels=VISION, gpus=0, suspend=True)
    told = answer(validation()[0], body).get("warnings") or []
    for field in (f"{FIELD}.cpu: unknown key 'envv'", f"{FIELD}.cpu.resources.cpu:", f"{FIELD}.cpu.resources.memory:",
                  f"{FIELD}.cpu.env", f"{FIELD}.gpu.resources.nvidia.com/gpu:", f"{FIELD}.gpu.tolerations:",
                  "metadata.annotations[cellfit.io/iterations]: 'many' is not an integer"):
        assert any(field in warning for warning in told), (field, told)


@pytest.mark.parametrize("configurations", [
    {"cpu": {"resources": {"cpu": "4"}}},
    {"cpu": {"resources": {"cpu": "4"}, "envv": {}}},
    {"gpu": {"resources": {"nvidia.com/gpu": "1.5"}}},
    {"gpu": {"resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}}},
    {"tpu": {"resources": {"cpu": "1"}}},
    {"cpu": {}},
    {"cpu": {"resources": {"cpu": "1"}, "tolerations": [{"keyy": "a"}]}},
    {"cpu": {"resources": {"cpu": "1"}, "nodeSelector": {"a": 1}, "annotations": []}},
    {"cpu": "x"},
])
def test_the_parser_refuses_exactly_what_the_checks_find(configurations: dict[str, object]) -> None:
    text = json.dumps(configurations)
    errors = configuration_errors(text)
    try:
        parse_configurations(text)
    except InvalidAnnotation as error:
        assert str(error) in {str(e) for e in errors}, (error, errors)
    else:
        assert errors == []


def test_a_bare_pods_unreadable_gang_size_is_warned_beside_its_unreadable_gang() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml", "uid": "u1", "labels": VISION,
           "annotations": {"cellfit.io/gang": "yes", "cellfit.io/gang-size": "two"}},
           "spec": {"schedulerName": "cellfit", "containers": [{"name": "c", "image": "x",
                                                               "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    told = answer(validation()[0], pod).get("warnings") or []
    assert "cellfit: metadata.annotations[cellfit.io/gang]: 'yes' is not 'true' or 'false'" in told
    assert "cellfit: metadata.annotations[cellfit.io/gang-size]: 'two' is not an integer" in told
