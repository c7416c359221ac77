"""``kubectl cellfit why``'s answers (scheduler/kubectl/why.py): facts in, one line out.

The objects are JSON as the API server returns them, read by the plugin's own parsers; the
views of virtual clusters and the filter reasons come from a real HiveD engine driven into
each situation; the event messages are cellfit's and kube-scheduler's own formats."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.cells import HivedEngine
from scheduler.kubectl.objects import (
    CellfitView,
    Facts,
    PodFacts,
    events_from,
    job_from,
    job_pod_name,
    pod_from,
    preemption_from,
)
from scheduler.kubectl.why import Answer, explain, explain_job, explain_pod
from scheduler.preemption.fitgpp import PreemptionDecision
from tests.cells.helpers import node_names, pod as engine_pod, rack_cluster, schedule
from scheduler.kube.names import filter_offered

NODES = node_names()
T0 = "2026-11-26T12:00:00Z"


def failed_scheduling(reason: str, *, nodes: int = 8, at: str = T0, count: int = 1) -> dict[str, Any]:
    """kube-scheduler's FailedScheduling event when cellfit gave every node ``reason``."""
    return event("FailedScheduling", f"0/{nodes} nodes are available: {nodes} {reason}. preemption: 0/{nodes} nodes are "
                 f"available: {nodes} No preemption victims found for incoming pod.", at=at, count=count, warning=True)


def event(reason: str, message: str, *, at: str = T0, count: int = 1, warning: bool = False, name: str = "x") -> dict[str, Any]:
    return {"reason": reason, "message": message, "type": "Warning" if warning else "Normal", "count": count,
            "lastTimestamp": at, "involvedObject": {"kind": "Pod", "name": name}, "metadata": {"creationTimestamp": at}}


def pod_json(name: str, *, node: str | None = None, phase: str = "Pending", vc: str | None = None, gang: int | None = None,
             gates: tuple[str, ...] = (), scheduler: str = "cellfit", deleting: bool = False, job: str | None = None) -> dict[str, Any]:
    labels = {"cellfit.io/virtual-cluster": vc} if vc else {}
    annotations = {"cellfit.io/gang": "true", "cellfit.io/gang-size": str(gang)} if gang else {}
    spec: dict[str, Any] = {"schedulerName": scheduler}
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels, "annotations": annotations}
    if deleting:
        meta["deletionTimestamp"] = T0
    if job:
        meta["ownerReferences"] = [{"kind": "Job", "name": job, "uid": f"uid-{job}"}]
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def job_json(name: str, *, suspend: bool = False, annotations: dict[str, str] | None = None,
             conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "annotations": annotations or {}},
            "spec": {"suspend": suspend}, "status": {"conditions": conditions or []}}


def a_pod(name: str, events: list[dict[str, Any]] = (), **kwargs: Any) -> PodFacts:  # type: ignore[assignment]
    return pod_from(pod_json(name, **kwargs), events=events_from(list(events)))


# ------------------------------------------------------------------------------ HiveD situations


@pytest.fixture
def full_vc() -> tuple[HivedEngine, str]:
    """VC "a" (one node cell) full with ns/a-0; the reason filter gives the next 8-GPU pod."""
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 1}],
                                                       "b": [{"cellType": "V100-NODE", "count": 2}]}))
    assert schedule(engine, engine_pod("a-0", 8), NODES) is not None
    reasons = set(filter_offered(engine, engine_pod("a-1", 8), NODES).unresolvable.values())
    assert len(reasons) == 1
    return engine, reasons.pop()


def test_quota_blocked_pod_names_the_vc_the_level_and_who_holds_it(full_vc: tuple[HivedEngine, str]) -> None:
    engine, reason = full_vc
    view = CellfitView(virtual_cluster=engine.inspect_virtual_cluster("a"))
    answer = explain(Facts(pod=a_pod("a-1", [failed_scheduling(reason)], vc="a"), cellfit=view))
    assert answer.reason == "quota"
    assert answer.summary == ("pending: virtual cluster 'a' has used its quota at level 'V100-NODE' "
                              "(1 of 1 'V100-NODE' cells bound, held by ns/a-0)")
    assert "r0n0: ns/a-0" in answer.details
    assert any("quota exhausted" in line for line in answer.details)  # the record it came from


