"""Nothing a client sends makes the service fail: schemathesis fuzzes every operation of the
OpenAPI document over real HTTP (valid and invalid bodies), and hypothesis mangles real
kube-scheduler payloads. The checks: never a 5xx, never a traceback, every answer conforms to
the documented schema, and the service still answers correctly afterwards."""

from __future__ import annotations

import json
from typing import Iterator

import httpx
import pytest
import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.config import Settings
from scheduler.extender.server import build_runtime
from tests.support import kube_objects as k
from tests.support.server import running_server

VERBS = ("filter", "prioritize", "preempt", "bind")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    runtime = build_runtime(Settings(), standalone=True)
    with running_server(runtime.app) as url:
        yield url


OPERATIONS = [("POST", f"/v1/extender/{verb}") for verb in VERBS] + [("GET", p) for p in ("/healthz", "/readyz", "/metrics")]


@pytest.fixture(scope="module")
def api_schema(base_url: str):
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json")


def test_the_openapi_document_covers_every_route(api_schema):
    found = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert set(OPERATIONS) <= found


# schemathesis's pytest plugin predates pytest 9, so its operations are driven through
# hypothesis directly: the same generation (valid and invalid bodies) and the same checks.
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_every_operation_conforms_to_its_schema_and_never_fails(api_schema, method, path):
    operation = api_schema[path][method]

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy())
    def run(case):
        # Schema-valid is not always acceptable: a Node without a name, or a quantity of
        # "1e999", passes any JSON schema and is still refused (HTTP 400 or the Error field,
        # naming the field). Every other check stands.
        response = case.call_and_validate(excluded_checks=[positive_data_acceptance])
        assert response.status_code < 500

    run()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def mangle(document, path: list[str], value):
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


FIELDS = [
    ["Pod"],
    ["Pod", "metadata"],
    ["Pod", "metadata", "name"],
    ["Pod", "spec", "containers"],
    ["Pod", "spec", "priority"],
    ["Pod", "spec", "overhead"],
    ["Pod", "status"],
    ["NodeNames"],
    ["Nodes"],
    ["Nodes", "items"],
]


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    verb=st.sampled_from(VERBS),
    junk=st.one_of(st.binary(max_size=200), json_values.map(lambda v: json.dumps(v).encode())),
)
def test_arbitrary_bodies_never_cause_a_server_error(base_url, verb, junk):
    response = httpx.post(f"{base_url}/v1/extender/{verb}", content=junk, timeout=10)
    assert response.status_code in (200, 400), response.text
    assert "Traceback" not in response.text
    assert isinstance(response.json(), (dict, list))


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(verb=st.sampled_from(VERBS[:2]), field=st.sampled_from(FIELDS), value=json_values, full=st.booleans())
def test_mangled_kube_scheduler_payloads_never_cause_a_server_error(base_url, verb, field, value, full):
    nodes = [k.node("gpu-a"), k.node("gpu-b")]
    body = k.extender_args(k.pod("train-0", gpus=2), nodes, node_cache_capable=not full)
    if field[0] == "Nodes" and not full:
        field = ["NodeNames"]
    mangle(body, field, value)
    response = httpx.post(f"{base_url}/v1/extender/{verb}", content=k.dumps(body), timeout=10)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400 or (verb == "filter" and response.json()["Error"]):
        message = response.json()["Error"]
        assert message and "Traceback" not in message


def test_still_serving_correctly_after_the_fuzzing(base_url):
    body = k.extender_args(k.pod("train-0", gpus=8), [k.node("gpu-a"), k.node("gpu-small", gpus=2)], node_cache_capable=False)
    result = httpx.post(f"{base_url}/v1/extender/filter", content=k.dumps(body), timeout=10).json()
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["gpu-a"]
    assert httpx.get(f"{base_url}/healthz").status_code == 200
