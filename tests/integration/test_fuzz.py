"""Nothing a client sends makes the service fail: schemathesis fuzzes every operation of the
OpenAPI document over real HTTP (valid and invalid bodies), and hypothesis mangles real
kube-scheduler payloads. The checks: never a 5xx, never a traceback, every answer conforms to
the documented schema, and the service still answers correctly afterwards.

Each test runs against both policies: resource-fit, and HiveD on a configured topology, whose
decisions read more of the pod (VC label, gang and cell-type annotations) and whose inspect API
serves the cell tree. Example counts stay small (each test a few seconds per policy)."""

from __future__ import annotations

import json
from typing import Any, Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.config import parse_settings
from scheduler.constants import (
    ANNOTATION_CELL_TYPE,
    ANNOTATION_GANG,
    ANNOTATION_GANG_SIZE,
    LABEL_PRIORITY,
    LABEL_VIRTUAL_CLUSTER,
)
from scheduler.extender.runtime import build_runtime
from tests.support import hived
from tests.support import kube_objects as k
from tests.support.server import running_server

VERBS = ("filter", "prioritize", "preempt", "bind")
# The configuration of each policy fuzzed: the embedded default's (resource-fit standalone), and
# HiveD with cells configured, so that no cluster is needed to discover them.
POLICIES = {"resource-fit": "", "hived": hived.CONFIG}


@pytest.fixture(scope="module", params=list(POLICIES))
def policy(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def base_url(policy: str) -> Iterator[str]:
    runtime = build_runtime(parse_settings(POLICIES[policy]), standalone=True)
    with running_server(runtime.app) as url:
        yield url


INSPECT = ("virtual-clusters", "virtual-clusters/{name}", "cells", "engine")
OPERATIONS = (
    [("POST", f"/v1/extender/{verb}") for verb in VERBS]
    + [("GET", p) for p in ("/healthz", "/readyz", "/metrics")]
    + [("GET", f"/v1/inspect/{p}") for p in INSPECT]
)


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
        # Every check, positive_data_acceptance included: what the document allows is accepted
        # (a Node offered in full needs a name there as in the service).
        response = case.call_and_validate()
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
    # What HiveD reads from a pod (resource-fit ignores them).
    ["Pod", "metadata", "labels", LABEL_VIRTUAL_CLUSTER],
    ["Pod", "metadata", "labels", LABEL_PRIORITY],
    ["Pod", "metadata", "annotations", ANNOTATION_GANG],
    ["Pod", "metadata", "annotations", ANNOTATION_GANG_SIZE],
    ["Pod", "metadata", "annotations", ANNOTATION_CELL_TYPE],
    ["Pod", "metadata", "ownerReferences"],
]
# Strings that pods' labels and annotations really hold, right or wrong: random text is almost
# never a number, a known cell type or a VC, so alone it would never get past the first check.
PLAUSIBLE = st.sampled_from(
    ["true", "false", "0", "1", "2", "3", "-1", "1e999", "A100", "A100-PAIR", "A100-NODE", "nobody", "speech", "opportunistic", ""]
)


def fuzzed_pod() -> dict[str, Any]:
    """The pod every mangled payload starts from. For HiveD it is a member of a 2-pod gang of
    2 GPUs each in the VC speech (the whole VC), so that gang booking and cell placement run,
    not only the parsing."""
    return k.pod(
        "train-0",
        gpus=2,
        labels={LABEL_VIRTUAL_CLUSTER: "speech"},
        annotations={ANNOTATION_GANG: "true", ANNOTATION_GANG_SIZE: "2"},
    )


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
@given(
    verb=st.sampled_from(VERBS[:2]),
    field=st.sampled_from(FIELDS),
    value=st.one_of(json_values, PLAUSIBLE),
    full=st.booleans(),
)
def test_mangled_kube_scheduler_payloads_never_cause_a_server_error(base_url, verb, field, value, full):
    nodes = [k.node("gpu-a"), k.node("gpu-b")]
    body = k.extender_args(fuzzed_pod(), nodes, node_cache_capable=not full)
    if field[0] == "Nodes" and not full:
        field = ["NodeNames"]
    mangle(body, field, value)
    response = httpx.post(f"{base_url}/v1/extender/{verb}", content=k.dumps(body), timeout=10)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400 or (verb == "filter" and response.json()["Error"]):
        message = response.json()["Error"]
        assert message and "Traceback" not in message


def test_still_serving_correctly_after_the_fuzzing(base_url, policy):
    if policy == "hived":
        # No fuzzed pod could reach vision's two nodes (the plausible strings do not name it):
        # an 8-GPU vision pod is placed on one of them.
        pod = k.pod("after-0", gpus=8, labels={LABEL_VIRTUAL_CLUSTER: "vision"})
        body = k.extender_args(pod, hived.NODES, node_cache_capable=False)
        expected = ({"gpu-a"}, {"gpu-b"}, {"gpu-c"})
    else:
        body = k.extender_args(k.pod("train-0", gpus=8), [k.node("gpu-a"), k.node("gpu-small", gpus=2)], node_cache_capable=False)
        expected = ({"gpu-a"},)
    result = httpx.post(f"{base_url}/v1/extender/filter", content=k.dumps(body), timeout=10).json()
    assert {n["metadata"]["name"] for n in result["Nodes"]["items"]} in expected, result
    assert httpx.get(f"{base_url}/healthz").status_code == 200
    assert httpx.get(f"{base_url}/v1/inspect/engine").json()["policy"] == policy
