"""The estimator's pure model: the linear fit, its uncertainty, pilots, the posterior, memory."""

import math

import pytest
from hypothesis import given, settings, strategies as st

from estimator.model import (
    MIB,
    ModelSettings,
    Prior,
    Sample,
    estimate_configuration,
    estimate_from_history,
    fit_linear,
    memory_demand,
    prior_from_history,
)


def test_two_lengths_separate_startup_from_per_iteration_time():
    # 5 s start-up, 0.5 s per iteration: the proportional guess t·N/k would say 750 s, not 505 s.
    samples = [Sample("gpu", 10, 10.0), Sample("gpu", 20, 15.0)]
    fit = fit_linear(samples)
    assert fit.startup_seconds == pytest.approx(5.0)
    assert fit.seconds_per_iteration == pytest.approx(0.5)
    assert not fit.proportional
    estimate = estimate_configuration("gpu", samples, iterations=1000)
    assert estimate.seconds == pytest.approx(505.0)
    assert estimate.method == "samples"


@settings(max_examples=200, deadline=None)
@given(
    startup=st.floats(0, 100),
    per_iteration=st.floats(1e-3, 100),
    short=st.integers(1, 1000),
    extra=st.integers(1, 1000),
    iterations=st.integers(3, 10**7),
    reported=st.booleans(),
)
def test_noiseless_samples_predict_exactly(startup, per_iteration, short, extra, iterations, reported):
    # Fitted across the two runs, or from inside each when the run reports its start-up.
    long = short + extra
    samples = [Sample("cpu", k, startup + per_iteration * k, startup_seconds=startup if reported else None) for k in (short, long)]
    estimate = estimate_configuration("cpu", samples, iterations=iterations)
    truth = max(startup + per_iteration * iterations, samples[-1].seconds)
    assert estimate.seconds == pytest.approx(truth, rel=1e-6, abs=1e-6)


def test_a_reported_startup_is_measured_not_extrapolated():
    # Start-up jitter between the two runs (5.0 s vs 5.3 s) is 30% of the short run's loop:
    # the two-point fit multiplies it by N/(k_long - k_short); the run's own split does not.
    jittered = [Sample("cpu", 10, 5.0 + 1.0), Sample("cpu", 20, 5.3 + 2.0)]
    inside = [Sample("cpu", 10, 6.0, startup_seconds=5.0), Sample("cpu", 20, 7.3, startup_seconds=5.3)]
    truth = 5.15 + 0.1 * 1000
    across = estimate_configuration("cpu", jittered, iterations=1000).seconds
    split = estimate_configuration("cpu", inside, iterations=1000).seconds
    assert abs(across - truth) > 0.25 * truth
    assert split == pytest.approx(truth, rel=1e-9)


def test_a_runs_split_is_a_second_length_of_the_same_run():
    # One run of 20 iterations that reached iteration 10 at 6.0 s: the two lengths of the fit,
    # with one start-up, measured or not.
    for startup in (5.0, None):
        one = [Sample("cpu", 20, 7.0, startup_seconds=startup, splits=((10, 6.0),))]
        fit = fit_linear(one)
        assert (fit.startup_seconds, fit.seconds_per_iteration) == (pytest.approx(5.0), pytest.approx(0.1))
        assert not fit.proportional
        estimate = estimate_configuration("cpu", one, iterations=1000)
        assert estimate.seconds == pytest.approx(105.0) and estimate.samples == 1 and estimate.method == "samples"


def test_a_split_shares_the_runs_start_up_so_its_jitter_is_not_extrapolated():
    # Two runs whose start-ups differ by 0.3 s mislead the fit across runs (see above); a run
    # and its own split, sharing one start-up, do not.
    across = estimate_configuration("cpu", [Sample("cpu", 10, 6.0), Sample("cpu", 20, 7.3)], iterations=1000).seconds
    split = estimate_configuration("cpu", [Sample("cpu", 20, 7.3, splits=((10, 6.3),))], iterations=1000).seconds
    truth = 5.3 + 0.1 * 1000
    assert abs(across - truth) > 0.25 * truth
    assert split == pytest.approx(truth, rel=1e-9)


def test_a_warmup_beyond_the_noise_joins_the_startup():
    # The first iterations cost 2 s more (autotuning): 2 + 0.1·k inside the loop, 5 s before it.
    samples = [Sample("gpu", k, 5.0 + 2.0 + 0.1 * k, startup_seconds=5.0) for k in (100, 200)]
    fit = fit_linear(samples)
    assert fit.startup_seconds == pytest.approx(7.0)
    assert fit.seconds_per_iteration == pytest.approx(0.1)
    assert estimate_configuration("gpu", samples, iterations=10_000).seconds == pytest.approx(1007.0)


