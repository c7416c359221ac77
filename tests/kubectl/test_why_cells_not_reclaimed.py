"""``kubectl cellfit why`` for a guaranteed pod that waits for its VC's cells opportunistic pods of
another VC hold, which cellfit does not reclaim for it (user25 #5): an interchangeable Job's GPU
sampling pod, created with preemptionPolicy Never, got the leader's CellsNotReclaimed Event, but
``why job/a-samp-0`` said only kube-scheduler's "pending gpu long (...Insufficient nvidia.com/gpu.
preemption: not eligible due to preemptionPolicy=Never.)". The Event here is the leader's own
(scheduler/cluster/stranded.py, run on VC b's opportunistic pods filling VC a's rack), the VC
view the engine's."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from estimator.objects import LABEL_SAMPLE, LABEL_SAMPLE_JOB
from scheduler.cluster.stranded import NOT_RECLAIMED as LEADERS_REASON
from scheduler.kubectl.objects import NOT_RECLAIMED, CellfitView, events_from, job_from, pod_from
from scheduler.kubectl.why import explain_job, explain_pod
from tests.cluster.test_stranded import AFTER, Cluster, unschedulable

# kube-scheduler's, live, on the sampling pod (user25 final-events.txt).
SCHEDULER = ("0/6 nodes are available: 1 node(s) were unschedulable, 5 Insufficient nvidia.com/gpu. preemption: not "
             "eligible due to preemptionPolicy=Never.")
SAMPLE_POD = "a-samp-0-b45c4ccd71f8-gpu-7f308-l0-0"


def leaders_event() -> tuple[dict[str, Any], Cluster]:
    """The CellsNotReclaimed Event the leader writes on a Never pod of VC a, b's pods on a's cells."""
    cluster = Cluster()
    cluster.api.pending = [unschedulable(cluster.g, preemptionPolicy="Never")]
    cluster.look_at(0)
    cluster.look_at(AFTER)
    (event,) = cluster.api.events
    return event, cluster


def view_of(cluster: Cluster) -> CellfitView:
    """VC a's view and the cell tree, as ``why`` reads them where a's quota is not bound."""
    return CellfitView(virtual_cluster=cluster.engine.inspect_virtual_cluster("a"), cell_tree=cluster.engine.inspect_cells(gpus=False))


def event(reason: str, message: str, *, at: str) -> dict[str, Any]:
    return {"reason": reason, "message": message, "type": "Warning", "lastTimestamp": at}


def sampling_pod(told: dict[str, Any] | None, *, scheduler: str = SCHEDULER) -> Any:
    body = {"metadata": {"name": SAMPLE_POD, "namespace": "team-a", "uid": "u-samp",
                         "labels": {"cellfit.io/virtual-cluster": "a", LABEL_SAMPLE: "true", LABEL_SAMPLE_JOB: "u-job"}},
            "spec": {"schedulerName": "cellfit", "preemptionPolicy": "Never",
                     "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
            "status": {"phase": "Pending"}}
    events: list[Mapping[str, Any]] = [event("FailedScheduling", scheduler, at="2026-11-28T22:53:50Z")]
    if told is not None:
        events.append(event(told["reason"], told["message"], at="2026-11-28T22:53:52Z"))
    return pod_from(body, events=events_from(events))


def test_the_plugin_reads_the_leaders_reason() -> None:
    assert NOT_RECLAIMED == LEADERS_REASON


def test_a_pending_pod_with_the_event_leads_with_it() -> None:
    told, cluster = leaders_event()
    view = view_of(cluster)
    answer = explain_pod(sampling_pod(told), view)
    assert answer.summary == (
        "pending: waits for cells of virtual cluster 'a' that opportunistic pods hold (64 GPUs of the "
        "cells it may use): cellfit does not reclaim them for a pod whose preemptionPolicy is Never (cellfit's "
        "estimator creates its sampling pods so), nor does kube-scheduler preempt for it; they free when those pods end, or "
        "delete them; kube-scheduler's last attempt: 0/6 nodes are available: 1 node(s) were unschedulable, "
        "5 Insufficient nvidia.com/gpu"), answer
    assert answer.details[0].startswith("CellsNotReclaimed, last 2026-11-28T22:53:52Z: cellfit does not reclaim"), answer


def test_an_estimating_jobs_pending_sampling_pod_leads_its_answer() -> None:
    told, cluster = leaders_event()
    view = replace(view_of(cluster), estimator_entry={
        "namespace": "team-a", "name": "a-samp-0", "state": "sampling", "samples": [
            {"pod": SAMPLE_POD, "configuration": "gpu", "length": "long", "state": "pending", "reason": SCHEDULER}]})
    job = job_from({"metadata": {"name": "a-samp-0", "namespace": "team-a", "uid": "u-job",
                                 "annotations": {"cellfit.io/configurations": "[]"}}, "spec": {"suspend": True}},
                   sampling_pods=(sampling_pod(told),))
    answer = explain_job(job, view)
    assert answer.reason == "estimating", answer
    assert answer.summary.startswith(f"estimating: its sampling pod {SAMPLE_POD} waits for cells of virtual cluster 'a' that "
                                     "opportunistic pods hold (64 GPUs of the cells"), answer
    assert "preemptionPolicy is Never (cellfit's estimator creates its sampling pods so)" in answer.summary
    assert answer.summary.endswith("; 0 of 1 samples done; pending gpu long (" + SAMPLE_POD + ": " + SCHEDULER + ")"), answer


def test_the_event_no_longer_leads_once_the_vcs_cells_hold_no_opportunistic_pod() -> None:
    told, cluster = leaders_event()
    for p in list(cluster.pods.pods()):
        if p.uid.startswith("o"):
            cluster.engine.delete_pod(p.uid)
    answer = explain_pod(sampling_pod(told), view_of(cluster))
    assert answer.summary.startswith("pending: 0/6 nodes"), answer


def test_a_pod_without_the_event_keeps_kube_schedulers_word() -> None:
    _, cluster = leaders_event()
    answer = explain_pod(sampling_pod(None), view_of(cluster))
    assert answer.summary.startswith("pending: 0/6 nodes"), answer


def test_the_fact_reader_reads_the_jobs_pending_sampling_pods_and_their_events(tmp_path: Any, monkeypatch: Any) -> None:
    """``why job/a-samp-0`` against an API server: the estimator's sampling pods carry no job-name
    label (the Job's pods' list misses them); they are listed by the Job's UID, their Events read."""
    from urllib.parse import parse_qs

    from scheduler.kubectl.api import Cellfit, InspectApi, KubeApi
    from scheduler.kubectl.facts import FactReader
    from scheduler.kubectl.kubeconfig import open_session
    from scheduler.kubectl.why import explain
    from tests.kubectl.test_cli import PROXY, ApiServer, kubeconfig, status

    told, cluster = leaders_event()
    pod = sampling_pod(told)
    job = {"metadata": {"name": "a-samp-0", "namespace": "team-a", "uid": "u-job", "annotations": {"cellfit.io/configurations": "[]"}},
           "spec": {"suspend": True}, "status": {}}
    body = {"metadata": {"name": SAMPLE_POD, "namespace": "team-a", "uid": "u-samp",
                         "labels": {"cellfit.io/virtual-cluster": "a", LABEL_SAMPLE: "true", LABEL_SAMPLE_JOB: "u-job"},
                         "ownerReferences": [{"kind": "Job", "name": "a-samp-0", "uid": "u-job"}]},
            "spec": {"schedulerName": "cellfit", "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
            "status": {"phase": "Pending"}}
    pod_events = [{"reason": e.reason, "message": e.message, "type": "Warning", "lastTimestamp": e.last_seen,
                   "involvedObject": {"kind": "Pod", "name": SAMPLE_POD, "uid": "u-samp"}} for e in pod.events]
    views: dict[str, Any] = {"estimates": {"jobs": [{"namespace": "team-a", "name": "a-samp-0", "state": "sampling", "samples": [
                 {"pod": SAMPLE_POD, "configuration": "gpu", "length": "long", "state": "pending", "reason": SCHEDULER}]}]},
             "virtual-clusters/a": cluster.engine.inspect_virtual_cluster("a"), "cells": cluster.engine.inspect_cells(gpus=False),
             "resume-holds": {"enabled": False}, "allox": {"queue": {}}}

    def answer(path: str, query: str) -> tuple[int, Any]:
        asked = {key: values[0] for key, values in parse_qs(query).items()}
        if path == "/apis/batch/v1/namespaces/team-a/jobs/a-samp-0":
            return 200, job
        if path == "/api/v1/namespaces/team-a/pods":
            return 200, {"items": [body] if asked.get("labelSelector") == f"{LABEL_SAMPLE_JOB}=u-job" else []}
        if path == "/api/v1/namespaces/team-a/events":
            return 200, {"items": pod_events if f"involvedObject.name={SAMPLE_POD}" in asked.get("fieldSelector", "") else []}
        view = path.partition(f"{PROXY}/v1/inspect/")[2]
        if view in views:
            return 200, views[view]
        return 404, status(404, "NotFound", f"the server could not find the requested resource ({path})")

    server = ApiServer(None)
    server.answer = answer  # type: ignore[method-assign]
    try:
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "config", server.url, contexts={"alice": ("t", "team-a")},
                                                        current="alice")))
        api = KubeApi(open_session(kubeconfig=None, context=None, namespace=None))
        facts = FactReader(api=api, inspect=InspectApi(api, Cellfit())).facts(kind="job", name="a-samp-0", namespace="team-a")
    finally:
        server.close()
    assert facts.job is not None and [p.name for p in facts.job.sampling_pods] == [SAMPLE_POD]
    summary = explain(facts).summary
    assert summary.startswith(f"estimating: its sampling pod {SAMPLE_POD} waits for cells of virtual cluster 'a' that "
                              "opportunistic pods hold (64 GPUs of the cells"), summary
