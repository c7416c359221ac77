"""user26 #1: kube-scheduler's own filter turned every node away (Insufficient nvidia.com/gpu),
so cellfit's filter, which says "quota exhausted", was never asked; the preempt verb's refusal
was then the pod's only word from cellfit, and it said "HiveD found no opportunistic pod on the
offered nodes (...) on cells virtual cluster 'vc-a' is owed" while those nodes held
opportunistic pods: the pod waits because its VC's quota is all in use, by its own pods. The
refusal says that, and who holds the quota.

FitGppEngine around the real HivedEngine: four 8-GPU nodes; vc-a's quota is two of them, held by
its guaranteed g1 (n-1) and g2 (n-2); vc-c's opportunistic pods fill n-3 and n-4 (vc-b's quota,
idle)."""

from __future__ import annotations

import copy
from typing import Any

import msgspec

from scheduler.cells import HivedEngine
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import V100_TYPES, node, pod, schedule

NODES = ["n-1", "n-2", "n-3", "n-4"]


def config() -> dict[str, Any]:
    return {
        "topology": {"cellTypes": copy.deepcopy(V100_TYPES), "physicalCells": [{"cellType": "V100-NODE", "nodeName": n} for n in NODES]},
        "virtualClusters": {"vc-a": [{"cellType": "V100-NODE", "count": 2}], "vc-b": [{"cellType": "V100-NODE", "count": 2}], "vc-c": []},
    }


def scene(*, g2: bool = True) -> FitGppEngine:
    engine = FitGppEngine(HivedEngine.from_config(config()), settings=FitGppSettings())
    for name in NODES:
        engine.apply_node(node(name))
    running = ((pod("g1", 8, "vc-a"), "n-1"), (pod("g2", 8, "vc-a"), "n-2"),
               (pod("opp1", 8, "vc-c", priority="opportunistic"), "n-3"), (pod("opp2", 8, "vc-c", priority="opportunistic"), "n-4"))
    for p, where in running if g2 else running[::2] + running[3:]:
        placed = schedule(engine, p, [where])  # type: ignore[arg-type]
        assert placed is not None, p.uid
        engine.apply_pod(msgspec.structs.replace(placed, phase="Running"))
    return engine


def test_a_guaranteed_pod_whose_vcs_quota_is_in_use_is_told_the_quota_and_its_holders() -> None:
    choice = scene().decide_preemption(pod("g3", 8, "vc-a"), {"n-3": ["opp1"], "n-4": ["opp2"]}, {})
    assert choice.victims == {}
    assert choice.refusal is not None
    assert choice.refusal.startswith("virtual cluster 'vc-a' quota exhausted at level 'V100-NODE'"), choice.refusal
    assert "held by ns/g1, ns/g2" in choice.refusal, choice.refusal
    assert "found no opportunistic pod" not in choice.refusal


def test_with_quota_left_elsewhere_the_refusal_still_says_what_hived_found_on_the_offered_nodes() -> None:
    engine = scene(g2=False)  # a cell of vc-a's quota is unbound: n-2's, which is not offered
    choice = engine.decide_preemption(pod("g3", 8, "vc-a"), {"n-1": ["g1"]}, {})
    assert choice.refusal is not None
    assert choice.refusal.startswith("HiveD found no opportunistic pod on the offered nodes (n-1)"), choice.refusal


def test_a_gpu_pod_of_the_same_vc_asking_opportunistic_room_hears_fitgpps_rule() -> None:
    choice = scene().decide_preemption(pod("o3", 8, "vc-a", priority="opportunistic"), {"n-3": ["opp1"]}, {})
    assert choice.refusal == "a best-effort pod never preempts others (FitGpp)"
