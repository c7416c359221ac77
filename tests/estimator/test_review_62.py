"""Adversarial review of the estimator (helper-62): what a cluster user does to sampling pods and
to the Jobs they sample, one reconcile pass at a time over a recording API."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from estimator.contract import encode_estimate, parse_estimate
from estimator.controller import Capacity, EstimatorController
from estimator.model import ConfigurationEstimate, Sample
from estimator.objects import JOB_DECODER, POD_DECODER
from scheduler.cluster.feed import InterchangeableJobs
from scheduler.config import EstimatorSettings
from tests.estimator.test_controller import RecordingApi, finished, job

CREATED = "2026-01-01T00:00:00Z"
CREATED_AT = 1767225600.0  # CREATED, in seconds


class DeletingApi(RecordingApi):
    """The recording API that also remembers which pods were deleted."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[str] = []

    def delete_pod(self, *, name: str, **_: Any) -> None:  # type: ignore[override]
        self.deleted.append(name)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def estimator_for(api: RecordingApi, clock: Clock) -> EstimatorController:
    return EstimatorController(
        api=api,  # type: ignore[arg-type]
        settings=EstimatorSettings(max_cluster_share=1.0),
        gpu_resource="nvidia.com/gpu",
        capacity=lambda: Capacity(cpu_millis=64_000, gpus=8),
        jobs=InterchangeableJobs(),
        clock=clock,
    )


def started(name: str, clock: Clock) -> tuple[DeletingApi, EstimatorController]:
    """A Job sampled from its first pass: its first runs created."""
    api = DeletingApi()
    estimator = estimator_for(api, clock)
    estimator._replace_jobs([job(name)])
    estimator.reconcile()
    return api, estimator


def with_status(pod: dict[str, Any], status: dict[str, Any], **metadata: Any) -> Any:
    body = {**pod, "metadata": {**pod["metadata"], "creationTimestamp": CREATED, **metadata}, "status": status}
    return POD_DECODER.decode(json.dumps(body).encode())


def edited(original: Any, *, suspend: bool | None = None, annotations: dict[str, str] | None = None) -> Any:
    body = json.loads(msgspec.json.encode(original))
    if suspend is not None:
        body["spec"]["suspend"] = suspend
    body["metadata"]["annotations"].update(annotations or {})
    return JOB_DECODER.decode(json.dumps(body).encode())


def names(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods)


# ------------------------------------------------------------------ an estimate too small to write


def test_an_estimate_below_a_millisecond_is_written_as_one_cellfit_can_read_back():
    estimate = ConfigurationEstimate(configuration="gpu", seconds=0.0002, uncertainty_seconds=0.0, pod_seconds=0.0002,
                                     memory_bytes=None, samples=1, method="proportional")
    text = encode_estimate({"gpu": estimate}, samples={"gpu": [("p", Sample("gpu", 20, 0.0))]}, overhead_fraction=None)
    assert parse_estimate(text).seconds["gpu"] > 0


def test_samples_reporting_zero_seconds_do_not_make_the_job_invalid():
    api, estimator = started("instant", Clock(CREATED_AT + 60))
    instant = job("instant")
    estimator._replace_pods([finished(p, 0.0, splits=[[10, 0.0]]) for p in api.created])
    estimator.reconcile()
    (written,) = [a["cellfit.io/estimate"] for _, a in api.annotations if "cellfit.io/estimate" in a]
    estimator._apply_job(edited(instant, annotations={"cellfit.io/estimate": written}))
    estimator.reconcile(everything=False)
    assert estimator.inspect()["jobs"][0]["state"] == "estimated"
