"""§3.2: opportunistic pods use idle cells of any VC; guaranteed pods prefer free cells with the
fewest opportunistic GPUs and preempt only when the VC's guaranteed cells are needed."""

from __future__ import annotations

import json

import pytest

from scheduler.cells import HivedEngine
from scheduler.errors import SchedulingConflict
from tests.cells.helpers import node_names, pod, rack_cluster, schedule, snapshot
from scheduler.kube.names import filter_offered

NODES = node_names()


def make() -> HivedEngine:
    # a owns one rack, b owns one rack: nothing is spare.
    return HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]}))


def opp(uid: str, gpus: int, vc: str = "b"):
    return pod(uid, gpus, vc, priority="opportunistic")


def test_opportunistic_pods_run_on_other_vcs_idle_cells():
    engine = make()
    placed = [schedule(engine, opp(f"o{i}", 8), NODES) for i in range(8)]
    assert all(p is not None for p in placed)  # the whole cluster, although b owns half of it
    assert json.loads(placed[0].annotations["cellfit.io/bind-info"])["vcCell"] is None
    decision = filter_offered(engine, opp("o9", 1), NODES)
    # Opportunistic pods never preempt: the reason is final.
    assert not decision.feasible and not decision.failed
    assert "no idle 1 GPUs" in decision.unresolvable["r0n0"]


def test_opportunistic_pods_avoid_cells_a_vc_holds():
    engine = make()
    schedule(engine, pod("g", 1, "a"), NODES)  # a binds a rack: its nodes become owned
    rack_nodes = set(engine.inspect_virtual_cluster("a")["vcCells"][0]["nodes"])
    assert len(rack_nodes) == 4
    for i in range(4):
        placed = schedule(engine, opp(f"o{i}", 8), NODES)
        assert placed.node_name not in rack_nodes
    # Only when the unowned nodes are full do opportunistic pods use a's idle GPUs.
    assert schedule(engine, opp("o5", 4), NODES).node_name in rack_nodes


def test_guaranteed_prefers_free_cells_without_opportunistic_pods():
    engine = make()
    first = schedule(engine, opp("o1", 2), NODES)
    rack_of_opp = first.node_name[:2]
    g = schedule(engine, pod("g", 8, "a"), NODES)
    assert g is not None and g.node_name[:2] != rack_of_opp  # the clean rack was bound
    assert engine.pending_preemptions() == {}


def test_fewest_opportunistic_gpus_among_dirty_cells():
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 8}]}))
    # Fill every node with opportunistic pods, then free some GPUs: r1n2 keeps only 1 opp GPU.
    for n in NODES:
        decision = filter_offered(engine, opp(f"o-{n}", 8, "a"), [n])
        engine.reserve(opp(f"o-{n}", 8, "a"), decision.feasible[0])
    engine.delete_pod("o-r1n2")
    engine.reserve(opp("small", 1, "a"), "r1n2")
    decision = filter_offered(engine, pod("g", 8, "a"), NODES)
    assert decision.failed == {"r1n2": "opportunistic pods ns/small hold the cells HiveD chose for this pod on node r1n2: "
                               "preempting them would free them for it"}
    assert set(decision.unresolvable) == set(NODES) - {"r1n2"}


def test_preemption_flow_only_names_hived_victims():
    engine = make()
    for i in range(8):
        schedule(engine, opp(f"o{i}", 8), NODES)
    g = pod("g", 4, "a")
    decision = filter_offered(engine, g, NODES)
    assert len(decision.failed) == 1 and not decision.feasible
    (node, reason), = decision.failed.items()
    assert reason.startswith("opportunistic pods ns/o")
    victim_uid = engine.pending_preemptions()["g"]
    assert len(victim_uid) == 1
    # kube-scheduler offers every pod on two nodes; HiveD keeps only its node and its victim.
    candidates = {node: [victim_uid[0], "unrelated"], "r1n3" if node != "r1n3" else "r0n0": ["x"]}
    assert engine.select_victims(g, candidates, {}) == {node: victim_uid}
    with pytest.raises(SchedulingConflict, match="waiting for preemption"):
        engine.reserve(g, node)
    # The cells stay held for g meanwhile: another guaranteed pod of a cannot take them.
    engine.delete_pod(victim_uid[0])
    decision = filter_offered(engine, g, NODES)
    assert decision.feasible == [node]
    assert engine.reserve(g, node).node_name == node
    assert engine.pending_preemptions() == {}


def test_a_failed_bind_leaves_the_preemptors_booking_to_its_retry():
    engine = make()
    for i in range(8):
        schedule(engine, opp(f"o{i}", 8), NODES)
    g = pod("g", 4, "a")
    (node,) = filter_offered(engine, g, NODES).failed
    engine.delete_pod(engine.pending_preemptions()["g"][0])  # the victim is gone
    booked = snapshot(engine)
    engine.reserve(g, node)
    engine.unreserve("g")  # its binding failed (the API did not answer)
    assert snapshot(engine) == booked
    # An opportunistic pod cannot take the cells meanwhile; the retry gets them.
    assert schedule(engine, opp("late", 8), NODES) is None
    assert filter_offered(engine, g, NODES).feasible == [node]
    # A pod whose cells the reservation booked still gives them back when its bind fails.
    small = pod("small", 1, "a")
    engine.reserve(small, filter_offered(engine, small, NODES).feasible[0])
    engine.unreserve("small")
    assert snapshot(engine) == booked
    # A kept booking goes with its pod.
    engine.delete_pod("g")
    assert "g" not in engine.allocator.by_pod


def test_preemption_is_needed_only_for_the_vcs_own_cells():
    engine = make()
    # Opportunistic pods on a third of the cluster; a's 4-GPU request must not preempt anyone.
    for i in range(3):
        schedule(engine, opp(f"o{i}", 8), NODES)
    assert schedule(engine, pod("g", 4, "a"), NODES) is not None
    assert engine.pending_preemptions() == {}


def test_deleting_the_waiting_pod_frees_its_hold():
    engine = make()
    for i in range(8):
        schedule(engine, opp(f"o{i}", 8), NODES)
    filter_offered(engine, pod("g", 8, "a"), NODES)
    assert engine.pending_preemptions()
    engine.delete_pod("g")
    assert engine.pending_preemptions() == {}
    assert engine.inspect_virtual_cluster("a")["vcCells"] == []


def test_wide_racks_are_covered_as_a_whole():
    # Racks of 20 nodes are indexed per rack; binding one must still steer opportunistic pods
    # away from all 20 of its nodes, and releasing it must bring them back.
    engine = HivedEngine.from_config(rack_cluster(racks=2, nodes_per_rack=20, vcs={"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]}))
    names = node_names(racks=2, nodes_per_rack=20)
    schedule(engine, pod("g", 1, "a"), names)
    held = set(engine.inspect_virtual_cluster("a")["vcCells"][0]["nodes"])
    assert len(held) == 20
    for i in range(20):
        assert schedule(engine, opp(f"o{i}", 8), names).node_name not in held
    assert schedule(engine, opp("o20", 8), names).node_name in held  # only a's idle GPUs left
    engine.delete_pod("o20")
    engine.delete_pod("g")
    # a's rack is free again: its nodes are back among the first choices.
    assert not any(engine.allocator.idle_nodes.held(engine.topology.nodes[n]) for n in held)
