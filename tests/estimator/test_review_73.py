"""Adversarial review of the estimator's pure core (helper-73): what real training programs'
reports, and the Jobs that run them, do to the fit, the estimate AlloX trusts, the plan and the
sampling pod."""

from __future__ import annotations

import json

from estimator.contract import encode_estimate, parse_estimate, parse_sample_report
from estimator.model import Sample, estimate_configuration

# ------------------------------------------------------------------ runs timed at 0 s


def test_a_report_of_zero_seconds_does_not_make_a_zero_estimate():
    """A run of 200 iterations took time: ``"seconds": 0`` says the workload's clock did not
    tick over it (an integer clock). Read as is, the Job was estimated at 0 s, written as
    0.001 s, and AlloX ran it as the shortest Job of all."""
    reports = [parse_sample_report(f'{{"iterations": {k}, "seconds": 0}}') for k in (200, 400)]
    estimate = estimate_configuration("gpu", [r.sample(configuration="gpu", pilot=0) for r in reports], iterations=20_000)
    assert estimate.seconds >= 10.0
    # A clock that ticks keeps its reading to the last digit.
    assert parse_sample_report('{"iterations": 200, "seconds": 0.0004}').sample(configuration="gpu", pilot=0).resolution_seconds == 0


def test_runs_timed_by_their_containers_at_zero_seconds_do_not_make_a_zero_estimate():
    """Container start and finish times are whole seconds: two sub-second runs of 200 and 400
    iterations both read 0 s. The Job is 100 times the long run, whose true time is anywhere in
    [0, 1) s; the estimate was 0 s (written 0.001 s)."""
    timed = [Sample("gpu", 200, 0.0, resolution_seconds=1.0), Sample("gpu", 400, 0.0, resolution_seconds=1.0)]
    estimate = estimate_configuration("gpu", timed, iterations=20_000)
    samples = {"gpu": [("short", timed[0]), ("long", timed[1])]}
    written = parse_estimate(encode_estimate({"gpu": estimate}, samples=samples, overhead_fraction=None)).seconds["gpu"]
    # Half a second each (the middle of what the clock allows), extrapolated: tens of seconds.
    assert written >= 10.0
    assert estimate.uncertainty_seconds > 0
    assert json.loads(encode_estimate({"gpu": estimate}, samples=samples, overhead_fraction=None))["gpu"]["samples"][0]["seconds"] == 0.0
