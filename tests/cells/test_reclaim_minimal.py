"""Reclaim is minimal: among the placements that are equal for the VC (its private cluster could
not tell them apart), a guaranteed pod takes the one that preempts the least opportunistic work,
fewest pods first, then fewest GPUs. Placements that differ for the VC are never traded for
fewer victims (sharing safety: the VC decides as its private cluster would).

The opportunistic pods are put exactly where each scenario needs them the way a restarted
cellfit learns them: running pods carrying a ``cellfit.io/bind-info``."""

from __future__ import annotations

import json

from scheduler.cells import HivedEngine
from scheduler.core.model import PodInfo
from tests.cells.helpers import bound, node_names, pod, rack_cluster, schedule
from scheduler.kube.names import filter_offered


def running_opportunistic(engine: HivedEngine, uid: str, node: str, gpu_indices: list[int], *, vc: str = "b") -> None:
    """An opportunistic pod of ``vc`` running on exactly ``gpu_indices`` of ``node``."""
    info = {"version": 1, "node": node, "vc": vc, "priority": "opportunistic", "cellType": "V100-NODE", "gpuIndices": gpu_indices}
    p = pod(uid, len(gpu_indices), vc, priority="opportunistic")
    engine.apply_pod(bound(p, node, {"cellfit.io/bind-info": json.dumps(info)}))
    assert engine.allocator.by_pod[uid].gpu_indices == sorted(gpu_indices)


def one_node(a_owns: str, opportunistic: dict[str, list[int]]) -> HivedEngine:
    """One 8-GPU node; a owns one ``a_owns`` cell of it and b a socket; b's opportunistic pods
    run on the GPUs given."""
    vcs = {"a": [{"cellType": a_owns, "count": 1}], "b": [{"cellType": "V100-SOCKET", "count": 1}]}
    engine = HivedEngine.from_config(rack_cluster(racks=1, nodes_per_rack=1, vcs=vcs))
    for uid, gpus in opportunistic.items():
        running_opportunistic(engine, uid, "r0n0", gpus)
    return engine


def reclaim(engine: HivedEngine, p: PodInfo, nodes: list[str]) -> tuple[str, list[str], int]:
    """Filter ``p``: the node it waits on, its victims, and the GPUs they hold."""
    decision = filter_offered(engine, p, nodes)
    assert not decision.feasible and len(decision.failed) == 1, decision
    (node,) = decision.failed
    victims = sorted(engine.pending_preemptions()[p.uid])
    gpus = sum(len(engine.allocator.by_pod[v].gpus) for v in victims)
    return node, victims, gpus


def test_a_new_vc_cell_is_split_where_fewest_pods_must_go():
    # a and b own a node each of one rack; neither is bound, so the rack is one free cell that
    # the buddy allocator splits for a's first pod. Both nodes are the same to a: r0n0 has four
    # 1-GPU opportunistic pods (4 GPUs), r0n1 one 6-GPU pod. Fewest GPUs would pick r0n0 and
    # preempt 4 pods; fewest pods picks r0n1 and preempts one.
    engine = HivedEngine.from_config(
        rack_cluster(racks=1, nodes_per_rack=2, vcs={"a": [{"cellType": "V100-NODE", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 1}]})
    )
    for i in range(4):
        running_opportunistic(engine, f"small-{i}", "r0n0", [i])
    running_opportunistic(engine, "big", "r0n1", [0, 1, 2, 3, 4, 5])
    assert reclaim(engine, pod("g", 8, "a"), node_names(1, 2)) == ("r0n1", ["big"], 6)


