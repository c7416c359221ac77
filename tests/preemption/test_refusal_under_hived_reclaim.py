"""F5 (user24): under HiveD a guaranteed pod of any job class may reclaim its VC's cells from
opportunistic pods, so a best-effort guaranteed pod for which the reclaim found nothing on the
offered nodes must not be told "a best-effort pod never preempts others (FitGpp)" moments
before HiveD's reclaim preempts opportunistic pods for it. The refusal says what HiveD found.

FitGppEngine around the real HivedEngine: two 8-GPU nodes, vc-a's quota both; vc-a's g1 fills
n-a, vc-b's opportunistic opp fills n-b."""

from __future__ import annotations

import msgspec

from scheduler.cells import HivedEngine
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import node, pod, schedule
from tests.cells.test_no_preemption_while_vc_cells_free import NODES, config


def scene() -> FitGppEngine:
    engine = FitGppEngine(HivedEngine.from_config(config()), settings=FitGppSettings())
    for name in NODES:
        engine.apply_node(node(name))
    for p, where in ((pod("g1", 8, "vc-a"), "n-a"), (pod("opp", 8, "vc-b", priority="opportunistic"), "n-b")):
        placed = schedule(engine, p, [where])  # type: ignore[arg-type]
        assert placed is not None
        engine.apply_pod(msgspec.structs.replace(placed, phase="Running"))
    return engine


def test_a_guaranteed_best_effort_pod_is_told_what_hived_found_not_that_it_never_preempts() -> None:
    engine = scene()
    choice = engine.decide_preemption(pod("g2", 8, "vc-a"), {"n-a": ["g1"]}, {})
    assert choice.victims == {}
    assert choice.refusal == (
        "HiveD found no opportunistic pod on the offered nodes (n-a) on cells virtual cluster 'vc-a' is owed, which it "
        "would reclaim for this guaranteed pod; and a pod that is not a trial pod takes no best-effort pod's room (FitGpp)"
    )
    assert "never preempts" not in choice.refusal


def test_the_same_pod_offered_the_opportunistic_pods_node_gets_hiveds_reclaim_and_no_refusal() -> None:
    choice = scene().decide_preemption(pod("g2", 8, "vc-a"), {"n-b": ["opp"]}, {})
    assert choice.victims == {"n-b": ["opp"]}
    assert choice.refusal is None


def test_an_opportunistic_best_effort_pod_still_hears_fitgpps_rule() -> None:
    choice = scene().decide_preemption(pod("o2", 8, "vc-b", priority="opportunistic"), {"n-b": ["opp"]}, {})
    assert choice.refusal == "a best-effort pod never preempts others (FitGpp)"
