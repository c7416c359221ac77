"""user26 #3: ``kubectl cellfit why job/train`` counted the Preempted Events of an earlier Job of
the same name, deleted and created again ("preempted 8 times": its 4 and the new one's 4). Its
pods are gone, so only their names tied them to the Job, and both Jobs' pods are named
``train-xxxxx``. Now a preempted pod counts for the Job only when its Event began once the Job
existed (its creationTimestamp), or the pod is one of the Job's own (by UID)."""

from __future__ import annotations

from typing import Any, Mapping

from scheduler.kubectl.errors import NotFound
from scheduler.kubectl.facts import FactReader
from scheduler.kubectl.why import explain

CREATED = "2026-11-29T10:00:00Z"


def preempted(pod: str, uid: str, at: str) -> dict[str, Any]:
    return {"reason": "Preempted", "type": "Warning", "firstTimestamp": at, "lastTimestamp": at,
            "message": "preempted by ml/te-0 on node n1: a trial pod needs the room (FitGpp score 1.0)",
            "involvedObject": {"kind": "Pod", "name": pod, "uid": uid, "namespace": "ml"}}


OLD = [preempted(f"train-old{i}a", f"u-old-{i}", f"2026-11-29T09:{30 + i}:00Z") for i in range(4)]
NEW = [preempted(f"train-new{i}b", f"u-new-{i}", f"2026-11-29T10:{10 + i}:00Z") for i in range(4)]
JOB = {"metadata": {"name": "train", "namespace": "ml", "uid": "u-job-2", "creationTimestamp": CREATED,
                    "annotations": {"cellfit.io/preemptions": "4"}},
       "spec": {"template": {"spec": {"schedulerName": "cellfit"}}}, "status": {"active": 0}}


class Api:
    """The few reads ``why job/train`` makes of the API server."""

    def __init__(self) -> None:
        self.running: dict[str, Any] = {"metadata": {"name": "train-new4c", "namespace": "ml", "uid": "u-new-4",
                                     "ownerReferences": [{"kind": "Job", "name": "train", "uid": "u-job-2"}]},
                        "spec": {"schedulerName": "cellfit", "nodeName": "n2"}, "status": {"phase": "Running"}}
        self.events = OLD + NEW

    def get(self, path: str, *, what: str, query: Mapping[str, str] | None = None) -> Any:
        if path == "/apis/batch/v1/namespaces/ml/jobs/train":
            return JOB
        if path == "/api/v1/namespaces/ml/pods":
            return {"items": [self.running]}
        if path == "/api/v1/namespaces/ml/events":
            selector = (query or {}).get("fieldSelector", "")
            return {"items": self.events if "reason=Preempted" in selector else []}
        raise NotFound(f"{what} not found")


class Inspect:
    def view(self, view: str, *, query: Mapping[str, str] | None = None) -> Any:
        return {"enabled": False} if view == "resume-holds" else {"name": "default", "cells": []}


def facts(api: Api) -> Any:
    return FactReader(api=api, inspect=Inspect()).facts(kind="job", name="train", namespace="ml")  # type: ignore[arg-type]


def test_only_the_preemptions_of_the_job_now_are_counted() -> None:
    found = facts(Api())
    assert found.job is not None
    assert sorted(p.victim for p in found.job.preemptions) == [f"ml/train-new{i}b" for i in range(4)]
    summary = explain(found).summary
    assert summary.startswith("preempted 4 times"), summary


def test_a_pod_of_the_job_by_uid_counts_whatever_its_events_time() -> None:
    api = Api()
    api.running["metadata"]["uid"] = "u-old-0"  # the Job's own pod, its Event's time read earlier (a clock skew)
    found = facts(api)
    assert found.job is not None
    assert "ml/train-old0a" in [p.victim for p in found.job.preemptions]
