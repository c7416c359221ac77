"""``kubectl cellfit`` as a cluster's users meet it and break it (helper-71's review): a preemptor
in a namespace the user may not read, a chart with two replicas whose service proxy lands on the
standby, a pod whose Job is gone, a pod that is gone itself.

The API server is test_cli's: kube-apiserver's paths and Status bodies, its service proxy
forwarding to a real cellfit inspect listener (HiveD); the standby's answer is the one
``scheduler/extender/runtime.py`` gives (``_term_view``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from scheduler.kubectl import cli
from scheduler.kubectl.errors import NotFound, PluginError, Unreachable
from scheduler.kubectl.objects import CellfitView, events_from, job_from, pod_from
from scheduler.kubectl.why import explain_job, explain_pod
from tests.kubectl.test_cli import PROXY, ApiServer, inspect_url, kubeconfig, status

__all__ = ["inspect_url"]  # test_cli's fixture: a real HiveD inspect listener

T0 = "2026-11-27T10:00:00Z"
STANDBY = {"leading": False, "leader": "cellfit-7d9f-abcde",
           "message": "this replica is a standby: the holder of the controllers' Lease runs this driver"}


class Replicas(ApiServer):
    """The service proxy in front of two cellfit replicas: ``answers[path]`` is the sequence of
    replies successive calls get (kube-apiserver picks an endpoint at random per request)."""

    def __init__(self, inspect_url: str | None) -> None:
        super().__init__(inspect_url)
        self.answers: dict[str, list[tuple[int, Any]]] = {}
        self.calls: dict[str, int] = {}

    def answer(self, path: str, query: str) -> tuple[int, Any]:
        self.calls[path] = self.calls.get(path, 0) + 1
        queued = self.answers.get(path)
        if queued:
            return queued.pop(0) if len(queued) > 1 else queued[0]
        return super().answer(path, query)


@pytest.fixture
def apiserver(inspect_url: str) -> Iterator[Replicas]:
    server = Replicas(inspect_url)
    yield server
    server.close()


@pytest.fixture
def config(tmp_path: Path, apiserver: Replicas, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = kubeconfig(tmp_path / "config", apiserver.url, contexts={"alice": ("alice-token", "ml")}, current="alice")
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("CELLFIT_NAMESPACE", raising=False)
    monkeypatch.delenv("CELLFIT_SERVICE", raising=False)
    return path


def event(reason: str, message: str, *, pod: str, uid: str = "", warning: bool = True) -> dict[str, Any]:
    return {"reason": reason, "message": message, "type": "Warning" if warning else "Normal", "lastTimestamp": T0,
            "involvedObject": {"kind": "Pod", "name": pod, "uid": uid}, "metadata": {"creationTimestamp": T0}}


def forbidden(what: str) -> tuple[int, Any]:
    return 403, status(403, "Forbidden", f'{what} is forbidden: User "alice" cannot list resource "events" in the namespace')


# ------------------------------------------------------------------------------ preemptor elsewhere


def test_job_preempted_by_a_pod_of_a_namespace_the_user_may_not_read(config: Path, apiserver: Replicas) -> None:
    """FitGpp preempts across namespaces: team A's best-effort Job for team B's trial pod. Team A
    may not read team B's events, where the score breakdown is; ``why`` still answers who
    preempted it and where its pods are now, and says the breakdown is not readable."""
    apiserver.routes["/apis/batch/v1/namespaces/ml/jobs/be"] = (200, {
        "metadata": {"name": "be", "namespace": "ml", "uid": "job-uid", "annotations": {"cellfit.io/preemptions": "1"}},
        "spec": {}, "status": {}})
    apiserver.routes["/api/v1/namespaces/ml/pods"] = (200, {"items": []})
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": [
        event("Preempted", "preempted by team-b/trial-0", pod="be-x2k9q", uid="victim-uid")]})
    apiserver.routes["/api/v1/namespaces/team-b/events"] = forbidden("events")
    answer = json.loads(cli.run(["why", "job/be", "-o", "json"]))
    assert answer["reason"] == "preempted"
    assert answer["summary"].startswith("preempted 1 time, last by team-b/trial-0; now ")
    assert any("team-b" in line and "may not read" in line for line in answer["details"]), answer["details"]


# ------------------------------------------------------------------------------ two replicas


def allox_queue() -> dict[str, Any]:
    return {"leading": True, "queue": {"gpu": [{"job": "ml/a", "kind": "gpu", "position": 1, "expectedStartSeconds": 30.0}]}}


def test_queue_read_from_the_standby_is_read_again_from_the_leader(config: Path, apiserver: Replicas) -> None:
    """With replicaCount 2 the Service's proxy reaches the standby about every other call: its
    answer has no queue, and the table must not say AlloX's queue is empty."""
    path = f"{PROXY}/v1/inspect/allox"
    apiserver.answers[path] = [(200, STANDBY), (200, STANDBY), (200, allox_queue())]
    assert cli.run(["queue"]).splitlines()[1].split() == ["ml/a", "gpu", "1", "~30", "s", "-"]
    assert apiserver.calls[path] == 3


