"""Sampling pods in the simulator: the estimator's own planner (:mod:`estimator.planner`) decides
which sampling runs a job needs, which to stop as long and what each configuration's estimate
is; the simulator only plays the runs.

The world a job's sampling runs meet is :class:`SampledJob`: the job runs ``iterations`` N;
on configuration ``c`` one pod run of ``k`` iterations takes ``startup[c] + per_iteration[c]·k``
seconds (start-up paid once: imports, data loading, CUDA context), so the whole job takes
``startup + per_iteration·N``, its true processing time. A sampling run's *measured* time is
that times ``exp(sample_noise · z)``, ``z`` standard normal per configuration and length (other
work on the node, data-loading jitter); the estimator never sees the truth, only these
measurements, as the termination message reports them (:class:`estimator.model.Sample`).

:class:`SamplingRun` is one job's sampling as the simulation drives it: the planner's first
decision creates the runs, each ended or stopped run becomes a :class:`~estimator.planner.SamplePod`
and the planner is asked again; once every run has ended its estimates are what the policy
sees. :func:`offline_estimates` asks the same planner as if every run had finished at once (no
run stopped as long), for measuring the estimator on a workload without a simulation.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Mapping, Sequence

from estimator.model import ConfigurationEstimate, Sample
from estimator.planner import (
    CreateSample,
    Decision,
    EstimatorSettings,
    SampleKey,
    SamplePod,
    StopSample,
    decide,
)
from estimator.sampling import SamplePlan, SamplingSettings, long_deadline_seconds, plan

# AlloX samples each configuration on two lengths; the estimator's defaults are 1% and 2% of
# the iterations (3% of the run in all, AlloX §4.1). A sampling fraction f splits the same way.
SHORT_SHARE: Final = 1.0 / 3.0


def estimator_settings(
    sampling_fraction: float,
    *,
    long_factor: float | None = None,
    long_min_seconds: float | None = None,
    base: EstimatorSettings = EstimatorSettings(),
) -> EstimatorSettings:
    """The live estimator's settings (``base``) with the two sample lengths at ``f/3`` and
    ``2f/3`` of the iterations, run at once (AlloX's two runs per configuration), and, when
    given, its long-sample rule (``estimator.longFactor``, ``estimator.longMinSeconds``)."""
    sampling = SamplingSettings(
        short_fraction=sampling_fraction * SHORT_SHARE,
        long_fraction=sampling_fraction * (1.0 - SHORT_SHARE),
        thin_limit=base.sampling.thin_limit,
        max_pilots=base.sampling.max_pilots,
        long_factor=base.sampling.long_factor if long_factor is None else long_factor,
        long_min_seconds=base.sampling.long_min_seconds if long_min_seconds is None else long_min_seconds,
        # The simulated runs report no splits (the paper's samples: two runs per configuration),
        # so both lengths start at once, as AlloX runs them.
        short_after_long=False,
    )
    return EstimatorSettings(
        sampling=sampling,
        model=base.model,
        max_attempts=base.max_attempts,
        history_skip_cov=base.history_skip_cov,
        history_skip_min_jobs=base.history_skip_min_jobs,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SampledJob:
    """What a job's sampling runs meet (see the module's docstring). ``noise[(c, length)]`` is
    the factor its measured time carries (1 = exact)."""

    iterations: int
    startup: Mapping[str, float]
    per_iteration: Mapping[str, float]
    noise: Mapping[tuple[str, str], float]

    def true_seconds(self, configuration: str) -> float:
        return self.startup[configuration] + self.per_iteration[configuration] * self.iterations

    def run_seconds(self, configuration: str, length: str, iterations: int) -> float:
        """How long a sampling run of ``iterations`` takes on ``configuration``, as measured."""
        exact = self.startup[configuration] + self.per_iteration[configuration] * iterations
        return exact * self.noise.get((configuration, length), 1.0)


def pod_name(job_id: str, key: SampleKey, attempt: int) -> str:
    return f"{job_id}/sample-{key.configuration}-{key.length}" + (f"-{attempt}" if attempt else "")


@dataclass(slots=True)
class RunState:
    """One sampling run the planner asked for."""

    name: str
    create: CreateSample
    seconds: float  # how long it takes once started (measured time)
    started_at: float | None = None
    ended: bool = False
    stopped_after: float | None = None  # set when the planner stopped it as long

    def pod(self, now: float) -> SamplePod:
        key = self.create.key
        if self.stopped_after is not None:
            sample = Sample(key.configuration, self.create.iterations, self.stopped_after, complete=False, pilot=key.pilot)
            return SamplePod(name=self.name, key=key, attempt=self.create.attempt, state="stopped", sample=sample)
        if self.ended:
            sample = Sample(key.configuration, self.create.iterations, self.seconds, pilot=key.pilot)
            return SamplePod(name=self.name, key=key, attempt=self.create.attempt, state="succeeded", sample=sample)
        if self.started_at is None:
            return SamplePod(name=self.name, key=key, attempt=self.create.attempt, state="pending")
        return SamplePod(
            name=self.name, key=key, attempt=self.create.attempt, state="running", running_seconds=now - self.started_at
        )


@dataclass(slots=True)
class SamplingRun:
    """One job's sampling, driven by :func:`estimator.planner.decide`."""

    job_id: str
    world: SampledJob
    configurations: tuple[str, ...]
    settings: EstimatorSettings
    plan: SamplePlan = field(init=False)
    runs: dict[str, RunState] = field(default_factory=dict)
    decision: Decision | None = None

    def __post_init__(self) -> None:
        self.plan = plan(job_uid=self.job_id, iterations=self.world.iterations, pods=1, ratio=0.03, settings=self.settings.sampling)

    def start(self) -> list[RunState]:
        """The runs the planner creates first (every configuration, both lengths)."""
        return self._ask(0.0)[0]

    def _ask(self, now: float) -> tuple[list[RunState], list[StopSample]]:
        decision = decide(
            configurations=self.configurations,
            plan=self.plan,
            job_iterations=self.world.iterations,
            waves=1,
            pods=[run.pod(now) for run in self.runs.values()],
            settings=self.settings,
        )
        self.decision = decision
        created = []
        for create in decision.create:
            name = pod_name(self.job_id, create.key, create.attempt)
            if name in self.runs:  # pragma: no cover - the planner never asks twice for a run it sees
                raise AssertionError(f"the planner asked for {name} again")
            run = RunState(
                name=name,
                create=create,
                seconds=self.world.run_seconds(create.key.configuration, create.key.length, create.iterations),
            )
            self.runs[name] = run
            created.append(run)
        return created, decision.stop

    def started(self, run: RunState, now: float) -> None:
        run.started_at = now

    def ended(self, run: RunState, now: float) -> tuple[list[RunState], list[StopSample]]:
        """``run`` finished at ``now``: the planner's next decision (new runs, runs to stop)."""
        run.ended = True
        return self._ask(now)

    def check(self, now: float) -> list[StopSample]:
        """Ask the planner whether a running sample has run past its deadline."""
        created, stop = self._ask(now)
        assert not created
        return stop

    def stopped(self, run: RunState, now: float) -> tuple[list[RunState], list[StopSample]]:
        assert run.started_at is not None
        run.stopped_after = now - run.started_at
        return self._ask(now)

    def deadline(self, run: RunState) -> float | None:
        """When ``run`` (running) would count as long: its start plus the planner's deadline for
        its length given the finished samples; None while no sample has finished or when it
        ends before."""
        if run.started_at is None or run.ended or run.stopped_after is not None:
            return None
        finished = [
            Sample(r.create.key.configuration, r.create.iterations, r.seconds, pilot=r.create.key.pilot)
            for r in self.runs.values()
            if r.ended and r.stopped_after is None
        ]
        limit = long_deadline_seconds(
            iterations=run.create.iterations,
            finished=finished,
            settings=self.settings.sampling,
            model=self.settings.model,
        )
        if limit is None or run.seconds <= limit:
            return None
        return run.started_at + limit

    @property
    def done(self) -> bool:
        return self.decision is not None and self.decision.done

    @property
    def estimates(self) -> Mapping[str, ConfigurationEstimate]:
        assert self.decision is not None and self.decision.estimates is not None
        return self.decision.estimates

    @property
    def spent_seconds(self) -> float:
        """Machine-seconds the runs held (stopped runs for as long as they ran)."""
        return sum(
            run.stopped_after if run.stopped_after is not None else run.seconds
            for run in self.runs.values()
            if run.ended or run.stopped_after is not None
        )


def offline_estimates(
    job_id: str, world: SampledJob, configurations: Sequence[str], settings: EstimatorSettings
) -> tuple[Mapping[str, ConfigurationEstimate], float | None]:
    """The planner's estimates when every run it asks for finishes (none stopped), and its
    overhead figure."""
    sampling = SamplingRun(job_id=job_id, world=world, configurations=tuple(configurations), settings=settings)
    pending = sampling.start()
    while pending:
        run = pending.pop()
        sampling.started(run, 0.0)
        created, _ = sampling.ended(run, run.seconds)
        pending.extend(created)
    assert sampling.decision is not None and sampling.decision.estimates is not None
    return sampling.decision.estimates, sampling.decision.overhead_fraction


def relative_errors(estimates: Mapping[str, ConfigurationEstimate], world: SampledJob) -> dict[str, float]:
    """``estimate / truth − 1`` per configuration estimated."""
    return {kind: estimate.seconds / world.true_seconds(kind) - 1.0 for kind, estimate in estimates.items()}


__all__: Sequence[str] = (
    "RunState",
    "SampledJob",
    "SamplingRun",
    "estimator_settings",
    "offline_estimates",
    "pod_name",
    "relative_errors",
)
