"""FitGppEngine: FitGpp's victims around a placement engine, with Job-held preemption counts."""

from __future__ import annotations

from scheduler.cells import HivedEngine
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption import FitGppSettings, NoVictims, PreemptionDecision
from scheduler.preemption.engine import FitGppEngine
from scheduler.kube.names import filter_offered

GI = 2**30
NODE = NodeInfo(name="n1", allocatable=Resources(32000, 256 * GI, 8))


def running(uid: str, *, job: str, gpus: int, cls: str = "best-effort", grace: int = 60, vc: str | None = None, node: str = "n1", priority: str | None = None) -> PodInfo:
    labels = {"cellfit.io/job-class": cls}
    if vc:
        labels["cellfit.io/virtual-cluster"] = vc
    if priority:
        labels["cellfit.io/priority"] = priority
    return PodInfo(uid=uid, namespace="ml", name=uid, requests=Resources(4000, 32 * GI, gpus), labels=labels,
                   node_name=node, phase="Running", grace_period_seconds=grace, owner=OwnerRef("Job", job, f"job-{job}"))


def te(uid: str = "te-1", gpus: int = 2, vc: str | None = None) -> PodInfo:
    labels = {"cellfit.io/job-class": "trial"}
    if vc:
        labels["cellfit.io/virtual-cluster"] = vc
    return PodInfo(uid=uid, namespace="ml", name=uid, requests=Resources(4000, 32 * GI, gpus), labels=labels, owner=OwnerRef("Job", "te", "job-te"))


def full_node(engine: FitGppEngine, **kwargs) -> None:
    engine.apply_node(NODE)
    # the long-grace BE pod scores higher than the short-grace one: FitGpp takes the cheap one
    engine.apply_pod(running("be-long", job="a", gpus=4, grace=600, **kwargs))
    engine.apply_pod(running("be-short", job="b", gpus=4, grace=30, **kwargs))


def test_trial_pod_preempts_fitgpps_victim_and_explains_it():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    full_node(engine)
    engine.apply_job(JobInfo(uid="job-b", namespace="ml", name="b"))  # seen by the watch: it resumes its pods
    choice = engine.decide_preemption(te(), {"n1": ["be-long", "be-short"]}, {})
    assert choice.victims == {"n1": ["be-short"]}
    decision = choice.decision  # the explanation travels with the choice
    assert isinstance(decision, PreemptionDecision) and decision.rule == "fitgpp" and choice.rule == "fitgpp"
    assert decision.preemptor_messages()[0].startswith("preempting ml/be-short on node n1 (score ")
    # ... and the choice tells it itself: drivers read it without knowing the decision's type.
    assert choice.explained and choice.refusal is None and choice.victim_uids == ("be-short",)
    assert choice.preemptor_messages() == decision.preemptor_messages()
    assert choice.victim_message() == decision.victim_message()
    assert decision.victim_message().startswith("preempted by ml/te-1 on node n1: the best-effort pod there cheapest to suspend")


def test_best_effort_never_preempts():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    full_node(engine)
    be = PodInfo(uid="be-new", namespace="ml", name="be-new", requests=Resources(0, 0, 2), labels={"cellfit.io/job-class": "best-effort"})
    choice = engine.decide_preemption(be, {"n1": ["be-short"]}, {})
    assert choice.victims == {}
    assert choice.refusal is not None and "never preempts" in choice.refusal
    assert not choice.explained and choice.preemptor_messages() == () and choice.victim_message() is None


def test_a_choice_without_fitgpps_decision_names_who_chose():
    from scheduler.preemption.engine import VictimChoice

    reclaim = VictimChoice(victims={"n1": ["opp-0"]}, decision=None)
    placement = VictimChoice(victims={"n1": ["opp-0"]}, decision=None, chosen_by="placement")
    assert (reclaim.rule, placement.rule) == ("reclaim", "placement")
    assert reclaim.refusal is None and not reclaim.explained and reclaim.victim_uids == ("opp-0",)


def test_trial_pods_are_never_victims():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.apply_node(NODE)
    engine.apply_pod(running("te-old", job="t", gpus=8, cls="trial"))
    choice = engine.decide_preemption(te(), {"n1": ["te-old"]}, {})
    assert choice.victims == {}
    assert isinstance(choice.decision, NoVictims)


def test_counts_come_from_jobs_and_are_raised_before_the_watch_echoes_them():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(max_preemptions=1))
    full_node(engine)
    engine.apply_job(JobInfo(uid="job-b", namespace="ml", name="b", annotations={"cellfit.io/preemptions": "1"}))
    # b is at P: the only other candidate is a
    assert engine.select_victims(te("te-1"), {"n1": ["be-long", "be-short"]}, {}) == {"n1": ["be-long"]}
    # a's count was raised by that decision, before any Job update arrives: nobody is left under P
    assert engine.select_victims(te("te-2"), {"n1": ["be-long", "be-short"]}, {}) == {}
    # a stale Job (count 0) from the watch does not lower it again
    engine.apply_job(JobInfo(uid="job-a", namespace="ml", name="a", annotations={}))
    assert engine.select_victims(te("te-3"), {"n1": ["be-long", "be-short"]}, {}) == {}


