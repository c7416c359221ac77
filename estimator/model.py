"""From samples to estimates: the estimator's pure model (AlloX §4.1, SLearn §4.1).

A sample is one short run of a Job's pod in one configuration: ``k`` iterations took ``t``
seconds. Training loops cost a start-up (imports, data loading, CUDA context) plus a time per
iteration, so a configuration's samples are fitted as ``t = a + b·k`` over at least two sample
lengths, and one pod's whole run of ``N`` iterations is predicted as ``a + b·N``: the start-up is
paid once, never multiplied by ``N / k``. The two lengths may come from one run: a workload that
reports the time it had reached at an earlier iteration (``splits`` in the termination message)
gives both from one pod, one start-up paid instead of two.

A workload that reports its start-up (``startupSeconds`` in the termination message: the part
of ``t`` before the first iteration) is fitted from inside each run instead: the start-up is
measured, not extrapolated, so its jitter between runs is no longer multiplied by
``N / (k_long - k_short)`` (on a loaded node that jitter dominated the two-point fit's error).
The iterations' own time ``t - startup`` is fitted through the origin, ``b·k``, unless the two
lengths show a warm-up (first iterations slower or faster, e.g. autotuning) beyond three times
its standard error (two let timing noise on a busy node pass for a warm-up, whose extrapolation
then costs more than the warm-up it corrects); then the loop is fitted as ``w + b·k`` and the warm-up ``w`` joins the start-up.

Uncertainty: each sample's timing has a noise of ``timing_noise_fraction`` of its length (other
work on the node) plus its clock's resolution (1 s when it is read from container timestamps,
see :class:`Sample`). The fit is weighted by those variances, and the prediction's standard
deviation comes from the fit's covariance, scaled up by the residuals when more samples than
parameters show more scatter than the noise model allows.

A multi-pod Job is sampled on a few pilot pods (SLearn's pilot tasks); the task mean is the mean
of their predictions and its uncertainty the task-wise spread over the square root of the pilot
count. A family's history gives a prior (mean μ, σ0) combined with the samples (mean of m
predictions, task-wise σ1) as SLearn §4.1's Gaussian posterior:
``(Σ y_i/σ1² + μ/σ0²) / (m/σ1² + 1/σ0²)``, variance ``1 / (m/σ1² + 1/σ0²)``.

Pure: no I/O, no clock, deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Final, Iterable, Literal, Sequence

Method = Literal["samples", "proportional", "posterior", "history", "lower-bound", "user"]

MIB: Final = 2**20


@dataclass(frozen=True)
class ModelSettings:
    """The model's knobs; the defaults are those documented in estimator/README.md."""

    # Relative timing noise of one sample (one standard deviation), from sharing a node.
    timing_noise_fraction: float = 0.02
    # Memory demand = the samples' peak times this, rounded up to a MiB (Gandiva-style headroom
    # for allocator growth over a longer run).
    memory_headroom: float = 1.25
    # Relative spread assumed for a family prior backed by a single past Job.
    single_history_cov: float = 0.5


@dataclass(frozen=True)
class Sample:
    """One sampling run. ``complete=False``: stopped as long after ``seconds``, so the run would
    have taken more (a lower bound)."""

    configuration: str
    iterations: int
    seconds: float
    peak_memory_bytes: int | None = None
    complete: bool = True
    # Clock resolution of ``seconds``: ~0 from the termination message, 1 s from container
    # start/finish timestamps (RFC 3339 seconds).
    resolution_seconds: float = 0.0
    # Which pilot pod of a multi-pod Job this sample ran as (0 for single-pod Jobs).
    pilot: int = 0
    # The part of ``seconds`` before the first iteration, when the workload reports it.
    startup_seconds: float | None = None
    # Times the run reported on its way (``splits`` in the termination message): ``(k_j, t_j)``
    # with ``k_j < iterations``, ``t_j`` counted from the same start as ``seconds``. Each is a
    # shorter sample of the same run, so one pod gives two sample lengths for one start-up.
    splits: tuple[tuple[int, float], ...] = ()

    def points(self) -> tuple[Sample, ...]:
        """The run as points of the fit: itself and, for each split, the run cut there (same
        start-up and clock)."""
        cuts = tuple(
            Sample(
                self.configuration, k, t, resolution_seconds=self.resolution_seconds, pilot=self.pilot,
                startup_seconds=self.startup_seconds,
            )
            for k, t in self.splits
            if 0 < k < self.iterations
        )
        return (replace(self, splits=()), *cuts) if cuts else (self,)


