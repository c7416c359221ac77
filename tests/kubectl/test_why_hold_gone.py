"""A hold the pod's last FailedScheduling names that cellfit no longer keeps (live session M4:
after a restart, once the trial pod ran and /v1/inspect/resume-holds was [], ``why job/be-b``
still said "kept off the node it fits by a preemptor hold: its free resources are kept for
ml2/te-k-…"). The live view decides; the message alone speaks only where the view is not read."""

from __future__ import annotations

from pathlib import Path

from scheduler.kubectl import cli
from scheduler.kubectl.objects import CellfitView, job_from
from scheduler.kubectl.why import explain_job, explain_pod
from tests.kubectl.test_cli import ApiServer, apiserver, config, inspect_url  # noqa: F401 - fixtures
from tests.kubectl.test_why import a_pod, event, failed_scheduling, job_json

__all__ = ["apiserver", "config", "inspect_url"]

PREEMPTOR = ("its free resources are kept for ml2/te-k-5xq2w, for which FitGpp preempted pods there "
             "(kube-scheduler nominated it to this node)")
RESUMING = "its free resources are kept for ns/be-a-x2k9q, of a best-effort Job preempted there and now resuming"


def test_a_preemptor_hold_gone_from_the_view_is_said_to_be_gone() -> None:
    job = job_from(job_json("be-b"), pods=(a_pod("be-b-7xk2p", [failed_scheduling(PREEMPTOR, nodes=1)]),))
    answer = explain_job(job, CellfitView(resume_holds=()))
    assert answer.reason == "pending"
    assert answer.summary == (
        "pod be-b-7xk2p: pending: the preemptor hold that kept it off the node it fits at its last attempt (its free "
        "resources kept for ml2/te-k-5xq2w) is gone now: cellfit keeps no hold for ml2/te-k-5xq2w, so none keeps this "
        "pod off; kube-scheduler's next attempt says what does, if anything")
    assert answer.details[-1].startswith("FailedScheduling, last ")


def test_a_resume_hold_for_another_pod_is_not_this_one() -> None:
    other = ({"node": "gpu-3", "job": "ns/be-z", "requests": "nvidia.com/gpu 4", "pods": ["ns/be-z-abcde"], "kind": "resume"},)
    answer = explain_pod(a_pod("waiter", [failed_scheduling(RESUMING, nodes=1)]), CellfitView(resume_holds=other))
    assert answer.reason == "pending"
    assert answer.summary.startswith("pending: the resume hold that kept it off the node it fits at its last attempt (its "
                                     "free resources kept for ns/be-a-x2k9q) is gone now")


def test_a_hold_the_view_still_lists_keeps_it_off() -> None:
    holds = ({"node": "gpu-3", "job": "ml2/te-k", "requests": "nvidia.com/gpu 4", "pods": ["ml2/te-k-5xq2w"], "kind": "preemptor"},)
    answer = explain_pod(a_pod("waiter", [failed_scheduling(PREEMPTOR, nodes=1)]), CellfitView(resume_holds=holds))
    assert answer.reason == "preemptor-hold"
    assert answer.summary.startswith("kept off node gpu-3 by a preemptor hold: its free resources are kept for ml2/te-k-5xq2w")


def test_through_the_plugin_a_live_view_without_the_hold(config: Path, apiserver: ApiServer) -> None:
    """The plugin reads /v1/inspect/resume-holds of a real cellfit, which holds nothing."""
    apiserver.routes["/api/v1/namespaces/ml/pods/be-b-7xk2p"] = (200, {
        "metadata": {"name": "be-b-7xk2p", "namespace": "ml", "uid": "u1"},
        "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}})
    failed = event("FailedScheduling", f"0/1 nodes are available: 1 {PREEMPTOR}.", warning=True, name="be-b-7xk2p")
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": [failed]})
    out = cli.run(["why", "pod/be-b-7xk2p"])
    assert out.splitlines()[0].startswith("pod/be-b-7xk2p: pending: the preemptor hold that kept it off the node it fits "), out
