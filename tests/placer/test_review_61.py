"""Adversarial review of AlloX admission (helper-61): what a cluster user can write that the API
server refuses, or that admission counts other than the pods it makes."""

from __future__ import annotations

import json

import pytest

from placer.configuration import parse_configurations
from scheduler.errors import InvalidAnnotation


@pytest.mark.parametrize(("resources", "field"), [
    # A GPU is indivisible: the API server refuses a pod asking for half of one, and counted as
    # int(0.5) = 0 GPUs AlloX would treat the GPU configuration as needing no GPU.
    ({"nvidia.com/gpu": "0.5", "cpu": "1"}, "cellfit.io/configurations.gpu.resources.nvidia.com/gpu"),
    ({"nvidia.com/gpu": "500m"}, "cellfit.io/configurations.gpu.resources.nvidia.com/gpu"),
    ({"requests": {"nvidia.com/gpu": 1.5}}, "cellfit.io/configurations.gpu.resources.requests.nvidia.com/gpu"),
    # An extended resource's request must equal its limit; a request above its limit is refused.
    ({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}, "cellfit.io/configurations.gpu.resources.requests.nvidia.com/gpu"),
    ({"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}, "cellfit.io/configurations.gpu.resources.requests.cpu"),
    ({"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}, "cellfit.io/configurations.gpu.resources.requests.memory"),
])
def test_resources_the_api_server_refuses_are_refused_naming_the_field(resources: dict, field: str) -> None:
    with pytest.raises(InvalidAnnotation) as caught:
        parse_configurations(json.dumps({"gpu": {"resources": resources}}))
    assert caught.value.field == field


@pytest.mark.parametrize("resources", [
    {"nvidia.com/gpu": "2", "cpu": "500m", "memory": "1e3"},
    {"nvidia.com/gpu": 1, "cpu": 0.5, "memory": "1Gi", "hugepages-2Mi": "1Gi"},
    {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1e0"}},
])
def test_every_quantity_form_kubernetes_accepts_still_parses(resources: dict) -> None:
    configuration = parse_configurations(json.dumps({"gpu": {"resources": resources}}))["gpu"]
    assert configuration.device_count("nvidia.com/gpu") in (1, 2)
