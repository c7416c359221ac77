"""A pod that fits AlloX's nodes together but no one of them never fits (a pod runs on one node):
48 cores a pod where each node has 32 allocatable, 64 in all, was told "more than any of them has
free now", as if waiting helped. It is told it never fits, naming the resource and the largest
node's amount; more than they have in all keeps its own words."""

from __future__ import annotations

import json
from typing import Any

from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi
from tests.placer.test_review_user21_what_users_read import suspended_job
from tests.placer.test_words21b_no_machine import PREFIX, cpu_only, gpu_only, no_machine

GIB = 2**30


def placer(api: RecordingApi, jobs: list[Any], *, free: list[Resources], allocatable: list[Resources]) -> PlacerController:
    """AlloX's nodes ``n0``, ``n1``, ... with ``allocatable`` each and ``free`` left each."""
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=False, reserved_cpu_per_gpu=1.0),
        gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {f"n{i}": node for i, node in enumerate(free)},
        capacity=lambda: sum(allocatable, Resources(cpu_millis=0, memory_bytes=0, gpus=0)),
        allocatable_by_node=lambda: {f"n{i}": node for i, node in enumerate(allocatable)}, clock=lambda: 1767225700.0,
    )


def test_more_cores_than_any_one_node_has_never_fits() -> None:
    api = RecordingApi()
    node = Resources(cpu_millis=32_000, memory_bytes=128 * GIB, gpus=0)
    placer(api, [cpu_only("wide", "48")], free=[node, node], allocatable=[node, node]).admit()
    message = no_machine(api, "wide")
    assert message == (PREFIX + "cellfit.io/configurations.cpu.resources, 48 cores a pod, more than any one of them has "
                       "(32 cores at most): it never fits")
    (event,) = [said for job, reason, said in api.events if reason == "NoMachine"]
    assert event == message


def test_the_largest_node_is_named_and_the_sum_keeps_its_words() -> None:
    api = RecordingApi()
    small, large = (Resources(cpu_millis=cores * 1000, memory_bytes=128 * GIB, gpus=0) for cores in (16, 40))
    placer(api, [cpu_only("wide", "48"), cpu_only("huge", "500")], free=[small, large], allocatable=[small, large]).admit()
    assert no_machine(api, "wide").endswith("48 cores a pod, more than any one of them has (40 cores at most): it never fits")
    assert no_machine(api, "huge").endswith("500 cores a pod, more than they have in all (56 cores): it never fits")


def test_a_pod_one_node_holds_but_not_now_is_told_now() -> None:
    api = RecordingApi()
    node = Resources(cpu_millis=32_000, memory_bytes=128 * GIB, gpus=0)
    busy = Resources(cpu_millis=8_000, memory_bytes=128 * GIB, gpus=0)
    placer(api, [cpu_only("big", "24")], free=[busy, busy], allocatable=[node, node]).admit()
    assert no_machine(api, "big").endswith("24 cores a pod, more than any of them has free now")


def test_more_gpus_than_any_one_node_has_never_fits() -> None:
    api = RecordingApi()
    node = Resources(cpu_millis=32_000, memory_bytes=128 * GIB, gpus=4)
    placer(api, [gpu_only("eight", "8")], free=[node, node], allocatable=[node, node]).admit()
    assert no_machine(api, "eight") == (PREFIX + "cellfit.io/configurations.gpu.resources, 8 GPUs a pod, more than any one "
                                        "of them has (4 GPUs at most): it never fits")


def told_on_idle_nodes(name: str, resources: dict[str, dict[str, str]], *, nodes: list[Resources]) -> str:
    """The NoMachine message of a Job of these configurations on AlloX's idle ``nodes``."""
    api = RecordingApi()
    job = suspended_job(name, configurations={kind: {"resources": asked} for kind, asked in resources.items()},
                        estimate=json.dumps({kind: {"seconds": 60} for kind in resources}))
    placer(api, [job], free=nodes, allocatable=nodes).admit()
    return no_machine(api, name)


def test_more_cores_beside_its_gpus_than_any_node_with_that_many_gpus_has_never_fits() -> None:
    gpu_node = Resources(cpu_millis=16_000, memory_bytes=128 * GIB, gpus=4)
    cpu_node = Resources(cpu_millis=64_000, memory_bytes=128 * GIB, gpus=0)
    message = told_on_idle_nodes("beside", {"gpu": {"nvidia.com/gpu": "1", "cpu": "24"}}, nodes=[gpu_node, cpu_node])
    assert message == (PREFIX + "cellfit.io/configurations.gpu.resources.cpu, 24 cores a pod beside its 1 GPU, more than any "
                       "of them with 1 GPU has (16 cores at most): it never fits")


def test_cores_on_one_node_and_memory_on_another_never_fit() -> None:
    many_cores = Resources(cpu_millis=64_000, memory_bytes=128 * GIB, gpus=0)
    much_memory = Resources(cpu_millis=16_000, memory_bytes=256 * GIB, gpus=0)
    message = told_on_idle_nodes("apart", {"cpu": {"cpu": "48", "memory": "200Gi"}}, nodes=[many_cores, much_memory])
    assert message.endswith("48 cores and 200 GiB a pod, more than any one of them has (64 cores and 256 GiB at most, not on "
                            "one node): it never fits")