@dataclass(frozen=True)
class LinearFit:
    """``t = startup_seconds + seconds_per_iteration · k`` with the covariance of the two."""

    startup_seconds: float
    seconds_per_iteration: float
    var_startup: float
    cov: float
    var_per_iteration: float
    proportional: bool  # fitted through the origin (one sample length, or a negative slope)

    def predict(self, iterations: float) -> float:
        return self.startup_seconds + self.seconds_per_iteration * iterations

    def std(self, iterations: float) -> float:
        variance = self.var_startup + 2 * iterations * self.cov + iterations * iterations * self.var_per_iteration
        return math.sqrt(max(variance, 0.0))


def _timed_at_least(sample: Sample) -> Sample:
    """A run read as 0 s off a clock of resolution ``r`` took between 0 and ``r``: half of it,
    not 0 (which the fit extrapolates to a Job of 0 s, whatever its iterations)."""
    floor = sample.resolution_seconds / 2
    return replace(sample, seconds=floor) if sample.seconds < floor else sample


def _variance(sample: Sample, settings: ModelSettings) -> float:
    noise = settings.timing_noise_fraction * sample.seconds
    # A difference of two timestamps each rounded to ``resolution``: uniform error, variance r²/6.
    floor = 1e-6 + sample.resolution_seconds**2 / 6
    return noise * noise + floor


@dataclass(frozen=True)
class _Sums:
    """The weighted sums both least-squares fits (with and without an intercept) are made of."""

    sw: float
    swk: float
    swkk: float
    swt: float
    swkt: float

    @classmethod
    def of(cls, points: Sequence[Sample], weights: Sequence[float]) -> _Sums:
        pairs = list(zip(weights, points))
        return cls(
            sw=sum(weights),
            swk=sum(w * s.iterations for w, s in pairs),
            swkk=sum(w * s.iterations * s.iterations for w, s in pairs),
            swt=sum(w * s.seconds for w, s in pairs),
            swkt=sum(w * s.iterations * s.seconds for w, s in pairs),
        )

    @property
    def det(self) -> float:
        return self.sw * self.swkk - self.swk * self.swk

    def line(self) -> tuple[float, float]:
        """Intercept and slope of ``t = a + b·k`` (at least two distinct lengths)."""
        slope = (self.sw * self.swkt - self.swk * self.swt) / self.det
        return (self.swt - slope * self.swk) / self.sw, slope

    def origin_slope(self) -> float:
        """Slope of ``t = b·k``."""
        return self.swkt / self.swkk


