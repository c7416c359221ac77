"""cellfit.io/configurations parsed, and every bad value named by its field."""

import json

import pytest

from placer.configuration import parse_configurations
from scheduler.errors import InvalidAnnotation

DESIGN_EXAMPLE = (
    '{"cpu":{"resources":{"cpu":"16","memory":"32Gi"}},'
    '"gpu":{"resources":{"nvidia.com/gpu":"1","cpu":"2","memory":"16Gi"},"env":{"CUDA":"1"}}}'
)


def test_the_design_example():
    configurations = parse_configurations(DESIGN_EXAMPLE)
    assert configurations.kinds == ("cpu", "gpu")
    cpu, gpu = configurations["cpu"], configurations["gpu"]
    assert dict(cpu.requests) == {"cpu": "16", "memory": "32Gi"} and dict(cpu.limits) == {}
    # GPUs must be limits in Kubernetes: the flat form writes extended resources as both.
    assert dict(gpu.limits) == {"nvidia.com/gpu": "1"}
    assert dict(gpu.env) == {"CUDA": "1"}
    assert gpu.device_count("nvidia.com/gpu") == 1 and cpu.device_count("nvidia.com/gpu") == 0


def test_structured_resources_and_the_optional_keys():
    text = json.dumps({
        "gpu": {
            "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "2"}, "limits": {"memory": "8Gi"}},
            "nodeSelector": {"nvidia.com/gpu.product": "A100"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "annotations": {"team": "vision"},
        }
    })
    gpu = parse_configurations(text)["gpu"]
    assert dict(gpu.limits) == {"memory": "8Gi", "nvidia.com/gpu": "2"}
    assert dict(gpu.node_selector) == {"nvidia.com/gpu.product": "A100"}
    assert [dict(t) for t in gpu.tolerations] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert dict(gpu.annotations) == {"team": "vision"}
    assert parse_configurations(text).kinds == ("gpu",)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (None, "cellfit.io/configurations"),
        ("{not json", "cellfit.io/configurations"),
        ("[]", "cellfit.io/configurations"),
        ('{"tpu": {"resources": {"cpu": "1"}}}', "cellfit.io/configurations"),
        ('{"cpu": 3}', "cellfit.io/configurations.cpu"),
        ('{"cpu": {"env": {}}}', "cellfit.io/configurations.cpu.resources"),
        ('{"cpu": {"resources": {"cpu": "lots"}}}', "cellfit.io/configurations.cpu.resources.cpu"),
        ('{"cpu": {"resources": {"cpu": "-1"}}}', "cellfit.io/configurations.cpu.resources.cpu"),
        ('{"cpu": {"resources": {"cpu": true}}}', "cellfit.io/configurations.cpu.resources.cpu"),
        ('{"cpu": {"resources": {}}}', "cellfit.io/configurations.cpu.resources"),
        ('{"cpu": {"resources": {"cpu": "1"}, "env": {"A": 1}}}', "cellfit.io/configurations.cpu.env.A"),
        ('{"cpu": {"resources": {"cpu": "1"}, "image": "x"}}', "cellfit.io/configurations.cpu"),
        ('{"cpu": {"resources": {"cpu": "1"}, "tolerations": {"key": "a"}}}', "cellfit.io/configurations.cpu.tolerations"),
        ('{"cpu": {"resources": {"cpu": "1"}, "tolerations": [{"kee": "a"}]}}', "cellfit.io/configurations.cpu.tolerations[0]"),
    ],
)
def test_bad_values_name_their_field(text, field):
    with pytest.raises(InvalidAnnotation) as error:
        parse_configurations(text)
    assert error.value.field == field
    assert str(error.value).startswith(field + ":")
