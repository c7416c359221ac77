"""helper-70's adversarial review of the HiveD cells, as a live cluster's users and admin would
break them: each test reproduces a defect through the engine's public verbs."""

from __future__ import annotations

import json
from typing import Any, Callable

from msgspec import structs

from scheduler.cells import HivedEngine
from scheduler.core.model import NodeInfo, PodInfo
from tests.cells.helpers import bound, node, node_names, pod, rack_cluster, schedule
from scheduler.kube.names import filter_offered

NODES = node_names()
RACK_LABEL = "topology.kubernetes.io/rack"
VCS = {
    "a": [{"cellType": "V100-NODE", "count": 2}, {"cellType": "V100-SWITCH", "count": 2}],
    "b": [{"cellType": "V100-RACK", "count": 1}],
}


def _engine() -> HivedEngine:
    return HivedEngine.from_config(rack_cluster(vcs=VCS))


def _gpu_owners(engine: HivedEngine, node_name: str) -> list[tuple[int | None, int | None]]:
    return [(leaf.guaranteed_owner, leaf.opportunistic_owner) for leaf in engine.topology.nodes[node_name].leaves]


def test_a_failed_bind_told_after_the_watch_showed_the_pod_bound_keeps_its_gpus():
    # The binding's answer was lost (a timeout) although the API server made it: the watch shows
    # the pod running, then the extender hands the reservation back. The pod runs on its GPUs;
    # giving them back let the next pod on that node (kube-scheduler offers it: 4 GPUs are free)
    # be given the same GPU indices.
    engine = _engine()
    p = pod("p", 4, "a")
    node_name = filter_offered(engine, p, NODES).feasible[0]
    placement = engine.reserve(p, node_name)
    engine.apply_pod(bound(p, node_name, dict(placement.annotations)))
    engine.unreserve(p.uid)
    assert p.uid in engine.allocator.by_pod
    q = schedule(engine, pod("q", 4, "a"), [node_name])
    assert q is not None
    assert not set(q.annotations["cellfit.io/gpu-indices"].split(",")) & set(placement.annotations["cellfit.io/gpu-indices"].split(","))


def test_a_restart_gives_a_running_pod_its_gpus_over_a_finished_gang_siblings_stale_slot():
    # A gang of two ran; one pod finished and its Job's deletion released the slot, and pod x
    # was bound on those GPUs. After a restart the survivor's bind-info (written when both ran)
    # re-books its sibling's slot on x's GPUs if the watch lists the survivor first: x then had
    # no booking at all (its GPUs counted for no VC), and the gang's next pod was handed x's
    # GPUs.
    engine = _engine()
    first, second = (pod(uid, 8, "b", gang=("job", 2)) for uid in ("g1", "g2"))
    survivor, finished = schedule(engine, first, NODES), schedule(engine, second, NODES)
    assert survivor is not None and finished is not None
    engine.apply_pod(survivor)
    engine.apply_pod(finished)
    engine.apply_pod(structs.replace(finished, phase="Succeeded"))
    engine.delete_job("uid-job")
    x = schedule(engine, pod("x", 8, "b"), [finished.node_name])
    assert x is not None and x.node_name == finished.node_name

    restarted = _engine()
    restarted.apply_pod(survivor)
    restarted.apply_pod(x)
    recovered = restarted.allocator.by_pod.get("x")
    assert recovered is not None and recovered.holds == "guaranteed" and recovered.node == x.node_name
    slots = restarted.allocator.groups["uid-job"].slots
    assert [(s.node, s.pod_uid) for s in slots] == [(survivor.node_name, "g1")]


def test_a_cordoned_node_does_not_cost_a_rack_tenant_its_whole_rack():
    # The admin cordons r0n0 for maintenance. Tenant a's node-sized pod split the clean rack r1
    # (a clean free cell was taken first), although r0, broken by the cordon anyway, had three
    # healthy free nodes: tenant b, whose VC is one rack, could then get no whole rack for its
    # 4 x 8-GPU gang until the maintenance ended.
    engine = _engine()
    for name in NODES:
        engine.apply_node(node(name))
    engine.apply_node(node("r0n0", unschedulable=True))
    placed = schedule(engine, pod("a1", 8, "a"), NODES)
    assert placed is not None and placed.node_name.startswith("r0")
    gang = [schedule(engine, pod(f"b{i}", 8, "b", gang=("train", 4)), NODES) for i in range(4)]
    assert all(p is not None and p.node_name.startswith("r1") for p in gang)


