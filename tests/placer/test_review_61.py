"""Adversarial review of AlloX admission (helper-61): what a cluster user can write that the API
server refuses, or that admission counts other than the pods it makes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from estimator.objects import JOB_DECODER
from placer.configuration import parse_configurations
from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from scheduler.errors import InvalidAnnotation
from tests.placer.test_controller import Jobs, RecordingApi


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


def cpu_job(name: str, *, cores: str, created: int, containers: int = 1, seconds: float = 100) -> Any:
    """A suspended Job with only a CPU configuration (``cores`` per container) and its estimate."""
    body = {"metadata": {"name": name, "namespace": "alice", "uid": f"uid-{name}", "resourceVersion": "1",
                         "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z",
                         "annotations": {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": cores, "memory": "1Gi"}}}),
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": seconds}})}},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": f"c{i}"} for i in range(containers)]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def cpu_only_controller(api: RecordingApi, jobs: list[Any], *, cores: int) -> PlacerController:
    node = Resources(cpu_millis=cores * 1000, memory_bytes=64 * 2**30, gpus=0)
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism="template"), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": node}, capacity=lambda: node, clock=lambda: 1767225700.0,
    )


def test_one_users_configuration_no_node_holds_leaves_the_others_their_cpu_slots() -> None:
    api = RecordingApi()
    # "1000" cores (a typo for "1") no node holds: sizing every CPU slot for it left no slot at all,
    # and every other Job of the cluster without a CPU configuration it could run on.
    placer = cpu_only_controller(api, [cpu_job("typo", cores="1000", created=0), cpu_job("small", cores="4", created=1)], cores=8)
    decision = placer.admit()
    assert [(s.key, s.kind) for s in decision.starts] == [("alice/small", "cpu")]
    assert [name for name, _ in api.patches] == ["small"]
    assert decision.unplaceable == ("alice/typo",)
    told = {name: condition for name, condition in api.conditions}
    assert told["typo"]["reason"] == "NoMachine"


def test_a_pod_of_two_containers_asks_for_its_configuration_twice() -> None:
    api = RecordingApi()
    # Every container gets the configuration (DESIGN.md): a trainer and its sidecar at 4 cores
    # each are a pod of 8 cores, which the 6-core node never holds; counted as 4 it was started
    # and its pod pended.
    placer = cpu_only_controller(api, [cpu_job("sidecar", cores="4", created=0, containers=2)], cores=6)
    decision = placer.admit()
    assert decision.starts == () and api.patches == []
    assert decision.unplaceable == ("alice/sidecar",)
    placer = cpu_only_controller(RecordingApi(), [cpu_job("sidecar", cores="4", created=0, containers=2)], cores=8)
    (start,) = placer.admit().starts
    assert start.key == "alice/sidecar"
