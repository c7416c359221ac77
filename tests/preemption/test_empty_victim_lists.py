"""Candidate nodes offered with no victims (kubernetes#139270, PR #135486): newer kube-schedulers
offer a preemption-capable extender nodes whose dry run found nothing to preempt, because it
cannot see what the extender manages. cellfit then chooses the victims itself from what it
knows of the node, or leaves the node out when nothing it may preempt makes room:

* FitGpp picks among the best-effort pods it tracks on the offered nodes, by its score;
* HiveD's reclaim picks the opportunistic pods on the cells the preemptor is owed;
* every victim runs on the node it is answered for, and together they free enough room.
"""

from __future__ import annotations

import pytest

from scheduler.cells import HivedEngine
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings, NoVictims, PreemptionDecision
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import node_names, pod, rack_cluster, schedule
from scheduler.kube.names import filter_offered

GI = 2**30
CAPACITY = Resources(32000, 256 * GI, 8)


def node(name: str) -> NodeInfo:
    return NodeInfo(name=name, allocatable=CAPACITY)


def running(uid: str, node_name: str, *, gpus: int, grace: int = 60, cls: str = "best-effort") -> PodInfo:
    return PodInfo(
        uid=uid, namespace="ml", name=uid, requests=Resources(4000, 32 * GI, gpus),
        labels={"cellfit.io/job-class": cls}, node_name=node_name, phase="Running",
        grace_period_seconds=grace, owner=OwnerRef("Job", uid, f"job-{uid}"),
    )


def trial(uid: str = "te-1", gpus: int = 4) -> PodInfo:
    return PodInfo(uid=uid, namespace="ml", name=uid, requests=Resources(4000, 32 * GI, gpus),
                   labels={"cellfit.io/job-class": "trial"}, owner=OwnerRef("Job", "te", "job-te"))


def fitgpp(*pods: PodInfo, nodes: tuple[str, ...] = ("n1", "n2")) -> FitGppEngine:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    for name in nodes:
        engine.apply_node(node(name))
    for p in pods:
        engine.apply_pod(p)
    return engine


def assert_frees_room(engine: FitGppEngine, preemptor: PodInfo, chosen: dict[str, list[str]]) -> None:
    """Every victim is a pod cellfit tracks on that node, and their release makes the room."""
    for node_name, uids in chosen.items():
        assert uids
        victims = [engine.victim(uid) for uid in uids]
        assert all(v is not None and v.node_name == node_name for v in victims), (node_name, victims)
        free = engine.inner.free_on(node_name)
        for victim in victims:
            free = free + victim.requests
        assert preemptor.requests.fits_in(free), (node_name, free)


# ---------------------------------------------------------------- FitGpp


@pytest.mark.parametrize("cheap", ["be-a", "be-b"])
def test_fitgpp_chooses_by_its_score_on_a_node_offered_without_victims(cheap):
    # Both pods free enough alone; the one with the shorter grace period scores lower.
    engine = fitgpp(
        running("be-a", "n1", gpus=4, grace=30 if cheap == "be-a" else 900),
        running("be-b", "n1", gpus=4, grace=30 if cheap == "be-b" else 900),
    )
    choice = engine.decide_preemption(trial(), {"n1": []}, {})
    assert choice.victims == {"n1": [cheap]}
    decision = choice.decision
    assert isinstance(decision, PreemptionDecision) and decision.rule == "fitgpp"
    assert_frees_room(engine, trial(), choice.victims)


def test_fitgpp_answers_the_same_whether_kube_scheduler_listed_victims_or_not():
    pods = (running("be-long", "n1", gpus=4, grace=600), running("be-short", "n1", gpus=4, grace=30))
    listed = fitgpp(*pods).select_victims(trial(), {"n1": ["be-long", "be-short"]}, {})
    unlisted = fitgpp(*pods).select_victims(trial(), {"n1": []}, {})
    assert listed == unlisted == {"n1": ["be-short"]}


def test_fitgpp_chooses_among_the_offered_nodes_only():
    engine = fitgpp(running("be-slow", "n1", gpus=8, grace=600), running("be-fast", "n2", gpus=8, grace=30))
    # Both nodes offered empty: the cheaper victim, on its own node.
    assert engine.select_victims(trial("te-1"), {"n1": [], "n2": []}, {}) == {"n2": ["be-fast"]}
    # Only n1 offered: its pod, never the cheaper one on a node kube-scheduler did not offer.
    engine = fitgpp(running("be-slow", "n1", gpus=8, grace=600), running("be-fast", "n2", gpus=8, grace=30))
    chosen = engine.select_victims(trial("te-2"), {"n1": []}, {})
    assert chosen == {"n1": ["be-slow"]}
    assert_frees_room(engine, trial("te-2"), chosen)


def test_fitgpp_falls_back_to_several_victims_that_together_make_room():
    engine = fitgpp(*(running(f"be-{i}", "n1", gpus=2, grace=60) for i in range(4)))
    preemptor = trial(gpus=6)
    choice = engine.decide_preemption(preemptor, {"n1": []}, {})
    assert set(choice.victims) == {"n1"} and len(choice.victims["n1"]) >= 3
    assert choice.decision.rule == "fallback"
    assert_frees_room(engine, preemptor, choice.victims)


