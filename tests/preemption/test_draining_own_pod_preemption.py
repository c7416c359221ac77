"""A pod of the preemptor's own VC on a cell the VC is draining is no FitGpp candidate where its
leaving frees no cell the VC may bind (review24 F1 of 6fa04ef): FitGppEngine._claimable asks
HiveD's preemption_helps about the VC's own pods too (before, only about opportunistic ones, so
FitGpp suspended the VC's best-effort pod on the draining cell for nothing).

6fa04ef's scene: vc-a shrunk from two V100 nodes to one; its trial g-full (8 GPUs) fills n-a, which
it keeps; n-b drains with its best-effort g-half (4) and vc-b's opportunistic opp (4). te-x (4 GPUs,
trial, vc-a); kube-scheduler offers n-b. vc-a has no quota left unbound: g-half's leaving unbinds
n-b, which vc-a cannot bind again."""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from scheduler.cells import HivedEngine
from scheduler.core.model import PodInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import V100_TYPES, node, pod, schedule
from tests.preemption.test_fitgpp_waits_for_freeing_cell import ours

NODES = ["n-a", "n-b"]
BE, TRIAL, OPP = 10, 100, 5


def config(nodes: int) -> dict[str, Any]:
    return {
        "topology": {"cellTypes": copy.deepcopy(V100_TYPES), "physicalCells": [{"cellType": "V100-NODE", "nodeName": n} for n in NODES]},
        "virtualClusters": {"vc-a": [{"cellType": "V100-NODE", "count": nodes}], "vc-b": []},
    }


def run(engine: FitGppEngine, p: PodInfo, where: str) -> None:
    placed = schedule(engine, p, [where])  # type: ignore[arg-type]
    assert placed is not None and placed.node_name == where, p.uid
    engine.apply_pod(msgspec.structs.replace(placed, phase="Running"))


def shrunk() -> tuple[HivedEngine, FitGppEngine]:
    hived = HivedEngine.from_config(config(2))
    engine = FitGppEngine(hived, settings=FitGppSettings())
    for name in NODES:
        engine.apply_node(node(name))
    run(engine, ours(pod("g-full", 8, "vc-a"), priority=TRIAL, job_class="trial"), "n-a")
    run(engine, ours(pod("g-half", 4, "vc-a"), priority=BE, job_class="best-effort"), "n-b")
    run(engine, ours(pod("opp", 4, "vc-b", priority="opportunistic"), priority=OPP, job_class="best-effort"), "n-b")
    hived.reconfigure(config(1))
    assert [root.node for root in hived.allocator.vcs["vc-a"].draining] == ["n-b"]
    return hived, engine


def test_fitgpp_does_not_preempt_the_vcs_own_pod_on_a_draining_cell() -> None:
    hived, engine = shrunk()
    te = ours(pod("te-x", 4, "vc-a"), priority=TRIAL, job_class="trial")
    engine.apply_pod(te)
    judge = hived.preemption_helps(te)
    g_half = engine.pods.get("g-half")
    assert judge is not None and g_half is not None and not judge(g_half)  # HiveD: it does not help
    assert filter_offered(engine, te, NODES).feasible == []
    choice = engine.decide_preemption(te, {"n-b": ["g-half", "opp"]}, {})
    assert "g-half" not in choice.victim_uids, (choice.rule, choice.victims)
    assert choice.victims == {}
    assert choice.refusal is not None and "ns/g-half: pods of this pod's virtual cluster on cells it is draining" in choice.refusal


def test_and_g_halfs_preemption_frees_nothing_te_x_can_use() -> None:
    _, engine = shrunk()
    engine.delete_pod("g-half")  # as if FitGpp's preemption of it had completed
    te = ours(pod("te-x", 4, "vc-a"), priority=TRIAL, job_class="trial")
    engine.apply_pod(te)
    assert filter_offered(engine, te, NODES).feasible == []  # passes: nothing gained
