"""``kubectl cellfit why pod/...`` reads the pod's Job only where its owner is a batch/v1 Job: a pod
of Volcano's Job (batch.volcano.sh, kind "Job") was answered with the batch/v1 Job of its
owner's name, another object (or "its Job ... is not read: not found" where none exists)."""

from __future__ import annotations

from typing import Any, Mapping

import pytest

from scheduler.kubectl.errors import NotFound
from scheduler.kubectl.facts import FactReader
from tests.kubectl.test_why_job_recreated import JOB, Inspect

VOLCANO = "batch.volcano.sh/v1alpha1"


class Api:
    """A pod ``train-0`` owned by a Job ``train`` of ``api_version``, and a batch/v1 Job ``train``."""

    def __init__(self, api_version: str) -> None:
        self.pod = {"metadata": {"name": "train-0", "namespace": "ml", "uid": "u-pod",
                                 "ownerReferences": [{"apiVersion": api_version, "kind": "Job", "name": "train",
                                                      "uid": "u-job-2", "controller": True}]},
                    "spec": {"schedulerName": "cellfit", "nodeName": "n2"}, "status": {"phase": "Running"}}
        self.read: list[str] = []

    def get(self, path: str, *, what: str, query: Mapping[str, str] | None = None) -> Any:
        self.read.append(path)
        if path == "/api/v1/namespaces/ml/pods/train-0":
            return self.pod
        if path == "/apis/batch/v1/namespaces/ml/jobs/train":
            return JOB
        if path in ("/api/v1/namespaces/ml/events", "/api/v1/namespaces/ml/pods"):
            return {"items": []}
        raise NotFound(f"{what} not found")


@pytest.mark.parametrize(("api_version", "job_read"), [(VOLCANO, False), ("batch/v1", True)])
def test_only_a_batch_jobs_pod_is_answered_with_its_job(api_version: str, job_read: bool) -> None:
    api = Api(api_version)
    found = FactReader(api=api, inspect=Inspect()).facts(kind="pod", name="train-0", namespace="ml")  # type: ignore[arg-type]
    assert (found.job is not None) is job_read
    assert ("/apis/batch/v1/namespaces/ml/jobs/train" in api.read) is job_read
    assert found.notes == ()
