"""An interchangeable Job whose own cellfit.io/estimate does not read (``{"gpu":{"seconds":0}}``,
warned at apply) is not estimated: AlloX never admits it. Live, why said "estimated, but not
started: …" with the detail "estimate gpu: 0 s"."""

from __future__ import annotations

import json

from scheduler.kubectl.objects import CellfitView, job_from
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why import job_json

ALLOX_OFF = "AlloX admission is not running: allox.enabled is false"


def test_an_invalid_user_estimate_is_not_called_an_estimate() -> None:
    job = job_from(job_json("ij", suspend=True, annotations={
        "cellfit.io/configurations": "{not json", "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 0}})}))
    answer = explain_job(job, CellfitView(unavailable={"allox": ALLOX_OFF}))
    assert answer.reason == "not-estimated"
    assert answer.summary == ("not estimated: its own cellfit.io/estimate does not read, so nothing is sampled or started until it "
                              "is corrected: cellfit.io/estimate.gpu.seconds: must be a number of seconds above 0 and at most "
                              "1,000,000,000, got 0")
    assert not any(line.startswith("estimate gpu") for line in answer.details)


def test_every_mistake_of_the_estimate_is_told() -> None:
    job = job_from(job_json("ij", suspend=True, annotations={
        "cellfit.io/configurations": "{}", "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 0}, "gpu": {"minutes": 3}})}))
    answer = explain_job(job, CellfitView())
    assert answer.reason == "not-estimated"
    assert "cellfit.io/estimate.cpu.seconds: must be" in answer.summary and "cellfit.io/estimate.gpu.seconds: is missing" in answer.summary


def test_a_valid_user_estimate_still_is_one() -> None:
    job = job_from(job_json("ij", suspend=True, annotations={
        "cellfit.io/configurations": "{}", "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 60}})}))
    answer = explain_job(job, CellfitView(unavailable={"allox": ALLOX_OFF}))
    assert (answer.reason, answer.summary) == ("allox-off", f"estimated, but not started: {ALLOX_OFF}")
    assert answer.details == ("estimate gpu: 60 s",)
