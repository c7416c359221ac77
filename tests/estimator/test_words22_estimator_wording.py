"""What the estimator tells users, as a live session read it: one Job's sampling runs counted as
that Job's, every mistake of a user's estimate in the InvalidInterchangeableJob Event (the
webhook warns of each), and the iterations' range with thousands separators as the estimate's
messages write theirs."""

from __future__ import annotations

import json

import pytest

from estimator.contract import parse_iterations
from estimator.objects import JOB_DECODER
from scheduler.errors import InvalidAnnotation
from tests.estimator.test_controller import RecordingApi, controller, job, pending


def test_the_iterations_range_is_written_with_thousands_separators() -> None:
    with pytest.raises(InvalidAnnotation) as raised:
        parse_iterations("-3")
    assert str(raised.value) == "cellfit.io/iterations: -3 is out of range; expected 3..1,000,000,000,000"


def _with(annotations: dict[str, str]) -> object:
    bad = job("bad")
    body = {"metadata": {**{f: getattr(bad.metadata, f) for f in ("name", "namespace", "uid", "creationTimestamp")},
                         "annotations": annotations},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_every_mistake_of_a_users_estimate_is_in_the_event() -> None:
    api = RecordingApi()
    estimator = controller(api)
    configurations = {"cpu": {"resources": {"cpu": "4"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}}
    estimator._replace_jobs([_with({"cellfit.io/configurations": json.dumps(configurations),
                                    "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 0}, "gpu": {"seconds": 0}})})])
    estimator.reconcile()
    ((reason, message),) = api.events
    assert reason == "InvalidInterchangeableJob"
    assert "cellfit.io/estimate.cpu.seconds: must be" in message and "cellfit.io/estimate.gpu.seconds: must be" in message
    assert api.conditions[0]["message"] == message


def test_invalid_configurations_and_an_invalid_estimate_are_both_told() -> None:
    api = RecordingApi()
    estimator = controller(api)
    estimator._replace_jobs([_with({"cellfit.io/configurations": "{not json",
                                    "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 0}})})])
    estimator.reconcile()
    ((reason, message),) = api.events
    assert "cellfit.io/configurations" in message and "cellfit.io/estimate.gpu.seconds: must be" in message


def test_one_jobs_sampling_message_counts_its_own_runs_only() -> None:
    api = RecordingApi()
    estimator = controller(api, share=1.0)
    estimator._replace_jobs([job("a"), job("b", created="2026-01-01T00:01:00Z")])
    estimator.reconcile()
    estimator._replace_pods([pending(p) for p in api.created])
    estimator.reconcile()
    messages = {j["name"]: j["message"] for j in estimator.inspect()["jobs"]}
    # Each Job: its two long runs (cpu, gpu) under way, its two short runs after them.
    assert messages == {name: "this Job's sampling runs: 2 under way, 2 more after them" for name in ("a", "b")}
