"""FitGpp's formulas (arXiv:1902.01613 eqs. 1–4) on hand-computed cases, its rules (TE never
preempts TE, BE never preempts, P) and the random fallback."""

from __future__ import annotations

import math

import pytest

from preemption_helpers import GIB, NODE, be, node, res, te_pod
from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from scheduler.errors import ConfigError, InvalidAnnotation
from scheduler.preemption import (
    CandidateTable,
    FitGppSettings,
    InvalidPreemptionSettings,
    JobClass,
    NodeState,
    NoVictims,
    Normalisers,
    PreemptionDecision,
    choose_victims,
    job_class_of,
    preemption_count_of,
    resource_size,
    sizes_of,
)
from scheduler.preemption.table import _columns

S4 = FitGppSettings(grace_period_weight=4.0, max_preemptions=1)


def decide(preemptor: PodInfo, states: list[NodeState], settings: FitGppSettings = S4, **kwargs: object) -> PreemptionDecision:
    decision = choose_victims(preemptor=preemptor, table=CandidateTable.from_nodes(states), settings=settings, **kwargs)  # type: ignore[arg-type]
    assert isinstance(decision, PreemptionDecision), decision
    return decision


def refuse(preemptor: PodInfo, states: list[NodeState], settings: FitGppSettings = S4, **kwargs: object) -> NoVictims:
    decision = choose_victims(preemptor=preemptor, table=CandidateTable.from_nodes(states), settings=settings, **kwargs)  # type: ignore[arg-type]
    assert isinstance(decision, NoVictims), decision
    assert not decision.found
    return decision


# ---------------------------------------------------------------------- eq. 1


def test_size_is_the_norm_of_the_demand_as_fractions_of_the_node() -> None:
    # 8/32, 64/256, 2/8: each a quarter, so sqrt(3 * 1/16).
    assert resource_size(res(8, 64, 2), NODE) == pytest.approx(math.sqrt(3) / 4)
    # 32 CPUs alone: the whole CPU dimension.
    assert resource_size(res(32, 0, 0), NODE) == pytest.approx(1.0)
    # Scale invariance (§3.2): the same fractions on a node twice as large give the same size.
    assert resource_size(res(16, 128, 4), Resources(64_000, 512 * GIB, 16)) == pytest.approx(math.sqrt(3) / 4)


def test_size_ignores_a_resource_the_node_does_not_have() -> None:
    cpu_node = Resources(32_000, 256 * GIB, 0)
    assert resource_size(res(16, 0, 0), cpu_node) == pytest.approx(0.5)
    demand = _columns([res(16, 0, 0).as_tuple()])
    capacity = _columns([cpu_node.as_tuple()])
    assert sizes_of(demand, capacity).tolist() == pytest.approx([0.5])


# ---------------------------------------------------------------------- eq. 3


def test_score_normalises_size_and_grace_period_over_the_running_be_jobs() -> None:
    big = be("big", 8, 64, 2, grace=60)  # size sqrt(3)/4 (the largest), GP 60 s
    small = be("small", 4, 32, 1, grace=300)  # size sqrt(3)/8, GP 300 s (the longest)
    nodes = [node("n1", [big, small], others=res(20, 160, 5))]  # full node: N = 0
    decision = decide(te_pod(4, 32, 1), nodes)
    # big: 1 + 4 x 60/300 = 1.8; small: 0.5 + 4 x 1 = 4.5 -> big.
    (victim,) = decision.victims
    assert victim.uid == "big"
    assert victim.size == pytest.approx(math.sqrt(3) / 4)
    assert victim.size_term == pytest.approx(1.0)
    assert victim.grace_term == pytest.approx(0.2)
    assert victim.score == pytest.approx(1.8)
    # s = 0: only size counts, and the smaller job is cheaper.
    decision = decide(te_pod(4, 32, 1), nodes, FitGppSettings(grace_period_weight=0.0))
    assert decision.victim_uids == ("small",)
    assert decision.victims[0].score == pytest.approx(0.5)


