"""F6 (user24), the wiring: the preempt verb answers kube-scheduler the victims of one node, and
kube-scheduler deletes only those. A gang FitGpp takes whole has members on other nodes too;
the replica that answered marks each DisruptionTarget (reason PreemptionByScheduler, so that
its Job resumes it under an Ignore rule, as kube-scheduler marks its own victims) and deletes
it, guarded by its UID, and tells it in its Preempted Event. Before, only the answered member
went and the other kept its GPUs while its distributed job hung.

The cache and the preempt verb as ``cellfit serve`` wires them, over a recording API double
(tests/cluster/test_preemptor_record_write.py's); the gang is two 8-GPU pods of Job ml/gang on
gpu-a and gpu-b, API JSON as the watch lists it."""

from __future__ import annotations

from typing import Any

from tests.cluster.test_preemptor_record_write import BE, WritingApi, preempt, replica, trial_pod
from tests.support.kube_objects import node, pod

GANG = {"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"}


class DeletingApi(WritingApi):
    """Also records the pods deleted, in order with the writes."""

    def delete_pod(self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None) -> None:
        self.writes.append(("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", {"uid": uid}, ""))


def member(index: int, node_name: str) -> dict[str, Any]:
    body = pod(f"gang-{index}", uid=f"uid-be-{index}", gpus=8, node_name=node_name, phase="Running", priority=500,
               labels=BE, annotations=GANG, job_uid="uid-gang")
    body["metadata"]["ownerReferences"][0]["name"] = "gang"
    return body


def test_the_gangs_member_on_another_node_is_marked_and_deleted_by_the_replica_that_answered() -> None:
    api = DeletingApi(nodes=[node("gpu-a", gpus=8), node("gpu-b", gpus=8)], pods=[member(0, "gpu-a"), member(1, "gpu-b"), trial_pod()])
    cache, service, _ = replica(api)
    answer = preempt(service, cache)
    assert answer["NodeNameToMetaVictims"] == {"gpu-a": {"Pods": [{"UID": "uid-be-0"}], "NumPDBViolations": 0}}
    (status,) = [w for w in api.writes if w[0] == "PATCH" and w[1] == "/api/v1/namespaces/ml/pods/gang-1/status"]
    (condition,) = status[2]["status"]["conditions"]
    assert status[2]["metadata"] == {"uid": "uid-be-1"}
    assert (condition["type"], condition["reason"]) == ("DisruptionTarget", "PreemptionByScheduler")
    assert condition["message"].startswith("cellfit: preempted with its gang ml/gang: the trial pod ml/te-0 takes the gang's room on node "
                                           "gpu-a; this pod ran on node gpu-b and goes with every pod of the gang ml/gang (2 pods, 16 GPUs)")
    deleted = [w for w in api.writes if w[0] == "DELETE"]
    assert deleted == [("DELETE", "/api/v1/namespaces/ml/pods/gang-1", {"uid": "uid-be-1"}, "")]  # gang-0 is kube-scheduler's to delete
    assert api.writes.index(status) < api.writes.index(deleted[0])
    preempted = {e["pod_name"]: e["message"] for e in api.events if e["reason"] == "Preempted"}
    assert set(preempted) == {"gang-0", "gang-1"}
    (preempting,) = [e["message"] for e in api.events if e["reason"] == "Preempting"]
    assert preempting.startswith("preempting the gang ml/gang (2 pods, 16 GPUs) on node gpu-a and its pods on node gpu-b, "
                                 "which cellfit deletes itself (")