def test_quota_holders_beyond_four_are_counted_not_listed() -> None:
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-SWITCH", "count": 6}]}))
    for index in range(6):
        assert schedule(engine, engine_pod(f"p{index}", 2), NODES) is not None
    reason = set(filter_offered(engine, engine_pod("late", 2), NODES).unresolvable.values()).pop()
    answer = explain_pod(a_pod("late", [failed_scheduling(reason)], vc="a"),
                         CellfitView(virtual_cluster=engine.inspect_virtual_cluster("a")))
    assert answer.reason == "quota"
    assert "6 of 6 'V100-SWITCH' cells bound" in answer.summary
    assert answer.summary.endswith("held by ns/p0, ns/p1, ns/p2, ns/p3 and 2 more)")


def test_quota_without_cellfits_view_still_says_which_vc_and_level(full_vc: tuple[HivedEngine, str]) -> None:
    _, reason = full_vc
    view = CellfitView(unavailable={"virtual-cluster": "no virtual cluster named 'a'"})
    answer = explain_pod(a_pod("a-1", [failed_scheduling(reason)], vc="a"), view)
    assert answer.reason == "quota"
    assert answer.summary == "pending: virtual cluster 'a' has used its quota at level 'V100-NODE' (no virtual cluster named 'a')"


def test_latest_failed_scheduling_event_decides(full_vc: tuple[HivedEngine, str]) -> None:
    engine, reason = full_vc
    older = failed_scheduling("Insufficient cpu", at="2026-11-26T11:00:00Z")
    newer = failed_scheduling(reason, at="2026-11-26T11:30:00Z", count=7)
    answer = explain_pod(a_pod("a-1", [newer, older], vc="a"), CellfitView(virtual_cluster=engine.inspect_virtual_cluster("a")))
    assert answer.reason == "quota"
    assert answer.details[-1].startswith("FailedScheduling (7 times), last 2026-11-26T11:30:00Z: 0/8 nodes are available")


def test_gang_that_cannot_fit_even_when_idle_is_told_it_never_will() -> None:
    engine = HivedEngine.from_config(rack_cluster(vcs={"b": [{"cellType": "V100-NODE", "count": 2}]}))
    reason = set(filter_offered(engine, engine_pod("g-0", 8, vc="b", gang=("big", 3)), NODES).unresolvable.values()).pop()
    answer = explain_pod(a_pod("g-0", [failed_scheduling(reason)], vc="b", gang=3),
                         CellfitView(virtual_cluster=engine.inspect_virtual_cluster("b")))
    assert answer.reason == "gang"
    assert answer.summary == ("its gang ns/big can never be placed as written: gang ns/big needs 3 pods x 8 GPUs but virtual "
                              "cluster 'b' can hold at most 2 such pods even when idle (make cellfit.io/gang-size or the GPUs each "
                              "pod asks for smaller, or its VC's quota larger)")


def test_gang_with_booked_slots_waits_for_its_members() -> None:
    """The first pod of a 2-pod gang is placed and books the other slot; the second pod has not
    been tried (its scheduling gate): the Job waits for its member, with its slot kept."""
    engine = HivedEngine.from_config(rack_cluster(vcs={"b": [{"cellType": "V100-NODE", "count": 2}]}))
    first = schedule(engine, engine_pod("train-0", 8, vc="b", gang=("train", 2)), NODES)
    assert first is not None
    view = CellfitView(virtual_cluster=engine.inspect_virtual_cluster("b"))
    pods = (a_pod("train-0", vc="b", gang=2, node=first.node_name, phase="Running"),
            a_pod("train-1", vc="b", gang=2, gates=("example.com/wait",)))
    job = job_from(job_json("train"), pods=pods)
    answer = explain_job(job, view)
    assert answer.reason == "gang"
    assert answer.summary == ("waiting for its gang ns/train: 1 of 2 pods placed, its other slots are booked; waiting for "
                              "train-1: waiting for its scheduling gates to be removed: example.com/wait "
                              "(kube-scheduler does not try it before)")


