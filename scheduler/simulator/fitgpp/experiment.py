"""Experiments: one workload, several policies, several seeds, and the paper's sweeps.

For the synthetic workload each seed's arrivals come from a FIFO run of the closed loop (load
held at ``load``, §4.2), and every policy replays exactly those arrivals. The closed-loop FIFO
run *is* FIFO's result on them (replaying its arrivals under FIFO reproduces it event for
event; a test checks that), so it is not run twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, Final, Literal, Sequence

from scheduler.config import Settings
from scheduler.preemption.model import FitGppSettings
from scheduler.simulator.grid import ProgressCallback, RunProgress, run_grid, run_label, run_reporter
from scheduler.simulator.fitgpp.policies import make_policy
from scheduler.simulator.policy_registry import PolicyOptions, policy_names
from scheduler.simulator.fitgpp.results import Summary, average, summarise
from scheduler.simulator.fitgpp.simulation import RunResult, Simulation
from scheduler.simulator.cluster import ClusterSpec
from scheduler.simulator.fitgpp.workload import FitGppWorkload, JobSpec

ArrivalSource = Literal["fifo-load", "trace"]
SweepName = Literal["s", "P", "te-share", "gp-scale"]
SWEEPS: Final[tuple[SweepName, ...]] = ("s", "P", "te-share", "gp-scale")
# The values of the paper's Figs. 4–7 (P: 1..4 and unlimited).
DEFAULT_SWEEP_VALUES: Final[dict[str, tuple[float, ...]]] = {
    "s": (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0),
    "P": (1.0, 2.0, 3.0, 4.0, math.inf),
    "te-share": (0.1, 0.2, 0.3, 0.4, 0.5),
    "gp-scale": (1.0, 2.0, 4.0, 8.0),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """One line of a table: a registered policy under given settings, shown as ``label``."""

    label: str
    policy: str
    settings: FitGppSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class Experiment:
    """What to run. ``trace`` replaces the synthetic ``workload`` when given; ``arrivals`` says
    whether submit times come from the closed FIFO loop or from the jobs themselves."""

    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    workload: FitGppWorkload = field(default_factory=FitGppWorkload)
    trace: tuple[JobSpec, ...] | None = None
    arrivals: ArrivalSource = "fifo-load"
    load: float = 2.0
    jobs: int = 2**16
    seeds: tuple[int, ...] = (1,)
    variants: tuple[Variant, ...] = ()
    # 0: decide at every event; 60: only every simulated minute, like the paper's simulator.
    tick: float = 0.0
    # The configuration the engine is composed from, as ``cellfit serve --config`` reads it;
    # None: the embedded default (resource fit, standalone).
    configuration: Settings | None = None

    @staticmethod
    def standard_variants(policies: Sequence[str], settings: FitGppSettings) -> tuple[Variant, ...]:
        known = policy_names()
        for name in policies:
            make_policy(name, PolicyOptions(settings=settings))  # raises UnknownPolicy
            assert name in known
        return tuple(Variant(label=name, policy=name, settings=settings) for name in policies)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """Per variant label: the summary averaged over seeds, and the raw runs."""

    summaries: dict[str, Summary]
    runs: dict[str, list[RunResult]]
    arrivals: dict[int, list[JobSpec]]


def jobs_for(experiment: Experiment, seed: int) -> list[JobSpec]:
    if experiment.trace is not None:
        jobs = list(experiment.trace)
        return jobs[: experiment.jobs] if experiment.jobs < len(jobs) else jobs
    return experiment.workload.generate(jobs=experiment.jobs, seed=seed, cluster=experiment.cluster)


def derive_arrivals(
    experiment: Experiment, jobs: list[JobSpec], *, seed: int, on_progress: Callable[[int, int], None] | None = None
) -> tuple[list[JobSpec], RunResult]:
    """The closed FIFO loop: submit times that hold the load at ``experiment.load``."""
    settings = FitGppSettings()
    simulation = Simulation(
        cluster=experiment.cluster,
        jobs=jobs,
        policy=make_policy("fifo", PolicyOptions(settings=settings, seed=seed)),
        settings=settings,
        seed=seed,
        arrivals="load",
        load=experiment.load,
        on_progress=on_progress,
        tick=experiment.tick,
        configuration=experiment.configuration,
    )
    result = simulation.run()
    return simulation.submitted_specs(), result


def run_variant(
    experiment: Experiment,
    variant: Variant,
    jobs: Sequence[JobSpec],
    *,
    seed: int,
    on_progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    simulation = Simulation(
        cluster=experiment.cluster,
        jobs=jobs,
        policy=make_policy(variant.policy, PolicyOptions(settings=variant.settings, seed=seed)),
        settings=variant.settings,
        seed=seed,
        arrivals="trace",
        on_progress=on_progress,
        tick=experiment.tick,
        configuration=experiment.configuration,
    )
    return simulation.run()


def _run(args: tuple[Experiment, Variant, list[JobSpec], int], on_progress: RunProgress | None) -> RunResult:
    experiment, variant, jobs, seed = args
    return run_variant(experiment, variant, jobs, seed=seed, on_progress=on_progress)


ArrivalCache = dict[tuple[object, ...], tuple[list[JobSpec], RunResult]]


def run_experiment(
    experiment: Experiment,
    *,
    workers: int = 1,
    progress: ProgressCallback | None = None,
    cache: ArrivalCache | None = None,
) -> Outcome:
    """Every variant on every seed. ``workers`` > 1 runs variants in parallel processes (the
    results are the same: each run is deterministic on its own). ``cache`` keeps the closed
    FIFO loop's arrivals between experiments on the same workload (the s and P sweeps)."""
    derive = experiment.arrivals == "fifo-load"
    replayed = [v for v in experiment.variants if not (derive and _is_plain_fifo(v))]
    total_runs = len(experiment.seeds) * ((1 if derive else 0) + len(replayed))
    finished = 0
    arrivals: dict[int, list[JobSpec]] = {}
    runs: dict[str, list[RunResult]] = {variant.label: [] for variant in experiment.variants}
    for seed in experiment.seeds:
        jobs = jobs_for(experiment, seed)
        if derive:
            label = run_label("arrivals (fifo)", seed)
            key = (experiment.workload, experiment.cluster, experiment.jobs, experiment.load, experiment.tick, experiment.trace, seed)
            cached = cache.get(key) if cache is not None else None
            if cached is None:
                cached = derive_arrivals(
                    experiment, jobs, seed=seed, on_progress=run_reporter(progress, finished, total_runs, label)
                )
                if cache is not None:
                    cache[key] = cached
            jobs, fifo_result = cached
            for variant in experiment.variants:
                if _is_plain_fifo(variant):
                    runs[variant.label].append(replace(fifo_result, policy=variant.policy))
            finished += 1
            if progress is not None:
                progress(finished, total_runs, 0, 0, label)
        arrivals[seed] = jobs
    pending = [(v.label, seed, (experiment, v, arrivals[seed], seed)) for seed in experiment.seeds for v in replayed]
    run_grid(pending, run=_run, runs=runs, workers=workers, progress=progress, finished=finished, total=total_runs)
    summaries = {label: average([summarise(run, label=label) for run in results]) for label, results in runs.items()}
    return Outcome(summaries=summaries, runs=runs, arrivals=arrivals)


