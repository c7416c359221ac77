"""``kubectl cellfit why`` for a pod cellfit can never place as written (scheduler/kubectl/why.py):
its reason comes first, with what to change, however few nodes kube-scheduler counted it on.

kube-scheduler counts reasons per node and sorts the counts as text (FitError.Error:
``sort.Strings`` of "<count> <reason>", joined with ", "): on a cluster of 24 nodes, 20 full, the
4 it offered cellfit come last, "20 Insufficient nvidia.com/gpu, 4 unknown virtual cluster ...".
The answer used to repeat that message: the user read a wait for GPUs, which would never end in
a placement, since cellfit refuses the pod on every node until its label changes. The reasons
here are the ones a real HiveD engine gives (filter_offered), each inside the message
kube-scheduler builds around them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.cells import HivedEngine
from scheduler.core.model import JobInfo, PodInfo
from scheduler.kube.names import filter_offered
from scheduler.kubectl.objects import CellfitView, events_from, job_from, pod_from
from scheduler.kubectl.why import explain_job, explain_pod
from tests.cells.helpers import node_names, pod as engine_pod, rack_cluster

VCS = {"a": [{"cellType": "V100-NODE", "count": 2}], "b": [{"cellType": "V100-SOCKET", "count": 2}]}
# The FailedScheduling Event kube-scheduler (profile cellfit) wrote for a pod naming a VC that does
# not exist, on 24 nodes of which cellfit was offered the 4 with GPUs free; as `kubectl get events
# -o json` returns it (an events.k8s.io/v1 Event read through core/v1): text, not built by a helper.
UNKNOWN_VC_EVENT = json.loads("""{
  "apiVersion": "v1",
  "kind": "Event",
  "metadata": {"name": "train-0.187c2b9f0a3d4e21", "namespace": "ml", "uid": "5f0c1d2e-8a7b-4c3d-9e1f-2a3b4c5d6e7f",
               "resourceVersion": "90211", "creationTimestamp": "2026-11-28T08:40:12Z"},
  "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "train-0", "uid": "uid-train-0", "apiVersion": "v1",
                     "resourceVersion": "90177"},
  "reason": "FailedScheduling",
  "message": "0/24 nodes are available: 20 Insufficient nvidia.com/gpu, 4 unknown virtual cluster 'research' (known: a, b). preemption: 0/24 nodes are available: 20 No preemption victims found for incoming pod, 4 Preemption is not helpful for scheduling.",
  "source": {},
  "firstTimestamp": null,
  "lastTimestamp": null,
  "type": "Warning",
  "eventTime": "2026-11-28T08:40:12.345678Z",
  "series": {"count": 6, "lastObservedTime": "2026-11-28T08:52:40.123456Z"},
  "action": "Scheduling",
  "reportingComponent": "cellfit",
  "reportingInstance": "cellfit-kube-scheduler-7c9d8b6f5-x2k4p"
}""")
TRAIN_0 = {"metadata": {"name": "train-0", "namespace": "ml", "uid": "uid-train-0", "labels": {"cellfit.io/virtual-cluster": "research"},
                        "ownerReferences": [{"kind": "Job", "name": "train", "uid": "uid-train"}]},
           "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}}
TAINT = "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"


def cellfit_reason(pod: PodInfo, *, vcs: dict[str, Any] = VCS) -> str:
    """The one reason HiveD's filter gives ``pod`` on the 4 nodes it is offered."""
    engine = HivedEngine.from_config(rack_cluster(vcs=vcs))
    decision = filter_offered(engine, pod, node_names()[:4])
    (reason,) = set(decision.unresolvable.values())
    return str(reason)


def failed_scheduling(counts: dict[str, int]) -> dict[str, Any]:
    """kube-scheduler's FailedScheduling message (FitError.Error) for these reasons per node."""
    nodes = sum(counts.values())
    histogram = ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))
    return {"reason": "FailedScheduling", "type": "Warning", "count": 1, "lastTimestamp": "2026-11-28T08:40:12Z",
            "message": f"0/{nodes} nodes are available: {histogram}. preemption: 0/{nodes} nodes are available: {nodes} "
                       "Preemption is not helpful for scheduling.",
            "involvedObject": {"kind": "Pod", "name": "train-0"}, "metadata": {"creationTimestamp": "2026-11-28T08:40:12Z"}}


