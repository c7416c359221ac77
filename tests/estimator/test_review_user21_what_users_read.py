"""What a user reads of the estimator, from user21's hand session on the local control plane:

- "estimated cpu 101 s ± 1 s, gpu 27 s ± 0 s from 2 samples, which together ran 20.4% as long as
  its gpu run": "± 0 s" said the estimate had no uncertainty (it had 0.36 s), and the sampling
  cost named neither how long the samples ran nor which "gpu run" (a sample's, the Job's);
- a Job created without ``spec.suspend: true`` was told "submitted without spec.suspend: true, or
  unsuspended before sampling ended": the estimator can tell which (the job-controller writes a
  ``Suspended`` condition only on a Job that was suspended), and it did not say that AlloX then
  does not choose its kind;
- (read in the code beside them) a stopped sample was "recorded as long", the estimator's own
  term, and a workload ignoring its sample length was told only "a sample costs what it runs";
- ij-badest's estimate was refused as "must be a number of seconds in (0, 1000000000], got
  'fast'" (the webhook's warning and the Job's Event say the same), interval notation for a
  bound; its other entry, {"gpu": {"minutes": 3}}, would have read "got None"."""

from __future__ import annotations

import json

import pytest

from estimator.contract import parse_estimate
from estimator.controller import describe, length_ignored_message, not_estimated_message, stopped_message
from estimator.model import ConfigurationEstimate
from estimator.objects import JOB_DECODER
from estimator.planner import Decision, SampleKey, StopSample
from scheduler.errors import InvalidAnnotation
from scheduler.wording import duration


def estimate(kind: str, seconds: float, uncertainty: float) -> ConfigurationEstimate:
    return ConfigurationEstimate(configuration=kind, seconds=seconds, uncertainty_seconds=uncertainty, pod_seconds=seconds,
                                 memory_bytes=None, samples=1, method="samples")


def test_an_uncertainty_under_a_second_is_not_said_as_zero() -> None:
    assert duration(0.36) == "0.4 s"
    assert duration(0.04) == "0.04 s"
    assert duration(0) == "0 s" and duration(45) == "45 s" and duration(720) == "12 min"


def test_the_estimated_event_says_how_long_sampling_ran_and_against_which_estimate() -> None:
    decision = Decision(estimates={"cpu": estimate("cpu", 101.0, 1.415), "gpu": estimate("gpu", 27.0, 0.36)},
                        samples={"cpu": [], "gpu": []}, overhead_fraction=5.5 / 27.0)
    text = describe(decision)
    assert text.startswith("estimated cpu 101 s ± 1 s, gpu 27 s ± 0.4 s from 0 samples")
    assert "± 0 s" not in text
    # The samples' time in seconds, and the Job's own estimate it is a share of, with its kind.
    assert text.endswith("which ran 6 s in all: 20.4% of its estimated 27 s on gpu")


def job(*, suspend: bool, conditions: list[dict[str, str]]) -> object:
    body = {"metadata": {"name": "eager", "namespace": "ml", "uid": "u-eager",
                         "annotations": {"cellfit.io/configurations": '{"cpu": {"resources": {"cpu": "1"}}}'}},
            "spec": {"suspend": suspend, "template": {"spec": {}}}, "status": {"conditions": conditions}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def test_a_job_created_unsuspended_is_told_that_and_not_the_other_case() -> None:
    text = not_estimated_message(job(suspend=False, conditions=[]))  # type: ignore[arg-type]
    assert "created without spec.suspend: true" in text
    assert "unsuspended" not in text and ", or " not in text
    assert "AlloX does not choose CPU or GPU" in text


def test_a_job_its_user_unsuspended_while_sampling_is_told_that() -> None:
    resumed = [{"type": "Suspended", "status": "False", "reason": "JobResumed", "message": "Job resumed"}]
    text = not_estimated_message(job(suspend=False, conditions=resumed))  # type: ignore[arg-type]
    assert "unsuspended" in text and "before cellfit's sampling ended" in text
    assert "created without" not in text
    assert "AlloX does not choose CPU or GPU" in text


def test_a_stopped_sample_says_what_it_still_counts_for() -> None:
    stop = StopSample(pod="train-cpu-l0-0", key=SampleKey(configuration="cpu", pilot=0, length="long"), iterations=20,
                      seconds=312.4, deadline_seconds=95.0)
    text = stopped_message(stop)
    assert text.startswith("sample train-cpu-l0-0 ran 5 min, longer than the 95 s")
    assert "stopped" in text and "cpu run of at least 5 min" in text
    assert "recorded as long" not in text  # the estimator's own term, not the reader's


def test_a_workload_ignoring_its_sample_length_is_told_what_to_change() -> None:
    text = length_ignored_message("train-gpu-l0-0", ran=1000, asked=20)
    assert "ran 1000 iterations" in text and "CELLFIT_SAMPLE_ITERATIONS=20" in text
    assert "training loop stop after CELLFIT_SAMPLE_ITERATIONS iterations" in text
    assert "the estimate uses the 1000 it reported" in text


def refusal(text: str) -> str:
    with pytest.raises(InvalidAnnotation) as raised:
        parse_estimate(text)
    return str(raised.value)


def test_an_estimate_entry_without_seconds_is_told_it_is_missing_and_what_it_has() -> None:
    # ij-badest's second entry, {"gpu": {"minutes": 3}}: it read "got None".
    told = refusal('{"gpu": {"minutes": 3}}')
    assert told.startswith("cellfit.io/estimate.gpu.seconds: is missing")
    assert '{"seconds": 600}' in told and "(it has minutes)" in told
    assert "None" not in told


def test_an_estimates_bounds_are_said_in_words_not_interval_notation() -> None:
    told = refusal('{"cpu": {"seconds": "fast"}}')
    assert "above 0 and at most 1,000,000,000" in told and told.endswith("got 'fast'")
    assert "(0," not in told and "]" not in told