def _is_plain_fifo(variant: Variant) -> bool:
    return variant.policy == "fifo"


# ---------------------------------------------------------------------- sweeps


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepPoint:
    value: float
    summaries: dict[str, Summary]


def sweep_experiments(
    name: SweepName, values: Sequence[float], base: Experiment, policies: Sequence[str]
) -> list[tuple[float, Experiment]]:
    """One experiment per value of the swept parameter, as in the paper's Figs. 4–7:

    * ``s`` and ``P`` (Figs. 4, 5): FitGpp alone, the parameter varied;
    * ``te-share`` (Fig. 6): every policy on workloads with that share of TE jobs;
    * ``gp-scale`` (Fig. 7): every policy, plus FitGpp with s = 8, on GPs scaled by the value.
    """
    settings = base.variants[0].settings if base.variants else FitGppSettings()
    out: list[tuple[float, Experiment]] = []
    for value in values:
        if name == "s":
            chosen = replace(settings, grace_period_weight=value)
            variants: tuple[Variant, ...] = (Variant(label="fitgpp", policy="fitgpp", settings=chosen),)
            out.append((value, replace(base, variants=variants)))
        elif name == "P":
            limit = None if math.isinf(value) else int(value)
            chosen = replace(settings, max_preemptions=limit)
            variants = (Variant(label="fitgpp", policy="fitgpp", settings=chosen),)
            out.append((value, replace(base, variants=variants)))
        elif name == "te-share":
            out.append(
                (
                    value,
                    replace(
                        base,
                        workload=base.workload.with_changes(te_share=value),
                        variants=Experiment.standard_variants(policies, settings),
                    ),
                )
            )
        else:
            variants = Experiment.standard_variants(policies, settings)
            if "fitgpp" in policies and settings.grace_period_weight != 8.0:
                variants += (
                    Variant(label="fitgpp s=8", policy="fitgpp", settings=replace(settings, grace_period_weight=8.0)),
                )
            out.append((value, replace(base, workload=base.workload.with_changes(gp_scale=value), variants=variants)))
    return out


def run_sweep(
    name: SweepName,
    values: Sequence[float],
    base: Experiment,
    policies: Sequence[str],
    *,
    workers: int = 1,
    progress: ProgressCallback | None = None,
) -> list[SweepPoint]:
    points: list[SweepPoint] = []
    cache: ArrivalCache = {}
    for value, experiment in sweep_experiments(name, values, base, policies):
        outcome = run_experiment(experiment, workers=workers, progress=progress, cache=cache)
        points.append(SweepPoint(value=value, summaries=outcome.summaries))
    return points