def _with_bind_info(p: PodInfo, edit: Callable[[dict[str, Any]], None]) -> PodInfo:
    info = json.loads(p.annotations["cellfit.io/bind-info"])
    edit(info)
    return structs.replace(p, annotations={**p.annotations, "cellfit.io/bind-info": json.dumps(info)})


def test_a_bind_info_naming_fewer_gpus_than_the_pod_runs_on_is_not_believed():
    # An edited (or foreign) bind-info names one GPU of a 2-GPU pod: the restart booked that
    # one GPU only, and the pod's other GPU was handed to the next pod.
    engine = _engine()
    running = schedule(engine, pod("p", 2, "a"), NODES)
    assert running is not None
    edited = _with_bind_info(running, lambda info: info.update(gpuIndices=info["gpuIndices"][:1]))
    restarted = _engine()
    restarted.apply_pod(edited)
    recovered = restarted.allocator.by_pod["p"]
    assert len(recovered.gpus) == 2
    assert any("names 1 GPUs" in note for note in restarted.allocator.anomalies)


def test_a_gpu_pod_another_scheduler_bound_without_a_known_vc_is_tracked_not_a_crash():
    # A pod bound by another scheduler (or before cellfit ran) on a node cellfit manages, without
    # the VC label or naming a VC the configuration does not have: apply_pod failed an
    # assertion, so the watch could not deliver the pod, and its GPUs were handed to others.
    engine = _engine()
    engine.apply_pod(pod("unlabelled", 2, vc=None, node="r0n0", phase="Running"))
    engine.apply_pod(pod("unknown-vc", 2, vc="gone", node="r0n0", phase="Running"))
    held = {engine.allocator.by_pod[uid].holds for uid in ("unlabelled", "unknown-vc")}
    assert held == {"opportunistic"}
    taken = {i for uid in ("unlabelled", "unknown-vc") for i in engine.allocator.by_pod[uid].gpu_indices}
    assert len(taken) == 4


def _gang_with_its_first_pod_bound(engine: HivedEngine, *, size: int) -> tuple[list[PodInfo], PodInfo, list[str]]:
    """b's gang of 8-GPU pods (Job "job"), its first pod bound; the nodes of its free slots."""
    pods = [pod(f"g{i}", 8, "b", gang=("job", size)) for i in range(size)]
    first = schedule(engine, pods[0], NODES)
    assert first is not None
    engine.apply_pod(first)
    return pods, first, sorted(s.node or "" for s in engine.allocator.groups["uid-job"].slots if s.pod_uid is None)


def test_a_restart_keeps_a_gang_to_its_size_when_a_slot_moved_after_the_first_pod_bound():
    # The gang's first pod was bound with the three slots in its bind-info; the second pod's
    # slot moved (kube-scheduler no longer offered the free slots' nodes). After a restart the
    # gang had four slots for three pods: the extra one, no pod's, held a node of the VC's rack
    # until the whole gang was gone.
    engine = _engine()
    pods, first, free = _gang_with_its_first_pod_bound(engine, size=3)
    second = schedule(engine, pods[1], [n for n in NODES if n not in free])
    assert second is not None and second.node_name not in free
    engine.apply_pod(second)

    restarted = _engine()
    restarted.apply_pod(first)
    restarted.apply_pod(second)
    slots = restarted.allocator.groups["uid-job"].slots
    assert len(slots) == 3
    assert sorted(s.pod_uid or "" for s in slots) == ["", "g0", "g1"]


def _a100(name: str, rack: str) -> NodeInfo:
    return node(name, 8, labels={"nvidia.com/gpu.product": "A100", RACK_LABEL: rack})


