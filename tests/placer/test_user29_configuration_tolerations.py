"""A configuration's tolerations are checked as the API server checks a pod's. Seen live
(user29): ``"tolerations": [{"key": "x", "operator": "Sometimes"}]`` in the cpu configuration
passed cellfit's checks; the API server refused each of its sampling pods (six SamplingPodRejected
Events, then SamplingFailed) naming ``spec.tolerations[1].operator``, a field of a pod the user
never wrote. Now the Job is InvalidSpec naming ``cellfit.io/configurations.cpu.tolerations[0]``'s
field, as the validating webhook tells it too (configuration_errors)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from placer.configuration import configuration_errors, parse_configurations
from scheduler.errors import InvalidAnnotation

WHERE = "cellfit.io/configurations.cpu.tolerations[0]"


def text(toleration: dict[str, Any]) -> str:
    return json.dumps({"cpu": {"resources": {"cpu": "4"}, "tolerations": [toleration]}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}})


@pytest.mark.parametrize(("toleration", "told"), [
    ({"key": "x", "operator": "Sometimes"}, f"{WHERE}.operator: 'Sometimes' is not a toleration operator; expected Equal or Exists"),
    ({"key": "x", "effect": "NoRun"}, f"{WHERE}.effect: 'NoRun' is not a taint effect; expected NoSchedule, PreferNoSchedule, NoExecute or none"),
    ({"operator": "Equal", "value": "v"}, f"{WHERE}.operator: without a key the operator must be Exists (it tolerates every taint)"),
    ({"key": "x", "operator": "Exists", "value": "v"}, f"{WHERE}.value: must be empty with operator Exists"),
    ({"key": "x", "effect": "NoSchedule", "tolerationSeconds": 30}, f"{WHERE}.tolerationSeconds: is only for effect NoExecute"),
    ({"key": "x", "effect": "NoExecute", "tolerationSeconds": "30"}, f"{WHERE}.tolerationSeconds: must be a whole number of seconds, got '30'"),
    ({"key": 7}, f"{WHERE}.key: must be a string, got 7"),
])
def test_a_toleration_the_api_server_refuses_is_refused_naming_its_field(toleration: dict[str, Any], told: str) -> None:
    with pytest.raises(InvalidAnnotation) as raised:
        parse_configurations(text(toleration))
    assert str(raised.value) == told
    assert [str(error) for error in configuration_errors(text(toleration))] == [told]


@pytest.mark.parametrize("toleration", [
    {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
    {"operator": "Exists"},
    {"key": "pool", "value": "cpu"},
    {"key": "pool", "operator": "Equal", "value": "cpu", "effect": ""},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
])
def test_tolerations_the_api_server_takes_are_taken(toleration: dict[str, Any]) -> None:
    assert parse_configurations(text(toleration))["cpu"].tolerations == (toleration,)