def test_resume_hold_names_the_node_and_the_pod_it_keeps_room_for() -> None:
    message = "its free resources are kept for ns/be-victim-x2k9q, of a best-effort Job preempted there and now resuming"
    holds = ({"node": "gpu-3", "job": "ns/be-victim", "requests": "cpu 1, memory 0, nvidia.com/gpu 4",
              "pods": ["ns/be-victim-x2k9q"]},)
    answer = explain_pod(a_pod("waiter", [failed_scheduling(message, nodes=1)]), CellfitView(resume_holds=holds))
    assert answer.reason == "resume-hold"
    assert answer.summary == ("kept off node gpu-3 by a resume hold: its free resources are kept for ns/be-victim-x2k9q of "
                              "Job ns/be-victim, a preempted best-effort Job resuming (until that pod is bound, at most "
                              "preemption.resumeHoldSeconds)")
    assert answer.details[0] == "hold on gpu-3: cpu 1, memory 0, nvidia.com/gpu 4 for ns/be-victim-x2k9q"


def test_preemptor_hold_says_which_pod_the_room_is_kept_for() -> None:
    message = ("its free resources are kept for ns/te-probe-x1, for which FitGpp preempted pods there "
               "(kube-scheduler nominated it to this node)")
    holds = ({"node": "gpu-3", "job": "ns/te-probe", "requests": "cpu 1, memory 0, nvidia.com/gpu 4",
              "pods": ["ns/te-probe-x1"], "kind": "preemptor"},)
    for view in (CellfitView(resume_holds=holds), CellfitView()):  # the message alone says it too
        answer = explain_pod(a_pod("waiter", [failed_scheduling(message, nodes=1)]), view)
        assert answer.reason == "preemptor-hold"
        assert "by a preemptor hold: its free resources are kept for ns/te-probe-x1, for which FitGpp" in answer.summary


def test_resume_hold_among_other_reasons_is_still_found() -> None:
    message = ("0/3 nodes are available: 1 its free resources are kept for ns/r-abcde, of a best-effort Job preempted "
               "there and now resuming, 2 node(s) didn't match Pod's node affinity/selector.")
    answer = explain_pod(a_pod("waiter", [event("FailedScheduling", message, warning=True)]), CellfitView())
    assert answer.reason == "resume-hold"
    assert "kept off the node it fits by a resume hold" in answer.summary


def test_other_failure_is_reported_as_kube_scheduler_said() -> None:
    message = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {a: b}."
    answer = explain_pod(a_pod("p", [event("FailedScheduling", message, warning=True)]), CellfitView())
    assert answer == Answer(reason="pending", summary=f"pending: {message.rstrip('.')}", details=answer.details)


@pytest.mark.parametrize(
    ("pod", "reason", "summary"),
    [
        (dict(node="gpu-1", phase="Running"), "running", "running on node gpu-1"),
        (dict(node="gpu-1"), "running", "bound to node gpu-1 (Pending)"),
        (dict(phase="Succeeded", node="gpu-1"), "complete", "ended: phase Succeeded"),
        (dict(phase="Failed", node="gpu-1"), "failed", "ended: phase Failed"),
        (dict(deleting=True, node="gpu-1", phase="Running"), "terminating", "terminating (deleted, in its grace period)"),
        (dict(gates=("a", "b")), "gated", "waiting for its scheduling gates to be removed: a, b (kube-scheduler does not try it before)"),
        (dict(scheduler="default-scheduler"), "not-cellfit", "not scheduled by cellfit: spec.schedulerName is default-scheduler"),
        (dict(), "pending", "pending; cellfit has not reported an attempt yet"),
    ],
)
def test_pod_states(pod: dict[str, Any], reason: str, summary: str) -> None:
    answer = explain_pod(a_pod("p", **pod), CellfitView())
    assert (answer.reason, answer.summary) == (reason, summary)


# ------------------------------------------------------------------------------ preemption