def test_normalisation_covers_every_running_be_job_even_outside_the_offered_nodes() -> None:
    nodes = [
        node("n1", [be("a", 4, 32, 1, grace=100)], others=res(28, 224, 7)),
        node("n2", [be("huge", 32, 256, 8, grace=400)]),
    ]
    decision = decide(te_pod(4, 32, 1), nodes, nodes=["n1"])
    (victim,) = decision.victims
    assert victim.node == "n1"
    assert victim.size_term == pytest.approx(resource_size(res(4, 32, 1), NODE) / math.sqrt(3))
    assert victim.grace_term == pytest.approx(0.25)
    # Explicit normalisers replace the table's.
    decision = decide(te_pod(4, 32, 1), nodes, nodes=["n1"], normalisers=Normalisers(max_size=1.0, max_grace_seconds=200.0))
    assert decision.victims[0].grace_term == pytest.approx(0.5)


# ---------------------------------------------------------------------- eq. 2 / 4


def test_victim_must_free_enough_on_its_own_node() -> None:
    # "cheap" has the lowest score but 1 GPU + 0 free < 2 needed; "fits" frees 2 GPUs.
    nodes = [
        node("n1", [be("cheap", 1, 8, 1, grace=0)], others=res(31, 248, 7)),
        node("n2", [be("fits", 8, 64, 2, grace=600)], others=res(24, 192, 6)),
    ]
    assert decide(te_pod(2, 16, 2), nodes).victim_uids == ("fits",)


def test_free_resources_of_the_node_count_element_wise() -> None:
    # TE needs 4 CPUs, 32 GiB, 2 GPUs. The BE job frees 2 CPUs, 64 GiB, 2 GPUs; the node has 2
    # CPUs free: 2 + 2 >= 4 on CPU, and the TE fits.
    candidate = be("b", 2, 64, 2, grace=60)
    n1 = node("n1", [candidate], others=res(28, 192, 6))
    assert n1.free == res(2, 0, 0)
    assert decide(te_pod(4, 32, 2), [n1]).victim_uids == ("b",)
    # One CPU short in one dimension and the job does not qualify alone (nothing else to take).
    n1 = node("n1", [candidate], others=res(29, 192, 6))
    refuse(te_pod(4, 32, 2), [n1])


def test_lowest_score_among_the_qualifying_jobs() -> None:
    nodes = [
        node("n1", [be("a", 8, 64, 2, grace=120), be("b", 8, 64, 2, grace=30)], others=res(16, 128, 4)),
        node("n2", [be("c", 4, 32, 2, grace=30)], others=res(28, 224, 6)),
    ]
    # b and c have the same GP; c is smaller.
    assert decide(te_pod(1, 8, 2), nodes).victim_uids == ("c",)


def test_ties_are_broken_by_node_then_uid_whatever_the_input_order() -> None:
    jobs = [be(uid, 4, 32, 1, grace=60) for uid in ("x", "y")]
    forward = [node("n2", [jobs[1]], others=res(28, 224, 7)), node("n1", [jobs[0]], others=res(28, 224, 7))]
    assert decide(te_pod(1, 1, 1), forward).victim_uids == ("x",)
    assert decide(te_pod(1, 1, 1), list(reversed(forward))).victim_uids == ("x",)


# ---------------------------------------------------------------------- classes and P


def test_te_never_preempts_te() -> None:
    nodes = [node("n1", [be("other-te", 32, 256, 8, job_class=JobClass.TRIAL)])]
    refusal = refuse(te_pod(1, 1, 1), nodes)
    assert "best-effort" in refusal.reason


def test_be_never_preempts() -> None:
    preemptor = PodInfo(uid="b", namespace="ns", name="b", requests=res(1, 1, 1))
    refusal = refuse(preemptor, [node("n1", [be("victim", 32, 256, 8)])])
    assert "only trial pods preempt" in refusal.reason
    labelled = PodInfo(uid="b", namespace="ns", name="b", requests=res(1, 1, 1), labels={"cellfit.io/job-class": "best-effort"})
    refuse(labelled, [node("n1", [be("victim", 32, 256, 8)])])


