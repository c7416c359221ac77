"""user26 #5: the validating webhook and AlloX's NoMachine condition disagreed on a CPU
configuration no node holds: the webhook said "(64 cores at most)", the condition "(62 cores at
most, beside the cores kept for its GPUs)". AlloX cuts a CPU slot from what a node has beside
allox.reservedCpuPerGpu cores a GPU, so that is what the webhook judges and says too (the
watch's node sizes, NodeSizes.reserved_cpu_per_gpu), and a configuration that fits a node only
in the cores kept for its GPUs is warned of: AlloX never starts it in that kind."""

from __future__ import annotations

import json
from typing import Any

from placer.controller import _beside_kept, _beyond_each_node
from scheduler.core.resources import Resources
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.validating import ObjectValidation
from scheduler.extender.validation import NodeSizes
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand
from tests.support.admission_reviews import job
from tests.unit.test_validation import answer

GIB = 2**30
NODES = [Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=2)] * 4  # 62 cores beside 1 a GPU


def warnings(body: dict[str, Any], *, reserved: float = 1.0) -> list[str]:
    service = ObjectValidation(cells=None, metrics=ExtenderMetrics(), gpu_resource="nvidia.com/gpu", reject_invalid=False,
                               nodes=NodeSizes(allocatable=lambda: NODES, reserved_cpu_per_gpu=reserved))
    return list(answer(service, body).get("warnings") or [])


def interchangeable(cores: str) -> dict[str, Any]:
    configurations = {"cpu": {"resources": {"cpu": cores}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}}
    return job("train", annotations={"cellfit.io/iterations": "1000", "cellfit.io/configurations": json.dumps(configurations)},
               gpus=0, suspend=True)


def test_the_webhook_says_the_cores_allox_judges_by_as_its_condition_does() -> None:
    assert warnings(interchangeable("100")) == [
        "cellfit: metadata.annotations[cellfit.io/configurations].cpu.resources: 100 cores a pod, more than any node has "
        "(62 cores at most, beside the cores kept for its GPUs): no node could ever run it: it is never sampled nor started in cpu"]
    # AlloX's own words for that configuration (placer/controller.py), on the same nodes
    nodes = [Capacity(cpu=64.0, gpu=2.0, memory=256.0)] * 4
    said = _beyond_each_node(Demand(cpu=100.0), nodes, beside_kept=[_beside_kept(n, kept=Demand(cpu=1.0)) for n in nodes])
    assert said is not None and "(62 cores at most, beside the cores kept for its GPUs)" in said


def test_a_configuration_that_fits_only_in_the_cores_kept_for_gpus_is_warned_of() -> None:
    assert warnings(interchangeable("63")) == [
        "cellfit: metadata.annotations[cellfit.io/configurations].cpu.resources: 63 cores a pod, more than any node has "
        "(62 cores at most, beside the cores kept for its GPUs): AlloX never starts it in cpu (allox.reservedCpuPerGpu: "
        "1 core kept beside each GPU)"]


def test_without_cores_kept_or_within_them_nothing_changes() -> None:
    assert warnings(interchangeable("62")) == []
    assert warnings(interchangeable("63"), reserved=0.0) == []
    assert warnings(interchangeable("100"), reserved=0.0) == [
        "cellfit: metadata.annotations[cellfit.io/configurations].cpu.resources: 100 cores a pod, more than any node has "
        "(64 cores at most): no node could ever run it: it is never sampled nor started in cpu"]


def test_the_live_webhook_judges_by_allox_reserved_cores_where_allox_runs() -> None:
    from scheduler.config import Settings
    from scheduler.extender.runtime import _node_sizes

    class Cache:
        def allocatable_by_node(self, pool: Any) -> dict[str, Resources]:
            return {"n1": NODES[0]}

    settings = Settings()
    sizes = _node_sizes(settings, Cache())  # type: ignore[arg-type]
    assert sizes is not None and sizes.reserved_cpu_per_gpu == settings.allox.reserved_cpu_per_gpu == 1.0
    off = settings.model_copy(update={"allox": settings.allox.model_copy(update={"enabled": False})})
    sizes = _node_sizes(off, Cache())  # type: ignore[arg-type]
    assert sizes is not None and sizes.reserved_cpu_per_gpu == 0.0
