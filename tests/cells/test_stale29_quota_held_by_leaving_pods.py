"""A guaranteed pod whose virtual cluster's quota is held by pods that are leaving is told so,
not "quota exhausted" (user29: users read "exhausted" as a problem to fix, a moment after a GPU
was freed).

HiveD's filter (and the preempt verb's refusal, request_refusal) said "virtual cluster 'vc-a'
quota exhausted at level ..." while the only pod holding that quota was terminating. It now says
the quota is held by pods that are leaving, names them (terminating, or being preempted where
cellfit handed out their deletion) and the node the pod goes to once they have gone; still
unresolvable for kube-scheduler, as a preemption frees nothing that is not freeing already. A
quota in use by pods that stay, or whose leaving pods would not free room enough, keeps
"exhausted". A discovered cell type's name counts its node's GPUs (``...-2GPU`` is one GPU of a
2-GPU node): the reason says how many GPUs a cell of that level holds.

Two 8-GPU V100 nodes, vc-a's quota one node: g1 holds n-a's GPUs.
"""

from __future__ import annotations

import copy
from typing import Any

from scheduler.cells import HivedEngine
from scheduler.core.model import PodInfo
from scheduler.kube.names import filter_offered
from tests.cells.helpers import V100_TYPES, node, pod
from tests.cells.test_no_preemption_while_vc_cells_free import run, terminating

NODES = ["n-a", "n-b"]
EXHAUSTED = ("virtual cluster 'vc-a' quota exhausted at level 'V100-NODE': none of its cells of type 'V100-NODE' or larger "
             "has 8 free GPUs in one 'V100-NODE', and every cell of its quota is already in use")


def config() -> dict[str, Any]:
    return {
        "topology": {"cellTypes": copy.deepcopy(V100_TYPES), "physicalCells": [{"cellType": "V100-NODE", "nodeName": n} for n in NODES]},
        "virtualClusters": {"vc-a": [{"cellType": "V100-NODE", "count": 1}], "vc-b": []},
    }


def scene(*gpus: int) -> tuple[HivedEngine, dict[str, PodInfo]]:
    """vc-a's pods g1, g2, ... of ``gpus`` GPUs each, bound on n-a, by UID."""
    engine = HivedEngine.from_config(config())
    for name in NODES:
        engine.apply_node(node(name))
    placed = {f"g{i}": run(engine, pod(f"g{i}", count, "vc-a"), ["n-a"]) for i, count in enumerate(gpus, start=1)}
    return engine, placed


def reasons(engine: HivedEngine, uid: str, gpus: int) -> set[str]:
    decision = filter_offered(engine, pod(uid, gpus, "vc-a"), NODES)
    assert not decision.feasible and not decision.failed  # unresolvable: no preemption frees it sooner
    return set(decision.unresolvable.values())


def test_a_quota_held_by_a_terminating_pod_is_leaving_not_exhausted() -> None:
    engine, placed = scene(8)
    engine.apply_pod(terminating(placed["g1"]))
    leaving = ("virtual cluster 'vc-a' quota at level 'V100-NODE' is held by pods that are leaving (ns/g1 terminating): "
               "this pod is placed on node n-a once they have gone")
    assert reasons(engine, "new", 8) == {leaving}
    assert engine.request_refusal(pod("new", 8, "vc-a")) == leaving
    assert "new" not in engine.allocator.by_pod


def test_a_quota_whose_holders_cellfit_preempts_names_them_being_preempted() -> None:
    engine, _ = scene(8)
    engine.expiry.victims_leaving(["g1"])  # its deletion handed out; the watch shows nothing yet
    assert reasons(engine, "new", 8) == {
        "virtual cluster 'vc-a' quota at level 'V100-NODE' is held by pods that are leaving (ns/g1 being preempted): "
        "this pod is placed on node n-a once they have gone"
    }


def test_a_quota_in_use_by_pods_that_stay_is_exhausted() -> None:
    engine, _ = scene(8)
    assert reasons(engine, "new", 8) == {EXHAUSTED}
    assert engine.request_refusal(pod("new", 8, "vc-a")) == f"{EXHAUSTED}, held by ns/g1"


def test_leaving_pods_that_free_too_little_leave_it_exhausted() -> None:
    engine, placed = scene(4, 4)
    engine.apply_pod(terminating(placed["g1"]))  # g2's 4 GPUs stay: no 8 in one node
    assert reasons(engine, "new", 8) == {EXHAUSTED}


def test_a_pod_with_room_is_placed_as_before_while_others_leave() -> None:
    engine, placed = scene(4)
    engine.apply_pod(terminating(placed["g1"]))
    decision = filter_offered(engine, pod("new", 4, "vc-a"), NODES)
    assert list(decision.feasible) == ["n-a"]


def test_a_discovered_level_says_how_many_gpus_its_cells_hold() -> None:
    product = "NVIDIA-A100-SXM4-80GB"
    nodes = [node(f"small{i}", 2, labels={"nvidia.com/gpu.product": product}) for i in range(2)]
    engine = HivedEngine.from_config({"virtualClusters": {"vc-a": [{"cellType": f"{product}-2GPU-NODE", "count": 1}]}}, nodes=nodes)
    for n in nodes:
        engine.apply_node(n)
    run(engine, pod("g1", 1, "vc-a"), ["small0"])
    g2 = run(engine, pod("g2", 1, "vc-a"), ["small0"])
    decision = filter_offered(engine, pod("new", 1, "vc-a"), ["small0", "small1"])
    (reason,) = set(decision.unresolvable.values())
    assert reason.startswith(f"virtual cluster 'vc-a' quota exhausted at level '{product}-2GPU' (cells of 1 GPU): "), reason
    engine.apply_pod(terminating(g2))
    (reason,) = set(filter_offered(engine, pod("new", 1, "vc-a"), ["small0", "small1"]).unresolvable.values())
    assert reason == (f"virtual cluster 'vc-a' quota at level '{product}-2GPU' (cells of 1 GPU) is held by pods that are "
                      "leaving (ns/g2 terminating): this pod is placed on node small0 once they have gone")