def test_an_unknown_virtual_cluster_comes_first_with_what_to_change_and_the_ordinary_counts_after() -> None:
    # The text above is cellfit's own reason for the pod, not a guess at it.
    assert "4 " + cellfit_reason(engine_pod("train-0", 8, vc="research")) in UNKNOWN_VC_EVENT["message"]
    answer = explain_pod(pod_from(TRAIN_0, events=events_from([UNKNOWN_VC_EVENT])), CellfitView())
    assert answer.reason == "never-placeable", answer
    assert answer.summary == ("can never be placed as written: unknown virtual cluster 'research' (known: a, b) (set label "
                              "cellfit.io/virtual-cluster to a virtual cluster it may use, one of those known); "
                              "the other nodes: 20 Insufficient nvidia.com/gpu"), answer
    assert answer.details == (f"FailedScheduling (6 times), last 2026-11-28T08:52:40.123456Z: {UNKNOWN_VC_EVENT['message']}",)


@pytest.mark.parametrize(("pod", "change"), [
    (engine_pod("train-0", 8, vc=None), "set label cellfit.io/virtual-cluster in the Job's pod template"),
    (engine_pod("train-0", 4, vc="b", cell_type="V100-NODE"),
     "name in annotation cellfit.io/cell-type a cell type its virtual cluster owns, or set label cellfit.io/virtual-cluster "
     "to one that owns it"),
    (engine_pod("train-0", 8, vc="b"), "ask for fewer GPUs a pod, or set label cellfit.io/virtual-cluster to a virtual "
     "cluster with larger cells"),
    (engine_pod("train-0", 16, vc="a"), "ask for fewer GPUs a pod: no node of the cluster has that many"),
    (engine_pod("train-0", 8, vc="a", cell_type="V100-SOCKET"), "ask for fewer GPUs a pod, or name a larger cell type in "
     "annotation cellfit.io/cell-type"),
    (engine_pod("train-0", 1, vc="a", cell_type="H100-NODE"), "set annotation cellfit.io/cell-type to a known cell type"),
    (engine_pod("train-0", 8, vc="a", cell_type="V100-RACK"), "name a cell type at or below the node level in annotation "
     "cellfit.io/cell-type"),
    (engine_pod("train-0", 1, vc="a", priority="urgent"), "give label cellfit.io/priority a value it takes"),
], ids=["no-vc", "vc-lacks-cell-type", "vc-cells-too-small", "no-node-that-large", "cell-type-too-small",
        "unknown-cell-type", "cell-type-above-node", "bad-priority"])
def test_each_never_placeable_reason_comes_first_behind_larger_counts(pod: PodInfo, change: str) -> None:
    reason = cellfit_reason(pod)
    event = failed_scheduling({"Insufficient nvidia.com/gpu": 20, TAINT: 3, reason: 4})
    assert event["message"].index(reason) > event["message"].index(TAINT)  # kube-scheduler's order hides it
    answer = explain_pod(pod_from(TRAIN_0, events=events_from([event])), CellfitView())
    assert (answer.reason, answer.summary) == (
        "never-placeable",
        f"can never be placed as written: {reason} ({change}); the other nodes: 20 Insufficient nvidia.com/gpu, 3 {TAINT}"), answer


def test_a_gang_its_vc_can_never_hold_is_its_jobs_answer_before_the_ordinary_counts() -> None:
    reason = cellfit_reason(engine_pod("big-0", 8, vc="a", gang=("big", 3)))
    body = json.loads(json.dumps(TRAIN_0))
    body["metadata"]["annotations"] = {"cellfit.io/gang": "true", "cellfit.io/gang-size": "3"}
    gang_pod = pod_from(body, events=events_from([failed_scheduling({"Insufficient nvidia.com/gpu": 20, reason: 4})]))
    job = job_from({"metadata": {"name": "train", "namespace": "ml", "uid": "uid-train", "annotations": {}},
                    "spec": {"suspend": False}, "status": {}}, pods=(gang_pod,))
    answer = explain_job(job, CellfitView())
    assert (answer.reason, answer.summary) == (
        "gang",
        f"its gang ns/big can never be placed as written: {reason} (make cellfit.io/gang-size or the GPUs each pod asks for "
        "smaller, or its VC's quota larger); the other nodes: 20 Insufficient nvidia.com/gpu"), answer


