"""A Job no node of AlloX's starts is told whether it never fits or fits no node's free room now
(user21's item 16): "no machine of AlloX's runs this Job: cellfit.io/configurations.cpu.resources,
500 cores a pod, more than any node of AlloX's has free" on a 64-core node said "has free", which
reads as if waiting helped, and "machine of AlloX's" meant nothing to its user. The message is the
NoMachine Event's once-key and the condition is written again when it changes: what it says never
fits is said from the nodes' allocatable, which does not move as pods come and go."""

from __future__ import annotations

import json
from typing import Any

from placer.controller import PlacerController
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi
from tests.placer.test_review_user21_what_users_read import suspended_job

GIB = 2**30
PREFIX = "AlloX's nodes (allox.nodeSelector) cannot start this Job: "


def placer(api: RecordingApi, jobs: list[Any], *, free: list[Resources], capacity: Resources) -> PlacerController:
    """AlloX's nodes ``n0``, ``n1``, ... with ``free`` left each, ``capacity`` their allocatable summed."""
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism="template", solver_process=False, reserved_cpu_per_gpu=1.0),
        gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {f"n{i}": node for i, node in enumerate(free)},
        capacity=lambda: capacity, clock=lambda: 1767225700.0,
    )


def cpu_only(name: str, cores: str) -> Any:
    return suspended_job(name, configurations={"cpu": {"resources": {"cpu": cores}}}, estimate=json.dumps({"cpu": {"seconds": 60}}))


def gpu_only(name: str, gpus: str) -> Any:
    return suspended_job(name, configurations={"gpu": {"resources": {"nvidia.com/gpu": gpus}}},
                         estimate=json.dumps({"gpu": {"seconds": 60}}))


def no_machine(api: RecordingApi, name: str) -> str:
    told = [condition for job, condition in api.conditions if job == name]
    assert told and told[-1]["reason"] == "NoMachine", told
    return str(told[-1]["message"])


def test_a_cpu_configuration_larger_than_every_node_together_is_told_it_never_fits() -> None:
    # The session's ij-huge: 500 cores a pod on AlloX's one node of 64 cores.
    api = RecordingApi()
    node = Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=0)
    placer(api, [cpu_only("huge", "500")], free=[node], capacity=node).admit()
    assert no_machine(api, "huge") == (PREFIX + "cellfit.io/configurations.cpu.resources, 500 cores a pod, more than they have "
                                       "in all (64 cores): it never fits")
    (event,) = [message for job, reason, message in api.events if reason == "NoMachine"]
    assert event == no_machine(api, "huge")


def test_a_cpu_configuration_that_fits_a_node_but_not_its_free_room_is_told_so_now_and_not_again_as_room_moves() -> None:
    api = RecordingApi()
    capacity = Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=0)
    free = [Resources(cpu_millis=8_000, memory_bytes=256 * GIB, gpus=0)]
    live = placer(api, [cpu_only("big", "32")], free=free, capacity=capacity)
    live.admit()
    message = no_machine(api, "big")
    assert message == PREFIX + "cellfit.io/configurations.cpu.resources, 32 cores a pod, more than any of them has free now"
    assert "never" not in message
    # Other pods leave: still too little, and the same words (no number that moves with the room),
    # so neither the condition nor the Event is written again.
    free[0] = Resources(cpu_millis=16_000, memory_bytes=256 * GIB, gpus=0)
    writes = len(api.conditions)
    live.admit()
    assert len(api.conditions) == writes
    assert [reason for _, reason, _ in api.events].count("NoMachine") == 1


def test_cores_kept_beside_gpus_count_against_never_fitting() -> None:
    # 64 cores and 8 GPUs, a core kept beside each (allox.reservedCpuPerGpu): a CPU slot has at most 56.
    api = RecordingApi()
    node = Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=8)
    placer(api, [cpu_only("wide", "60")], free=[node], capacity=node).admit()
    assert no_machine(api, "wide").endswith("60 cores a pod, more than they have in all (56 cores beside the 8 kept for their "
                                            "GPUs): it never fits")


def test_a_gpu_configuration_asking_more_gpus_than_every_node_together_never_fits() -> None:
    api = RecordingApi()
    node = Resources(cpu_millis=16_000, memory_bytes=64 * GIB, gpus=2)
    placer(api, [gpu_only("eight", "8")], free=[node], capacity=node).admit()
    assert no_machine(api, "eight") == (PREFIX + "cellfit.io/configurations.gpu.resources, 8 GPUs a pod, more than they have "
                                        "in all (2 GPUs): it never fits")


def test_a_gpu_configuration_more_than_any_node_has_free_now_is_told_now() -> None:
    # Two nodes of 4 GPUs, one GPU free on each: 4 GPUs a pod fits either once its pods leave.
    api = RecordingApi()
    one_free = Resources(cpu_millis=4_000, memory_bytes=32 * GIB, gpus=1)
    capacity = Resources(cpu_millis=32_000, memory_bytes=128 * GIB, gpus=8)
    placer(api, [gpu_only("four", "4")], free=[one_free, one_free], capacity=capacity).admit()
    assert no_machine(api, "four") == PREFIX + "cellfit.io/configurations.gpu.resources, 4 GPUs a pod, more than any of them has free now"
