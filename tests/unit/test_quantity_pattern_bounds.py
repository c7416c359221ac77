"""Every quantity the OpenAPI document allows decodes, in every field that carries one.

tests/integration/test_fuzz.py sends request bodies drawn from the document and fails on any
schema-valid request cellfit refuses (400). The grammar alone (dc52513) still allowed values no
field can hold: "1e99", "99999999999999999999", "9999999E" (beyond int64, or a CPU beyond int64
millicores) and, under the GPU resource, fractions ("0.5" is not a whole number of devices).
The document's string patterns and number bounds here are those the service serves, drawn with
hypothesis from the patterns themselves."""

from __future__ import annotations

import re
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.constants import RESOURCE_NVIDIA_GPU
from scheduler.core.resources import (
    DEVICE_COUNT_PATTERN,
    QUANTITY_PATTERN,
    cpu_millis,
    device_count,
    whole_units,
)
from scheduler.kube import wire

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


def resource_list_schema() -> dict[str, Any]:
    _, components = msgspec.json.schema_components([wire.ResourceRequirements], ref_template="{name}")
    limits = components["ResourceRequirements"]["properties"]["limits"]
    return next(option for option in limits["anyOf"] if option.get("type") == "object")


def options(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {option["type"]: option for option in schema["anyOf"]}


def test_the_document_carries_the_patterns_tested_here() -> None:
    resource_list = resource_list_schema()
    quantity = options(resource_list["additionalProperties"])
    assert quantity["string"]["pattern"] == QUANTITY_PATTERN
    devices = options(resource_list["properties"][RESOURCE_NVIDIA_GPU])
    assert devices["string"]["pattern"] == DEVICE_COUNT_PATTERN
    assert "number" not in devices  # a JSON number under the GPU resource is documented whole


def in_length(text: str) -> bool:
    return len(text) <= 64


@SETTINGS
@given(text=st.from_regex(QUANTITY_PATTERN, fullmatch=True).filter(in_length))
def test_every_documented_quantity_string_decodes_as_cpu_and_memory(text: str) -> None:
    assert cpu_millis(text, field="cpu") >= 0
    assert whole_units(text, field="memory") >= 0


@SETTINGS
@given(text=st.from_regex(DEVICE_COUNT_PATTERN, fullmatch=True).filter(in_length))
def test_every_documented_device_count_decodes_as_gpus(text: str) -> None:
    assert re.fullmatch(QUANTITY_PATTERN, text)  # and as any other resource
    assert device_count(text, field="gpus") >= 0
    assert cpu_millis(text, field="cpu") >= 0


def bounded_numbers(schema: dict[str, Any], kind: str) -> st.SearchStrategy[int | float]:
    bounds = options(schema)[kind]
    if kind == "integer":
        return st.integers(min_value=bounds["minimum"], max_value=bounds["maximum"])
    return st.floats(min_value=bounds["minimum"], max_value=bounds["maximum"], allow_nan=False)


@SETTINGS
@given(data=st.data())
def test_every_documented_quantity_number_decodes_in_every_field(data: st.DataObject) -> None:
    resource_list = resource_list_schema()
    quantity = resource_list["additionalProperties"]
    number = data.draw(bounded_numbers(quantity, "integer") | bounded_numbers(quantity, "number"))
    assert cpu_millis(number, field="cpu") >= 0
    assert whole_units(number, field="memory") >= 0
    gpus = data.draw(bounded_numbers(resource_list["properties"][RESOURCE_NVIDIA_GPU], "integer"))
    assert device_count(gpus, field="gpus") >= 0


def test_the_largest_values_the_patterns_allow_decode() -> None:
    for text in ("999999999999999", "999999999999999.999", "999999999999k", "99999999999Ki", "99999Gi", "0.999P", "9e14", "99e13", "999999999999999999m"):
        assert re.fullmatch(QUANTITY_PATTERN, text), text
        assert cpu_millis(text, field="cpu") <= 2**63 - 1
    for text in ("9999999999999999", "99999999999999999999", "1e99", "9999999E", "1E", "1Ei", "9223372036854775808"):
        assert not re.fullmatch(QUANTITY_PATTERN, text), text
    for text in ("0.5", "1m", "1e-3", ".5"):
        assert not re.fullmatch(DEVICE_COUNT_PATTERN, text), text