def fit_linear(samples: Sequence[Sample], *, settings: ModelSettings = ModelSettings()) -> LinearFit:
    """Weighted least squares of ``t`` on ``k`` over complete samples (and their splits,
    :meth:`Sample.points`). With one distinct length,
    or when noise makes the slope negative, the fit goes through the origin (``t = b·k``), which
    over-estimates by the start-up's share rather than extrapolating noise."""
    points = [_timed_at_least(point) for s in samples if s.complete and s.iterations > 0 for point in s.points()]
    if not points:
        raise ValueError("no complete sample to fit")
    if all(s.startup_seconds is not None for s in points):
        return _fit_from_inside(points, settings)
    weights = [1.0 / _variance(s, settings) for s in points]
    sums = _Sums.of(points, weights)
    # Weights ten orders of magnitude apart (a 0 s report beside a huge one) cancel the
    # determinant to 0: no line to fit, the origin's stands.
    if len({s.iterations for s in points}) >= 2 and sums.det > 0:
        intercept, slope = sums.line()
        if slope > 0:
            scale = _scatter(points, weights, lambda k: intercept + slope * k, parameters=2)
            return LinearFit(
                startup_seconds=intercept,
                seconds_per_iteration=slope,
                var_startup=scale * sums.swkk / sums.det,
                cov=-scale * sums.swk / sums.det,
                var_per_iteration=scale * sums.sw / sums.det,
                proportional=False,
            )
    slope = sums.origin_slope()
    scale = _scatter(points, weights, lambda k: slope * k, parameters=1)
    # The start-up ``s`` this fit takes as 0 is any part of the shortest run: t = s + b'·k
    # makes the prediction ``slope·N - s·(c·N - 1)``, c = Σwk/Σwk². Its error is counted as
    # s's mean square over [0, t_min] (t_min²/3), as a start-up of that variance whose
    # covariance with the slope is -c times it: no error at the samples' own length, the
    # start-up's share of them extrapolated beyond.
    startup_square = min(s.seconds for s in points) ** 2 / 3
    share = sums.swk / sums.swkk
    return LinearFit(
        startup_seconds=0.0,
        seconds_per_iteration=slope,
        var_startup=startup_square,
        cov=-share * startup_square,
        var_per_iteration=scale / sums.swkk + share * share * startup_square,
        proportional=True,
    )


def _fit_from_inside(points: Sequence[Sample], settings: ModelSettings) -> LinearFit:
    """Start-up measured by each run, iterations' time fitted apart (see the module's doc)."""
    startups = [s.startup_seconds or 0.0 for s in points]
    startup = sum(startups) / len(startups)
    # The full run's start-up is one more draw: the runs' spread, at least the timing noise.
    spread = sum((v - startup) ** 2 for v in startups) / (len(startups) - 1) if len(startups) >= 2 else 0.0
    var_startup = max(spread, (settings.timing_noise_fraction * startup) ** 2, 1e-12)
    loop_points = [
        Sample(s.configuration, s.iterations, max(s.seconds - v, 0.0), resolution_seconds=s.resolution_seconds)
        for s, v in zip(points, startups)
    ]
    weights = [1.0 / _variance(s, settings) for s in loop_points]
    sums = _Sums.of(loop_points, weights)
    slope = sums.origin_slope()
    fit = LinearFit(
        startup_seconds=startup,
        seconds_per_iteration=slope,
        var_startup=var_startup,
        cov=0.0,
        var_per_iteration=_scatter(loop_points, weights, lambda k: slope * k, parameters=1) / sums.swkk,
        proportional=False,
    )
    if len({s.iterations for s in loop_points}) < 2 or sums.det <= 0:  # det: as in fit_linear
        return fit
    warmup, warm_slope = sums.line()
    var_warmup = sums.swkk / sums.det  # the noise model's, unscaled: two lengths leave no residual to scale by
    if warm_slope <= 0 or warmup * warmup <= 9 * var_warmup:
        return fit
    return LinearFit(
        startup_seconds=startup + warmup,
        seconds_per_iteration=warm_slope,
        var_startup=var_startup + var_warmup,
        cov=-sums.swk / sums.det,
        var_per_iteration=sums.sw / sums.det,
        proportional=False,
    )


def _scatter(points: Sequence[Sample], weights: Sequence[float], predict: object, *, parameters: int) -> float:
    """Reduced chi-square when there are more points than parameters and it exceeds 1."""
    if len(points) <= parameters:
        return 1.0
    residual = sum(w * (s.seconds - predict(s.iterations)) ** 2 for w, s in zip(weights, points))  # type: ignore[operator]
    return max(1.0, residual / (len(points) - parameters))