def test_a_restart_that_discovers_a_rack_around_a_running_pod_keeps_the_racks_free_node_usable():
    # Discovered cells: m1 joined rack r2 while m0 ran a pod, so it joined as a standalone node
    # (the rack waits for idle cells). A restart discovers rack r2 and the default VC owns racks
    # only; the pod was recovered into its old node cell m0, which split the rack: m1 stayed
    # idle and no 8-GPU pod could be placed on it until the pod on m0 finished.
    names = ["n0", "n1", "m0", "m1"]
    live = HivedEngine.from_nodes([_a100("n0", "r1"), _a100("n1", "r1"), _a100("m0", "r2")], rack_label=RACK_LABEL)
    running = schedule(live, pod("p", 2, None), names[:3])
    assert running is not None and running.node_name == "m0"
    live.apply_node(_a100("m1", "r2"))

    restarted = HivedEngine.from_nodes([_a100(n, "r1" if n.startswith("n") else "r2") for n in names], rack_label=RACK_LABEL)
    restarted.apply_pod(running)
    assert restarted.allocator.by_pod["p"].root is not None
    placed = [schedule(restarted, pod(f"q{i}", 8, None), names) for i in range(3)]
    assert all(p is not None for p in placed) and {p.node_name for p in placed if p} == {"n0", "n1", "m1"}


def test_a_node_cell_inside_a_rack_that_formed_later_is_not_bound_for_the_node_quota():
    # Discovered cells: s0 stood alone, so A100-NODE was a chain of its own; racks r8 and r9
    # formed later, in a chain A100 > A100-NODE > A100-RACK. The default VC owns 1 A100-NODE and
    # 2 A100-RACK. With s0 NotReady, an 8-GPU pod bound a node of rack r9 as the VC's node cell
    # (the rack chain counts no node quota, so nothing checked the split): the VC could then
    # bind only one rack, and the rack's other node, healthy and idle, served no 8-GPU pod.
    names = ["s0", "m0", "m1", "k0", "k1"]
    engine = HivedEngine.from_nodes([_a100("s0", "r0")], rack_label=RACK_LABEL)
    for name, rack in (("m0", "r9"), ("m1", "r9"), ("k0", "r8"), ("k1", "r8")):
        engine.apply_node(_a100(name, rack))
    engine.apply_node(structs.replace(_a100("s0", "r0"), ready=False))
    placed = [schedule(engine, pod(f"q{i}", 8, None), names) for i in range(4)]
    assert all(p is not None for p in placed) and {p.node_name for p in placed if p} == {"m0", "m1", "k0", "k1"}


def test_a_restart_after_a_reload_recovers_each_vcs_pods_in_their_own_cells():
    # a's switches and c's socket share node r0n0; a reload gives a node cells instead of
    # switches, so a's switch drains. A restart must not recover a's pod in the whole node: c's
    # pod, recovered after it, then had no cell and was tracked outside any VC cell, a victim
    # for the next guaranteed pod.
    first = {"a": [{"cellType": "V100-SWITCH", "count": 2}], "c": [{"cellType": "V100-SOCKET", "count": 1}]}
    second = {
        "a": [{"cellType": "V100-NODE", "count": 1}],
        "c": [{"cellType": "V100-SOCKET", "count": 1}],
        "b": [{"cellType": "V100-RACK", "count": 1}],
    }
    engine = HivedEngine.from_config(rack_cluster(vcs=first))
    running = [schedule(engine, pod("pa", 2, "a"), NODES), schedule(engine, pod("pc", 4, "c"), NODES)]
    assert all(p is not None and p.node_name == "r0n0" for p in running)
    engine.reconfigure(rack_cluster(vcs=second))

    restarted = HivedEngine.from_config(rack_cluster(vcs=second))
    for p in running:
        assert p is not None
        restarted.apply_pod(p)
    roots = {uid: (b.holds, b.root.id if b.root else None) for uid, b in restarted.allocator.by_pod.items()}
    assert roots == {"pa": ("guaranteed", "r0n0/V100-SWITCH#0"), "pc": ("guaranteed", "r0n0/V100-SOCKET#1")}