def test_queue_only_ever_from_the_standby_says_so(config: Path, apiserver: Replicas) -> None:
    path = f"{PROXY}/v1/inspect/allox"
    apiserver.answers[path] = [(200, STANDBY)]
    with pytest.raises(Unreachable, match="standby.*cellfit-7d9f-abcde"):
        cli.run(["queue"])


def test_why_of_a_queued_job_is_not_told_by_the_standby(config: Path, apiserver: Replicas) -> None:
    """A suspended interchangeable Job AlloX queued: the standby's estimates and AlloX views
    know nothing of it, which ``why`` must not read as "not queued"."""
    apiserver.routes["/apis/batch/v1/namespaces/ml/jobs/a"] = (200, {
        "metadata": {"name": "a", "namespace": "ml", "uid": "job-a", "annotations": {
            "cellfit.io/configurations": "{}", "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 600}, "cpu": {"seconds": 5400}})}},
        "spec": {"suspend": True}, "status": {}})
    apiserver.routes["/api/v1/namespaces/ml/pods"] = (200, {"items": []})
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": []})
    apiserver.answers[f"{PROXY}/v1/inspect/allox"] = [(200, STANDBY), (200, allox_queue())]
    apiserver.answers[f"{PROXY}/v1/inspect/estimates"] = [(200, STANDBY), (200, {"leading": True, "jobs": []})]
    answer = json.loads(cli.run(["why", "job/a", "-o", "json"]))
    assert answer["reason"] == "allox-queue"
    assert answer["summary"] == "queued by AlloX: 1st on gpu, expected start in ~30 s"


# ------------------------------------------------------------------------------ gone objects


def pending_pod(name: str, *, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Job", "name": owner, "uid": f"uid-{owner}"}]
    return {"metadata": meta, "spec": {"schedulerName": "cellfit"}, "status": {"phase": "Pending"}}


@pytest.mark.parametrize("job_reply", [
    (404, status(404, "NotFound", 'jobs.batch "gone" not found')),
    (403, status(403, "Forbidden", 'jobs.batch "gone" is forbidden: User "alice" cannot get resource "jobs"')),
])
def test_pod_whose_job_is_gone_or_unreadable_is_still_explained(config: Path, apiserver: Replicas, job_reply: tuple[int, Any]) -> None:
    """The pod is what was asked about: its Job deleted a moment ago (its pods go after it) or not
    readable to the user (a role granting pods and events only) leaves the pod's own answer."""
    message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    apiserver.routes["/api/v1/namespaces/ml/pods/gone-x2k9q"] = (200, pending_pod("gone-x2k9q", owner="gone"))
    apiserver.routes["/apis/batch/v1/namespaces/ml/jobs/gone"] = job_reply
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": [
        event("FailedScheduling", message, pod="gone-x2k9q", uid="uid-gone-x2k9q")]})
    answer = json.loads(cli.run(["why", "pod/gone-x2k9q", "-o", "json"]))
    assert answer["reason"] == "pending"
    assert answer["summary"] == "pending: Insufficient nvidia.com/gpu"
    assert any("Job ml/gone" in line for line in answer["details"]), answer["details"]


BREAKDOWN = "score 0.31 = size 0.12 + 4.0 x GP 0.05"


def fitgpp_preempted_be_x2k9q(apiserver: Replicas, *, victim_uid: str) -> None:
    """The two events cellfit writes when FitGpp preempts ml/be-x2k9q for ml/trial-0 on gpu-7."""
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": [
        event("Preempted", "preempted by ml/trial-0", pod="be-x2k9q", uid=victim_uid),
        event("Preempting", f"preempting ml/be-x2k9q on node gpu-7 ({BREAKDOWN})", pod="trial-0", warning=False),
    ]})