@pytest.mark.parametrize(
    ("pods", "preemptor", "reason"),
    [
        pytest.param((running("te-old", "n1", gpus=8, cls="trial"),), trial(), "no best-effort pod", id="only-trial-pods"),
        pytest.param((), trial(), "no best-effort pod", id="empty-node"),
        pytest.param(
            (running("be-0", "n1", gpus=2), running("te-old", "n1", gpus=6, cls="trial")),
            trial(gpus=4), "too little room", id="best-effort-pods-free-too-little",
        ),
        pytest.param(
            (running("be-0", "n1", gpus=8),),
            PodInfo(uid="te-1", namespace="ml", name="be-new", requests=Resources(0, 0, 2), labels={"cellfit.io/job-class": "best-effort"}),
            "never preempts", id="best-effort-preemptor",
        ),
    ],
)
def test_fitgpp_drops_a_node_where_nothing_it_may_preempt_makes_room(pods, preemptor, reason):
    engine = fitgpp(*pods)
    choice = engine.decide_preemption(preemptor, {"n1": []}, {})
    assert choice.victims == {}
    decision = choice.decision
    assert isinstance(decision, NoVictims) and reason in decision.reason, decision


def test_fitgpp_drops_a_node_it_has_never_seen():
    engine = fitgpp(running("be-0", "n1", gpus=8))
    assert engine.select_victims(trial(), {"elsewhere": []}, {}) == {}


def test_fitgpp_keeps_only_the_node_where_room_can_be_made():
    engine = fitgpp(running("te-old", "n1", gpus=8, cls="trial"), running("be-0", "n2", gpus=8))
    chosen = engine.select_victims(trial(), {"n1": [], "n2": []}, {})
    assert chosen == {"n2": ["be-0"]}
    assert_frees_room(engine, trial(), chosen)


# ---------------------------------------------------------------- HiveD reclaim

NODES = node_names()


def hived() -> HivedEngine:
    # a owns one rack, b the other; b's opportunistic pods fill every node.
    engine = HivedEngine.from_config(
        rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]})
    )
    for i in range(len(NODES)):
        assert schedule(engine, pod(f"o{i}", 8, "b", priority="opportunistic"), NODES) is not None
    return engine


def opportunistic_pods_on(engine: HivedEngine, node_name: str) -> set[str]:
    return {
        b.pod_uid for b in engine.allocator.bookings.values()
        if b.holds == "opportunistic" and b.node == node_name and b.pod_uid is not None
    }


def test_hived_reclaim_chooses_the_opportunistic_pods_on_the_owed_cells():
    engine = hived()
    owed = pod("g", 4, "a")
    decision = filter_offered(engine, owed, NODES)
    (node_name,) = decision.failed
    chosen = engine.select_victims(owed, {name: [] for name in NODES}, {})
    assert chosen == {node_name: engine.pending_preemptions()["g"]}
    assert chosen[node_name] and set(chosen[node_name]) <= opportunistic_pods_on(engine, node_name)
    # Offered alone and empty, the node gets the same victims.
    assert engine.select_victims(owed, {node_name: []}, {}) == chosen
    # Once they are gone the pod fits there: they freed enough.
    for uid in chosen[node_name]:
        engine.delete_pod(uid)
    assert filter_offered(engine, owed, NODES).feasible == [node_name]


def test_hived_reclaim_comes_first_under_fitgpp_on_an_empty_list():
    engine = FitGppEngine(hived(), settings=FitGppSettings())
    # Labelled best-effort: FitGpp alone would never let it preempt; HiveD's reclaim does.
    owed = pod("g", 8, "a")
    owed = PodInfo(uid=owed.uid, namespace=owed.namespace, name=owed.name, requests=owed.requests,
                   labels={**owed.labels, "cellfit.io/job-class": "best-effort"})
    (node_name,) = filter_offered(engine, owed, NODES).failed
    chosen = engine.select_victims(owed, {name: [] for name in NODES}, {})
    assert chosen == {node_name: sorted(opportunistic_pods_on(engine.inner, node_name))}


@pytest.mark.parametrize(
    "preemptor",
    [
        pytest.param(pod("late", 8, "b", priority="opportunistic"), id="opportunistic-never-preempts"),
        pytest.param(pod("cpu", 0, "a"), id="no-gpus"),
        pytest.param(pod("nobody", 8, "nobody"), id="unknown-vc"),
    ],
)
def test_hived_drops_nodes_where_it_may_reclaim_nothing(preemptor):
    engine = hived()
    assert engine.select_victims(preemptor, {name: [] for name in NODES}, {}) == {}


def test_hived_drops_a_node_whose_cells_hold_no_pod_to_delete():
    """A gang slot whose pod has left stays booked for its gang: kube-scheduler cannot delete
    it, so the node is left out rather than answered with no victims."""
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]}))
    members = [pod(f"og-{i}", 8, "b", priority="opportunistic", gang=("og", len(NODES))) for i in range(len(NODES))]
    for member in members:
        assert schedule(engine, member, NODES) is not None
    owed = pod("g", 8, "a")
    (node_name,) = filter_offered(engine, owed, NODES).failed
    [victim] = engine.select_victims(owed, {node_name: []}, {})[node_name]
    engine.delete_pod(victim)  # its gang still runs elsewhere: the slot stays, podless
    assert engine.allocator.victims(engine.allocator.by_pod["g"])  # still in the way
    assert engine.select_victims(owed, {node_name: []}, {}) == {}
