"""``kubectl cellfit why`` for a Job whose gang annotation cellfit cannot read
(scheduler/kubectl/why.py): the answer is the mistake the filter reported, not a gang wait.

Seen by hand on the local control plane: a Job with ``cellfit.io/gang: "true"`` and
``cellfit.io/gang-size: "abc"`` was answered "waiting for its gang ns/bad: 0 of 1 pods placed,
nothing is booked yet; waiting for ...": cellfit never made it a gang, no size 1 was ever
asked for, and nothing will ever be booked for it; the user must fix the annotation."""

from __future__ import annotations

from typing import Any, Mapping

import msgspec

from scheduler.cells.request import parse_request
from scheduler.errors import InvalidAnnotation
from scheduler.kubectl.objects import CellfitView, events_from, job_from, pod_from
from scheduler.kubectl.why import explain_job
from tests.cells.helpers import pod as engine_pod


def filter_reason(gang_size: str) -> str:
    """The sentence cellfit's filter gives a gang pod with this gang-size: the request parser's."""
    gang_pod = engine_pod("bad-0", 1, vc="fit", gang=("bad", 2))
    request_pod = msgspec.structs.replace(gang_pod, annotations={**gang_pod.annotations, "cellfit.io/gang-size": gang_size})
    try:
        parse_request(request_pod)
    except InvalidAnnotation as error:
        return str(error)
    raise AssertionError(f"gang-size {gang_size!r} was accepted")


def failed_scheduling(reason: str) -> Mapping[str, Any]:
    """kube-scheduler's FailedScheduling Event when cellfit refused the one node it was offered."""
    return {"reason": "FailedScheduling", "type": "Warning", "count": 1, "lastTimestamp": "2026-11-28T05:08:47Z",
            "message": f"0/7 nodes are available: 1 {reason}, 2 Insufficient nvidia.com/gpu, 4 node(s) didn't match Pod's "
                       "node affinity/selector. preemption: 0/7 nodes are available: 7 Preemption is not helpful for scheduling.",
            "involvedObject": {"kind": "Pod", "name": "bad-x1"}, "metadata": {"creationTimestamp": "2026-11-28T05:08:47Z"}}


def pending_gang_pod(gang_size: str, events: list[Mapping[str, Any]]) -> Any:
    body = {"metadata": {"name": "bad-x1", "namespace": "ns", "uid": "uid-bad-x1",
                         "labels": {"cellfit.io/virtual-cluster": "fit"},
                         "annotations": {"cellfit.io/gang": "true", "cellfit.io/gang-size": gang_size},
                         "ownerReferences": [{"kind": "Job", "name": "bad", "uid": "uid-bad"}]},
            "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}}
    return pod_from(body, events=events_from(events))


def bad_job(gang_size: str) -> Any:
    reason = filter_reason(gang_size)
    job = {"metadata": {"name": "bad", "namespace": "ns", "uid": "uid-bad", "annotations": {}},
           "spec": {"suspend": False}, "status": {}}
    return job_from(job, pods=(pending_gang_pod(gang_size, [failed_scheduling(reason)]),)), reason


def test_a_job_whose_gang_size_does_not_read_is_told_the_mistake_not_a_gang_wait() -> None:
    job, reason = bad_job("abc")
    answer = explain_job(job, CellfitView())
    # The mistake first, though kube-scheduler counted it on 1 node of 7 (tests/kubectl/test_why_never_placeable.py).
    assert answer.reason == "never-placeable", answer
    assert answer.summary == (f"pod bad-x1: can never be placed as written: {reason} (give annotation cellfit.io/gang-size a value it takes); "
                              "the other nodes: 2 Insufficient nvidia.com/gpu, 4 node(s) didn't match Pod's node affinity/selector"), answer
    assert "waiting for its gang" not in answer.summary, answer


def test_a_gang_with_a_readable_size_still_waits_as_a_gang() -> None:
    """The check above is narrow: a readable gang-size keeps the gang's answer."""
    job = job_from({"metadata": {"name": "bad", "namespace": "ns", "uid": "uid-bad", "annotations": {}},
                    "spec": {"suspend": False}, "status": {}},
                   pods=(pending_gang_pod("2", [failed_scheduling("Insufficient cpu")]),))
    answer = explain_job(job, CellfitView())
    assert answer.reason == "gang", answer
    assert answer.summary.startswith("waiting for its gang ns/bad: 0 of 2 pods placed, nothing is booked yet"), answer