def test_a_warmup_within_the_noise_is_not_extrapolated():
    # 0.05 s of "warm-up" on loops of 10 and 20 s is noise (2% of a loop is 0.2-0.4 s): the
    # loop is fitted through the origin, the slope from both lengths together.
    samples = [Sample("cpu", 100, 1.0 + 10.05, startup_seconds=1.0), Sample("cpu", 200, 1.0 + 20.0, startup_seconds=1.0)]
    fit = fit_linear(samples)
    assert fit.startup_seconds == pytest.approx(1.0)
    assert fit.seconds_per_iteration == pytest.approx(30.05 / 300, rel=0.01)


def test_a_warmup_under_three_standard_errors_is_not_extrapolated():
    # 1.5 s on loops of ~11.5 and ~21.5 s is about 2.4 standard errors of the 2% noise model:
    # taken as a warm-up it would move the slope by 15%, for what noise on a busy node can do.
    samples = [Sample("cpu", k, 5.0 + 1.5 + 0.1 * k, startup_seconds=5.0) for k in (100, 200)]
    fit = fit_linear(samples)
    assert fit.startup_seconds == pytest.approx(5.0)
    assert fit.seconds_per_iteration == pytest.approx((11.5 + 21.5) / 300, rel=0.02)


def test_without_every_startup_the_fit_is_across_runs():
    mixed = [Sample("cpu", 10, 6.0, startup_seconds=5.0), Sample("cpu", 20, 7.0)]
    assert fit_linear(mixed).startup_seconds == pytest.approx(5.0)  # t = 5 + 0.1·k from both runs' totals


def test_uncertainty_grows_with_extrapolation_and_with_timestamp_resolution():
    precise = [Sample("gpu", 10, 10.0), Sample("gpu", 20, 15.0)]
    coarse = [Sample("gpu", 10, 10.0, resolution_seconds=1.0), Sample("gpu", 20, 15.0, resolution_seconds=1.0)]
    near = estimate_configuration("gpu", precise, iterations=100).uncertainty_seconds
    far = estimate_configuration("gpu", precise, iterations=1000).uncertainty_seconds
    assert 0 < near < far
    assert estimate_configuration("gpu", coarse, iterations=1000).uncertainty_seconds > far


def test_scatter_beyond_the_noise_model_widens_the_uncertainty():
    steady = [Sample("cpu", k, 2 + k) for k in (10, 10, 20, 20)]
    noisy = [Sample("cpu", 10, 9.0), Sample("cpu", 10, 15.0), Sample("cpu", 20, 19.0), Sample("cpu", 20, 25.0)]
    assert fit_linear(noisy).std(1000) > 2 * fit_linear(steady).std(1000)


def test_one_length_or_negative_slope_falls_back_to_proportional():
    one = fit_linear([Sample("cpu", 10, 20.0)])
    assert one.proportional and one.predict(100) == pytest.approx(200.0)
    # Noise made the longer run faster: extrapolating that slope would predict less than observed.
    flipped = estimate_configuration("cpu", [Sample("cpu", 10, 20.0), Sample("cpu", 20, 19.0)], iterations=1000)
    assert flipped.method == "proportional"
    assert flipped.seconds > 19.0 * 1000 / 20 * 0.9


def test_a_prediction_is_never_shorter_than_a_sample():
    # Start-up dominates and the fit's slope is tiny: the full run still lasts what its part did.
    estimate = estimate_configuration("gpu", [Sample("gpu", 1, 30.0), Sample("gpu", 2, 30.001)], iterations=3)
    assert estimate.seconds >= 30.001


def test_stopped_samples_give_a_lower_bound():
    estimate = estimate_configuration("cpu", [Sample("cpu", 20, 600.0, complete=False)], iterations=1000)
    assert estimate.method == "lower-bound" and estimate.lower_bound
    assert estimate.seconds == pytest.approx(600.0 * 1000 / 20)


def test_pilots_give_the_task_mean_and_its_spread_over_root_m():
    # Three pilot pods of one Job with different task lengths (task skew).
    samples = []
    for pilot, per_iteration in enumerate((1.0, 2.0, 3.0)):
        samples += [Sample("cpu", k, 1 + per_iteration * k, pilot=pilot) for k in (10, 20)]
    estimate = estimate_configuration("cpu", samples, iterations=100, waves=4)
    assert estimate.pod_seconds == pytest.approx(201.0)
    assert estimate.seconds == pytest.approx(4 * 201.0)
    # σ1 = 100 s across pilots; the mean of 3 has σ1/√3.
    assert estimate.uncertainty_seconds == pytest.approx(4 * 100 / math.sqrt(3), rel=1e-6)


