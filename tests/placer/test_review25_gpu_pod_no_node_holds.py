"""review25 (copied from the reviewer's test_memory_kept_by_a_pod_no_node_holds.py): be5ff1b (F17 memory per GPU kept) keeps, for the whole life of the process, the most
memory per GPU ANY pod asking GPUs ever asked, bound or pending, whether or not a node could ever
hold it (unlike a queued GPU configuration, which beside_each_gpu counts only where gpu_shortfall
finds a node for it).

A single pending pod of 1 GPU asking 1 TiB (a typo for 1 Gi, or a pod for another pool) that no
node can ever hold makes AlloX keep 1 TiB beside every free GPU: on a node of 8 free GPUs, 64 cores
and 512 GiB, no CPU run is started any more, and the pod's deletion changes nothing until cellfit
restarts (the most seen is kept). CPU Jobs are told NoMachine ("more than any of them has free
now", with a warning Event) while the node's 512 GiB and 64 cores sit idle.

Now only pods one of AlloX's nodes holds (its allocatable; their sum where none is known) shape
what is kept beside each GPU (placer/guarantee.py GpuPodsAsk.per_gpu).
"""

from __future__ import annotations

from placer.guarantee import asked_per_gpu
from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from scheduler.matching.model import Demand
from tests.placer.test_gpu_node_memory_kept import GI, GPU_NODE, placer


def impossible_pod() -> PodInfo:
    """1 GPU and 1 TiB: no node of the cluster (512 GiB) ever holds it."""
    return PodInfo(uid="uid-typo", namespace="x", name="typo", requests=Resources(1_000, 1024 * GI, 1), phase="Pending")


def test_a_gpu_pod_no_node_can_hold_does_not_stop_cpu_runs() -> None:
    assert len(placer([impossible_pod()]).admit().starts) == 8


def test_cpu_jobs_are_not_told_no_machine_holds_them_while_the_node_is_free() -> None:
    """The Jobs are told NoMachine, '4 cores and 64 GiB a pod, more than any of them has free
    now', with a warning Event, on a node with 64 cores and 512 GiB free."""
    made = placer([impossible_pod()])
    made.admit()
    told = [event for event in made._api.events if event[1] == "NoMachine"]
    assert told == [], told[:1]


def test_only_pods_one_node_holds_shape_what_is_kept() -> None:
    """Each node's allocatable judges a pod, not their sum: 1 GPU and 600 GiB fits two nodes of
    512 GiB together, never one of them. A pod some node holds still counts, and a node alike
    to another counts once (the judgement is per kind of node)."""
    holdable = PodInfo(uid="g", namespace="x", name="g", requests=Resources(6_000, 40 * GI, 1), phase="Pending")
    asked = asked_per_gpu([impossible_pod(), holdable])
    assert asked.per_gpu(nodes=[GPU_NODE, GPU_NODE]) == Demand(cpu=6.0, memory=40.0)
    wide = PodInfo(uid="w", namespace="x", name="w", requests=Resources(1_000, 600 * GI, 1), phase="Pending")
    assert asked_per_gpu([wide]).per_gpu(nodes=[GPU_NODE, GPU_NODE]) == Demand()
    assert asked_per_gpu([wide]).per_gpu(nodes=[GPU_NODE, Resources(64_000, 1024 * GI, 8)]) == Demand(cpu=1.0, memory=600.0)


def test_a_gpu_pod_no_node_holds_by_each_nodes_allocatable_keeps_nothing() -> None:
    """With each node's allocatable known (live), the pod is judged against each of them."""
    made = placer([impossible_pod()])
    made._allocatable_by_node = lambda: {"gpu-1": GPU_NODE}
    assert len(made.admit().starts) == 8
