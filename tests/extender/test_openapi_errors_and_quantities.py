"""The OpenAPI document (/openapi.json) says what the verbs answer and accept, as the fuzzer of
tests/integration/test_fuzz.py reads it. Found by that fuzzer on a random seed: each verb's 400,
413 and 503 answers were documented as an OfferedNode (the last schema made, where ErrorBody had
been) though they are {"Error": ...}; and a quantity was any string, so "INF" in a pod's
spec.resources was a schema-valid request that cellfit refuses (400, naming the field)."""

from __future__ import annotations

import re
from typing import Any, Iterator

import httpx
import pytest

from scheduler.config import parse_settings
from scheduler.constants import RESOURCE_NVIDIA_GPU
from scheduler.core.resources import QUANTITY_LIMIT, cpu_millis, parse_quantity
from scheduler.errors import InvalidQuantity
from scheduler.extender.runtime import build_runtime
from tests.support import kube_objects as k
from tests.support.server import running_server


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, dict[str, Any]]]:
    runtime = build_runtime(parse_settings(""), standalone=True)
    with running_server(runtime.app) as url:
        yield url, httpx.get(f"{url}/openapi.json").json()


def test_every_verbs_error_answers_are_documented_as_the_error_body(served: tuple[str, dict[str, Any]]) -> None:
    _, document = served
    for verb in ("filter", "prioritize", "preempt", "bind"):
        responses = document["paths"][f"/v1/extender/{verb}"]["post"]["responses"]
        for status in ("400", "413", *(("503",) if verb in ("prioritize", "preempt") else ())):
            assert responses[status]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}, (verb, status)


def quantity_schema(document: dict[str, Any], resource: str | None = None) -> dict[str, Any]:
    """A quantity's schema in a pod's limits: any resource's, or ``resource``'s own."""
    limits = document["components"]["schemas"]["ResourceRequirements"]["properties"]["limits"]
    found = next(option for option in limits["anyOf"] if option.get("type") == "object")
    return found["additionalProperties"] if resource is None else found["properties"][resource]  # type: ignore[no-any-return]


def test_a_quantity_is_documented_as_cellfit_reads_it(served: tuple[str, dict[str, Any]]) -> None:
    url, document = served
    text = next(option for option in quantity_schema(document)["anyOf"] if option["type"] == "string")
    pattern = re.compile(text["pattern"])
    for valid in ("500m", "16Gi", "1e3", "+2", ".5", "2."):
        assert pattern.match(valid) and parse_quantity(valid, field="f") >= 0
    # Nor one too large for a field: beyond int64, or a CPU's millicores beyond it.
    for refused in ("INF", "abc", "-1", "1e100", "NaN", "99999999999999999999", "9999999E", "1e16", "10000000000000000"):
        assert not pattern.match(refused)
        with pytest.raises(InvalidQuantity):
            cpu_millis(refused, field="f")
    numbers = [option for option in quantity_schema(document)["anyOf"] if option["type"] in ("integer", "number")]
    assert [option.get("minimum") for option in numbers] == [0, 0]
    assert [option.get("maximum") for option in numbers] == [QUANTITY_LIMIT, QUANTITY_LIMIT]
    gpus = quantity_schema(document, RESOURCE_NVIDIA_GPU)["anyOf"]
    assert [option["type"] for option in gpus] == ["string", "integer"]  # a whole count
    assert not re.match(gpus[0]["pattern"], "0.5") and not re.match(gpus[0]["pattern"], "1m")
    # What the document allows is accepted, pod-level resources included.
    pod = k.pod("p", uid="u", gpus=0)
    pod["spec"]["resources"] = {"limits": {"cpu": "2."}}
    answer = httpx.post(f"{url}/v1/extender/prioritize", json={"Pod": pod, "NodeNames": ["n1"]})
    assert answer.status_code == 200, answer.text
    # The largest values the document allows, in each field: a CPU, a memory, a GPU count.
    largest = {"memory": "0.999Pi", RESOURCE_NVIDIA_GPU: "999999999999999"}
    pod["spec"]["containers"][0]["resources"] = {"requests": largest, "limits": {"cpu": QUANTITY_LIMIT}}
    pod["spec"]["resources"] = {"requests": {"cpu": "999999999999999"}}
    pod["spec"]["overhead"] = {"cpu": "999999999999999999m", "memory": "99999Gi"}
    for text in (*largest.values(), "999999999999999", "999999999999999999m", "99999Gi"):
        assert pattern.match(text), text
    answer = httpx.post(f"{url}/v1/extender/prioritize", json={"Pod": pod, "NodeNames": ["n1"]})
    assert answer.status_code == 200, answer.text
