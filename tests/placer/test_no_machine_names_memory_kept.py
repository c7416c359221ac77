"""A CPU configuration that no longer fits AlloX's nodes only because of the memory kept beside
their GPUs (placer/guarantee.py asked_per_gpu, F17) is told so, as one that no longer fits
because of the cores kept is: "(64 GiB beside the 448 kept for their GPUs): it fits once the GPU
pods asking that much beside their GPUs have been gone 300 s" (review26 #8: "it never fits" before,
and the Job started 301 s after those pods left). Before 9354d66, its Job read "more than any of them has free now" (or, waiting, that pods AlloX did not
start held every cpu machine), though no CPU pod leaving would make room for it.

tests/placer/test_gpu_node_memory_kept.py's node: 8 GPUs, 64 cores and 512 GiB, a VC's
guaranteed pod of 8 GPUs, 8 cores and 448 GiB known, so 64 GiB is left for CPU runs."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from placer.guarantee import asked_per_gpu
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi
from tests.placer.test_gpu_node_memory_kept import guaranteed_pod

GI = 2**30
GPU_NODE = Resources(cpu_millis=64_000, memory_bytes=512 * GI, gpus=8)


def cpu_job(*, gib: int, pods: int = 1) -> Any:
    annotations = {
        "cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "4", "memory": f"{gib}Gi"}}}),
        "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 300}}),
    }
    body = {
        "metadata": {"name": "big-mem", "namespace": "u2", "uid": "uid-big-mem", "annotations": annotations, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"suspend": True, "parallelism": pods, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


def told(*, gib: int, pods: int = 1, nodes: int = 1) -> dict[str, Any]:
    """The Placed condition of the CPU Job, on ``nodes`` such nodes, the guaranteed pod known."""
    api = RecordingApi()
    by_node = {f"gpu-{i}": GPU_NODE for i in range(nodes)}
    placer = PlacerController(
        api=api,
        jobs=Jobs([cpu_job(gib=gib, pods=pods)]),
        settings=AlloxSettings(alpha=1.0, solver_process=False),
        gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: by_node,
        capacity=lambda: sum(by_node.values(), Resources()),
        clock=lambda: 1767225700.0,
        allocatable_by_node=lambda: by_node,
        asked_per_gpu=lambda: asked_per_gpu([guaranteed_pod("big-0")]),
    )
    decision = placer.admit()
    assert decision.starts == () and decision.unplaceable == ("u2/big-mem",)
    ((_, condition),) = api.conditions
    return condition


def test_a_cpu_configuration_beyond_what_the_kept_memory_leaves_is_told_when_it_fits() -> None:
    condition = told(gib=128)
    assert condition["reason"] == "NoMachine", condition
    assert condition["message"] == (
        "AlloX's nodes (allox.nodeSelector) cannot start this Job: cellfit.io/configurations.cpu.resources, 4 cores and 128 GiB "
        "a pod, more than they have in all (64 GiB beside the 448 kept for their GPUs): it fits once the GPU pods asking that much "
        "beside their GPUs have been gone 300 s"
    ), condition


def test_on_several_nodes_the_one_node_it_lacks_is_told_with_the_memory_kept() -> None:
    """Two such nodes keep 448 GiB each: 128 GiB is left in all, 64 GiB on either, and a pod
    runs on one node."""
    condition = told(gib=100, nodes=2)
    assert condition["message"].endswith(
        "4 cores and 100 GiB a pod, more than any one of them has (64 GiB at most, beside the memory kept for its GPUs): it fits once "
        "the GPU pods asking that much beside their GPUs have been gone 300 s"
    ), condition


def test_a_job_whose_pods_the_kept_memory_leaves_no_room_for_together_is_not_told_to_wait_for_pods_to_end() -> None:
    """Two pods of 40 GiB: one node's 64 GiB left beside its GPUs holds one, never both, so no
    pod ending makes room for them; the Job was told "every cpu machine ... is in use by pods
    AlloX did not start ... it waits until 2 of them free at once"."""
    condition = told(gib=40, pods=2)
    assert (condition["reason"], condition["message"]) == (
        "NoMachine",
        "no node of the cluster offers a kind this Job has an estimate for with 2 machines at once",
    ), condition
