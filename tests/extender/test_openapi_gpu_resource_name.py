"""The OpenAPI document says a whole count for the resource cellfit counts as GPUs,
policy.gpuResourceName, not for nvidia.com/gpu whatever is configured: with amd.com/gpu the
document allowed "0.5" there, which cellfit refuses ("not a whole number of devices", review28b
#5), and refused it under nvidia.com/gpu, which cellfit then reads as any quantity."""

from __future__ import annotations

import re
from typing import Any

import httpx

from scheduler.config import parse_settings
from scheduler.extender.runtime import build_runtime
from tests.support import kube_objects as k
from tests.support.server import running_server


def limits_schema(document: dict[str, Any]) -> dict[str, Any]:
    limits = document["components"]["schemas"]["ResourceRequirements"]["properties"]["limits"]
    return next(option for option in limits["anyOf"] if option.get("type") == "object")


def test_the_configured_gpu_resource_is_documented_whole_and_fractions_of_it_refused() -> None:
    runtime = build_runtime(parse_settings("policy:\n  name: resource-fit\n  gpuResourceName: amd.com/gpu\n"), standalone=True)
    with running_server(runtime.app) as url:
        document = httpx.get(f"{url}/openapi.json").json()
        limits = limits_schema(document)
        assert set(limits["properties"]) == {"amd.com/gpu"}
        whole = limits["properties"]["amd.com/gpu"]["anyOf"][0]["pattern"]
        assert re.fullmatch(whole, "2") and not re.fullmatch(whole, "0.5")
        # Every ResourceList the document holds says the same (containers, overhead, pod level).
        text = str(document)
        assert "'nvidia.com/gpu'" not in text and text.count("'amd.com/gpu'") >= 3
        # What it says agrees with cellfit: a fraction of the configured GPU is refused, of
        # nvidia.com/gpu (any quantity now) accepted.
        pod = k.pod("p", uid="u", gpus=0)
        pod["spec"]["containers"][0]["resources"] = {"limits": {"amd.com/gpu": "0.5"}}
        assert httpx.post(f"{url}/v1/extender/prioritize", json={"Pod": pod, "NodeNames": ["n1"]}).status_code == 400
        pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "0.5"}}
        answer = httpx.post(f"{url}/v1/extender/prioritize", json={"Pod": pod, "NodeNames": ["n1"]})
        assert answer.status_code == 200, answer.text


def test_the_default_gpu_resource_is_documented_whole() -> None:
    runtime = build_runtime(parse_settings(""), standalone=True)
    with running_server(runtime.app) as url:
        limits = limits_schema(httpx.get(f"{url}/openapi.json").json())
        assert set(limits["properties"]) == {"nvidia.com/gpu"}
