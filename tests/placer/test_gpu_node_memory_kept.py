"""AlloX keeps beside each free GPU the memory GPU pods ask per GPU, as it keeps their cores
(F17's second half): it kept the most cores per GPU a GPU-asking pod asks, but not memory, so on
a node of 8 free GPUs, 64 cores and 512 GiB it cut CPU slots from all 512 GiB and started eight
CPU runs of 64 GiB there, and a VC's guaranteed pod of 8 GPUs and 448 GiB then stayed Pending
("Insufficient memory"). Now the most memory per GPU such a pod asks (bound or pending, not
finished; placer/guarantee.py asked_per_gpu), and for the NotBound limit after, are kept beside each
free GPU before the node's memory is cut into CPU slots: 64 GiB is left, one CPU run."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from placer.guarantee import asked_per_gpu
from scheduler.config import AlloxSettings
from scheduler.core.model import OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.matching.model import Demand
from tests.placer.test_controller import Jobs, RecordingApi

GI = 2**30
GPU_NODE = Resources(cpu_millis=64_000, memory_bytes=512 * GI, gpus=8)
CPU_RUN_GIB = 64


def cpu_job(name: str, *, created: int) -> Any:
    annotations = {
        "cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "4", "memory": f"{CPU_RUN_GIB}Gi"}}}),
        "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 300}}),
    }
    body = {
        "metadata": {
            "name": name,
            "namespace": "u2",
            "uid": f"uid-{name}",
            "annotations": annotations,
            "creationTimestamp": f"2026-01-01T00:00:{created:02d}Z",
        },
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


def guaranteed_pod(name: str, *, node: str | None = None, phase: str = "Pending") -> PodInfo:
    """A VC's guaranteed pod of 8 GPUs, 8 cores and 448 GiB, waiting for its node's GPUs."""
    return PodInfo(
        uid=f"uid-{name}",
        namespace="ml-a",
        name=name,
        requests=Resources(8_000, 448 * GI, 8),
        node_name=node,
        phase=phase,
        labels={"cellfit.io/virtual-cluster": "team-a"},
        owner=OwnerRef("Job", "big", "uid-big"),
    )


def placer(pods: list[PodInfo] | None) -> PlacerController:
    return PlacerController(
        api=RecordingApi(),
        jobs=Jobs([cpu_job(f"c{i}", created=i) for i in range(10)]),
        settings=AlloxSettings(alpha=1.0, solver_process=False),
        gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"gpu-1": GPU_NODE},
        capacity=lambda: GPU_NODE,
        clock=lambda: 1767225700.0,
        asked_per_gpu=None if pods is None else (lambda: asked_per_gpu(pods)),
    )


def test_cpu_runs_leave_the_memory_a_pending_gpu_pod_asks_beside_its_gpus() -> None:
    # Not knowing the GPU pod (before): eight CPU runs of 64 GiB take the node's 512 GiB.
    assert len(placer(None).admit().starts) == 8
    decision = placer([guaranteed_pod("big-0")]).admit()
    assert len(decision.starts) * CPU_RUN_GIB <= (512 - 448)
    assert len(decision.starts) == 1


def test_the_memory_per_gpu_seen_is_kept_after_the_gpu_pod_is_gone() -> None:
    pods = [guaranteed_pod("big-0")]
    seen = placer(pods)
    seen.admit()
    pods.clear()  # it ran and ended; the VC's next pod will ask as much
    seen._jobs = Jobs([cpu_job(f"d{i}", created=i) for i in range(10)])
    assert len(seen.admit().starts) == 1


def test_the_solver_process_keeps_it_too() -> None:
    in_process = placer([guaranteed_pod("big-0")])
    child = placer([guaranteed_pod("big-0")])
    child._settings = AlloxSettings(alpha=1.0, solver_process=True)
    try:
        assert [s.key for s in child.admit().starts] == [s.key for s in in_process.admit().starts]
    finally:
        child.stop()


def test_asked_per_gpu_reads_pods_asking_gpus_and_not_finished_ones() -> None:
    cpu_only = PodInfo(uid="c", namespace="x", name="c", requests=Resources(96_000, 900 * GI, 0))
    finished = guaranteed_pod("old", node="gpu-1", phase="Succeeded")
    bound = PodInfo(uid="g", namespace="x", name="g", requests=Resources(6_000, 40 * GI, 1), node_name="gpu-0", phase="Running")
    wide = PodInfo(uid="w", namespace="x", name="w", requests=Resources(2_000, 64 * GI, 4))
    # The most of each per GPU, over different pods: 6 cores (bound), 40 GiB (bound; wide asks 16).
    assert asked_per_gpu([cpu_only, finished, bound, wide]).per_gpu(nodes=[GPU_NODE]) == Demand(cpu=6.0, memory=40.0)
    assert asked_per_gpu([cpu_only]).per_gpu(nodes=[GPU_NODE]) == Demand()
