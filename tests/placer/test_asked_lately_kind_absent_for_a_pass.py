"""AskedLately was kept AskedLately per kind of node, keyed by the node's whole allocatable,
and each pass keeps only the kinds present in that pass. A node whose allocatable changes for a
moment -- the NVIDIA device plugin restarting (its nvidia.com/gpu allocatable reads 0 until it
registers again; an upgrade, a driver reload), or the kind's only node briefly missing -- makes
its kind absent for one pass, and the window of what that kind's GPU pods asked is forgotten.
A GPU pod that ended a moment before (a Job's pod to be recreated after its back-off) no longer
has its cores and memory kept beside the free GPUs when the node comes back, within the 300 s
that AskedLately exists to keep them for.
"""

from __future__ import annotations

from placer.controller import PlacerController
from placer.guarantee import GpuPodsAsk, asked_per_gpu
from scheduler.config import AlloxSettings
from scheduler.core.model import OwnerRef, PodInfo
from scheduler.core.resources import Resources
from tests.placer.test_controller import Jobs, RecordingApi
from tests.placer.test_review26_no_machine_never_negative import BIG, GI


def test_a_kind_absent_for_one_pass_keeps_what_its_pods_asked_within_the_window() -> None:
    big_pod = PodInfo(uid="uid-huge-0", namespace="ml", name="huge-0", requests=Resources(8_000, 896 * GI, 8), node_name="big-0",
                      phase="Running", labels={}, owner=OwnerRef("Job", "huge", "uid-huge"))
    allocatable = {"big-0": BIG}
    asked = [asked_per_gpu([big_pod])]
    placer = PlacerController(
        api=RecordingApi(), jobs=Jobs([]), settings=AlloxSettings(alpha=1.0, solver_process=False), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: allocatable, capacity=lambda: BIG, clock=lambda: 1767225700.0,
        allocatable_by_node=lambda: dict(allocatable), asked_per_gpu=lambda: asked[0], unbound_hold_seconds=300,
    )
    placer._note_asked_per_gpu(1000.0)
    kept = placer._kept_on("big-0").memory
    assert kept > 0  # the huge pod's memory per GPU
    asked[0] = GpuPodsAsk()  # the pod ended (its Job recreates it after its back-off)
    allocatable["big-0"] = Resources(cpu_millis=BIG.cpu_millis, memory_bytes=BIG.memory_bytes, gpus=0)  # device plugin restarting
    placer._note_asked_per_gpu(1010.0)
    allocatable["big-0"] = BIG  # registered again, 20 s later
    placer._note_asked_per_gpu(1020.0)
    assert placer._kept_on("big-0").memory == kept  # within the 300 s window: still kept
