"""user26 #4: HiveD's filter told a guaranteed pod whose cells opportunistic pods hold "waiting
for preemption of opportunistic pods team-b/opp1-nz59r on node gpu-node-1" (kube-scheduler's
FailedNodes, FailedScheduling) while nothing had preempted them, nor might (kube-scheduler's
preemption had not run, or found nothing to do). Until a preemption is under way (a victim
leaving: its deletion handed out, or terminating) the filter says what holds the cells and that
preempting them would free them; then it says it waits for that preemption.

Two 8-GPU nodes, vc-a's quota both; vc-a's g1 fills n-a, vc-b's opportunistic opp fills n-b."""

from __future__ import annotations

from scheduler.kube.names import filter_offered
from tests.cells.helpers import pod
from tests.cells.test_no_preemption_while_vc_cells_free import scene, terminating

BEFORE = "opportunistic pods ns/opp hold the cells HiveD chose for this pod on node n-b: preempting them would free them for it"
UNDER_WAY = "waiting for preemption of opportunistic pods ns/opp on node n-b"


def test_before_any_preemption_the_filter_says_preempting_them_would_free_the_cells() -> None:
    engine, _, _ = scene()
    decision = filter_offered(engine, pod("g2", 8, "vc-a"), ["n-b"])
    assert decision.failed == {"n-b": BEFORE}


def test_once_the_preempt_verb_chose_them_it_waits_for_their_preemption() -> None:
    engine, _, _ = scene()
    g2 = pod("g2", 8, "vc-a")
    filter_offered(engine, g2, ["n-b"])
    assert engine.select_victims(g2, {"n-b": ["opp"]}, {}) == {"n-b": ["opp"]}
    assert filter_offered(engine, g2, ["n-b"]).failed == {"n-b": UNDER_WAY}


def test_a_victim_terminating_is_a_preemption_under_way() -> None:
    engine, _, opp = scene()
    g2 = pod("g2", 8, "vc-a")
    filter_offered(engine, g2, ["n-b"])
    engine.apply_pod(terminating(opp))
    assert filter_offered(engine, g2, ["n-b"]).failed == {"n-b": UNDER_WAY}