def test_deleted_pod_preempted_by_fitgpp_is_explained_from_its_events(config: Path, apiserver: Replicas) -> None:
    """A pod FitGpp preempted is deleted: the user asking about it (the name in their logs) gets
    what its events still say, not "not found"."""
    fitgpp_preempted_be_x2k9q(apiserver, victim_uid="victim-uid")
    answer = json.loads(cli.run(["why", "pod/be-x2k9q", "-o", "json"]))
    assert answer["reason"] == "preempted"
    assert answer["summary"] == f"deleted: preempted by ml/trial-0 on node gpu-7 ({BREAKDOWN})"


def test_a_pod_that_never_was_is_still_not_found(config: Path, apiserver: Replicas) -> None:
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": []})
    with pytest.raises(NotFound, match="pod ml/nope not found"):
        cli.run(["why", "pod/nope"])


# ------------------------------------------------------------------------------ the preemptor


def test_a_preemptor_waiting_for_its_victims_says_so_not_that_nothing_fits(config: Path, apiserver: Replicas) -> None:
    """FitGpp preempted a best-effort pod for a trial pod, which kube-scheduler nominated to the
    node until the victim's grace period ends. Its last FailedScheduling still says no node
    fits (the attempt that preempted); the answer is the preemption under way."""
    breakdown = "score 0.31 = size 0.12 + 4.0 x GP 0.05"
    trial = pending_pod("trial-0")
    trial["status"]["nominatedNodeName"] = "gpu-7"
    apiserver.routes["/api/v1/namespaces/ml/pods/trial-0"] = (200, trial)
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": [
        event("FailedScheduling", "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are "
              "available: 1 node(s) had victims, 7 No preemption victims found for incoming pod.", pod="trial-0", uid="uid-trial-0"),
        event("Preempting", f"preempting ml/be-x2k9q on node gpu-7 ({breakdown})", pod="trial-0", uid="uid-trial-0", warning=False),
    ]})
    answer = json.loads(cli.run(["why", "pod/trial-0", "-o", "json"]))
    assert answer["reason"] == "preempting"
    assert answer["summary"] == ("nominated to node gpu-7, where FitGpp preempted ml/be-x2k9q for it: it is placed there once "
                                 "its victims have left (their grace period)")
    assert f"preempting ml/be-x2k9q on node gpu-7 ({breakdown})" in answer["details"][0]


def test_a_nomination_without_cellfits_preemption_keeps_kube_schedulers_reason(config: Path, apiserver: Replicas) -> None:
    trial = pending_pod("p-0")
    trial["status"]["nominatedNodeName"] = "gpu-7"
    apiserver.routes["/api/v1/namespaces/ml/pods/p-0"] = (200, trial)
    apiserver.routes["/api/v1/namespaces/ml/events"] = (200, {"items": [
        event("FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu.", pod="p-0", uid="uid-p-0")]})
    answer = json.loads(cli.run(["why", "pod/p-0", "-o", "json"]))
    assert answer["reason"] == "preempting" and answer["summary"] == (
        "nominated to node gpu-7 by kube-scheduler, which preempted pods there for it: it is placed there once its victims "
        "have left (their grace period); its last attempt: Insufficient cpu")
    assert "nominated to node gpu-7 by kube-scheduler" in answer["details"]


# ------------------------------------------------------------------------------ the kubeconfig


@pytest.mark.parametrize(("content", "said"), [
    (b"apiVersion: v1\ncurrent-context: \xff\xfe\n", "not UTF-8"),
    (b"- a\n- b\n", "not a kubeconfig: its top level is a list"),
    (b"apiVersion: v1\ncurrent-context: [\n", "while parsing"),  # said before too
])
def test_a_broken_kubeconfig_is_an_error_naming_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         content: bytes, said: str) -> None:
    """kubectl says which file it could not load; the plugin said nothing but a traceback."""
    broken = tmp_path / "broken-config"
    broken.write_bytes(content)
    monkeypatch.setenv("KUBECONFIG", str(broken))
    with pytest.raises(PluginError, match=f"{broken}.*{said}"):
        cli.run(["vcs"])


# ------------------------------------------------------------------------------ sampling


