"""FitGpp's refusal ("cellfit preempts no one for this pod: ...") did not name the pods
preemption.maxPreemptions (P) kept from being chosen: a user whose trial pod stayed pending
read "suspending every eligible best-effort pod on any one offered node would still leave too
little room" while the pod that would have made room was there, passed over because its Job
had been preempted P times already (live hand session). Now a refusal names each pod at its
limit that would have made room (on a node where suspending it with the others frees enough),
and its count; pods at their limit that would not have helped are not named."""

from __future__ import annotations

import json

import msgspec

from preemption_helpers import be, node, res, te_pod
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.kube import translate, wire
from scheduler.preemption import CandidateTable, FitGppSettings, NodeState, NoVictims, choose_victims
from scheduler.preemption.engine import FitGppEngine

P2 = FitGppSettings(max_preemptions=2)
KEPT = "; preemption.maxPreemptions (P = 2) kept out the best-effort pods that would have made room: "


def refusal(nodes: list[NodeState], settings: FitGppSettings = P2, gpus: int = 8) -> str:
    decision = choose_victims(preemptor=te_pod(1, 1, gpus), table=CandidateTable.from_nodes(nodes), settings=settings)
    assert isinstance(decision, NoVictims), decision
    return decision.reason


def test_the_pod_at_its_limit_that_would_have_made_room_is_named_with_its_count() -> None:
    nodes = [node("n1", [be("bert-be-3", 8, 64, 4, preemptions=2), be("fresh", 8, 64, 4)])]
    assert refusal(nodes) == (
        "suspending every eligible best-effort pod on any one offered node would still leave too little room"
        f"{KEPT}ns/bert-be-3 was preempted 2 times, its limit"
    )


def test_every_pod_at_its_limit_names_those_that_would_have_made_room_only() -> None:
    nodes = [
        node("n1", [be("big", 8, 64, 8, preemptions=3)]),  # would have made room, over the limit lowered since
        node("n2", [be("small", 2, 16, 2, preemptions=2)], others=res(8, 64, 6)),  # would not have
    ]
    assert refusal(nodes) == (
        f"every best-effort pod on the offered nodes was already preempted P = 2 times{KEPT}ns/big was preempted 3 times, over its limit 2"
    )


def test_pods_at_their_limit_that_would_not_have_helped_are_not_named() -> None:
    nodes = [node("n1", [be("small", 2, 16, 2, preemptions=2), be("fresh", 2, 16, 2)], others=res(8, 64, 4))]
    assert refusal(nodes) == "suspending every eligible best-effort pod on any one offered node would still leave too little room"


def test_many_are_named_three_and_counted() -> None:
    nodes = [node("n1", [be(f"be-{i}", 1, 8, 1, preemptions=2) for i in range(8)])]
    said = refusal(nodes)
    assert said.endswith(
        f"{KEPT}ns/be-0 was preempted 2 times, its limit; ns/be-1 was preempted 2 times, its limit; ns/be-2 was preempted 2 times, its limit; and 5 more"
    ), said


def test_the_preempt_verb_names_the_job_counted_from_its_annotation() -> None:
    """Through FitGppEngine: the count is the Job's cellfit.io/preemptions, as the watch reads it
    from the API server's JSON."""
    made = FitGppEngine(ResourceFitEngine(), settings=P2)
    made.apply_node(NodeInfo(name="n1", allocatable=Resources(32000, 2**38, 8)))
    body = {
        "metadata": {"uid": "uid-bert", "namespace": "ns", "name": "bert-be", "annotations": {"cellfit.io/preemptions": "2"}},
        "spec": {"backoffLimit": 6, "template": {"spec": {"containers": [{"name": "train"}]}}},
        "status": {"active": 1},
    }
    made.apply_job(translate.job_info(msgspec.json.decode(json.dumps(body).encode(), type=wire.Job)))
    for name, owner in (("bert-be-3", OwnerRef("Job", "bert-be", "uid-bert")), ("other-0", OwnerRef("Job", "other", "uid-other"))):
        made.apply_pod(
            PodInfo(
                uid=name,
                namespace="ns",
                name=name,
                requests=Resources(1000, 2**30, 4),
                labels={"cellfit.io/job-class": "best-effort"},
                node_name="n1",
                phase="Running",
                owner=owner,
            )
        )
    te = PodInfo(uid="te", namespace="ns", name="te", requests=Resources(1000, 2**30, 8), labels={"cellfit.io/job-class": "trial"})
    choice = made.decide_preemption(te, {"n1": []}, {})
    assert choice.victims == {} and choice.refusal is not None
    assert choice.refusal.endswith(f"{KEPT}ns/bert-be-3 was preempted 2 times, its limit"), choice.refusal