def test_ordinary_counts_alone_keep_kube_schedulers_message() -> None:
    event = failed_scheduling({"Insufficient nvidia.com/gpu": 20, "Insufficient cpu": 4})
    answer = explain_pod(pod_from(TRAIN_0, events=events_from([event])), CellfitView())
    assert answer.reason == "pending", answer
    assert answer.summary == "pending: 0/24 nodes are available: 20 Insufficient nvidia.com/gpu, 4 Insufficient cpu", answer


def test_a_reason_cut_off_the_event_is_read_from_the_pods_condition() -> None:
    # kube-scheduler cuts a FailedScheduling Event's message at 1024 bytes (NoteLengthLimit,
    # " ..."), and writes it whole into the PodScheduled condition: on a cluster of many node
    # pools, each with its own taint, cellfit's reason, sorted last, is past the cut.
    reason = cellfit_reason(engine_pod("train-0", 8, vc="research"))
    taints = {f"node(s) had untolerated taint {{pool.example.com/team-{team:02d}: reserved}}": 20 for team in range(16)}
    whole = failed_scheduling({**taints, reason: 4})["message"]
    assert len(whole) > 1024 and whole.index(reason) > 1024 - len(" ...")
    event = failed_scheduling({**taints, reason: 4}) | {"message": whole[:1024 - len(" ...")] + " ..."}
    body = json.loads(json.dumps(TRAIN_0))
    body["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": whole,
                                     "lastProbeTime": None, "lastTransitionTime": "2026-11-28T08:40:12Z"}]
    answer = explain_pod(pod_from(body, events=events_from([event])), CellfitView())
    assert answer.reason == "never-placeable", answer
    assert answer.summary.startswith(f"can never be placed as written: {reason} (set label cellfit.io/virtual-cluster"), answer
    # Without the condition (an older pod, or one kube-scheduler has not updated): the Event as it is.
    assert explain_pod(pod_from(TRAIN_0, events=events_from([event])), CellfitView()).reason == "pending"


def test_a_gang_its_job_can_never_complete_or_of_mixed_gpu_counts_comes_first() -> None:
    engine = HivedEngine.from_config(rack_cluster(vcs=VCS))
    engine.apply_job(JobInfo(uid="uid-big", namespace="ns", name="big", parallelism=2))
    first = engine_pod("big-0", 4, vc="a", gang=("big", 4))
    engine.apply_pod(first)
    (too_wide,) = set(filter_offered(engine, first, node_names()[:4]).unresolvable.values())
    engine.apply_job(JobInfo(uid="uid-big", namespace="ns", name="big", parallelism=4))
    assert len(filter_offered(engine, first, node_names()[:4]).feasible) == 1  # its gang booked
    (mixed,) = set(filter_offered(engine, engine_pod("big-1", 2, vc="a", gang=("big", 4)), node_names()[:4]).unresolvable.values())
    # The filter's own "(set it to 2)" is said once, within the change.
    assert too_wide.endswith(" (set it to 2)")
    for reason, told, change in (
            (too_wide, too_wide.removesuffix(" (set it to 2)"),
             "set cellfit.io/gang-size to 2, the pods the Job runs at once, or run more at once"),
            (mixed, mixed, "give every pod of the gang the same GPU count")):
        event = failed_scheduling({"Insufficient nvidia.com/gpu": 20, reason: 4})
        answer = explain_pod(pod_from(TRAIN_0, events=events_from([event])), CellfitView())
        assert (answer.reason, answer.summary) == (
            "never-placeable", f"can never be placed as written: {told} ({change}); the other nodes: 20 Insufficient nvidia.com/gpu")
