"""A toleration's key and value are checked as the API server checks a pod's (its
ValidateTolerations): the key a label name (an optional DNS-subdomain prefix and '/', then a
name of up to 63 characters), and with operator Equal (or none) the value a label value (up to
63 characters). Before, ``{"key": "pool", "value": "cpu nodes"}`` in a configuration passed
cellfit's checks, and the API server refused each of the configuration's sampling pods naming
``spec.tolerations[...]``, a field of a pod the user never wrote (the failure 3fc34f4 ended for
the operator and effect)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from placer.configuration import configuration_errors, parse_configurations
from scheduler.errors import InvalidAnnotation

WHERE = "cellfit.io/configurations.cpu.tolerations[0]"


def text(toleration: dict[str, Any]) -> str:
    return json.dumps({"cpu": {"resources": {"cpu": "4"}, "tolerations": [toleration]}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}})


@pytest.mark.parametrize(("toleration", "field"), [
    ({"key": "pool nodes", "operator": "Exists"}, "key"),
    ({"key": "-pool", "operator": "Exists"}, "key"),
    ({"key": "Example.com/pool", "operator": "Exists"}, "key"),
    ({"key": "example.com/", "operator": "Exists"}, "key"),
    ({"key": "a/b/c", "operator": "Exists"}, "key"),
    ({"key": "p" * 64, "operator": "Exists"}, "key"),
    ({"key": "pool", "value": "cpu nodes"}, "value"),
    ({"key": "pool", "operator": "Equal", "value": "v" * 64}, "value"),
    ({"key": "pool", "value": "cpu-"}, "value"),
])
def test_a_key_or_value_the_api_server_refuses_is_refused_naming_its_field(toleration: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidAnnotation) as raised:
        parse_configurations(text(toleration))
    assert str(raised.value).startswith(f"{WHERE}.{field}: ")
    assert [str(error) for error in configuration_errors(text(toleration))] == [str(raised.value)]


@pytest.mark.parametrize("toleration", [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
    {"key": "Pool_Name.x", "value": "CPU_nodes.v1"},
    {"key": "pool", "operator": "Equal", "value": ""},
    {"key": "p" * 63, "value": "v" * 63},
    {"key": "a" * 253 + "/" + "b" * 63, "operator": "Exists"},
])
def test_keys_and_values_the_api_server_takes_are_taken(toleration: dict[str, Any]) -> None:
    assert parse_configurations(text(toleration))["cpu"].tolerations == (toleration,)
