"""``kubectl cellfit why`` wording found in user24's live session (scheduler/kubectl/why.py):
kube-scheduler's counts kept where it gives several reasons (F5), the filter's gang-size advice
said once (F11), a mistake hidden behind another named too, and the change a bad value needs
said as a change (F3). The FailedScheduling messages are kube-scheduler's frame around reasons
that cellfit's own code words (gang_size_problem, parse_request through a real HiveD engine)."""

from __future__ import annotations

from typing import Any

from scheduler.cells.request import gang_size_problem
from scheduler.kubectl.objects import CellfitView, events_from, job_from, pod_from
from scheduler.kubectl.why import explain_job, explain_pod
from tests.cells.helpers import pod as engine_pod
from tests.kubectl.test_why_never_placeable import cellfit_reason, failed_scheduling


def pod_with(message: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> Any:
    body: dict[str, Any] = {
        "metadata": {"name": "train-0", "namespace": "ml", "uid": "uid-train-0",
                     "labels": labels if labels is not None else {"cellfit.io/virtual-cluster": "research"},
                     "annotations": annotations or {},
                     "ownerReferences": [{"kind": "Job", "name": "train", "uid": "uid-train"}]},
        "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}}
    event = {"reason": "FailedScheduling", "type": "Warning", "count": 1, "lastTimestamp": "2026-11-28T18:36:00Z",
             "message": message, "involvedObject": {"kind": "Pod", "name": "train-0"},
             "metadata": {"creationTimestamp": "2026-11-28T18:36:00Z"}}
    return pod_from(body, events=events_from([event]))


def test_several_reasons_on_every_node_keep_their_counts() -> None:
    message = ("0/6 nodes are available: 6 Insufficient cpu, 6 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are "
               "available: 6 No preemption victims found for incoming pod.")
    answer = explain_pod(pod_with(message), CellfitView())
    assert answer.summary == "pending: 0/6 nodes are available: 6 Insufficient cpu, 6 Insufficient nvidia.com/gpu", answer


def test_one_reason_on_every_node_is_said_without_the_counts() -> None:
    message = "0/6 nodes are available: 6 Insufficient nvidia.com/gpu. preemption: 0/6 nodes are available: 6 No victims."
    assert explain_pod(pod_with(message), CellfitView()).summary == "pending: Insufficient nvidia.com/gpu"


def test_a_gang_larger_than_the_job_runs_at_once_is_told_the_size_to_set_once() -> None:
    problem = gang_size_problem(3, parallelism=2, completions=None)
    assert problem is not None and problem.endswith("(set it to 2)")
    reason = f"gang ml/train: {problem}"
    gang_pod = pod_with(f"0/4 nodes are available: 4 {reason}.", annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "3"})
    job = job_from({"metadata": {"name": "train", "namespace": "ml", "uid": "uid-train", "annotations": {}},
                    "spec": {"suspend": False, "parallelism": 2}, "status": {}}, pods=(gang_pod,))
    answer = explain_job(job, CellfitView())
    assert answer.reason == "never-placeable", answer
    assert answer.summary == (
        "can never be placed as written: gang ml/train: annotation cellfit.io/gang-size is 3 but the Job runs at most 2 pods "
        "at once (spec.parallelism 2): the gang could never be complete (set cellfit.io/gang-size to 2, the pods the Job "
        "runs at once, or run more at once)"), answer
    assert answer.summary.count("set ") == 1


def test_a_bad_priority_says_what_to_change_and_names_the_unknown_vc_it_hid() -> None:
    reason = cellfit_reason(engine_pod("train-0", 1, vc="team-z", priority="guarenteed"))
    assert "virtual cluster" not in reason  # the filter stops at the first mistake
    pod = pod_with(str(failed_scheduling({reason: 1, "Insufficient nvidia.com/gpu": 5})["message"]),
                   labels={"cellfit.io/virtual-cluster": "team-z", "cellfit.io/priority": "guarenteed"})
    view = CellfitView(unavailable={"virtual-cluster": "cellfit does not serve /v1/inspect/virtual-clusters/team-z here: "
                                                       "no virtual cluster named 'team-z'"})
    answer = explain_pod(pod, view)
    assert answer.reason == "never-placeable", answer
    assert answer.summary == (
        f"can never be placed as written: {reason} (give label cellfit.io/priority a value it takes); and label "
        "cellfit.io/virtual-cluster: unknown virtual cluster 'team-z' (set it to a virtual cluster it may use: kubectl "
        "cellfit vcs lists them); the other nodes: 5 Insufficient nvidia.com/gpu"), answer


def test_a_known_vc_is_not_called_unknown() -> None:
    reason = cellfit_reason(engine_pod("train-0", 1, vc="a", priority="guarenteed"))
    pod = pod_with(str(failed_scheduling({reason: 4})["message"]), labels={"cellfit.io/virtual-cluster": "a",
                                                                         "cellfit.io/priority": "guarenteed"})
    answer = explain_pod(pod, CellfitView(virtual_cluster={"name": "a", "cells": []}))
    assert answer.summary == f"can never be placed as written: {reason} (give label cellfit.io/priority a value it takes)"
