"""AlloX's free GPUs exclude the room FitGpp keeps for pods AlloX did not start (user24, F7):
AlloX started q-u1-4 on the 4 GPUs of VC team-a a resume hold kept for a preempted Job's resumed
pod (PriorityClass cellfit-resumed); the resumed pod won and q-u1-4 stayed Pending. Real
RoomHolds (scheduler/preemption/holds.py) and a real HivedEngine; the Jobs from the API's JSON."""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from placer.controller import Guarantees, PlacerController
from placer.guarantee import KeptRoom, guarantees, kept_room
from scheduler.cells import HivedEngine
from scheduler.config import AlloxSettings
from scheduler.core.model import OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption.holds import RoomHolds
from tests.placer.test_controller import Jobs, RecordingApi, job
from tests.placer.test_guarantee import NODES, engine, place, views
from tests.placer.test_guarantee import job as vc_job
from tests.placer.test_review_user21_what_users_read import placed

GI = 2**30


def resumed_pod(name: str, *, job_name: str, gpus: int, vc: str | None = None) -> PodInfo:
    labels = {"cellfit.io/job-class": "best-effort", **({"cellfit.io/virtual-cluster": vc} if vc else {})}
    return PodInfo(uid=f"uid-{name}", namespace="ml-a", name=name, requests=Resources(4000, 32 * GI, gpus), labels=labels,
                   priority=750, owner=OwnerRef("Job", job_name, f"uid-{job_name}"))


def resume_hold(node: str, pod: PodInfo) -> RoomHolds:
    """FitGpp preempted a pod of ``pod``'s Job on ``node``: its next pod, pending, is held room."""
    holds = RoomHolds()
    assert pod.owner is not None
    holds.displaced(job_uid=pod.owner.uid, node_name=node)
    holds.apply_pod(pod)
    return holds


def hived_placer(api: RecordingApi, cells: HivedEngine, jobs: list[Any], *, free: dict[str, Resources],
                 kept: Any = None) -> PlacerController:
    return PlacerController(
        api=api, jobs=Jobs(jobs), settings=AlloxSettings(alpha=1.0, mechanism="template"), gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: free, capacity=lambda: Resources(cpu_millis=128000, memory_bytes=2**39, gpus=16),
        clock=lambda: 1767225700.0,
        guarantees=lambda running: Guarantees(cells=guarantees(views(cells)), default_vc=cells.default_vc),
        kept_room=kept,
    )


def test_a_vcs_gpus_a_resume_hold_keeps_are_not_free_for_allox() -> None:
    # VC a: 4 of its 8 GPUs run a best-effort Job; the other 4 are kept for mp-1's resumed pod.
    cells = engine()
    place(cells, "mp-2", 4, "a")
    free = {name: Resources(cpu_millis=64000, memory_bytes=2**38, gpus=4) for name in NODES}
    mp1 = resumed_pod("mp-1-w58cb", job_name="mp-1", gpus=4, vc="a")
    holds = resume_hold(NODES[0], mp1)
    jobs = [vc_job("q", "a", created=0)]
    unheld = hived_placer(RecordingApi(), cells, jobs, free=free).admit()
    assert [(s.key, s.kind) for s in unheld.starts] == [("a/q", "gpu")]  # before: started on the held GPUs
    api = RecordingApi()
    decision = hived_placer(api, cells, jobs, free=free,
                            kept=lambda running: kept_room(holds=holds.holds(), pods=[mp1], except_owners=running)).admit()
    assert decision.idle_machines.get("gpu@a", 0) == 0
    assert [(s.key, s.kind) for s in decision.starts] == [("a/q", "cpu")]
    assert "no GPU of virtual cluster 'a' was free for it" in placed(api)["q"]


