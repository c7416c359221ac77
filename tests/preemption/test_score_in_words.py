"""FitGpp's score as its Events say it (user21's item 4): "GP", "FitGpp score" and unitless
numbers meant nothing to the user of a preempted Job. The numbers stay (they are the
explanation); each term says what it is a fraction of, in the paper's terms (eq. 3): size, the
pod's share of its node's CPU, memory and GPUs (eq. 1) against the largest running best-effort
pod's; the grace period (``terminationGracePeriodSeconds``, the time to checkpoint) against the
longest. ``kubectl cellfit why`` still reads the score from both Events."""

from __future__ import annotations

from typing import Any

from preemption_helpers import be, node, te_pod
from scheduler.kubectl.objects import events_from, preemption_from
from scheduler.preemption import CandidateTable, FitGppSettings, PreemptionDecision, choose_victims

S4 = FitGppSettings(grace_period_weight=4.0, max_preemptions=1)


def decide(nodes: list[Any]) -> PreemptionDecision:
    decision = choose_victims(preemptor=te_pod(0, 0, 4, uid="te-probe"), table=CandidateTable.from_nodes(nodes), settings=S4)
    assert isinstance(decision, PreemptionDecision), decision
    return decision


def session() -> PreemptionDecision:
    # As in user21's session: the victim holds 4 of 8 GPUs with 10 s to checkpoint; the largest
    # best-effort pod holds a whole node, the longest grace period is 300 s.
    return decide([node("gpu-0", [be("be-victim", 0, 0, 4, grace=10), be("be-other", 0, 0, 4, grace=300)]),
                   node("gpu-1", [be("be-big", 0, 0, 8, grace=300)])])


def test_each_term_says_what_it_is_a_fraction_of_with_the_numbers_kept() -> None:
    decision = session()
    (victim,) = decision.victims
    assert victim.key == "ns/be-victim"
    (preempting,) = decision.preemptor_messages()
    for said in (preempting, decision.victim_message()):
        assert "score 0.63 = size 0.50 + 4.0 x grace 0.03" in said, said
        assert "CPU, memory and GPUs" in said and "50% of the largest best-effort pod's" in said, said
        assert "grace period to checkpoint, 10 s, is 3% of the longest, 5 min" in said, said
        assert " GP " not in said, said


def test_why_reads_the_whole_explanation_from_either_event() -> None:
    decision = session()
    (victim,) = decision.victims
    explained = victim.explain(grace_period_weight=4.0)

    def event(reason: str, message: str, name: str) -> Any:
        (read,) = events_from([{"reason": reason, "message": message, "type": "Normal", "count": 1,
                                "involvedObject": {"kind": "Pod", "name": name},
                                "metadata": {"creationTimestamp": "2026-11-28T09:00:00Z"}}])
        return read

    preempted = event("Preempted", decision.victim_message(), "be-victim")
    alone = preemption_from(victim="ns/be-victim", preempted=preempted, preemptor_events=(), unread="not readable")
    assert (alone.node, alone.breakdown, alone.unread) == ("gpu-0", explained, "")
    assert alone.breakdown is not None and "3% of the longest, 5 min" in alone.breakdown
    (message,) = decision.preemptor_messages()
    both = preemption_from(victim="ns/be-victim", preempted=preempted, preemptor_events=(event("Preempting", message, "te-probe"),))
    assert (both.node, both.breakdown) == ("gpu-0", explained)


def test_without_grace_periods_or_with_a_tiny_share_it_says_so() -> None:
    none = decide([node("gpu-0", [be("a", 0, 0, 4, grace=0), be("b", 0, 0, 4, grace=0)])])
    said = none.victim_message()
    assert "x grace 0.00: " in said and "no best-effort pod has a grace period to checkpoint" in said, said
    tiny = decide([node("gpu-0", [be("small", 0, 0, 4, grace=1), be("b", 0, 0, 4, grace=1000)])])
    assert "1 s, is <1% of the longest, 17 min" in tiny.victim_message(), tiny.victim_message()