@dataclass(frozen=True)
class Prior:
    """A family's history for one configuration: seconds per iteration (start-up included) of
    its past Jobs' pods."""

    mean_per_iteration: float
    std_per_iteration: float
    count: int
    # The family's task-wise spread: the pooled coefficient of variation of its past Jobs' pilot
    # pods (0: unknown). It floors σ1, which one or two pilots of a new Job cannot measure.
    task_cov: float = 0.0

    @property
    def cov(self) -> float:
        return self.std_per_iteration / self.mean_per_iteration if self.mean_per_iteration > 0 else math.inf


@dataclass(frozen=True)
class ConfigurationEstimate:
    """One configuration's estimate for a whole Job."""

    configuration: str
    seconds: float  # the Job's processing time: pod time × waves
    uncertainty_seconds: float  # one standard deviation
    pod_seconds: float
    memory_bytes: int | None  # per pod, headroom included
    samples: int
    method: Method
    # The pilots' predictions' coefficient of variation (SLearn's task-wise variation seen in
    # this Job), with two pilots or more; recorded so that the family learns its task spread.
    task_cov: float | None = None

    @property
    def lower_bound(self) -> bool:
        return self.method == "lower-bound"


def memory_demand(samples: Iterable[Sample], *, settings: ModelSettings = ModelSettings()) -> int | None:
    peaks = [s.peak_memory_bytes for s in samples if s.peak_memory_bytes is not None and s.peak_memory_bytes > 0]
    if not peaks:
        return None
    return math.ceil(max(peaks) * settings.memory_headroom / MIB) * MIB


def estimate_configuration(
    configuration: str,
    samples: Sequence[Sample],
    *,
    iterations: int,
    waves: int = 1,
    prior: Prior | None = None,
    settings: ModelSettings = ModelSettings(),
) -> ConfigurationEstimate:
    """The estimate of a Job whose pods each run ``iterations`` in ``waves`` rounds, from its
    samples in ``configuration`` (any pilots), combined with ``prior`` when given."""
    own = [s for s in samples if s.configuration == configuration]
    memory = memory_demand(own, settings=settings)
    pilots: dict[int, list[Sample]] = {}
    for sample in own:
        pilots.setdefault(sample.pilot, []).append(sample)
    predictions = [p for p in (_pilot_prediction(runs, iterations=iterations, settings=settings) for runs in pilots.values()) if p]
    if not any(s.complete for s in own):
        bound = max((p.mean for p in predictions), default=0.0)
        if prior is not None and prior.mean_per_iteration * iterations >= bound:
            return _from_prior(configuration, prior, iterations=iterations, waves=waves, memory=memory, samples=len(own))
        if not predictions:
            raise ValueError(f"no sample of configuration {configuration!r}")
        return ConfigurationEstimate(
            configuration=configuration, seconds=bound * waves, uncertainty_seconds=0.0, pod_seconds=bound,
            memory_bytes=memory, samples=len(own), method="lower-bound",
        )
    m = len(predictions)
    means = [p.mean for p in predictions]
    mean = sum(means) / m
    measurement = sum(p.variance for p in predictions) / m
    spread = sum((y - mean) ** 2 for y in means) / (m - 1) if m >= 2 else 0.0
    task_variance = max(spread, measurement, 1e-12)  # σ1²: one task's variance around the mean
    task_cov = math.sqrt(spread) / mean if m >= 2 and mean > 0 else None
    bounded = any(p.bound for p in predictions)
    method: Method = "lower-bound" if bounded else "proportional" if any(p.proportional for p in predictions) else "samples"
    variance = task_variance / m
    # A pilot's proven lower bound is not made shorter by its family's history.
    if prior is not None and not bounded:
        # With m = 1-2 pilots the spread seen is mostly luck: the family's own spread is a floor,
        # or the posterior would trust a skewed pilot over a steady history (SLearn §4.1).
        task_variance = max(task_variance, (prior.task_cov * mean) ** 2)
        prior_mean = prior.mean_per_iteration * iterations
        prior_variance = max((prior.std_per_iteration * iterations) ** 2, 1e-12)
        precision = m / task_variance + 1 / prior_variance
        # Never shorter than the pilots' own runs took of it: the history may be of Jobs that
        # started faster, and a run is never shorter than a part of it.
        ran = sum(p.longest for p in predictions) / m
        mean = max((sum(means) / task_variance + prior_mean / prior_variance) / precision, ran)
        variance = 1 / precision
        method = "posterior"
    return ConfigurationEstimate(
        configuration=configuration,
        seconds=mean * waves,
        uncertainty_seconds=math.sqrt(variance) * waves,
        pod_seconds=mean,
        memory_bytes=memory,
        samples=len(own),
        method=method,
        task_cov=task_cov,
    )