def test_under_resource_fit_a_nodes_gpus_a_hold_keeps_are_not_free_for_allox() -> None:
    mp1 = resumed_pod("mp-1-w58cb", job_name="mp-1", gpus=1)
    holds = resume_hold("n1", mp1)
    api = RecordingApi()
    placer = PlacerController(
        api=api, jobs=Jobs([job("w", cpu=100, gpu=10)]), settings=AlloxSettings(alpha=1.0, solver_process=False),
        gpu_resource="nvidia.com/gpu",
        free_by_node=lambda running: {"n1": Resources(cpu_millis=5000, memory_bytes=64 * GI, gpus=1)},
        capacity=lambda: Resources(cpu_millis=5000, memory_bytes=64 * GI, gpus=1), clock=lambda: 1767225700.0,
        kept_room=lambda running: kept_room(holds=holds.holds(), pods=[mp1], except_owners=running),
    )
    decision = placer.admit()
    assert decision.idle_machines.get("gpu", 0) == 0
    assert [s.kind for s in decision.starts] != ["gpu"]


def test_a_nominated_pending_pod_keeps_its_room_once_and_allox_s_own_pods_keep_none() -> None:
    preemptor = replace(resumed_pod("te-mp", job_name="te-mp", gpus=4, vc="a"), nominated_node_name="r0n0", priority=1000)
    holds = RoomHolds()
    holds.preempting(preemptor, node_name="r0n0")
    ours = replace(resumed_pod("q-0", job_name="q", gpus=1, vc="a"), nominated_node_name="r0n1")
    bound = replace(resumed_pod("done", job_name="d", gpus=2, vc="a"), node_name="r0n1", nominated_node_name="r0n1")
    kept = kept_room(holds=holds.holds(), pods=[preemptor, ours, bound], except_owners=frozenset({"uid-q"}))
    assert kept == [KeptRoom(node="r0n0", requests=preemptor.requests, virtual_cluster="a")]


def test_an_opportunistic_pods_room_takes_no_vcs_guarantee() -> None:
    opportunistic = replace(resumed_pod("o", job_name="o", gpus=4, vc="a"), nominated_node_name="r0n0",
                            labels={"cellfit.io/virtual-cluster": "a", "cellfit.io/priority": "opportunistic"})
    (room,) = kept_room(holds=[], pods=[opportunistic])
    assert room.virtual_cluster is None and room.requests.gpus == 4


def test_a_held_pod_hived_booked_cells_for_takes_no_more_of_its_vcs_guarantee() -> None:
    # FitGpp's preemptor under HiveD gets its VC's cells booked once its victims leave
    # (HivedEngine.booked_nodes): inspect_guarantees counts them, so AlloX must not again.
    preemptor = replace(resumed_pod("te-2", job_name="te-2", gpus=4, vc="a"), priority=1000)
    holds = RoomHolds()
    holds.preempting(preemptor, node_name="r0n0")
    (room,) = kept_room(holds=holds.holds(), pods=[preemptor], booked={"uid-te-2"})
    assert (room.node, room.requests.gpus, room.virtual_cluster) == ("r0n0", 4, None)
    (unbooked,) = kept_room(holds=holds.holds(), pods=[preemptor])
    assert unbooked.virtual_cluster == "a"


def test_a_hold_on_a_node_allox_does_not_have_takes_none_of_its_vcs_gpus() -> None:
    """A resume hold rebuilt from a Job's cellfit.io/resume-holds on a node deleted since (its Job's
    pod left pending for ever) took two of AlloX's four GPUs in e2e's full run, so
    test_allox_thirty_jobs started its Jobs on two GPUs and six CPU slots where the offline
    matching used four GPUs. Room kept on a node outside AlloX's takes the VC's cells there, none
    of those on AlloX's nodes."""
    cells = engine()
    place(cells, "mp-2", 4, "a")
    free = {name: Resources(cpu_millis=64000, memory_bytes=2**38, gpus=4) for name in NODES}
    mp1 = resumed_pod("mp-1-w58cb", job_name="mp-1", gpus=4, vc="a")
    holds = resume_hold("deleted-node", mp1)
    jobs = [vc_job("q", "a", created=0)]
    decision = hived_placer(RecordingApi(), cells, jobs, free=free,
                            kept=lambda running: kept_room(holds=holds.holds(), pods=[mp1], except_owners=running)).admit()
    assert decision.idle_machines.get("gpu@a", 0) == 4
    assert [(s.key, s.kind) for s in decision.starts] == [("a/q", "gpu")]