def test_terminating_pods_are_not_victims() -> None:
    nodes = [node("n1", [be("going", 32, 256, 8, terminating=True)])]
    refuse(te_pod(1, 1, 1), nodes)


def test_preemption_limit_p() -> None:
    nodes = [
        node("n1", [be("twice", 4, 32, 1, grace=0, preemptions=1)], others=res(28, 224, 7)),
        node("n2", [be("fresh", 16, 128, 4, grace=600)], others=res(16, 128, 4)),
    ]
    # P = 1: the cheaper job was already preempted once.
    assert decide(te_pod(1, 1, 1), nodes).victim_uids == ("fresh",)
    # P = 2 or unlimited: it is eligible again.
    assert decide(te_pod(1, 1, 1), nodes, FitGppSettings(max_preemptions=2)).victim_uids == ("twice",)
    assert decide(te_pod(1, 1, 1), nodes, FitGppSettings(max_preemptions=None)).victim_uids == ("twice",)
    # P = 0 disables preemption.
    assert "disabled" in refuse(te_pod(1, 1, 1), nodes, FitGppSettings(max_preemptions=0)).reason
    # Every candidate at the limit.
    at_limit = [node("n1", [be("a", 4, 32, 1, preemptions=1)], others=res(28, 224, 7))]
    assert "already preempted" in refuse(te_pod(1, 1, 1), at_limit).reason


# ---------------------------------------------------------------------- fallback


def _fragmented() -> list[NodeState]:
    # No single job frees 4 GPUs anywhere, but two on one node do.
    return [
        node(f"n{i}", [be(f"j{i}{k}", 2, 16, 2, grace=60 + k) for k in range(4)])
        for i in range(3)
    ]


def test_fallback_preempts_random_be_jobs_on_one_node_until_there_is_room() -> None:
    decision = decide(te_pod(4, 32, 4), _fragmented())
    assert decision.rule == "fallback"
    assert len(decision.victims) >= 2
    assert {v.node for v in decision.victims} == {decision.node}
    freed = sum((res(2, 16, 2) for _ in decision.victims), Resources())  # every job of _fragmented holds this
    assert res(4, 32, 4).fits_in(freed)
    assert all(message.startswith(f"preempting ns/{v.uid} on node {decision.node} (random fallback") for message, v in zip(decision.preemptor_messages(), decision.victims))
    assert decision.victim_message() == (f"preempted by {decision.preemptor_key} on node {decision.node}: no single best-effort "
                                         "pod there freed enough, so FitGpp took best-effort pods at random until it did")


def test_fallback_is_seeded() -> None:
    same = {decide(te_pod(4, 32, 4), _fragmented(), seed=7).victim_uids for _ in range(5)}
    assert len(same) == 1
    varied = {decide(te_pod(4, 32, 4), _fragmented(), seed=seed).victim_uids for seed in range(30)}
    assert len(varied) > 1
    # The preemptor's UID is part of the seed: two pods need not get the same victims.
    by_pod = {decide(te_pod(4, 32, 4, uid=f"te-{i}"), _fragmented()).victim_uids for i in range(30)}
    assert len(by_pod) > 1


def test_fallback_respects_p() -> None:
    nodes = [
        node("n1", [be("done-a", 2, 16, 2, preemptions=1), be("done-b", 2, 16, 2, preemptions=1), be("ok-a", 2, 16, 2), be("ok-b", 2, 16, 2)]),
    ]
    for seed in range(20):
        decision = decide(te_pod(4, 32, 4), nodes, seed=seed)
        assert set(decision.victim_uids) == {"ok-a", "ok-b"}
    only_done = [node("n1", [be("a", 2, 16, 2, preemptions=1), be("b", 2, 16, 2, preemptions=1), be("c", 2, 16, 2)], others=res(2, 16, 2))]
    refuse(te_pod(4, 32, 4), only_done)