def test_guaranteed_pods_of_another_vc_are_never_victims():
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    full_node(engine, vc="speech")
    choice = engine.decide_preemption(te(vc="vision"), {"n1": ["be-long", "be-short"]}, {})
    assert choice.victims == {}
    assert "another virtual cluster" in choice.decision.reason
    engine2 = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    full_node(engine2, vc="speech", priority="opportunistic")
    assert engine2.select_victims(te(vc="vision"), {"n1": ["be-long", "be-short"]}, {}) == {"n1": ["be-short"]}


def test_placement_is_the_inner_engines_and_reservations_count():
    inner = ResourceFitEngine()
    engine = FitGppEngine(inner, settings=FitGppSettings())
    engine.apply_node(NODE)
    assert filter_offered(engine, te(gpus=8), ["n1"]).feasible == ["n1"]
    engine.reserve(running("be-x", job="x", gpus=8, node="n1"), "n1")
    assert inner.free_on("n1").gpus == 0
    assert engine.select_victims(te(gpus=8), {"n1": ["be-x"]}, {}) == {"n1": ["be-x"]}
    engine.unreserve("be-x")
    assert inner.free_on("n1").gpus == 8 and engine.stats()["preemptionCandidates"] == 0


def hived_full_of_opportunistic_pods() -> FitGppEngine:
    """FitGpp over HiveD: VCs vision and speech own one 8-GPU node each, and speech's
    opportunistic pods fill both nodes (g0, g1)."""
    nodes = [NodeInfo(name=f"g{i}", allocatable=Resources(64000, 512 * GI, 8), labels={"nvidia.com/gpu.product": "A100"}) for i in range(2)]
    hived = HivedEngine.from_config(
        {"virtualClusters": {"vision": [{"cellType": "A100-NODE", "count": 1}], "speech": [{"cellType": "A100-NODE", "count": 1}]}},
        nodes=nodes,
    )
    engine = FitGppEngine(hived, settings=FitGppSettings())
    for node in nodes:
        engine.apply_node(node)
    for i in range(2):
        pod = PodInfo(uid=f"opp-{i}", namespace="ml", name=f"opp-{i}", requests=Resources(1000, GI, 8),
                      labels={"cellfit.io/virtual-cluster": "speech", "cellfit.io/priority": "opportunistic", "cellfit.io/job-class": "best-effort"})
        placed = filter_offered(engine, pod, ["g0", "g1"]).feasible
        engine.reserve(pod, placed[0])
    return engine


def test_hived_reclaim_of_opportunistic_pods_comes_first():
    engine = hived_full_of_opportunistic_pods()
    # a best-effort guaranteed pod of vision still gets its cell back: HiveD's reclaim, not FitGpp
    owed = PodInfo(uid="vision-1", namespace="ml", name="vision-1", requests=Resources(1000, GI, 8),
                   labels={"cellfit.io/virtual-cluster": "vision", "cellfit.io/job-class": "best-effort"})
    decision = filter_offered(engine, owed, ["g0", "g1"])
    assert decision.failed, decision
    node = next(iter(decision.failed))
    chosen = engine.select_victims(owed, {node: ["opp-0", "opp-1"]}, {})
    assert len(chosen) == 1 and len(next(iter(chosen.values()))) == 1


def test_a_pod_without_a_vc_label_is_in_the_default_vc_like_one_that_names_it():
    """A best-effort Job labelled virtual-cluster: default and a trial Job with no label share
    the default VC: FitGpp may preempt one for the other (found on the e2e control plane)."""
    from scheduler.preemption.model import may_claim_cells

    named = running("be-named", job="be", gpus=8, vc="default")
    assert may_claim_cells(te(gpus=1), named)
    assert may_claim_cells(te(gpus=1, vc="default"), running("be-bare", job="bb", gpus=8))
    assert not may_claim_cells(te(gpus=1, vc="team-a"), named)
    assert not may_claim_cells(te(gpus=1), running("be-a", job="ba", gpus=8, vc="team-a"))


def test_no_second_victim_while_the_first_one_is_still_leaving():
    """kube-scheduler may drop an exited victim from its cache a moment before cellfit's watch
    does, and ask again for the same pod: cellfit waits for the victim instead of taking another
    (the cause of e2e/test_resume_queue.py's intermittent second preemption)."""
    from scheduler.core.model import PodInfo as Pod

    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings(max_preemptions=None))
    full_node(engine)
    trial = te(gpus=4)
    assert engine.select_victims(trial, {"n1": ["be-long", "be-short"]}, {}) == {"n1": ["be-short"]}
    # Asked again before the victim's deletion reached cellfit: nothing more is taken.
    choice = engine.decide_preemption(trial, {"n1": ["be-long"]}, {})
    assert choice.victims == {}
    assert "already terminating on node n1" in choice.decision.reason
    # Once it is gone, a pod that still needs room may preempt again.
    engine.delete_pod("be-short")
    engine.apply_pod(Pod(uid="te-other", namespace="ml", name="te-other", requests=Resources(4000, 32 * GI, 4),
                         labels={"cellfit.io/job-class": "best-effort"}, node_name="n1", phase="Running"))
    bigger = te(uid="te-2", gpus=4)
    assert engine.select_victims(bigger, {"n1": ["be-long", "te-other"]}, {}) != {}
