"""A hold the last attempt named that the replica which answered does not keep (why23b): holds
live in each replica's memory and only the one beside the active kube-scheduler keeps pods off,
while the service proxy reaches any ready replica and says not which answered. With one replica
behind the Service its view is the one that counts and the hold is gone; with more, or where
the plugin may not list the Service's EndpointSlices, the answer says only that the replica
which answered keeps none, never that none keeps the pod off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scheduler.kubectl import cli
from scheduler.kubectl.objects import CellfitView, job_from
from scheduler.kubectl.why import explain_job, explain_pod
from tests.kubectl.test_cli import ApiServer, apiserver, config, inspect_url  # noqa: F401 - fixtures
from tests.kubectl.test_why import a_pod, event, failed_scheduling, job_json

__all__ = ["apiserver", "config", "inspect_url"]

PREEMPTOR = ("its free resources are kept for ml2/te-k-5xq2w, for which FitGpp preempted pods there "
             "(kube-scheduler nominated it to this node)")
RESUMING = "its free resources are kept for ns/be-a-x2k9q, of a best-effort Job preempted there and now resuming"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/cellfit-system/endpointslices"
UNSEEN = ("pending: the preemptor hold that kept it off the node it fits at its last attempt (its free resources kept for "
          "ml2/te-k-5xq2w) is not kept by the cellfit replica that answered: it keeps no hold for ml2/te-k-5xq2w; the last "
          "attempt named one: another replica may still keep it; kube-scheduler's next attempt says what does, if anything")


def _slices(*pods: str) -> dict[str, Any]:
    return {"items": [{"metadata": {"name": "cellfit-abcde"}, "endpoints": [
        {"addresses": [f"10.0.0.{i}"], "conditions": {"ready": True}, "targetRef": {"kind": "Pod", "name": name}}
        for i, name in enumerate(pods)]}]}


def test_two_replicas_the_answering_one_keeping_none_is_not_said_to_be_the_last_word() -> None:
    job = job_from(job_json("be-b"), pods=(a_pod("be-b-7xk2p", [failed_scheduling(PREEMPTOR, nodes=1)]),))
    answer = explain_job(job, CellfitView(resume_holds=(), replicas=2))
    assert answer.reason == "pending"
    assert answer.summary == f"pod be-b-7xk2p: {UNSEEN}"
    assert "none keeps this pod off" not in answer.summary
    assert answer.details[0].endswith("2 cellfit replicas stand behind its Service")
    assert answer.details[-1].startswith("FailedScheduling, last ")


def test_replicas_not_known_says_so() -> None:
    answer = explain_pod(a_pod("waiter", [failed_scheduling(RESUMING, nodes=1)]), CellfitView(resume_holds=(), replicas=None))
    assert answer.summary.startswith("pending: the resume hold that kept it off the node it fits at its last attempt (its "
                                     "free resources kept for ns/be-a-x2k9q) is not kept by the cellfit replica that answered")
    assert "another replica may still keep it" in answer.summary
    assert "is not known: you may not list its EndpointSlices" in answer.details[0]


def test_one_replica_its_view_decides() -> None:
    answer = explain_pod(a_pod("waiter", [failed_scheduling(PREEMPTOR, nodes=1)]), CellfitView(resume_holds=(), replicas=1))
    assert "is gone now: cellfit keeps no hold for ml2/te-k-5xq2w, so none keeps this pod off" in answer.summary


def test_a_standby_listing_the_hold_still_says_kept_off() -> None:
    holds = ({"node": "gpu-3", "job": "ml2/te-k", "requests": "nvidia.com/gpu 4", "pods": ["ml2/te-k-5xq2w"], "kind": "preemptor"},)
    answer = explain_pod(a_pod("waiter", [failed_scheduling(PREEMPTOR, nodes=1)]), CellfitView(resume_holds=holds, replicas=2))
    assert answer.reason == "preemptor-hold"


def _pending_pod(apiserver: ApiServer) -> None:
    apiserver.routes["/api/v1/namespaces/ml/pods/be-b-7xk2p"] = (200, {
        "metadata": {"name": "be-b-7xk2p", "namespace": "ml", "uid": "u1"},
        "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}})
    failed = event("FailedScheduling", f"0/1 nodes are available: 1 {PREEMPTOR}.", warning=True, name="be-b-7xk2p")
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": [failed]})


def test_through_the_plugin_two_replicas_behind_the_service(config: Path, apiserver: ApiServer) -> None:
    _pending_pod(apiserver)
    apiserver.routes[SLICES] = (200, _slices("cellfit-0", "cellfit-1"))
    out = cli.run(["why", "pod/be-b-7xk2p"])
    assert out.splitlines()[0] == f"pod/be-b-7xk2p: {UNSEEN}", out
    assert "2 cellfit replicas stand behind its Service" in out


def test_through_the_plugin_endpointslices_forbidden(config: Path, apiserver: ApiServer) -> None:
    _pending_pod(apiserver)
    apiserver.routes[SLICES] = (403, {"kind": "Status", "code": 403, "message": "endpointslices is forbidden"})
    out = cli.run(["why", "pod/be-b-7xk2p"])
    assert out.splitlines()[0] == f"pod/be-b-7xk2p: {UNSEEN}", out
    assert "you may not list its EndpointSlices" in out


def test_through_the_plugin_one_replica_behind_the_service(config: Path, apiserver: ApiServer) -> None:
    _pending_pod(apiserver)
    apiserver.routes[SLICES] = (200, _slices("cellfit-0"))
    out = cli.run(["why", "pod/be-b-7xk2p"])
    assert "is gone now: cellfit keeps no hold for ml2/te-k-5xq2w, so none keeps this pod off" in out.splitlines()[0], out