@dataclass(frozen=True)
class _PilotPrediction:
    """One pilot pod's predicted run. ``bound``: a run of it stopped as long proved more than
    its finished runs predict (or none finished), and ``mean`` is that lower bound."""

    mean: float
    variance: float
    proportional: bool
    bound: bool
    longest: float  # the pilot's longest sample: its run takes at least that


def _pilot_prediction(samples: Sequence[Sample], *, iterations: int, settings: ModelSettings) -> _PilotPrediction | None:
    # Stopped before finishing: the run is at least as long as that rate extrapolated.
    bound = max((s.seconds * max(1.0, iterations / s.iterations) for s in samples if not s.complete and s.iterations > 0), default=None)
    longest = max(s.seconds for s in samples)
    if not any(s.complete for s in samples):
        return None if bound is None else _PilotPrediction(mean=bound, variance=0.0, proportional=False, bound=True, longest=longest)
    fit = fit_linear(samples, settings=settings)
    predicted = max(fit.predict(iterations), longest)  # a run is never shorter than a part of it
    if bound is not None and bound > predicted:
        return _PilotPrediction(mean=bound, variance=0.0, proportional=fit.proportional, bound=True, longest=longest)
    return _PilotPrediction(
        mean=predicted, variance=fit.std(iterations) ** 2, proportional=fit.proportional, bound=False, longest=longest
    )


def _from_prior(
    configuration: str, prior: Prior, *, iterations: int, waves: int, memory: int | None, samples: int
) -> ConfigurationEstimate:
    pod_seconds = prior.mean_per_iteration * iterations
    return ConfigurationEstimate(
        configuration=configuration,
        seconds=pod_seconds * waves,
        uncertainty_seconds=prior.std_per_iteration * iterations * waves,
        pod_seconds=pod_seconds,
        memory_bytes=memory,
        samples=samples,
        method="history",
    )


def estimate_from_history(configuration: str, prior: Prior, *, iterations: int, waves: int = 1) -> ConfigurationEstimate:
    """A family whose history is tight enough skips sampling: the prior alone."""
    return _from_prior(configuration, prior, iterations=iterations, waves=waves, memory=None, samples=0)


def prior_from_history(
    per_iteration_seconds: Sequence[float], *, task_covs: Sequence[float] = (), settings: ModelSettings = ModelSettings()
) -> Prior | None:
    """μ and σ0 of a family's past pods' seconds per iteration (job-wise variation), and the
    family's task spread: the root mean square of its past Jobs' pilots' coefficients of
    variation (each an unbiased variance estimate, however few pilots it had)."""
    values = [v for v in per_iteration_seconds if v > 0 and math.isfinite(v)]
    if not values:
        return None
    covs = [c for c in task_covs if c >= 0 and math.isfinite(c)]
    task_cov = math.sqrt(sum(c * c for c in covs) / len(covs)) if covs else 0.0
    mean = sum(values) / len(values)
    if len(values) == 1:
        return Prior(mean_per_iteration=mean, std_per_iteration=mean * settings.single_history_cov, count=1, task_cov=task_cov)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    # Identical past runs do not make the next one certain: at least the timing noise.
    return Prior(
        mean_per_iteration=mean, std_per_iteration=max(std, mean * settings.timing_noise_fraction), count=len(values),
        task_cov=task_cov,
    )
