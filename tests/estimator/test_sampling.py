"""Sample lengths, pilot pods, SLearn's adaptive ratio and the long-sample deadline."""

import pytest
from hypothesis import given, strategies as st

from estimator.model import Sample
from estimator.sampling import (
    SamplingRatio,
    SamplingSettings,
    long_deadline_seconds,
    plan,
    pods_of,
    sample_lengths,
    waves_of,
)


@given(st.integers(3, 10**9))
def test_two_distinct_lengths_below_the_job(iterations):
    lengths = sample_lengths(iterations)
    assert 1 <= lengths["short"] < lengths["long"] < iterations


def test_lengths_are_one_and_two_percent_so_three_percent_in_all():
    assert sample_lengths(10_000) == {"short": 100, "long": 200}


def test_thin_jobs_sample_one_pod_wide_jobs_a_pilot_set():
    assert plan(job_uid="a", iterations=1000, pods=2, ratio=0.05).pilots == (0,)
    wide = plan(job_uid="a", iterations=1000, pods=200, ratio=0.03)
    assert len(wide.pilots) == 6 and all(0 <= p < 200 for p in wide.pilots)
    # max(1, r·S): a wide Job of 3 pods still samples one pilot.
    assert len(plan(job_uid="a", iterations=1000, pods=3, ratio=0.01).pilots) == 1
    assert len(plan(job_uid="a", iterations=1000, pods=10_000, ratio=0.05).pilots) == SamplingSettings().max_pilots


def test_pilots_are_deterministic_per_job():
    assert plan(job_uid="x", iterations=100, pods=500, ratio=0.02).pilots == plan(job_uid="x", iterations=100, pods=500, ratio=0.02).pilots
    assert plan(job_uid="x", iterations=100, pods=500, ratio=0.02).pilots != plan(job_uid="y", iterations=100, pods=500, ratio=0.02).pilots


def test_pods_and_waves():
    assert pods_of(completions=None, parallelism=None) == 1
    assert pods_of(completions=None, parallelism=4) == 4
    assert waves_of(completions=10, parallelism=4) == 3
    assert waves_of(completions=2, parallelism=8) == 1
    assert waves_of(completions=None, parallelism=None) == 1


def test_long_deadline_from_the_fastest_finished_prediction():
    settings = SamplingSettings(long_factor=10, long_min_seconds=0)
    assert long_deadline_seconds(iterations=20, finished=[], settings=settings) is None
    finished = [Sample("gpu", 10, 12.0), Sample("gpu", 20, 22.0), Sample("cpu", 10, 100.0)]
    assert long_deadline_seconds(iterations=20, finished=finished, settings=settings) == pytest.approx(220.0)
    floor = SamplingSettings(long_factor=10, long_min_seconds=1000)
    assert long_deadline_seconds(iterations=20, finished=finished, settings=floor) == 1000


def test_adaptive_ratio_follows_slearn_figure_4():
    ratio = SamplingRatio(window=2)
    assert [ratio.next_ratio() for _ in range(6)] == [0.03, 0.03, 0.02, 0.02, 0.04, 0.04]
    for normalized, sr in ((2.0, 0.03), (2.0, 0.03), (1.5, 0.02), (1.5, 0.02), (3.0, 0.04), (3.0, 0.04)):
        ratio.job_finished(ratio=sr, normalized_jct=normalized)
    # 2% beat 3% by more than 10%: try 1%.
    assert ratio.next_ratio() == 0.01
    ratio.job_finished(ratio=0.01, normalized_jct=1.0)
    assert ratio.next_ratio() == 0.01


def test_adaptive_ratio_goes_up_to_five_when_four_wins_clearly():
    ratio = SamplingRatio(window=1)
    for _ in range(3):
        ratio.next_ratio()
    for normalized, sr in ((2.0, 0.03), (2.5, 0.02), (1.0, 0.04)):
        ratio.job_finished(ratio=sr, normalized_jct=normalized)
    assert ratio.next_ratio() == 0.05
    # A window keeps only the recent Jobs.
    ratio.job_finished(ratio=0.04, normalized_jct=9.0)
    assert ratio.next_ratio() == 0.03
