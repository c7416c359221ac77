"""Experiments on the ``allox`` workload: policies × seeds on one workload, and the sweeps of
EuroSys'20 Figs. 16–18 plus one over the load: α (Fig. 16); the sample noise, which produces the
estimation error of Fig. 17 (the error is measured and reported, not set); the sampling
fraction, which sets the profiling overhead of Fig. 18 (measured too).

Every policy of an experiment sees the same jobs for a seed (same arrivals, same true times,
same sampling runs), so differences are the policies' own; the estimates differ between
policies only where the planner stopped a run as long, which depends on when its peers ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Final, Literal, Sequence

from scheduler.config import Settings
from scheduler.preemption.model import FitGppSettings
from scheduler.simulator.allox.policies import ALPHA_POLICIES, make_interchangeable_policy
from scheduler.simulator.allox.results import AlloxSummary, average, summarise
from scheduler.simulator.allox.simulation import AlloxRunResult, InterchangeableSimulation
from scheduler.simulator.allox.workload import ALLOX_CLUSTER, AlloxJobSpec, AlloxWorkload
from scheduler.simulator.grid import ProgressCallback, RunProgress, run_grid
from scheduler.simulator.policy_registry import AlloxOptions, PolicyOptions
from scheduler.simulator.cluster import ClusterSpec

AlloxSweepName = Literal["alpha", "load", "sample-noise", "sampling-fraction"]
ALLOX_SWEEPS: Final[tuple[AlloxSweepName, ...]] = ("alpha", "load", "sample-noise", "sampling-fraction")
# Sweeps the workload had before the estimator produced its estimates, and what replaces them.
RETIRED_SWEEPS: Final = {
    "estimation-error": "the estimation error is measured now, not set: sweep sample-noise (Fig. 17), "
    "whose table reports the error it produces",
    "profiling-overhead": "the profiling overhead is measured now, not set: sweep sampling-fraction (Fig. 18), "
    "whose table reports the overhead it produces",
}
# Fig. 16 varies α from 0.1 to 1; Figs. 17 and 18 do not print their x axes in the text. The
# sample noise spans exact samples to 4x the default (2%: an 8% mean absolute error, the
# paper's Fig. 10); the sampling fraction half to ~7x the estimator's 3% (1% + 2%).
DEFAULT_ALLOX_SWEEP_VALUES: Final[dict[str, tuple[float, ...]]] = {
    "alpha": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
    "load": (0.5, 0.6, 0.7, 0.8, 0.9, 0.95),
    "sample-noise": (0.0, 0.01, 0.02, 0.04, 0.08),
    "sampling-fraction": (0.015, 0.03, 0.06, 0.1, 0.2),
}
# The policies each figure compares when --policies is not given.
DEFAULT_SWEEP_POLICIES: Final[dict[str, tuple[str, ...]]] = {
    "alpha": ("allox", "es", "srpt"),
    "load": ("allox", "allox+", "es", "drff", "drfs", "drfa", "srpt"),
    "sample-noise": ("allox", "es", "srpt"),
    "sampling-fraction": ("allox", "es", "drff", "srpt"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxVariant:
    """One line of a table: a registered interchangeable policy with its options."""

    label: str
    policy: str
    options: AlloxOptions = AlloxOptions()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxExperiment:
    cluster: ClusterSpec = ALLOX_CLUSTER
    workload: AlloxWorkload = field(default_factory=AlloxWorkload)
    load: float = 0.9
    jobs: int = 10_000
    seeds: tuple[int, ...] = (1,)
    variants: tuple[AlloxVariant, ...] = ()
    # The configuration the engine is composed from, as ``cellfit serve --config`` reads it;
    # None: its embedded default.
    configuration: Settings | None = None

    @staticmethod
    def variants_for(policies: Sequence[str], options: AlloxOptions) -> tuple[AlloxVariant, ...]:
        for name in policies:
            make_interchangeable_policy(name, PolicyOptions(settings=FitGppSettings(), allox=options))  # UnknownPolicy
        return tuple(AlloxVariant(label=name, policy=name, options=options) for name in policies)

    def jobs_for(self, seed: int) -> list[AlloxJobSpec]:
        return self.workload.generate(jobs=self.jobs, seed=seed, cluster=self.cluster, load=self.load)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxOutcome:
    summaries: dict[str, AlloxSummary]
    runs: dict[str, list[AlloxRunResult]]


def run_variant(
    experiment: AlloxExperiment,
    variant: AlloxVariant,
    jobs: Sequence[AlloxJobSpec],
    *,
    seed: int,
    on_progress: Callable[[int, int], None] | None = None,
) -> AlloxRunResult:
    policy = make_interchangeable_policy(
        variant.policy, PolicyOptions(settings=FitGppSettings(), seed=seed, allox=variant.options)
    )
    simulation = InterchangeableSimulation(
        cluster=experiment.cluster,
        workload=experiment.workload,
        jobs=jobs,
        policy=policy,
        seed=seed,
        on_progress=on_progress,
        configuration=experiment.configuration,
    )
    return simulation.run()


def _task(args: tuple[AlloxExperiment, AlloxVariant, int]) -> AlloxRunResult:
    experiment, variant, seed = args
    return run_variant(experiment, variant, experiment.jobs_for(seed), seed=seed)


def run_allox_experiment(
    experiment: AlloxExperiment, *, workers: int = 1, progress: ProgressCallback | None = None
) -> AlloxOutcome:
    """Every variant on every seed; ``workers`` > 1 runs them in parallel processes (the same
    results: each run is deterministic on its own). A worker generates its seed's jobs itself;
    in this process each seed's jobs are generated once, for all the variants."""
    pending = [(variant.label, seed, (experiment, variant, seed)) for seed in experiment.seeds for variant in experiment.variants]
    runs: dict[str, list[AlloxRunResult]] = {variant.label: [] for variant in experiment.variants}
    jobs_by_seed: dict[int, list[AlloxJobSpec]] = {}

    def run(args: tuple[AlloxExperiment, AlloxVariant, int], on_progress: RunProgress | None) -> AlloxRunResult:
        _, variant, seed = args
        jobs = jobs_by_seed.get(seed)
        if jobs is None:
            jobs = jobs_by_seed[seed] = experiment.jobs_for(seed)
        return run_variant(experiment, variant, jobs, seed=seed, on_progress=on_progress)

    run_grid(pending, task=_task, run=run, runs=runs, workers=workers, progress=progress)
    summaries = {label: average([summarise(run, label=label) for run in results]) for label, results in runs.items()}
    return AlloxOutcome(summaries=summaries, runs=runs)


