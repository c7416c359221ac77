"""AlloX keeps beside each free GPU the cores GPU pods ask per GPU (user24, F17): it cut a
64-core node of 8 GPUs into a 48-core CPU slot and started a CPU Job there, and a VC's
guaranteed gang (8 GPUs and 32 cores a pod) then waited on "Insufficient cpu". Now the most
cores per GPU a GPU pod asks (placer/guarantee.py asked_per_gpu, over the pods' records),
and for the NotBound limit after, are kept beside each free GPU, as a queued GPU configuration's are."""

from __future__ import annotations

import json
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from placer.guarantee import asked_per_gpu
from scheduler.config import AlloxSettings
from scheduler.core.model import OwnerRef, PodInfo
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi

GI = 2**30
GPU_NODE = Resources(cpu_millis=64_000, memory_bytes=512 * GI, gpus=8)


def cpu_job(name: str) -> Any:
    annotations = {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "48", "memory": "64Gi"}}}),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 300}})}
    body = {"metadata": {"name": name, "namespace": "u2", "uid": f"uid-{name}", "annotations": annotations,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def gang_pod(name: str, *, node: str | None = None, phase: str = "Pending") -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace="ml-a", name=name, requests=Resources(32_000, 128 * GI, 8), node_name=node,
                   phase=phase, labels={"cellfit.io/virtual-cluster": "team-a"}, owner=OwnerRef("Job", "gang-bert", "uid-gang"))


def placer(api: RecordingApi, pods: list[PodInfo] | None) -> PlacerController:
    return PlacerController(
        api=api, jobs=Jobs([cpu_job("q-u2-3")]), settings=AlloxSettings(alpha=1.0, solver_process=False),
        gpu_resource="nvidia.com/gpu", free_by_node=lambda running: {"gpu-1": GPU_NODE}, capacity=lambda: GPU_NODE,
        clock=lambda: 1767225700.0, asked_per_gpu=None if pods is None else (lambda: asked_per_gpu(pods)),
    )


def test_a_cpu_job_is_not_cut_from_the_cores_a_gpu_pod_asks_beside_its_gpus() -> None:
    alone = placer(RecordingApi(), None).admit()
    assert [(s.key, s.kind) for s in alone.starts] == [("u2/q-u2-3", "cpu")]  # before: 64 - 8 x 1 core left 56
    pods = [gang_pod("gang-bert-0")]
    api = RecordingApi()
    decision = placer(api, pods).admit()
    assert decision.starts == () and decision.unplaceable == ("u2/q-u2-3",)  # 64 - 8 x 4 cores leaves 32: no 48-core slot
    ((_, told),) = api.conditions
    assert told["reason"] == "NoMachine" and "(32 cores beside the 32 kept for their GPUs)" in told["message"]


def test_the_cores_per_gpu_seen_are_kept_after_the_gpu_pod_is_gone() -> None:
    pods = [gang_pod("gang-bert-0")]
    seen = placer(RecordingApi(), pods)
    seen.admit()
    pods.clear()  # the gang ended; the VC's next gang will ask as much
    assert seen.admit().starts == ()


def test_asked_per_gpu_reads_pods_asking_gpus_and_not_finished_ones() -> None:
    cpu_only = PodInfo(uid="c", namespace="x", name="c", requests=Resources(96_000, GI, 0))
    finished = gang_pod("old", node="gpu-1", phase="Succeeded")
    one_gpu = PodInfo(uid="g", namespace="x", name="g", requests=Resources(6_000, GI, 1), node_name="gpu-0", phase="Running")
    assert asked_per_gpu([cpu_only, finished, one_gpu]).per_gpu(nodes=[GPU_NODE]).cpu == 6.0
    assert asked_per_gpu([cpu_only]).per_gpu(nodes=[GPU_NODE]).cpu == 0.0
