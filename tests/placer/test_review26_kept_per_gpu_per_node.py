"""review26 #6 (1825de4): what AlloX keeps beside each free GPU is one figure for every node, the
most per GPU over the GPU pods *some* node of AlloX's holds. A pod only the large node holds (8
GPUs and 896 GiB: 112 GiB a GPU) keeps 112 GiB beside each free GPU of the small 4-GPU nodes of
128 GiB too, all their memory, though it can never run there. The large node busy, a CPU run of
32 GiB that a small node holds, next to GPUs no pod asking that much can use, is not started."""

from __future__ import annotations

from placer.controller import PlacerController
from placer.guarantee import asked_per_gpu
from scheduler.config import AlloxSettings
from scheduler.core.model import OwnerRef, PodInfo
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi
from tests.placer.test_review26_no_machine_never_negative import BIG, GI, SMALL, cpu_job


def test_a_pod_only_the_big_node_holds_keeps_nothing_on_the_small_nodes() -> None:
    big_pod = PodInfo(uid="uid-huge-0", namespace="ml", name="huge-0", requests=Resources(8_000, 896 * GI, 8), node_name=None,
                      phase="Pending", labels={}, owner=OwnerRef("Job", "huge", "uid-huge"))
    allocatable = {"big-0": BIG, "small-0": SMALL}
    free = {"big-0": Resources(cpu_millis=0, memory_bytes=1024 * GI, gpus=8), "small-0": SMALL}  # big's cores busy
    api = RecordingApi()
    placer = PlacerController(
        api=api, jobs=Jobs([cpu_job()]), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: free, capacity=lambda: BIG + SMALL, clock=lambda: 1767225700.0,
        allocatable_by_node=lambda: allocatable, asked_per_gpu=lambda: asked_per_gpu([big_pod]),
    )
    decision = placer.admit()
    assert [(s.key, s.kind) for s in decision.starts] == [("u2/c", "cpu")], [c for _, c in api.conditions]




def test_the_solver_process_keeps_each_nodes_own() -> None:
    """The big node keeps 125 GiB beside each GPU for a pod of 8 GPUs and 1000 GiB, 24 GiB left for
    CPU runs: the 32 GiB run is not started there, by the solver process either (each node's keep
    travels with the node)."""
    pod = PodInfo(uid="uid-wide-0", namespace="ml", name="wide-0", requests=Resources(8_000, 1000 * GI, 8), node_name=None,
                  phase="Pending", labels={}, owner=OwnerRef("Job", "wide", "uid-wide"))
    free = {"big-0": BIG, "small-0": Resources(cpu_millis=0, memory_bytes=128 * GI, gpus=4)}  # small's cores busy
    for solver_process in (False, True):
        placer = PlacerController(
            api=RecordingApi(), jobs=Jobs([cpu_job()]), settings=AlloxSettings(alpha=1.0, solver_process=solver_process),
            gpu_resource="nvidia.com/gpu", free_by_node=lambda running: free, capacity=lambda: BIG + SMALL,
            clock=lambda: 1767225700.0, allocatable_by_node=lambda: {"big-0": BIG, "small-0": SMALL},
            asked_per_gpu=lambda: asked_per_gpu([pod]),
        )
        try:
            assert placer.admit().starts == (), solver_process
        finally:
            placer.stop()