def test_a_free_cell_on_the_list_is_taken_where_fewest_pods_must_go():
    # c's pod binds r0n0, which splits the rack: r0n1..r0n3 are free nodes on the list.
    engine = HivedEngine.from_config(
        rack_cluster(
            racks=1,
            nodes_per_rack=4,
            vcs={"a": [{"cellType": "V100-NODE", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 2}], "c": [{"cellType": "V100-NODE", "count": 1}]},
        )
    )
    assert schedule(engine, pod("c0", 8, "c"), ["r0n0"]) is not None
    running_opportunistic(engine, "x-0", "r0n1", [0, 1])
    running_opportunistic(engine, "x-1", "r0n1", [2, 3])
    running_opportunistic(engine, "x-2", "r0n1", [4])
    running_opportunistic(engine, "y-0", "r0n2", [0, 1, 2, 3, 4, 5, 6])
    running_opportunistic(engine, "z-0", "r0n3", [0, 1, 2, 3])
    running_opportunistic(engine, "z-1", "r0n3", [4, 5, 6, 7])
    assert reclaim(engine, pod("g", 8, "a"), node_names(1, 4)) == ("r0n2", ["y-0"], 7)


def test_among_equal_vc_cells_already_bound_the_one_with_fewest_victims():
    # a's two bound nodes each run one of a's 1-GPU pods on GPU 0: to a they are the same. A
    # 7-GPU pod fits only whole in either; r0n0 carries three opportunistic pods there, r0n1 one.
    engine = HivedEngine.from_config(
        rack_cluster(racks=1, nodes_per_rack=2, vcs={"a": [{"cellType": "V100-NODE", "count": 2}]})
    )
    for uid, node in (("a0", "r0n0"), ("a1", "r0n1")):
        assert schedule(engine, pod(uid, 1, "a"), [node]).node_name == node
    running_opportunistic(engine, "p-0", "r0n0", [1], vc="a")
    running_opportunistic(engine, "p-1", "r0n0", [2, 3], vc="a")
    running_opportunistic(engine, "p-2", "r0n0", [4, 5, 6, 7], vc="a")
    running_opportunistic(engine, "q-0", "r0n1", [1, 2, 3, 4, 5, 6, 7], vc="a")
    assert reclaim(engine, pod("g", 7, "a"), node_names(1, 2)) == ("r0n1", ["q-0"], 7)


def test_inside_a_cell_the_gpus_whose_pods_are_fewest_and_smallest():
    # One node, owned by a as switches (2 GPUs). Every switch is the same to a. Switch 0 runs
    # two 1-GPU pods, switch 1 one 2-GPU pod: fewest pods takes switch 1 (the GPU counts tie).
    engine = one_node("V100-SWITCH", {"one-0": [0], "one-1": [1], "two": [2, 3], "four": [4, 5, 6, 7]})
    node, victims, gpus = reclaim(engine, pod("g", 2, "a"), ["r0n0"])
    assert (victims, gpus) == (["two"], 2)
    assert engine.allocator.by_pod["g"].gpu_indices == [2, 3]


def test_one_pod_either_way_then_fewest_gpus():
    # A 4-GPU pod spans switches 0 and 1; switch 2 and switch 3 run a 2-GPU pod each. Every
    # switch costs one pod; switches 2 and 3 cost 2 GPUs, not 4.
    engine = one_node("V100-SWITCH", {"wide": [0, 1, 2, 3], "pair-2": [4, 5], "pair-3": [6, 7]})
    _, victims, gpus = reclaim(engine, pod("g", 2, "a"), ["r0n0"])
    assert (victims, gpus) == (["pair-2"], 2)


def test_part_of_a_cell_is_picked_where_fewest_pods_run():
    # 3 GPUs take a socket (4 GPUs) and leave one GPU of it: which one is the same to a. The
    # pods on the socket: 1-GPU pods on GPUs 0 and 1, a 2-GPU pod on GPUs 2-3; taking GPUs 1-3
    # or 0,2,3 preempts two pods, and any 3 GPUs must touch the pair: leaving GPU 0 or 1 is best.
    engine = one_node("V100-SOCKET", {"s-0": [0], "s-1": [1], "pair": [2, 3]})
    # b's own pod binds the clean socket: a's only cell left is the one above.
    assert filter_offered(engine, pod("b0", 4, "b"), ["r0n0"]).feasible == ["r0n0"]
    assert engine.reserve(pod("b0", 4, "b"), "r0n0").annotations["cellfit.io/gpu-indices"] == "4,5,6,7"
    _, victims, gpus = reclaim(engine, pod("g", 3, "a"), ["r0n0"])
    assert len(victims) == 2 and "pair" in victims and gpus == 3


