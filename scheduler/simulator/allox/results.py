"""AlloX's metrics from simulation runs (EuroSys'20 §5.1 "Metrics"): the average job completion
time (JCT) and its tail, the JCT of the longest 1% of jobs (Fig. 13), the spread of the users'
progress (Fig. 14: "standard deviation of progresses across users"), CPU and GPU utilisation
(Fig. 12), the estimator's measured error and overhead (Figs. 10, 17, 18), and their mean over
seeds."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final, Mapping, Sequence

import numpy as np

from scheduler.simulator.allox.simulation import KINDS, AlloxRunResult

MINUTE: Final = 60.0
JCT_PERCENTILES: Final = (50, 95, 99)


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxSummary:
    """One run's numbers, or the mean of several runs' (``seeds`` says which). JCTs in minutes;
    ``utilisation[kind]`` is the share of that kind's machines held by jobs and by samples over
    the arrival window; ``progress_sd`` / ``progress_mean`` are in dominant-share units (one GPU
    of 20 = 0.05); ``on_cpu`` is the share of jobs that finished on a CPU, ``cpu_work_speedup``
    the mean speedup of the work CPUs did (see :class:`AlloxRunResult`). ``estimation`` is what
    the estimator measured on the jobs it sampled (:func:`estimation_figures`); None for a
    policy that needs no estimate or when nothing was sampled."""

    policy: str
    seeds: tuple[int, ...]
    jobs: int
    average_jct: float
    jct: dict[str, float]
    longest_jct: float
    progress_sd: float
    progress_mean: float
    user_progress: dict[str, float]
    user_jct: dict[str, float]
    utilisation: dict[str, dict[str, float]]
    on_cpu: float
    cpu_work_speedup: float | None
    makespan: float
    preemptions: float
    pods_waited: float
    events: float
    decisions: float
    estimation: dict[str, Any] | None = None
    per_seed: tuple[AlloxSummary, ...] = field(default=())

    def to_document(self, *, per_seed: bool = True) -> dict[str, object]:
        """The ``--output-json`` form of one policy."""
        document: dict[str, object] = {
            "average_jct_minutes": self.average_jct,
            "jct_minutes": self.jct,
            "longest_1pct_jct_minutes": self.longest_jct,
            "progress": {"sd": self.progress_sd, "mean": self.progress_mean, "per_user": self.user_progress},
            "user_average_jct_minutes": self.user_jct,
            "utilisation": self.utilisation,
            "on_cpu_fraction": self.on_cpu,
            "cpu_work_speedup": self.cpu_work_speedup,
            "makespan_minutes": self.makespan,
            "preemptions": self.preemptions,
            "pods_waited": self.pods_waited,
            "jobs": self.jobs,
            "events": self.events,
            "decisions": self.decisions,
            "seeds": list(self.seeds),
            "estimation": self.estimation,
        }
        if per_seed and len(self.per_seed) > 1:
            document["per_seed"] = [summary.to_document(per_seed=False) for summary in self.per_seed]
        return document


def summarise(result: AlloxRunResult, *, label: str | None = None) -> AlloxSummary:
    jct = result.completion_time / MINUTE
    jobs = result.jobs
    if jobs:
        points = np.percentile(jct, JCT_PERCENTILES)
        percentiles = {f"p{p}": float(v) for p, v in zip(JCT_PERCENTILES, points)}
        longest = max(1, math.ceil(jobs / 100))
        order = np.argsort(-result.fastest, kind="stable")[:longest]
        longest_jct = float(jct[order].mean())
        average = float(jct.mean())
    else:
        percentiles = {f"p{p}": 0.0 for p in JCT_PERCENTILES}
        longest_jct = average = 0.0
    user_jct = {
        user: float(jct[result.user == index].mean()) if (result.user == index).any() else 0.0
        for index, user in enumerate(result.users)
    }
    utilisation = {
        kind: {
            what: held / result.machines[kind] if result.machines.get(kind) else 0.0
            for what, held in result.window_busy[kind].items()
        }
        for kind in KINDS
        if kind in result.window_busy
    }
    return AlloxSummary(
        policy=label or result.policy,
        seeds=(result.seed,),
        jobs=jobs,
        average_jct=average,
        jct=percentiles,
        longest_jct=longest_jct,
        progress_sd=result.progress_sd,
        progress_mean=result.progress_mean,
        user_progress={user: float(value) for user, value in zip(result.users, result.user_progress)},
        user_jct=user_jct,
        utilisation=utilisation,
        on_cpu=float(result.final_kind.mean()) if jobs else 0.0,
        cpu_work_speedup=result.cpu_work_speedup,
        makespan=result.makespan / MINUTE,
        preemptions=float(result.preemptions),
        pods_waited=float(result.pods_waited),
        events=float(result.events),
        decisions=float(result.decisions),
        estimation=estimation_figures(result),
    )


def estimation_figures(result: AlloxRunResult) -> dict[str, Any] | None:
    """The estimator's figures over the jobs it sampled: the relative error ``estimate / true −
    1`` of every configuration estimated (``mae`` its mean absolute value, ``error_sd`` its
    standard deviation, ``bias`` its mean, ``p90_abs`` the 90th percentile of its absolute value,
    as AlloX Fig. 10 reports them), ``overhead`` the mean of the planner's per-job overhead
    (sampling seconds over the sum of the job's estimates, as the live Event says it),
    ``sample_vs_fastest`` the sampling machine-seconds over the jobs' true fastest times,
    the estimates per model method and the runs stopped as long. None when nothing was
    sampled."""
    record = result.sampling
    sampled = record.sampled
    if not sampled.any():
        return None
    estimate, truth = record.estimate[sampled], record.truth[sampled]
    present = ~np.isnan(estimate) & ~np.isnan(truth)
    errors = estimate[present] / truth[present] - 1.0
    absolute = np.abs(errors)
    overhead = record.overhead[sampled]
    overhead = overhead[~np.isnan(overhead)]
    return {
        "jobs": int(sampled.sum()),
        "estimates": int(errors.size),
        "mae": float(absolute.mean()) if errors.size else None,
        "error_sd": float(errors.std()) if errors.size else None,
        "bias": float(errors.mean()) if errors.size else None,
        "p90_abs": float(np.percentile(absolute, 90)) if errors.size else None,
        "overhead": float(overhead.mean()) if overhead.size else None,
        "sample_vs_fastest": float(record.sample_seconds[sampled].sum() / result.fastest[sampled].sum()),
        "methods": dict(record.methods),
        "stopped_samples": record.stopped,
    }


def average(summaries: Sequence[AlloxSummary]) -> AlloxSummary:
    """The mean of each statistic over runs of one policy with different seeds."""
    if len(summaries) == 1:
        return summaries[0]
    first = summaries[0]

    def mean(values: Sequence[float]) -> float:
        return float(np.mean(values))

    def mean_map(maps: Sequence[Mapping[str, float]]) -> dict[str, float]:
        keys = sorted({key for m in maps for key in m})
        return {key: mean([m.get(key, 0.0) for m in maps]) for key in keys}

    return AlloxSummary(
        policy=first.policy,
        seeds=tuple(seed for s in summaries for seed in s.seeds),
        jobs=first.jobs,
        average_jct=mean([s.average_jct for s in summaries]),
        jct=mean_map([s.jct for s in summaries]),
        longest_jct=mean([s.longest_jct for s in summaries]),
        progress_sd=mean([s.progress_sd for s in summaries]),
        progress_mean=mean([s.progress_mean for s in summaries]),
        user_progress=mean_map([s.user_progress for s in summaries]),
        user_jct=mean_map([s.user_jct for s in summaries]),
        utilisation={
            kind: mean_map([s.utilisation[kind] for s in summaries if kind in s.utilisation])
            for kind in first.utilisation
        },
        on_cpu=mean([s.on_cpu for s in summaries]),
        cpu_work_speedup=_mean_present([s.cpu_work_speedup for s in summaries]),
        makespan=mean([s.makespan for s in summaries]),
        preemptions=mean([s.preemptions for s in summaries]),
        pods_waited=mean([s.pods_waited for s in summaries]),
        events=mean([s.events for s in summaries]),
        decisions=mean([s.decisions for s in summaries]),
        estimation=_mean_estimation([s.estimation for s in summaries]),
        per_seed=tuple(summaries),
    )


def _mean_estimation(figures: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """Numbers averaged over the seeds that sampled; counts (jobs, methods, stopped runs) summed."""
    present = [f for f in figures if f is not None]
    if not present:
        return None
    out: dict[str, Any] = {}
    for key in present[0]:
        if key == "methods":
            methods: dict[str, int] = {}
            for f in present:
                for method, count in f["methods"].items():
                    methods[method] = methods.get(method, 0) + count
            out[key] = dict(sorted(methods.items()))
        elif key in ("jobs", "estimates", "stopped_samples"):
            out[key] = sum(f[key] for f in present)
        else:
            values = [f[key] for f in present if f[key] is not None]
            out[key] = float(np.mean(values)) if values else None
    return out


def _mean_present(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return float(np.mean(present)) if present else None


def total_utilisation(summary: AlloxSummary, kind: str) -> float | None:
    """Jobs and samples together; None where the cluster has no machine of ``kind``."""
    shares = summary.utilisation.get(kind)
    return sum(shares.values()) if shares is not None else None