def test_a_sampling_pod_still_pending_is_not_said_to_run() -> None:
    """The estimator's sample rows (estimator/controller.py) are pending, running, succeeded,
    stopped or failed: a sample waiting for room in a busy cluster is no run under way."""
    job = job_from({"metadata": {"name": "ij-a", "namespace": "ml", "uid": "u", "annotations": {"cellfit.io/configurations": "{}"}},
                    "spec": {"suspend": True}, "status": {}})
    entry = {"namespace": "ml", "name": "ij-a", "state": "sampling", "samples": [
        {"pod": "ij-a-gpu-long-0", "configuration": "gpu", "length": "long", "pilot": 0, "attempt": 1, "state": "running"},
        {"pod": "ij-a-cpu-long-0", "configuration": "cpu", "length": "long", "pilot": 0, "attempt": 1, "state": "pending"},
    ]}
    answer = explain_job(job, CellfitView(estimator_entry=entry))
    assert answer.reason == "estimating"
    assert answer.summary == ("estimating: 0 of 2 samples done; running gpu long (ij-a-gpu-long-0); "
                              "pending cpu long (ij-a-cpu-long-0)")


# ------------------------------------------------------------------------------ event series


def test_the_latest_attempt_is_the_last_of_a_series_not_its_first() -> None:
    """kube-scheduler writes events.k8s.io Events: read as core/v1, a repeated FailedScheduling is
    one Event whose eventTime is its first occurrence, series.lastObservedTime its latest, and
    lastTimestamp empty. An older reason still recurring is the latest, not another reason
    seen once in between."""
    def scheduler_event(message: str, *, first: str, last: str | None = None, count: int | None = None) -> dict[str, Any]:
        found: dict[str, Any] = {"reason": "FailedScheduling", "message": message, "type": "Warning", "eventTime": first,
                                 "lastTimestamp": None, "involvedObject": {"kind": "Pod", "name": "w-0", "uid": "uid-w-0"},
                                 "metadata": {"creationTimestamp": first[:19] + "Z"}}
        if last is not None:
            found["series"] = {"count": count, "lastObservedTime": last}
        return found

    recurring = scheduler_event("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                                first="2026-11-27T10:00:00.000000Z", last="2026-11-27T12:00:00.000000Z", count=40)
    once = scheduler_event("0/3 nodes are available: 3 Insufficient cpu.", first="2026-11-27T11:00:00.000000Z")
    pod = pod_from(pending_pod("w-0"), events=events_from([recurring, once]))
    answer = explain_pod(pod, CellfitView())
    assert answer.summary == "pending: Insufficient nvidia.com/gpu"
    assert answer.details == ("FailedScheduling (40 times), last 2026-11-27T12:00:00.000000Z: "
                              "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",)


def test_events_of_both_time_formats_sort_by_time() -> None:
    """lastTimestamp has seconds, eventTime microseconds: as text, 10:00:00.5Z sorts before
    10:00:00Z although it is later."""
    def at(reason: str, **stamps: str) -> dict[str, Any]:
        return {"reason": reason, "message": reason, "type": "Normal", "involvedObject": {"kind": "Pod", "name": "x"}, **stamps}

    ordered = events_from([at("Later", eventTime="2026-11-27T10:00:00.500000Z"), at("Earlier", lastTimestamp="2026-11-27T10:00:00Z")])
    assert [e.reason for e in ordered] == ["Earlier", "Later"]


def test_a_victim_in_its_grace_period_says_it_was_preempted(config: Path, apiserver: Replicas) -> None:
    """FitGpp's victim leaves within its grace period: asked meanwhile, why said only
    "terminating", the preemption left in the details."""
    victim = pending_pod("be-x2k9q")
    victim["metadata"]["deletionTimestamp"] = T0
    victim["spec"]["nodeName"] = "gpu-7"
    victim["status"]["phase"] = "Running"
    apiserver.routes["/api/v1/namespaces/ml/pods/be-x2k9q"] = (200, victim)
    fitgpp_preempted_be_x2k9q(apiserver, victim_uid="uid-be-x2k9q")
    answer = json.loads(cli.run(["why", "pod/be-x2k9q", "-o", "json"]))
    assert answer["reason"] == "preempted"
    assert answer["summary"] == f"terminating: preempted by ml/trial-0 on node gpu-7 ({BREAKDOWN})"
