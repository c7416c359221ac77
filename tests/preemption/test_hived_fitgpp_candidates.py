"""FitGpp under HiveD chooses among the victims whose preemption can help its preemptor: pods of
its own virtual cluster, or opportunistic ones, never a guaranteed pod of another VC (which
never loses its cells). Before, eq. 4 and the fallback chose over every best-effort pod and a
choice that fell on another VC's pod was refused after the fact: a trial pod stayed Pending
for good while best-effort pods of its own VC held its cells (the live session's H1).

The scene, on FitGppEngine around the real HivedEngine (production's composition): VCs vc-a
and vc-b own one 8-GPU node cell each; vc-b's best-effort Job vcb-be fills one node, vc-a's
best-effort Job be-p (2 pods x 4 GPUs) the other, and vc-a's trial pod te-x asks for 8 GPUs.
"""

from __future__ import annotations

import copy

import msgspec

from scheduler.cells import HivedEngine
from scheduler.core.model import JobInfo, OwnerRef, PodInfo
from scheduler.kube.names import filter_offered
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.cells.helpers import V100_TYPES, node, pod, schedule

NODES = ["n-a", "n-b"]
BEST_EFFORT, TRIAL = 10, 100


def engine() -> FitGppEngine:
    config = {
        "topology": {"cellTypes": copy.deepcopy(V100_TYPES), "physicalCells": [
            {"cellType": "V100-NODE", "nodeName": name} for name in NODES]},
        "virtualClusters": {vc: [{"cellType": "V100-NODE", "count": 1}] for vc in ("vc-a", "vc-b")},
    }
    made = FitGppEngine(HivedEngine.from_config(config), settings=FitGppSettings())
    for name in NODES:
        made.apply_node(node(name))
    return made


def job_pod(uid: str, gpus: int, vc: str, job: str, job_class: str, *, grace: int = 30) -> PodInfo:
    made = pod(uid, gpus, vc)
    return msgspec.structs.replace(
        made, labels={**made.labels, "cellfit.io/job-class": job_class},
        priority=TRIAL if job_class == "trial" else BEST_EFFORT,
        owner=OwnerRef(kind="Job", name=job, uid=f"uid-{job}"), grace_period_seconds=grace,
    )


def run(made: FitGppEngine, *pods: PodInfo) -> dict[str, str]:
    """Bind each pod where HiveD places it; pod UID -> node."""
    where = {}
    for p in pods:
        assert p.owner is not None
        made.apply_job(JobInfo(uid=p.owner.uid, namespace="ns", name=p.owner.name))
        placed = schedule(made, p, NODES)  # type: ignore[arg-type]
        assert placed is not None, p.uid
        made.apply_pod(placed)
        assert placed.node_name is not None
        where[p.uid] = placed.node_name
    return where


def h1() -> tuple[FitGppEngine, dict[str, str], PodInfo]:
    made = engine()
    where = run(made, job_pod("vcb-be-0", 8, "vc-b", "vcb-be", "best-effort", grace=1),
                job_pod("be-p-0", 4, "vc-a", "be-p", "best-effort", grace=600),
                job_pod("be-p-1", 4, "vc-a", "be-p", "best-effort", grace=600))
    te_x = job_pod("te-x-0", 8, "vc-a", "te-x", "trial")
    made.apply_job(JobInfo(uid="uid-te-x", namespace="ns", name="te-x"))
    made.apply_pod(te_x)
    assert filter_offered(made, te_x, NODES).feasible == []  # vc-a's quota is be-p's
    return made, where, te_x


def test_a_trial_pod_preempts_its_own_vcs_best_effort_pods_not_another_vcs() -> None:
    made, where, te_x = h1()
    choice = made.decide_preemption(te_x, {name: [] for name in NODES}, {})
    assert choice.refusal is None
    assert choice.rule == "fallback"  # neither 4-GPU pod frees 8 GPUs alone
    assert list(choice.victims) == [where["be-p-0"]]
    assert sorted(choice.victim_uids) == ["be-p-0", "be-p-1"]


def test_eq4_passes_over_another_vcs_pod_that_scores_lower() -> None:
    made = engine()
    # vc-b's pod would be eq. 4's pick (the same size, a shorter grace period): it is not a candidate.
    where = run(made, job_pod("vcb-be-0", 8, "vc-b", "vcb-be", "best-effort", grace=1),
                job_pod("be-q-0", 8, "vc-a", "be-q", "best-effort", grace=600))
    te_x = job_pod("te-x-0", 8, "vc-a", "te-x", "trial")
    made.apply_pod(te_x)
    choice = made.decide_preemption(te_x, {name: [] for name in NODES}, {})
    assert (choice.rule, choice.victims) == ("fitgpp", {where["be-q-0"]: ["be-q-0"]})
    # Eq. 3's maxima still cover every running best-effort pod: be-q has the longest grace period.
    assert choice.decision is not None and choice.decision.victims[0].grace_term == 1.0  # type: ignore[union-attr]


def test_where_only_another_vcs_pods_run_the_refusal_says_so() -> None:
    made, where, te_x = h1()
    choice = made.decide_preemption(te_x, {where["vcb-be-0"]: []}, {})
    assert choice.victims == {}
    assert choice.refusal == ("every best-effort pod on the offered nodes (ns/vcb-be-0) is a guaranteed pod of another "
                              "virtual cluster, whose cells it never loses")


def test_kubectl_cellfit_why_tells_the_refusal_beside_kube_schedulers_reason() -> None:
    """A refusal can still come (only another VC's pods on the nodes kube-scheduler offered):
    ``why`` told only the VC's quota, never that cellfit refused to preempt (the session's
    ``why job/te-x``). Its PreemptionRefused Event, as the preempt verb words it, now follows."""
    from scheduler.kubectl.objects import CellfitView, PodFacts, events_from
    from scheduler.kubectl.why import explain_pod

    made, where, te_x = h1()
    refusal = made.decide_preemption(te_x, {where["vcb-be-0"]: []}, {}).refusal
    assert refusal is not None
    quota = filter_offered(made, te_x, NODES).unresolvable[where["be-p-0"]]

    def item(reason: str, message: str, at: str) -> dict[str, object]:
        return {"reason": reason, "message": message, "type": "Normal", "count": 1, "lastTimestamp": at,
                "involvedObject": {"kind": "Pod", "name": "te-x-0"}, "metadata": {"creationTimestamp": at}}

    said = f"cellfit preempts no one for this pod: {refusal}"  # extender/service.py's words
    events = events_from([item("FailedScheduling", f"0/2 nodes are available: 2 {quota}.", "2026-11-28T05:20:06Z"),
                          item("PreemptionRefused", said, "2026-11-28T05:20:07Z")])
    facts = PodFacts(namespace="ns", name="te-x-0", phase="Pending", node=None, scheduler_name="cellfit", vc="vc-a",
                     job_class="trial", events=events)
    answer = explain_pod(facts, CellfitView())
    assert answer.reason == "quota"
    assert answer.summary.startswith("pending: virtual cluster 'vc-a' has used its quota at level 'V100-NODE'")
    assert answer.summary.endswith(f"; {said}")
    assert answer.details[-1] == f"PreemptionRefused, last 2026-11-28T05:20:07Z: {said}"