def test_a_reload_removing_a_vc_releases_its_gangs_slots_that_no_pod_can_take_any_more():
    # b's gang of four runs one pod; the other three exist but wait. A reload removes b and
    # gives c three node cells. b's pods can never be placed now (their VC is unknown), yet the
    # three slots without a pod kept three nodes booked for as long as the first pod ran (its
    # gang's pods all exist, so the booking timeout never applied), and c's pods waited for them.
    first = {"a": VCS["a"], "b": [{"cellType": "V100-NODE", "count": 4}]}
    second = {"a": VCS["a"], "c": [{"cellType": "V100-NODE", "count": 3}]}
    engine = HivedEngine.from_config(rack_cluster(vcs=first))
    engine.watch_pods(True)
    gang = [pod(f"g{i}", 8, "b", gang=("job", 4)) for i in range(4)]
    for member in gang:
        engine.apply_pod(member)
    first_member = schedule(engine, gang[0], NODES)
    assert first_member is not None
    engine.apply_pod(first_member)
    for uid, gpus in (("a0", 8), ("a1", 8), ("a2", 2), ("a3", 2)):
        placed = schedule(engine, pod(uid, gpus, "a"), NODES)
        assert placed is not None
        engine.apply_pod(placed)

    engine.reconfigure(rack_cluster(vcs=second))
    assert [s.pod_uid for s in engine.allocator.groups["uid-job"].slots] == ["g0"]
    (released,) = engine.expire_bookings(0.0)
    assert released.kind == "Job" and "virtual cluster 'b' was removed" in released.message
    assert all(schedule(engine, pod(f"c{i}", 8, "c"), NODES) is not None for i in range(3))


def test_a_reload_removing_a_vc_releases_the_cells_held_for_its_waiting_pod():
    # b's pod p waits for the preemption of an opportunistic pod on its cells. A reload removes
    # b: p can never be placed now, yet its cells stayed held, and o0 stayed listed as the
    # victim it waits for.
    first = {"a": [{"cellType": "V100-NODE", "count": 2}], "b": [{"cellType": "V100-RACK", "count": 1}]}
    second = {"a": [{"cellType": "V100-NODE", "count": 2}], "c": [{"cellType": "V100-RACK", "count": 1}]}
    engine = HivedEngine.from_config(rack_cluster(vcs=first))
    engine.watch_pods(True)
    for i in range(8):
        opportunistic = pod(f"o{i}", 8, "a", priority="opportunistic")
        engine.apply_pod(opportunistic)
        placed = schedule(engine, opportunistic, NODES)
        assert placed is not None
        engine.apply_pod(placed)
    waiting = pod("p", 8, "b")
    engine.apply_pod(waiting)
    assert filter_offered(engine, waiting, NODES).failed and engine.pending_preemptions() == {"p": ["o0"]}

    engine.reconfigure(rack_cluster(vcs=second))
    assert "p" not in engine.allocator.by_pod and engine.pending_preemptions() == {}
    (released,) = engine.expire_bookings(0.0)
    assert released.kind == "Pod" and released.name == "p" and "'b' was removed" in released.message


def test_a_guaranteed_pod_waiting_for_victims_takes_a_clean_cell_of_its_vc_that_freed_since():
    # a's pod p held node r0n1 while b's opportunistic pod o0 there was to be preempted; then
    # a's other pod finished and its node r0n0 came back clean and free. p kept waiting for
    # (and asking the preemption of) o0 instead of taking r0n0.
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 2}], "b": [{"cellType": "V100-NODE", "count": 6}]}))
    first = schedule(engine, pod("g1", 8, "a"), NODES)
    assert first is not None and first.node_name == "r0n0"
    engine.apply_pod(first)
    for i in range(7):
        opportunistic = schedule(engine, pod(f"o{i}", 8, "b", priority="opportunistic"), NODES)
        assert opportunistic is not None
        engine.apply_pod(opportunistic)
    waiting = pod("p", 8, "a")
    assert filter_offered(engine, waiting, NODES).failed and engine.pending_preemptions() == {"p": ["o0"]}

    engine.apply_pod(structs.replace(first, phase="Succeeded"))
    assert filter_offered(engine, waiting, NODES).feasible == ["r0n0"]
    assert engine.pending_preemptions() == {}


def test_a_pod_another_scheduler_bound_on_a_gang_slots_gpus_gets_them():
    # b's gang booked four nodes, one pod came. The default scheduler, counting only the node's
    # free GPUs, bound a foreign 8-GPU pod of b onto a node whose GPUs only a slot without a
    # pod held: it got no booking at all (no untracked GPU left), so b's use of its cells was
    # undercounted while it ran. The running pod outranks the plan.
    engine = _engine()
    _, _, free = _gang_with_its_first_pod_bound(engine, size=4)
    engine.apply_pod(pod("foreign", 8, "b", node=free[0], phase="Running"))
    assert engine.allocator.by_pod["foreign"].node == free[0]
    assert free[0] not in {s.node for s in engine.allocator.groups["uid-job"].slots}