def test_placements_that_differ_for_the_vc_are_not_traded_for_fewer_victims():
    # a's fuller node (6 free GPUs) is its best fit for a 6-GPU pod, as in its private cluster,
    # even though preempting there costs more than on its emptier node (7 free GPUs).
    engine = HivedEngine.from_config(
        rack_cluster(racks=1, nodes_per_rack=2, vcs={"a": [{"cellType": "V100-NODE", "count": 2}]})
    )
    assert schedule(engine, pod("a0", 2, "a"), ["r0n0"]).node_name == "r0n0"
    assert schedule(engine, pod("a1", 1, "a"), ["r0n1"]).node_name == "r0n1"
    for i in range(2, 8):
        running_opportunistic(engine, f"many-{i}", "r0n0", [i], vc="a")
    running_opportunistic(engine, "one", "r0n1", [1, 2, 3, 4, 5, 6, 7], vc="a")
    node, victims, _ = reclaim(engine, pod("g", 6, "a"), node_names(1, 2))
    assert node == "r0n0" and len(victims) == 6


def test_no_victims_needed_means_no_victims_taken():
    # A clean node the same to a as a dirty one is taken without preempting anyone.
    engine = HivedEngine.from_config(
        rack_cluster(racks=1, nodes_per_rack=2, vcs={"a": [{"cellType": "V100-NODE", "count": 2}]})
    )
    for uid, node in (("a0", "r0n0"), ("a1", "r0n1")):
        assert schedule(engine, pod(uid, 1, "a"), [node]).node_name == node
    running_opportunistic(engine, "p", "r0n0", [1, 2, 3, 4, 5, 6, 7], vc="a")
    placed = schedule(engine, pod("g", 7, "a"), node_names(1, 2))
    assert placed is not None and placed.node_name == "r0n1"
    assert engine.pending_preemptions() == {}


def test_the_adversarial_run_a_gang_reclaims_two_pods_not_six():
    # The shape of issue 18's finding: a's rack of 20 nodes (a wide cell, its nodes indexed by
    # free GPUs) has four nodes left, all the same to a. Two run three opportunistic pods each
    # (8 GPUs), two run one 7-GPU pod each. A gang of two 8-GPU pods used to preempt the first
    # two nodes it met: 6 pods, 16 GPUs. 2 pods and 14 GPUs do.
    names = node_names(1, 20)
    engine = HivedEngine.from_config(rack_cluster(racks=1, nodes_per_rack=20, vcs={"a": [{"cellType": "V100-RACK", "count": 1}]}))
    for i in range(16):
        assert schedule(engine, pod(f"a{i}", 8, "a"), [names[i]]).node_name == names[i]
    for node in names[16:18]:
        for uid, gpus in (("x", [0, 1, 2, 3]), ("y", [4, 5]), ("z", [6, 7])):
            running_opportunistic(engine, f"{uid}-{node}", node, gpus, vc="a")
    for node in names[18:]:
        running_opportunistic(engine, f"w-{node}", node, [0, 1, 2, 3, 4, 5, 6], vc="a")
    first = pod("g-0", 8, "a", gang=("job", 2))
    decision = filter_offered(engine, first, names)
    assert not decision.feasible and len(decision.failed) == 1
    group = engine.allocator.groups["uid-job"]
    victims = {v.pod_uid for slot in group.slots for v in engine.allocator.victims(slot)}
    assert sorted(slot.node for slot in group.slots) == names[18:]
    assert victims == {f"w-{node}" for node in names[18:]}
    assert sum(len(engine.allocator.by_pod[v].gpus) for v in victims) == 14