def test_no_preemption_when_no_node_can_make_room() -> None:
    nodes = [node("n1", [be("a", 2, 16, 2)], others=res(0, 0, 6))]
    assert "too little room" in refuse(te_pod(1, 1, 4), nodes).reason
    refuse(te_pod(1, 1, 9), [node("n1", [be("a", 32, 256, 8)])])


# ---------------------------------------------------------------------- explanations


def test_event_messages() -> None:
    nodes = [node("node-x", [be("big", 8, 64, 2, grace=60), be("small", 4, 32, 1, grace=300)], others=res(20, 160, 5))]
    decision = decide(te_pod(4, 32, 1, uid="trial-1"), nodes)
    why = ("score 1.80 = size 1.00 + 4.0 x grace 0.20: its share of its node's CPU, memory and GPUs is 100% of the largest "
           "best-effort pod's, and its grace period to checkpoint, 60 s, is 20% of the longest, 5 min")
    assert decision.preemptor_messages() == (f"preempting ns/big on node node-x ({why})",)
    # The victim's own event says where and why: its user may not read the preemptor's events.
    assert decision.victim_message() == ("preempted by ns/trial-1 on node node-x: the best-effort pod there cheapest to suspend "
                                         f"and quickest to resume (FitGpp {why})")
    assert decision.found and decision.rule == "fitgpp"
    half = decide(te_pod(4, 32, 1), nodes, FitGppSettings(grace_period_weight=2.25))
    assert "+ 2.25 x grace" in half.preemptor_messages()[0]


# ---------------------------------------------------------------------- inputs


def test_job_class_label() -> None:
    assert job_class_of({}) is JobClass.BEST_EFFORT
    assert job_class_of({"cellfit.io/job-class": "trial"}) is JobClass.TRIAL
    assert job_class_of({"cellfit.io/job-class": "best-effort"}) is JobClass.BEST_EFFORT
    with pytest.raises(InvalidAnnotation, match=r"cellfit.io/job-class.*'trail'"):
        job_class_of({"cellfit.io/job-class": "trail"})
    with pytest.raises(InvalidAnnotation):
        choose_victims(
            preemptor=PodInfo(uid="x", namespace="ns", name="x", labels={"cellfit.io/job-class": "urgent"}),
            table=CandidateTable.from_nodes([]),
            settings=S4,
        )


def test_preemption_count_annotation() -> None:
    assert preemption_count_of({}) == 0
    assert preemption_count_of({"cellfit.io/preemptions": " 3 "}) == 3
    for bad in ("-1", "x", "1.5", ""):
        with pytest.raises(InvalidAnnotation, match="cellfit.io/preemptions"):
            preemption_count_of({"cellfit.io/preemptions": bad})


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"grace_period_weight": -1.0}, "grace_period_weight"),
        ({"grace_period_weight": math.nan}, "grace_period_weight"),
        ({"grace_period_weight": math.inf}, "grace_period_weight"),
        ({"grace_period_weight": True}, "grace_period_weight"),
        ({"max_preemptions": -1}, "max_preemptions"),
        ({"max_preemptions": 1.5}, "max_preemptions"),
        ({"max_preemptions": True}, "max_preemptions"),
    ],
)
def test_settings_are_validated(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidPreemptionSettings, match=field) as raised:
        FitGppSettings(**kwargs)  # type: ignore[arg-type]
    assert isinstance(raised.value, ConfigError)
    assert raised.value.field == field


def test_settings_defaults_are_the_papers() -> None:
    settings = FitGppSettings()
    assert (settings.grace_period_weight, settings.max_preemptions) == (4.0, 1)
    assert settings.below_limit(0) and not settings.below_limit(1)
    assert FitGppSettings(max_preemptions=None).describe_limit() == "unlimited"


def test_empty_table() -> None:
    refuse(te_pod(1, 1, 1), [])
    refuse(te_pod(1, 1, 1), [node("n1", [])])
