"""review26 #7 (9354d66): NoMachine's figures of what a node has beside the cores and memory kept
for its GPUs never go below zero. Kept per GPU times the GPUs can be more than the node has (a
pod of 1 GPU and 512 GiB on a node of 8 GPUs and 1 TiB keeps 512 GiB beside each of the 8), and
a CPU Job read "(-3072 GiB beside the 4096 kept for their GPUs)"."""

from __future__ import annotations

import json
import re
from typing import Any

from estimator.objects import JOB_DECODER
from placer.controller import PlacerController
from placer.guarantee import asked_per_gpu
from scheduler.config import AlloxSettings
from scheduler.core.model import OwnerRef, PodInfo
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi

GI = 2**30
BIG = Resources(cpu_millis=64_000, memory_bytes=1024 * GI, gpus=8)
SMALL = Resources(cpu_millis=32_000, memory_bytes=128 * GI, gpus=4)


def cpu_job() -> Any:
    annotations = {"cellfit.io/configurations": json.dumps({"cpu": {"resources": {"cpu": "4", "memory": "32Gi"}}}),
                   "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 300}})}
    body = {"metadata": {"name": "c", "namespace": "u2", "uid": "uid-c", "annotations": annotations, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_no_machine_never_tells_a_negative_amount_left() -> None:
    pod = PodInfo(uid="uid-wide-0", namespace="ml", name="wide-0", requests=Resources(8_000, 512 * GI, 1), node_name=None,
                  phase="Pending", labels={}, owner=OwnerRef("Job", "wide", "uid-wide"))
    api = RecordingApi()
    placer = PlacerController(
        api=api, jobs=Jobs([cpu_job()]), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"big-0": BIG}, capacity=lambda: BIG, clock=lambda: 1767225700.0,
        allocatable_by_node=lambda: {"big-0": BIG}, asked_per_gpu=lambda: asked_per_gpu([pod]),
    )
    assert placer.admit().starts == ()
    messages = [c["message"] for _, c in api.conditions if c["reason"] == "NoMachine"]
    assert messages, api.conditions
    assert not any(re.search(r"-\d", m) for m in messages), messages
    assert "none beside the 1024 GiB kept for their GPUs" in messages[0], messages
