"""Sampling pods whose PriorityClass does not exist (`cellfit serve` pointed at a cluster where
the chart's classes were never created). Seen live (user29): the API server refused every run
("no PriorityClass with name cellfit-sampling was found", 403), all three attempts of each
configuration were spent within a second, the Job was told SamplingFailed, and it stayed so
after the administrator created the class. Now a missing class spends no attempt, the Job is
told once what is missing and which setting names it, and it is sampled once the class exists."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from estimator.controller import EstimatorController
from estimator.objects import JOB_DECODER
from scheduler.config import EstimatorSettings
from scheduler.errors import KubernetesApiError
from tests.estimator.test_controller import job
from tests.estimator.test_review_62 import CREATED_AT, Clock, DeletingApi, estimator_for, play


class NoClassApi(DeletingApi):
    """An API server without the PriorityClass until ``created`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.created_class = False
        self.refused = 0

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        name = pod["spec"].get("priorityClassName")
        if name and not self.created_class:
            self.refused += 1
            raise KubernetesApiError(f'create pod {namespace}/{pod["metadata"]["name"]}: pods "{pod["metadata"]["name"]}" is forbidden: '
                                     f"no PriorityClass with name {name} was found (HTTP 403)", status=403)
        super().create_pod(namespace=namespace, pod=pod)


def without_the_class() -> tuple[NoClassApi, EstimatorController, Any]:
    """An estimator over one waiting Job on an API server without the sampling class."""
    api = NoClassApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60))
    waiting = job("waiting")
    estimator._replace_jobs([waiting])
    return api, estimator, waiting


def test_a_missing_priority_class_spends_no_attempt_and_sampling_starts_once_it_exists() -> None:
    api, estimator, waiting = without_the_class()
    play(estimator, api, waiting, passes=6)  # more passes than maxAttempts
    assert api.refused >= 2 * EstimatorSettings().max_attempts
    assert [reason for reason, _ in api.events if reason == "SamplingFailed"] == []
    rejected = [message for reason, message in api.events if reason == "SamplingPodRejected"]
    assert rejected == [
        "sampling pods not created: their PriorityClass 'cellfit-sampling' (estimator.priorityClassName) does not exist; "
        "an administrator creates it (kubectl apply -f deploy/priority-classes.yaml, or the Helm chart) or names an existing "
        "class in cellfit's estimator.priorityClassName. No sampling attempt is counted: sampling starts once it exists"
    ]
    api.created_class = True
    play(estimator, api, waiting, passes=6)
    (written,) = [notes["cellfit.io/estimate"] for _, notes in api.annotations if "cellfit.io/estimate" in notes]
    assert sorted(json.loads(written)) == ["cpu", "gpu"]


def own_class_job(name: str, priority_class: str) -> Any:
    configurations = {"cpu": {"resources": {"cpu": "2"}}, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
    body = {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "creationTimestamp": "2026-01-01T00:00:00Z",
                     "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/iterations": "1000"}},
        "spec": {"suspend": True, "template": {"spec": {"priorityClassName": priority_class, "containers": [{"name": "c", "image": "i"}]}}},
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_sampling_in_the_template_s_class_names_the_template_s_field() -> None:
    api = NoClassApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60), settings=EstimatorSettings(max_cluster_share=1.0, priority_class_name=None))
    waiting = own_class_job("own-class", "team-high")
    estimator._replace_jobs([waiting])
    play(estimator, api, waiting, passes=4)
    (message,) = [message for reason, message in api.events if reason == "SamplingPodRejected"]
    assert "'team-high' (spec.template.spec.priorityClassName) does not exist; create it, or name" in message
    assert [reason for reason, _ in api.events if reason == "SamplingFailed"] == []


def test_the_missing_class_is_logged_once_until_a_run_is_created_again(caplog: pytest.LogCaptureFixture) -> None:
    """Every pass tries each Job's runs again: live, the warning came once per pod per pass."""
    api = NoClassApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60))
    jobs = [job("first"), job("second")]
    estimator._replace_jobs(jobs)
    with caplog.at_level(logging.WARNING, logger="estimator.controller"):
        for _ in range(4):
            estimator.reconcile()
    assert api.refused >= 4
    said = [r for r in caplog.records if "PriorityClass does not exist" in r.getMessage()]
    assert len(said) == 1 and said[0].priority_class == "cellfit-sampling"  # type: ignore[attr-defined]


def test_the_job_s_view_says_no_run_was_created_and_why() -> None:
    """Live, ``kubectl cellfit why`` said "1 under way" of runs the API server had refused."""
    api, estimator, waiting = without_the_class()
    for _ in range(2):
        estimator.reconcile()
    (entry,) = estimator.inspect()["jobs"]
    assert (entry["state"], entry["message"]) == (
        "sampling", "sampling pods not created: their PriorityClass 'cellfit-sampling' (estimator.priorityClassName) does not exist")
    api.created_class = True
    for _ in range(2):
        estimator.reconcile()
    (entry,) = estimator.inspect()["jobs"]
    assert entry["message"].startswith("this Job's sampling runs: ")
