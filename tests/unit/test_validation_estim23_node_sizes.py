"""The validating webhook warns of a configuration no node could ever run by its cores and
memory too, not only by its GPUs (hand session, H2): a 16-GPU configuration was warned of, a
``"cpu": "200"`` one on 64-core nodes was not, and its Job sat estimating behind a sample that
could never be placed. The webhook reads the nodes' sizes from the watch (``NodeSizes``:
``allox.nodeSelector``'s pool), as the estimator does before sampling."""

from __future__ import annotations

import json
import threading
from typing import Any

from scheduler.core.resources import Resources
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.validating import ObjectValidation
from scheduler.extender.validation import LiveCells, NodeSizes
from tests.support.admission_reviews import job
from tests.unit.test_validation import VISION, answer, hived

GIB = 2**30
NODES = [Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=8)] * 4


def warnings(body: dict[str, Any], *, cells: bool = False, pooled: bool = False) -> list[str]:
    service = ObjectValidation(
        cells=LiveCells(hived(), lock=threading.RLock()) if cells else None, metrics=ExtenderMetrics(),
        gpu_resource="nvidia.com/gpu", reject_invalid=False, nodes=NodeSizes(allocatable=lambda: NODES, pooled=pooled))
    return list(answer(service, body).get("warnings") or [])


def interchangeable(configurations: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return job("train", annotations={"cellfit.io/iterations": "1000", "cellfit.io/configurations": json.dumps(configurations)},
               gpus=0, suspend=True, **kwargs)


def test_a_cpu_configuration_of_more_cores_than_any_node_is_warned_of() -> None:
    body = interchangeable({"cpu": {"resources": {"cpu": "200"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}})
    assert warnings(body) == [
        "cellfit: metadata.annotations[cellfit.io/configurations].cpu.resources: 200 cores a pod, more than any node has "
        "(64 cores at most): no node could ever run it: it is never sampled nor started in cpu"]


def test_memory_is_judged_too_and_the_pool_is_named() -> None:
    body = interchangeable({"cpu": {"resources": {"cpu": "8", "memory": "300Gi"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}})
    (told,) = warnings(body, pooled=True)
    assert "cpu.resources: 300 GiB a pod, more than any node of allox.nodeSelector's pool has (256 GiB at most)" in told


def test_a_configuration_some_node_holds_is_not_warned_of() -> None:
    body = interchangeable({"cpu": {"resources": {"cpu": "64", "memory": "256Gi"}}, "gpu": {"resources": {"nvidia.com/gpu": "8"}}})
    assert warnings(body) == []


def test_under_hived_the_gpus_are_the_cells_to_judge_once_and_the_cores_the_nodes() -> None:
    body = interchangeable({"cpu": {"resources": {"cpu": "200"}}, "gpu": {"resources": {"nvidia.com/gpu": "16"}}},
                           template_labels=VISION)
    told = warnings(body, cells=True)
    assert [w for w in told if "16 GPUs" in w] == [
        "cellfit: metadata.annotations[cellfit.io/configurations].gpu.resources: the pod requests 16 GPUs, more than any "
        "node-level cell holds (largest: 'A100-NODE' with 8): it is never sampled nor started in gpu"]
    assert any(w.startswith("cellfit: metadata.annotations[cellfit.io/configurations].cpu.resources: 200 cores a pod") for w in told)
