"""From nodes to AlloX machines, and the cluster capacity fairness divides by.

A machine is one unit a job holds alone (§3.1, §4.1): a whole GPU (or, for pods of several GPUs,
that many GPUs of one node: beyond the paper, whose jobs take one GPU each), or a CPU slot the
size of the CPU configuration (the paper gives a CPU job a whole physical CPU). Every GPU job also needs
a little CPU to feed the device, so ``reserved_cpu_per_gpu`` cores (one by default, §4.4
"Minimum CPU per job") are set aside beside each GPU before the node's CPU is cut into slots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from scheduler.matching.errors import InvalidInstance
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import KIND_CPU, KIND_GPU, Demand, Machine

DEFAULT_RESERVED_CPU_PER_GPU = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeResources:
    """What a node offers: CPU cores, whole GPUs, memory (any unit, used consistently)."""

    name: str
    cpu: float
    gpu: int
    memory: float
    # Cores and memory this node keeps beside each of its GPUs whatever the pass's reserve: what
    # the GPU pods it can hold ask (placer: a pod only a larger node holds keeps nothing here).
    kept_cpu_per_gpu: float = 0.0
    kept_memory_per_gpu: float = 0.0


def cpu_slots(
    node: NodeResources, *, cpu_slot: Demand, reserved_cpu_per_gpu: float = DEFAULT_RESERVED_CPU_PER_GPU,
    reserved_memory_per_gpu: float = 0.0,
) -> int:
    """How many CPU configurations fit on ``node`` beside its GPUs' reserved cores and memory."""
    if cpu_slot.cpu <= 0:
        raise InvalidInstance("a CPU slot needs a positive number of cores", field="cpu_slot.cpu")
    cores = node.cpu - node.gpu * max(reserved_cpu_per_gpu, node.kept_cpu_per_gpu)
    slots = math.floor(cores / cpu_slot.cpu) if cores > 0 else 0
    if cpu_slot.memory > 0:
        memory = node.memory - node.gpu * max(reserved_memory_per_gpu, node.kept_memory_per_gpu)
        slots = min(slots, math.floor(memory / cpu_slot.memory) if memory > 0 else 0)
    return max(slots, 0)


def machines_for(
    nodes: Sequence[NodeResources],
    *,
    cpu_slot: Demand,
    reserved_cpu_per_gpu: float = DEFAULT_RESERVED_CPU_PER_GPU,
    gpu_slot: int = 1,
    reserved_memory_per_gpu: float = 0.0,
) -> list[Machine]:
    """Every GPU slot (``gpu_slot`` GPUs of one node: a pod of that many binds only where one
    node has them) and every CPU slot of ``nodes`` as a machine named ``<node>/gpu-<i>`` or
    ``<node>/cpu-<i>``, in node order."""
    if gpu_slot < 1:
        raise InvalidInstance(f"a GPU slot needs at least one GPU, got {gpu_slot}", field="gpu_slot")
    machines: list[Machine] = []
    for node in nodes:
        machines.extend(Machine(name=f"{node.name}/gpu-{index}", kind=KIND_GPU) for index in range(node.gpu // gpu_slot))
        slots = cpu_slots(node, cpu_slot=cpu_slot, reserved_cpu_per_gpu=reserved_cpu_per_gpu, reserved_memory_per_gpu=reserved_memory_per_gpu)
        machines.extend(Machine(name=f"{node.name}/cpu-{index}", kind=KIND_CPU) for index in range(slots))
    return machines


def cluster_capacity(nodes: Iterable[NodeResources]) -> Capacity:
    """C, G and M of §3.3.2: the totals over all nodes."""
    cpu = gpu = memory = 0.0
    for node in nodes:
        cpu += node.cpu
        gpu += node.gpu
        memory += node.memory
    return Capacity(cpu=cpu, gpu=gpu, memory=memory)


def default_demands(
    *, cpu_slot: Demand, reserved_cpu_per_gpu: float = DEFAULT_RESERVED_CPU_PER_GPU
) -> dict[str, Demand]:
    """What a configuration holds when a job does not say: a GPU job one GPU and its reserved
    cores; a CPU job one slot."""
    return {KIND_GPU: Demand(gpu=1.0, cpu=reserved_cpu_per_gpu), KIND_CPU: cpu_slot}


@dataclass(frozen=True, slots=True, kw_only=True)
class GuaranteeCell:
    """One cell of a virtual cluster's guarantee (HiveD, §3): ``gpus`` GPUs, of which ``free``
    are neither held by a guaranteed pod nor bad. A cell of the quota not bound yet is wholly
    free: HiveD's buddy allocator binds one when a pod needs it (Theorem 1 keeps one free)."""

    gpus: int
    free: int


def guaranteed_gpu_machines(
    guarantees: Mapping[str, Sequence[GuaranteeCell]], *, gpus_per_pod: Mapping[str, int]
) -> dict[str, int]:
    """How many GPU machines each virtual cluster's free guarantee holds: pods of
    ``gpus_per_pod[vc]`` GPUs (1 when absent) that fit in its cells, ``Σ ⌊free / g⌋``. For one
    GPU this is exact; for more it counts a cell's free GPUs as one block, an upper bound when a
    cell's free GPUs are split below it (HiveD then places the pod, or it waits).
    Opportunistic use of other VCs' idle cells is not counted: what AlloX plans on must be the
    VC's to keep."""
    machines: dict[str, int] = {}
    for vc, cells in guarantees.items():
        size = max(1, gpus_per_pod.get(vc, 1))
        machines[vc] = sum(max(cell.free, 0) // size for cell in cells)
    return machines