# ---------------------------------------------------------------------- sweeps


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxSweepPoint:
    value: float
    summaries: dict[str, AlloxSummary]


def sweep_experiments(
    name: AlloxSweepName, values: Sequence[float], base: AlloxExperiment
) -> list[tuple[float, AlloxExperiment]]:
    """One experiment per value: ``alpha`` changes the α-dependent policies' options (the
    others are run once, see :func:`run_allox_sweep`); ``load``, ``sample-noise`` and
    ``sampling-fraction`` change the workload under every policy."""
    out: list[tuple[float, AlloxExperiment]] = []
    for value in values:
        if name == "alpha":
            variants = tuple(
                replace(variant, options=replace(variant.options, alpha=value))
                for variant in base.variants
                if variant.policy in ALPHA_POLICIES
            )
            out.append((value, replace(base, variants=variants)))
        elif name == "load":
            out.append((value, replace(base, load=value)))
        elif name == "sample-noise":
            out.append((value, replace(base, workload=base.workload.with_changes(sample_noise=value))))
        elif name == "sampling-fraction":
            out.append((value, replace(base, workload=base.workload.with_changes(sampling_fraction=value))))
        else:
            raise ValueError(f"unknown sweep {name!r}")
    return out


def run_allox_sweep(
    name: AlloxSweepName,
    values: Sequence[float],
    base: AlloxExperiment,
    *,
    workers: int = 1,
    progress: ProgressCallback | None = None,
) -> list[AlloxSweepPoint]:
    """The sweep's points. For ``alpha`` the policies that do not read α (ES, SRPT, ...) are
    run once and shown at every point, as the reference lines of Fig. 16."""
    fixed: dict[str, AlloxSummary] = {}
    if name == "alpha":
        others = tuple(variant for variant in base.variants if variant.policy not in ALPHA_POLICIES)
        if others:
            fixed = run_allox_experiment(replace(base, variants=others), workers=workers, progress=progress).summaries
    points = []
    for value, experiment in sweep_experiments(name, values, base):
        summaries = run_allox_experiment(experiment, workers=workers, progress=progress).summaries if experiment.variants else {}
        ordered = {variant.label: (summaries.get(variant.label) or fixed[variant.label]) for variant in base.variants}
        points.append(AlloxSweepPoint(value=value, summaries=ordered))
    return points
