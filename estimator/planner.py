"""One Job's sampling, decided: from what exists (the Job's plan, its sampling pods, their
results) to what to do next (pods to create or stop, the estimate to write, what failed).

The live controller and the simulator both call :func:`decide`; it keeps no state between calls,
so a restarted controller that lists the same pods decides the same thing (and, because sampling
pods have deterministic names, never starts one twice).

Pure: no I/O, no clock (the caller says how long each running sample has run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping, Sequence

from estimator.model import (
    ConfigurationEstimate,
    ModelSettings,
    Prior,
    Sample,
    estimate_configuration,
    estimate_from_history,
)
from estimator.sampling import LENGTHS, Length, SamplePlan, SamplingSettings, long_deadline_seconds

PodState = Literal["pending", "running", "succeeded", "failed", "stopped"]


@dataclass(frozen=True, order=True)
class SampleKey:
    """One sampling run a plan asks for: a configuration, a pilot pod, a length."""

    configuration: str
    pilot: int
    length: Length


@dataclass(frozen=True)
class SamplePod:
    """A sampling pod as the driver sees it. ``sample``: the result of a succeeded pod (or the
    lower bound of one stopped as long). ``running_seconds``: how long a running pod has run."""

    name: str
    key: SampleKey
    attempt: int
    state: PodState
    sample: Sample | None = None
    running_seconds: float | None = None
    failure: str | None = None
    # Why the termination message, meant as the run's report, does not read (its times stood in).
    report_error: str | None = None
    # Why a pending pod is not on a node yet, in the scheduler's words (PodScheduled False).
    pending_reason: str | None = None


@dataclass(frozen=True)
class CreateSample:
    key: SampleKey
    attempt: int
    iterations: int
    # Asks the run to also report the seconds it reached at this iteration (``splits``): the
    # short sample's length, on a long run whose short one waits for it.
    split_iterations: int | None = None


@dataclass(frozen=True)
class StopSample:
    pod: str
    key: SampleKey
    iterations: int
    seconds: float  # how long it had run: the lower bound it proved
    deadline_seconds: float


@dataclass(frozen=True)
class EstimatorSettings:
    sampling: SamplingSettings = SamplingSettings()
    model: ModelSettings = ModelSettings()
    # Attempts of one sampling run before its configuration counts as failed.
    max_attempts: int = 3
    # A family prior this tight (σ0/μ) and with this many past Jobs replaces sampling.
    history_skip_cov: float = 0.05
    history_skip_min_jobs: int = 3


@dataclass
class Decision:
    create: list[CreateSample] = field(default_factory=list)
    stop: list[StopSample] = field(default_factory=list)
    # Set once every planned run has ended: the estimate per configuration that has one.
    estimates: dict[str, ConfigurationEstimate] | None = None
    # Configurations that could not be estimated, with why.
    failed: dict[str, str] = field(default_factory=dict)
    # The samples behind each configuration's estimate, by pod name.
    samples: dict[str, list[tuple[str, Sample]]] = field(default_factory=dict)
    # Every sample's seconds over the fastest configuration's estimate.
    overhead_fraction: float | None = None
    # Runs waiting for their pod to start or finish.
    in_progress: int = 0

    @property
    def done(self) -> bool:
        return self.estimates is not None


# Where a configuration's long run stands, for its short run waiting on it: still to end;
# ended with a split that stands for the short run (or stopped as long); ended without one; failed.
SampleRunState = Literal["waiting", "done", "no-split", "failed"]


def _covers_short(sample: Sample, plan: SamplePlan) -> bool:
    """A split of the long run nearer the short length than the long one serves as the short
    sample: the two lengths the fit needs, one start-up paid."""
    middle = (plan.iterations["short"] + plan.iterations["long"]) / 2
    return sample.complete and any(0 < k <= middle for k, _ in sample.splits)


def tight(prior: Prior | None, settings: EstimatorSettings) -> bool:
    return (
        prior is not None
        and prior.count >= settings.history_skip_min_jobs
        and prior.cov <= settings.history_skip_cov
    )


def decide(
    *,
    configurations: Sequence[str],
    plan: SamplePlan,
    job_iterations: int,
    waves: int,
    pods: Sequence[SamplePod],
    priors: Mapping[str, Prior] | None = None,
    settings: EstimatorSettings = EstimatorSettings(),
) -> Decision:
    priors = priors or {}
    decision = Decision()
    by_key: dict[SampleKey, list[SamplePod]] = {}
    for pod in pods:
        by_key.setdefault(pod.key, []).append(pod)
    finished = [p.sample for p in pods if p.state == "succeeded" and p.sample is not None]

    results: dict[str, list[tuple[str, Sample]]] = {kind: [] for kind in configurations}
    failures: dict[str, list[str]] = {kind: [] for kind in configurations}
    sampled = [kind for kind in configurations if not tight(priors.get(kind), settings)]
    in_sequence = settings.sampling.short_after_long
    split = plan.iterations["short"] if in_sequence else None
    for kind in sampled:
        for pilot in plan.pilots:
            long_run: SampleRunState = "waiting"
            for length in ("long", "short") if in_sequence else LENGTHS:
                key = SampleKey(configuration=kind, pilot=pilot, length=length)
                iterations = plan.iterations[length]
                attempts = sorted(by_key.get(key, []), key=lambda p: p.attempt)
                latest = attempts[-1] if attempts else None
                if in_sequence and length == "short" and latest is None and long_run in ("waiting", "done"):
                    # The long run may make this one unneeded: wait for it, then skip it when
                    # the run reported a split near the short length, or when it was stopped
                    # as long (the lower bound stands).
                    if long_run == "waiting":
                        decision.in_progress += 1
                    continue
                if latest is None:
                    decision.create.append(
                        CreateSample(key=key, attempt=0, iterations=iterations, split_iterations=split if length == "long" else None)
                    )
                    decision.in_progress += 1
                elif latest.state in ("succeeded", "stopped") and latest.sample is not None:
                    results[kind].append((latest.name, latest.sample))
                    if length == "long":
                        long_run = "done" if _covers_short(latest.sample, plan) else "no-split"
                        if long_run == "no-split" and not latest.sample.complete:
                            long_run = "done"
                elif latest.state == "failed" or latest.sample is None and latest.state in ("succeeded", "stopped"):
                    if latest.attempt + 1 < settings.max_attempts:
                        decision.create.append(
                            CreateSample(
                                key=key, attempt=latest.attempt + 1, iterations=iterations,
                                split_iterations=split if length == "long" else None,
                            )
                        )
                        decision.in_progress += 1
                    else:
                        failures[kind].append(f"{latest.name}: {latest.failure or 'failed'}")
                        if length == "long":
                            long_run = "failed"
                else:
                    decision.in_progress += 1
                    if latest.state == "running" and latest.running_seconds is not None:
                        deadline = long_deadline_seconds(
                            iterations=iterations, finished=finished, settings=settings.sampling, model=settings.model
                        )
                        if deadline is not None and latest.running_seconds > deadline:
                            decision.stop.append(
                                StopSample(
                                    pod=latest.name, key=key, iterations=iterations, seconds=latest.running_seconds,
                                    deadline_seconds=deadline,
                                )
                            )
    if decision.in_progress:
        return decision

    estimates: dict[str, ConfigurationEstimate] = {}
    for kind in configurations:
        prior = priors.get(kind)
        if kind not in sampled:
            assert prior is not None
            estimates[kind] = estimate_from_history(kind, prior, iterations=job_iterations, waves=waves)
            continue
        samples = [sample for _, sample in results[kind]]
        if failures[kind] and not samples:
            # Every run failed (OOMKilled, a crash, never scheduled): the Job would fail there
            # too, however fast its family ran there before.
            decision.failed[kind] = "; ".join(failures[kind])
            continue
        # Failed runs beside good ones: the estimate rests on fewer pilots (said in the samples).
        estimates[kind] = estimate_configuration(
            kind, samples, iterations=job_iterations, waves=waves, prior=prior, settings=settings.model
        )
        if failures[kind]:
            decision.failed[kind] = "; ".join(failures[kind])
    decision.estimates = estimates
    decision.samples = {kind: results[kind] for kind in estimates}
    # Sampling's cost against the run it informs: every sample's machine time over the Job's
    # fastest configuration (a 3% CPU sample of a Job 10x faster on GPU costs 30% of its run).
    spent = sum(sample.seconds for rows in results.values() for _, sample in rows)
    fastest = min((e.seconds for e in estimates.values()), default=0.0)
    decision.overhead_fraction = spent / fastest if fastest > 0 and spent > 0 else None
    return decision