def test_posterior_lies_between_prior_and_samples_weighted_by_precision():
    samples = [Sample("gpu", 10, 10.0), Sample("gpu", 20, 20.0)]  # 1 s per iteration
    alone = estimate_configuration("gpu", samples, iterations=1000)
    vague = Prior(mean_per_iteration=2.0, std_per_iteration=10.0, count=5)
    sharp = Prior(mean_per_iteration=2.0, std_per_iteration=0.001, count=5)
    with_vague = estimate_configuration("gpu", samples, iterations=1000, prior=vague)
    with_sharp = estimate_configuration("gpu", samples, iterations=1000, prior=sharp)
    assert with_vague.method == with_sharp.method == "posterior"
    assert alone.seconds < with_vague.seconds < with_sharp.seconds <= 2000.0
    assert with_vague.seconds == pytest.approx(alone.seconds, rel=0.01)
    assert with_sharp.seconds == pytest.approx(2000.0, rel=0.01)
    assert with_sharp.uncertainty_seconds < alone.uncertainty_seconds


def test_posterior_formula_matches_slearn():
    # m = 1 prediction y with variance σ1², prior μ, σ0²: (y/σ1² + μ/σ0²) / (1/σ1² + 1/σ0²).
    samples = [Sample("gpu", 10, 10.0), Sample("gpu", 20, 20.0)]
    alone = estimate_configuration("gpu", samples, iterations=100)
    y, var1 = alone.seconds, alone.uncertainty_seconds**2
    prior = Prior(mean_per_iteration=1.5, std_per_iteration=0.05, count=4)
    mu, var0 = 150.0, 5.0**2
    combined = estimate_configuration("gpu", samples, iterations=100, prior=prior)
    assert combined.seconds == pytest.approx((y / var1 + mu / var0) / (1 / var1 + 1 / var0))
    assert combined.uncertainty_seconds == pytest.approx(math.sqrt(1 / (1 / var1 + 1 / var0)))


def test_the_family_task_spread_floors_what_one_or_two_pilots_see():
    # Two pilots that happen to agree (10 s per iteration each) against a steady family at 20 s
    # whose past Jobs' pilots spread by 50%: one lucky pair must not outweigh the history.
    pilots = [Sample("cpu", k, 10.0 * k, pilot=p, startup_seconds=0.0) for p in (0, 1) for k in (10, 20)]
    blind = prior_from_history([20.0, 20.5, 19.5])
    informed = prior_from_history([20.0, 20.5, 19.5], task_covs=[0.6, 0.4, 0.5])
    assert blind.task_cov == 0.0 and informed.task_cov == pytest.approx(math.sqrt((0.36 + 0.16 + 0.25) / 3))
    trusting = estimate_configuration("cpu", pilots, iterations=100, prior=blind).pod_seconds
    floored = estimate_configuration("cpu", pilots, iterations=100, prior=informed).pod_seconds
    assert trusting < 1100 < floored < 2000
    # The pilots' own spread is recorded for the family (two pilots or more), and a floor never
    # narrows what the pilots show.
    spread = [Sample("cpu", k, r * k, pilot=p, startup_seconds=0.0) for p, r in ((0, 8.0), (1, 12.0)) for k in (10, 20)]
    assert estimate_configuration("cpu", spread, iterations=100).task_cov == pytest.approx(math.sqrt(2) * 200 / 1000)  # 800 s and 1200 s
    assert estimate_configuration("cpu", pilots[:2], iterations=100).task_cov is None


def test_history_prior_and_history_only_estimate():
    prior = prior_from_history([1.0, 1.1, 0.9])
    assert prior.count == 3 and prior.mean_per_iteration == pytest.approx(1.0)
    assert prior.std_per_iteration == pytest.approx(0.1)
    one = prior_from_history([2.0])
    assert one.std_per_iteration == pytest.approx(2.0 * ModelSettings().single_history_cov)
    assert prior_from_history([]) is None
    same = prior_from_history([3.0, 3.0, 3.0])
    assert same.std_per_iteration > 0  # identical history is not certainty
    estimate = estimate_from_history("cpu", prior, iterations=500, waves=2)
    assert estimate.method == "history" and estimate.samples == 0
    assert estimate.seconds == pytest.approx(1000.0)


def test_memory_demand_is_the_peak_with_headroom_in_whole_mib():
    samples = [Sample("gpu", 10, 1.0, peak_memory_bytes=100 * MIB), Sample("gpu", 20, 2.0, peak_memory_bytes=300 * MIB + 1)]
    assert memory_demand(samples) == math.ceil((300 * MIB + 1) * 1.25 / MIB) * MIB
    assert memory_demand([Sample("gpu", 10, 1.0)]) is None
    assert estimate_configuration("gpu", samples, iterations=100).memory_bytes == memory_demand(samples)


def test_only_the_named_configuration_counts():
    samples = [Sample("gpu", 10, 10.0), Sample("gpu", 20, 15.0), Sample("cpu", 10, 100.0), Sample("cpu", 20, 150.0)]
    assert estimate_configuration("gpu", samples, iterations=100).seconds == pytest.approx(55.0)
    assert estimate_configuration("cpu", samples, iterations=100).seconds == pytest.approx(550.0)
    with pytest.raises(ValueError):
        estimate_configuration("gpu", [], iterations=100)
