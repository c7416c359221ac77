"""Under HiveD with one virtual cluster owning every GPU (discovered cells, no
``virtualClusters``: the implicit ``default``), a GPU-only Job while pods AlloX did not start hold
every GPU. Seen live (user29): its Placed condition and ``kubectl cellfit queue`` said "waiting for
a GPU of virtual cluster 'default': its guaranteed GPUs are in use (AlloX does not count other
virtual clusters' idle GPUs)", to users who chose no VC, in a cluster with no other VC; the
README names a VC only where HiveD has more than one. Now it is told what it waits for, as
without HiveD: every GPU machine in use by pods AlloX did not start (WaitingForMachine). With two
VCs the VC's quota is still named (tests/placer/test_guarantee.py)."""

from __future__ import annotations

from placer.controller import Guarantees, PlacerController
from placer.guarantee import guarantees
from scheduler.cells import HivedEngine
from scheduler.config import AlloxSettings
from scheduler.core.resources import Resources
from tests.cells.helpers import rack_cluster
from tests.placer.test_controller import Jobs, RecordingApi
from tests.placer.test_guarantee import gpu_only_job, place, views


def one_vc() -> tuple[HivedEngine, str]:
    cells = HivedEngine.from_config(rack_cluster(1, 2))  # no virtualClusters: 'default' owns both nodes
    assert cells.default_vc is not None
    return cells, cells.default_vc


def admitted(cells: HivedEngine, vc: str) -> tuple[PlacerController, dict[str, str]]:
    """AlloX over the VC's GPU-only Job, no GPU free on AlloX's node r0n1; its one condition."""
    api = RecordingApi()
    placer = PlacerController(
        api=api, jobs=Jobs([gpu_only_job("g", vc)]), settings=AlloxSettings(alpha=1.0), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"r0n1": Resources(cpu_millis=64000, memory_bytes=2**38, gpus=0)},
        capacity=lambda: Resources(cpu_millis=128000, memory_bytes=2**39, gpus=16), clock=lambda: 1767225700.0,
        guarantees=lambda running: Guarantees(cells=guarantees(views(cells)), default_vc=vc),
    )
    placer.admit()
    ((_, condition),) = api.conditions
    return placer, condition


def test_one_vc_s_guarantee_in_use_is_told_as_every_gpu_in_use_without_naming_it() -> None:
    cells, vc = one_vc()
    place(cells, "hold-0", 8, vc)
    place(cells, "hold-1", 8, vc)
    placer, condition = admitted(cells, vc)
    assert condition["reason"] == "WaitingForMachine", condition
    assert condition["message"] == ("every gpu machine of AlloX's nodes is in use by pods AlloX did not start, so no Job of "
                                    "AlloX's ends for it to queue behind: it waits until one frees")
    assert placer.inspect()["waiting"] == [{"job": f"{vc}/g", "reason": "WaitingForMachine", "message": condition["message"],
                                            "virtualCluster": vc}]


def test_one_vc_s_free_gpus_outside_alloxs_nodes_are_told_without_naming_it() -> None:
    cells, vc = one_vc()
    _, condition = admitted(cells, vc)
    assert (condition["reason"], condition["message"]) == (
        "NoMachine", "GPUs are free only outside AlloX's nodes (allox.nodeSelector), none on them for this Job")
