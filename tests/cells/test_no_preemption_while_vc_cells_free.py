"""No opportunistic pod is preempted for a guaranteed pod while its virtual cluster's own cells
are being freed (seen live, one try in three): kube-scheduler's preempt verb offers only the
nodes where removing pods makes room, which leaves out the node whose GPUs a pod of the VC still
holds while it terminates, and the leader's reclaim books among the nodes the pod fits on once
opportunistic pods go (scheduler/cluster/stranded.py), which leaves it out too. Planned among
those nodes alone, HiveD bound a new cell of the VC's quota on another node and named its
opportunistic pod as the victim while the cell the pod could have was a moment from free.

Now HiveD answers no victim (the preempt verb, the filter, the leader's booking) while a cell of
the pod's level in the VC's cells has room once the pods leaving it are gone, and says so; it
preempts as before once they are gone and the pod still has no room, and when nothing of the VC
is leaving.

Two 8-GPU V100 nodes; vc-a's quota is both, its guaranteed g1 fills n-a, vc-b's opportunistic
opp fills n-b."""

from __future__ import annotations

import copy
import time
from typing import Any, Callable

from msgspec.structs import replace

from scheduler.cells import HivedEngine
from scheduler.core.model import PodInfo
from scheduler.kube.names import filter_offered
from tests.cells.helpers import V100_TYPES, node, pod, schedule

NODES = ["n-a", "n-b"]


def config() -> dict[str, Any]:
    return {
        "topology": {"cellTypes": copy.deepcopy(V100_TYPES), "physicalCells": [{"cellType": "V100-NODE", "nodeName": n} for n in NODES]},
        "virtualClusters": {"vc-a": [{"cellType": "V100-NODE", "count": 2}], "vc-b": []},
    }


def run(engine: HivedEngine, p: PodInfo, nodes: list[str]) -> PodInfo:
    placed = schedule(engine, p, nodes)
    assert placed is not None and placed.node_name is not None, p.uid
    engine.apply_pod(placed)
    return placed


def scene(*, g1_gpus: int = 8, clock: Callable[[], float] = time.monotonic) -> tuple[HivedEngine, PodInfo, PodInfo]:
    engine = HivedEngine.from_config(config(), clock=clock)
    for name in NODES:
        engine.apply_node(node(name))
    g1 = run(engine, pod("g1", g1_gpus, "vc-a"), ["n-a"])
    opp = run(engine, pod("opp", 8, "vc-b", priority="opportunistic"), ["n-b"])
    return engine, g1, opp


def terminating(p: PodInfo) -> PodInfo:
    return replace(p, terminating=True)


def test_the_preempt_verb_names_no_victim_while_the_vcs_pod_terminates() -> None:
    engine, g1, _ = scene()
    engine.apply_pod(terminating(g1))
    g2 = pod("g2", 8, "vc-a")
    assert engine.select_victims(g2, {"n-b": ["opp"]}, {}) == {}
    assert "g2" not in engine.allocator.by_pod  # nothing booked on n-b
    assert not engine.expiry.is_leaving("opp")


def test_the_filter_says_it_waits_for_the_cells_being_freed() -> None:
    engine, g1, _ = scene()
    engine.apply_pod(terminating(g1))
    decision = filter_offered(engine, pod("g2", 8, "vc-a"), ["n-b"])
    assert not decision.feasible
    (reason,) = set(decision.unresolvable.values())
    assert reason == (
        "HiveD waits for cell n-a of virtual cluster 'vc-a' on node n-a, which pods leaving free (ns/g1): "
        "no opportunistic pod is preempted for this pod while its virtual cluster's own cells are being freed"
    )


def test_once_the_pod_is_gone_the_cells_are_the_new_pods_without_preemption() -> None:
    engine, g1, _ = scene()
    engine.apply_pod(terminating(g1))
    engine.delete_pod("g1")
    assert run(engine, pod("g2", 8, "vc-a"), NODES).node_name == "n-a"


def test_with_nothing_of_the_vc_leaving_the_opportunistic_pod_is_preempted_as_before() -> None:
    engine, _, _ = scene()
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {"n-b": ["opp"]}


def test_an_opportunistic_pod_leaving_the_vcs_cell_is_waited_for_too() -> None:
    """g1 takes half of n-a; an opportunistic pod terminating holds the other half."""
    engine, _, _ = scene(g1_gpus=4)
    half = run(engine, pod("opp-half", 4, "vc-b", priority="opportunistic"), ["n-a"])
    engine.apply_pod(terminating(half))
    assert engine.select_victims(pod("g2", 4, "vc-a"), {"n-b": ["opp"]}, {}) == {}


def test_cells_free_but_not_leaving_do_not_stop_the_preemption() -> None:
    """A free cell of the VC on a node kube-scheduler refuses for other reasons (its cores full)
    is not waited for: nothing would free it for this pod, and the pod would wait for good."""
    engine, _, _ = scene(g1_gpus=4)
    assert engine.select_victims(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {}) == {"n-b": ["opp"]}


def test_the_leaders_booking_books_nothing_while_the_cells_are_freed() -> None:
    engine, g1, _ = scene()
    g2 = pod("g2", 8, "vc-a")
    engine.apply_pod(g2)
    engine.apply_pod(terminating(g1))
    assert engine.reclaim_need(g2, among=["n-b"]) is None
    assert engine.book_reclaim(g2, among=["n-b"]) is None
    assert "g2" not in engine.allocator.by_pod and not engine.expiry.is_leaving("opp")


def test_no_opportunistic_pod_helps_while_the_vcs_cells_are_freed() -> None:
    """FitGpp chooses its own victims among those that help (scheduler/preemption), once HiveD's
    reclaim names none: it must not take the opportunistic pod HiveD held back on."""
    engine, g1, opp = scene()
    g2 = pod("g2", 8, "vc-a")
    judge = engine.preemption_helps(g2)
    assert judge is not None and judge(opp)
    engine.apply_pod(terminating(g1))
    judge = engine.preemption_helps(g2)
    assert judge is not None and not judge(opp)
