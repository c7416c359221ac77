"""``kubectl cellfit why`` for a gang its virtual cluster cannot hold even when idle
(scheduler/kubectl/why.py): no wait ends it, so the answer says so and what to change.

Seen by hand on the local control plane: a Job of two 8-GPU pods in a VC of one 8-GPU node read
"waiting for its gang ns/gang-big (none of 2 pods placed): all its pods are placed together or
none: gang ns/gang-big needs 2 pods x 8 GPUs but virtual cluster 'gang' can hold at most 1 such
pod even when idle": "waiting" for something that never comes."""

from __future__ import annotations

from typing import Any, Mapping

from scheduler.cells import HivedEngine
from scheduler.kube.names import filter_offered
from scheduler.kubectl.objects import CellfitView, events_from, job_from, pod_from
from scheduler.kubectl.why import explain_job, explain_pod
from tests.cells.helpers import node_names, pod as engine_pod, rack_cluster


def filter_reason(*, pods: int, quota_nodes: int) -> str:
    """HiveD's one reason for a gang of ``pods`` 8-GPU pods in a VC of ``quota_nodes`` nodes."""
    engine = HivedEngine.from_config(rack_cluster(vcs={"b": [{"cellType": "V100-NODE", "count": quota_nodes}]}))
    decision = filter_offered(engine, engine_pod("big-0", 8, vc="b", gang=("big", pods)), node_names())
    (reason,) = set(decision.unresolvable.values())
    return str(reason)


def failed_scheduling(reason: str) -> Mapping[str, Any]:
    return {"reason": "FailedScheduling", "type": "Warning", "count": 1, "lastTimestamp": "2026-11-28T05:19:52Z",
            "message": f"0/8 nodes are available: 8 {reason}. preemption: 0/8 nodes are available: 8 Preemption is not helpful "
                       "for scheduling.", "involvedObject": {"kind": "Pod", "name": "big-0"},
            "metadata": {"creationTimestamp": "2026-11-28T05:19:52Z"}}


def gang_pod(reason: str, *, size: int) -> Any:
    body = {"metadata": {"name": "big-0", "namespace": "ns", "uid": "uid-big-0", "labels": {"cellfit.io/virtual-cluster": "b"},
                         "annotations": {"cellfit.io/gang": "true", "cellfit.io/gang-size": str(size)},
                         "ownerReferences": [{"kind": "Job", "name": "big", "uid": "uid-big"}]},
            "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}}
    return pod_from(body, events=events_from([failed_scheduling(reason)]))


def test_a_gang_its_vc_can_never_hold_is_told_it_never_will_and_what_to_change() -> None:
    reason = filter_reason(pods=2, quota_nodes=1)
    expected = (f"its gang ns/big can never be placed as written: {reason} (make cellfit.io/gang-size or the GPUs each pod asks "
                "for smaller, or its VC's quota larger)")
    answer = explain_pod(gang_pod(reason, size=2), CellfitView())
    assert (answer.reason, answer.summary) == ("gang", expected), answer
    job = job_from({"metadata": {"name": "big", "namespace": "ns", "uid": "uid-big", "annotations": {}},
                    "spec": {"suspend": False}, "status": {}}, pods=(gang_pod(reason, size=2),))
    assert explain_job(job, CellfitView()).summary == expected


def test_a_gang_that_fits_an_idle_vc_still_waits() -> None:
    """Its quota used by others: a wait that ends when they finish."""
    answer = explain_pod(gang_pod("virtual cluster 'b' quota exhausted at level 'V100-NODE': gang ns/big ...", size=2), CellfitView())
    assert answer.summary.startswith("waiting for its gang ns/big"), answer