def preemption_events(victim: str, preemptor: str, node: str, breakdown: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two events cellfit writes, in the formats of scheduler/preemption/fitgpp.py."""
    return (event("Preempted", f"preempted by {preemptor}", warning=True, name=victim.split("/")[1]),
            event("Preempting", f"preempting {victim} on node {node} ({breakdown})", name=preemptor.split("/")[1]))


def test_messages_parsed_are_the_ones_fitgpp_writes() -> None:
    """The parser follows FitGpp's own wording: read it from the decision that writes it."""
    import inspect as source
    text = source.getsource(PreemptionDecision)
    assert 'f"preempting {self._named(victim)} on node {self.node}{_rest_of_gang(victim, self.node)} "' in text
    assert 'f"({prefix}{victim.explain(grace_period_weight=weight)})"' in text
    assert 'head = f"preempted by {self.preemptor_key} on node {self.node}"' in text


def test_preempted_job_says_by_whom_where_the_score_and_how_often() -> None:
    breakdown = "score 0.31 = size 0.12 + 4.0 x GP 0.05"
    preempted, preempting = preemption_events("ns/be-cheap-7xk2p", "ns/te-probe-q8w3z", "gpu-7", breakdown)
    found = preemption_from(victim="ns/be-cheap-7xk2p", preempted=events_from([preempted])[0],
                            preemptor_events=events_from([preempting]))
    assert (found.by, found.node, found.breakdown) == ("ns/te-probe-q8w3z", "gpu-7", breakdown)
    holds = ({"node": "gpu-7", "job": "ns/other", "requests": "nvidia.com/gpu 4", "pods": ["ns/other-abcde"]},)
    waiting = failed_scheduling("its free resources are kept for ns/other-abcde, of a best-effort Job preempted there "
                                "and now resuming", nodes=1)
    job = job_from(job_json("be-cheap", annotations={"cellfit.io/preemptions": "1"}),
                   pods=(a_pod("be-cheap-n3w9x", [waiting]),), preemptions=(found,))
    answer = explain_job(job, CellfitView(resume_holds=holds))
    assert answer.reason == "preempted"
    assert answer.summary.startswith(f"preempted 1 time, last by ns/te-probe-q8w3z on node gpu-7 ({breakdown}); now pod "
                                     "be-cheap-n3w9x: kept off node gpu-7 by a resume hold")
    assert answer.details[0] == f"ns/be-cheap-7xk2p preempted by ns/te-probe-q8w3z on node gpu-7 ({breakdown}) at {T0}"


def test_kube_schedulers_own_preempted_event_names_the_node_and_the_preemptors_uid() -> None:
    """kube-scheduler writes a Preempted event of its own on the victim; alone (cellfit's lost),
    it still tells where and by which pod."""
    theirs = event("Preempted", "Preempted by pod 0f1e2d3c-aaaa-bbbb on node gpu-7", warning=True)
    found = preemption_from(victim="ns/be-abcde", preempted=events_from([theirs])[0], preemptor_events=())
    assert (found.by, found.node, found.breakdown) == ("pod 0f1e2d3c-aaaa-bbbb", "gpu-7", None)


def test_preempted_job_resumed_and_running() -> None:
    job = job_from(job_json("be", annotations={"cellfit.io/preemptions": "2"}),
                   pods=(a_pod("be-abcde", node="gpu-2", phase="Running"),))
    answer = explain_job(job, CellfitView())
    assert answer.reason == "preempted"
    assert answer.summary == "preempted 2 times; now running: 1 pod on gpu-2"


def test_preemptor_event_gone_leaves_the_preemptor_named() -> None:
    preempted, _ = preemption_events("ns/be-abcde", "ns/te-fghij", "n", "score 1.00 = size 0.50 + 4.0 x GP 0.12")
    found = preemption_from(victim="ns/be-abcde", preempted=events_from([preempted])[0], preemptor_events=())
    job = job_from(job_json("be"), pods=(), preemptions=(found,))
    assert explain_job(job, CellfitView()).summary.startswith("preempted 1 time, last by ns/te-fghij; now ")


def test_a_pod_of_a_preempted_job_tells_the_preemption_first() -> None:
    job = job_from(job_json("be", annotations={"cellfit.io/preemptions": "1"}))
    answer = explain(Facts(pod=a_pod("be-abcde", node="gpu-2", phase="Running"), job=job))
    assert (answer.reason, answer.summary) == ("preempted", "preempted 1 time; now running on node gpu-2")


def test_preempted_pods_are_told_by_their_names() -> None:
    assert job_pod_name("be", "be-x2k9q") and job_pod_name("be", "be-3-x2k9q")
    assert not job_pod_name("be", "be-cheap-x2k9q") and not job_pod_name("be", "bex2k9q") and not job_pod_name("be", "be-x2k9")


# ------------------------------------------------------------------------------ interchangeable Jobs

CONFIGURATIONS = json.dumps({"cpu": {"resources": {"cpu": "4"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}})
ESTIMATE = {"cpu": {"seconds": 101.0, "uncertaintySeconds": 2.0, "method": "samples"},
            "gpu": {"seconds": 27.0, "uncertaintySeconds": 1.0, "method": "samples"}}


def interchangeable(*, suspend: bool = True, placement: str | None = None, conditions: list[dict[str, str]] = (),  # type: ignore[assignment]
                    estimate: bool = False) -> dict[str, Any]:
    annotations = {"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "500"}
    if placement:
        annotations["cellfit.io/placement"] = placement
    if estimate:
        annotations["cellfit.io/estimate"] = json.dumps(ESTIMATE)
    return job_json("ij", suspend=suspend, annotations=annotations, conditions=list(conditions))


def test_estimating_names_its_samples() -> None:
    entry = {"namespace": "ns", "name": "ij", "state": "sampling", "message": "", "samples": [
        {"pod": "ij-sample-cpu-1", "configuration": "cpu", "length": "short", "state": "succeeded", "iterations": 5, "seconds": 1.2},
        {"pod": "ij-sample-cpu-2", "configuration": "cpu", "length": "long", "state": "running"},
        {"pod": "ij-sample-gpu-1", "configuration": "gpu", "length": "short", "state": "failed", "failure": "OOMKilled"},
    ]}
    answer = explain_job(job_from(interchangeable()), CellfitView(estimator_entry=entry))
    assert answer.reason == "estimating"
    assert answer.summary == ("estimating: 1 of 3 samples done; running cpu long (ij-sample-cpu-2); "
                              "failed gpu short (ij-sample-gpu-1: OOMKilled)")


def test_estimating_waits_for_room() -> None:
    entry = {"namespace": "ns", "name": "ij", "state": "waiting-for-capacity", "message": "sampling pods hold 10% of GPUs", "samples": []}
    answer = explain_job(job_from(interchangeable()), CellfitView(estimator_entry=entry))
    assert answer.summary == "estimating: waiting for room for its sampling pods (estimator.maxClusterShare)"
    assert answer.details[0] == "sampling pods hold 10% of GPUs"


def test_estimator_not_running() -> None:
    view = CellfitView(unavailable={"estimates": "cellfit does not serve /v1/inspect/estimates here: the estimator is not running"})
    answer = explain_job(job_from(interchangeable()), view)
    assert answer.reason == "not-estimated"
    assert answer.summary.endswith("the estimator is not running")


@pytest.mark.parametrize("why", ["InvalidSpec", "SamplingFailed"])
def test_not_estimated_says_the_condition(why: str) -> None:
    condition = {"type": "Estimated", "status": "False", "reason": why, "message": "cpu: sampling failed after 3 attempts"}
    answer = explain_job(job_from(interchangeable(conditions=[condition])), CellfitView())
    assert (answer.reason, answer.summary) == ("not-estimated", f"not estimated ({why}): cpu: sampling failed after 3 attempts")


def test_queued_by_allox_with_position_and_expected_start() -> None:
    conditions = [{"type": "Estimated", "status": "True", "reason": "Estimated", "message": ""},
                  {"type": "Placed", "status": "False", "reason": "Queued", "message": "2nd on gpu, expected start in ~12 min (AlloX)"}]
    entry = {"job": "ns/ij", "kind": "gpu", "position": 2, "expectedStartSeconds": 722.0}
    answer = explain_job(job_from(interchangeable(conditions=conditions, estimate=True)), CellfitView(allox_entry=entry))
    assert answer.reason == "allox-queue"
    assert answer.summary == "queued by AlloX: 2nd on gpu, expected start in ~12 min"
    assert answer.details[:2] == ("estimate cpu: 101 s ± 2 s (samples)", "estimate gpu: 27 s ± 1 s (samples)")


@pytest.mark.parametrize(("position", "starts_with", "said"), [
    (2, 1, "2nd on cpu, starting together with the 1st"),
    (4, 2, "4th on cpu, starting together with the 2nd and 3rd"),
    (3, 3, "3rd on cpu"),
])
def test_a_queued_job_starting_with_earlier_ones_says_so(position: int, starts_with: int, said: str) -> None:
    """"2nd on cpu" alone reads as "after the 1st" where machines free together (the inspect
    API's ``startsWith``, the first position expected at this Job's time)."""
    entry = {"job": "ns/ij", "kind": "cpu", "position": position, "startsWith": starts_with, "expectedStartSeconds": 60.0}
    answer = explain_job(job_from(interchangeable(estimate=True)), CellfitView(allox_entry=entry))
    assert answer.summary == f"queued by AlloX: {said}, expected start in ~1 min or less"


def test_a_user_estimate_needs_no_estimated_condition_to_be_queued() -> None:
    """A user-set cellfit.io/estimate means nothing is sampled, and no Estimated condition is
    written: AlloX's queue still holds the Job (seen on the local control plane)."""
    job = job_from(interchangeable(estimate=True))
    entry = {"job": "ns/ij", "kind": "cpu", "position": 1, "expectedStartSeconds": 95.0}
    assert explain_job(job, CellfitView(allox_entry=entry)).summary == "queued by AlloX: 1st on cpu, expected start in ~95 s"
    assert explain_job(job, CellfitView()).summary == "estimated; waiting for AlloX's next decision"
    assert explain_job(job_from(interchangeable()), CellfitView()).reason == "estimating"  # no estimate at all


def test_queued_by_allox_from_the_condition_when_the_queue_does_not_list_it() -> None:
    conditions = [{"type": "Estimated", "status": "True"},
                  {"type": "Placed", "status": "False", "reason": "WaitingForQuota", "message": "waiting for a GPU of virtual cluster 'a'"}]
    answer = explain_job(job_from(interchangeable(conditions=conditions)), CellfitView())
    assert answer.summary == "queued by AlloX (WaitingForQuota): waiting for a GPU of virtual cluster 'a'"


def test_running_on_cpu_instead_of_gpu_gives_the_estimates_and_allox_reason() -> None:
    conditions = [{"type": "Estimated", "status": "True"},
                  {"type": "Placed", "status": "True", "reason": "Started",
                   "message": "running on cpu: AlloX chose cpu (estimated 101 s; gpu 27 s) because no GPU was free for it, the first expected free in 9 min"}]
    job = job_from(interchangeable(suspend=False, placement="cpu", conditions=conditions, estimate=True),
                   pods=(a_pod("ij-abcde", node="cpu-1", phase="Running"),))
    answer = explain_job(job, CellfitView())
    assert answer.reason == "cpu-instead-of-gpu"
    assert answer.summary == "on CPU instead of GPU: AlloX chose cpu (estimated 101 s; gpu 27 s) because no GPU was free for it, the first expected free in 9 min"
    assert answer.details == ("estimate cpu: 101 s ± 2 s (samples)", "estimate gpu: 27 s ± 1 s (samples)", "now: running: 1 pod on cpu-1")


def test_a_pod_of_a_job_on_cpu_says_so() -> None:
    conditions = [{"type": "Placed", "status": "True", "reason": "Started", "message": "running on cpu: AlloX chose cpu"}]
    job = job_from(interchangeable(suspend=False, placement="cpu", conditions=conditions, estimate=True))
    answer = explain(Facts(pod=a_pod("ij-abcde", node="cpu-1", phase="Running"), job=job))
    assert (answer.reason, answer.summary) == ("cpu-instead-of-gpu", "on CPU instead of GPU: AlloX chose cpu")
    assert answer.details[-1] == "now: running on node cpu-1"


@pytest.mark.parametrize(("message", "summary"), [
    ("running on cpu", "on CPU instead of GPU: AlloX chose cpu"),
    ("running on cpu: unsuspended by its user, not by AlloX (the kind its pod template asks for)",
     "on CPU instead of GPU: unsuspended by its user, not by AlloX (the kind its pod template asks for)"),
])
def test_a_job_on_cpu_says_the_kind_once(message: str, summary: str) -> None:
    conditions = [{"type": "Placed", "status": "True", "reason": "Started", "message": message}]
    job = job_from(interchangeable(suspend=False, placement="cpu", conditions=conditions, estimate=True),
                   pods=(a_pod("ij-abcde", node="cpu-1", phase="Running"),))
    assert explain_job(job, CellfitView()).summary == summary


def test_placed_on_gpu_is_just_running() -> None:
    job = job_from(interchangeable(suspend=False, placement="gpu"), pods=(a_pod("ij-abcde", node="g", phase="Running"),))
    assert explain_job(job, CellfitView()).reason == "running"


# ------------------------------------------------------------------------------ plain Jobs


@pytest.mark.parametrize(
    ("condition", "summary"),
    [({"type": "Complete", "status": "True"}, "completed"),
     ({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"},
      "failed: Job has reached the specified backoff limit")],
)
def test_finished_jobs(condition: dict[str, str], summary: str) -> None:
    assert explain_job(job_from(job_json("j", conditions=[condition])), CellfitView()).summary == summary


def test_suspended_plain_job() -> None:
    answer = explain_job(job_from(job_json("j", suspend=True)), CellfitView())
    assert answer.reason == "suspended"


def test_job_without_pods_yet() -> None:
    assert explain_job(job_from(job_json("j")), CellfitView()).reason == "pending"


def test_job_with_several_pending_pods_explains_the_first_and_counts_the_rest(full_vc: tuple[HivedEngine, str]) -> None:
    engine, reason = full_vc
    pods = tuple(a_pod(f"j-{i}", [failed_scheduling(reason)], vc="a") for i in range(3))
    answer = explain_job(job_from(job_json("j"), pods=pods), CellfitView(virtual_cluster=engine.inspect_virtual_cluster("a")))
    assert answer.reason == "quota"
    assert answer.summary.startswith("pod j-0: pending: virtual cluster 'a' has used its quota")
    assert answer.summary.endswith("(and 2 more pending pods)")


def test_running_job_lists_its_nodes() -> None:
    pods = tuple(a_pod(f"j-{i}", node=f"gpu-{i % 2}", phase="Running") for i in range(3))
    assert explain_job(job_from(job_json("j"), pods=pods), CellfitView()).summary == "running: 3 pods on gpu-0, gpu-1"


def test_facts_without_an_object_are_a_programming_error() -> None:
    with pytest.raises(ValueError):
        explain(Facts())


def test_estimate_annotation_that_is_not_json_explains_less_but_answers() -> None:
    job = job_from(job_json("j", annotations={"cellfit.io/estimate": "{nope", "cellfit.io/preemptions": "x"}))
    assert job.estimate is None and job.preemption_count == 0
    assert explain_job(job, CellfitView()).reason == "pending"


def test_answer_as_dict_for_scripts() -> None:
    answer = Answer(reason="quota", summary="s", details=("a", "b"))
    assert answer.as_dict() == {"reason": "quota", "summary": "s", "details": ["a", "b"]}


def test_why_is_pure() -> None:
    """why.py, objects.py and wording.py import nothing that does I/O (the house rule for the
    pure core; facts.py and api.py do the reading)."""
    import ast
    from pathlib import Path

    for module in ("why", "objects", "wording", "views", "output"):
        tree = ast.parse((Path(__file__).resolve().parents[2] / "scheduler" / "kubectl" / f"{module}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
            a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in imported if m and (m.split(".")[0] in ("kubernetes", "urllib3", "httpx", "socket", "time", "os")
                                                 or m in ("scheduler.kubectl.api", "scheduler.kubectl.facts"))}, (module, imported)
