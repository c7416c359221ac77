"""The paper's statistics from simulation runs: Table 1 (slowdown percentiles of TE and BE
jobs), Table 2 (re-scheduling intervals), Tables 3–4 (share of jobs preempted, by count), and
their average over seeds (the paper averages its RAND repetitions the same way, §4.2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.simulator.fitgpp.simulation import RunResult

SLOWDOWN_PERCENTILES: Final = (50, 95, 99)
INTERVAL_PERCENTILES: Final = (50, 75, 95, 99)
COUNT_BUCKETS: Final = ("1", "2", ">=3")


def _percentiles(values: npt.NDArray[np.float64], which: Sequence[int]) -> dict[str, float | None]:
    if not len(values):
        return {f"p{p}": None for p in which}
    points = np.percentile(values, which)
    return {f"p{p}": float(v) for p, v in zip(which, points)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """One run's numbers, or the mean of several runs' (``seeds`` says which)."""

    policy: str
    seeds: tuple[int, ...]
    jobs: int
    te_slowdown: dict[str, float | None]
    be_slowdown: dict[str, float | None]
    te_jobs: int
    be_jobs: int
    preempted_fraction: float
    preempted_by_count: dict[str, float]
    rescheduling_interval_minutes: dict[str, float | None]
    preemption_decisions: float
    victims: float
    rules: dict[str, float]
    events: float
    per_seed: tuple[Summary, ...] = field(default=())

    def to_document(self, *, per_seed: bool = True) -> dict[str, object]:
        """The ``--output-json`` form of one policy."""
        document: dict[str, object] = {
            "te": {"slowdown": self.te_slowdown, "jobs": self.te_jobs},
            "be": {"slowdown": self.be_slowdown, "jobs": self.be_jobs},
            "preempted_fraction": self.preempted_fraction,
            "preempted_by_count": self.preempted_by_count,
            "rescheduling_interval_minutes": self.rescheduling_interval_minutes,
            "jobs": self.jobs,
            "preemption_decisions": self.preemption_decisions,
            "victims": self.victims,
            "decisions_by_rule": self.rules,
            "events": self.events,
            "seeds": list(self.seeds),
        }
        if per_seed and len(self.per_seed) > 1:
            document["per_seed"] = [summary.to_document(per_seed=False) for summary in self.per_seed]
        return document


def summarise(result: RunResult, *, label: str | None = None) -> Summary:
    slowdown = result.slowdown
    trial = result.trial
    counts = result.preemptions
    jobs = max(1, result.jobs)
    return Summary(
        policy=label or result.policy,
        seeds=(result.seed,),
        jobs=result.jobs,
        te_slowdown=_percentiles(slowdown[trial], SLOWDOWN_PERCENTILES),
        be_slowdown=_percentiles(slowdown[~trial], SLOWDOWN_PERCENTILES),
        te_jobs=int(trial.sum()),
        be_jobs=int((~trial).sum()),
        preempted_fraction=float((counts > 0).sum() / jobs),
        preempted_by_count={
            "1": float((counts == 1).sum() / jobs),
            "2": float((counts == 2).sum() / jobs),
            ">=3": float((counts >= 3).sum() / jobs),
        },
        rescheduling_interval_minutes=_percentiles(result.intervals / 60.0, INTERVAL_PERCENTILES),
        preemption_decisions=float(result.preemption_decisions),
        victims=float(counts.sum()),
        rules={rule: float(n) for rule, n in sorted(result.rules.items())},
        events=float(result.events),
    )


def average(summaries: Sequence[Summary]) -> Summary:
    """The mean of each statistic over runs of one policy with different seeds. A percentile
    that some runs lack (no preemption at all) averages over the runs that have it."""
    if len(summaries) == 1:
        return summaries[0]
    first = summaries[0]

    def mean_map(maps: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
        keys = list(maps[0])
        out: dict[str, float | None] = {}
        for key in keys:
            values = [m[key] for m in maps if m.get(key) is not None]
            out[key] = float(np.mean([v for v in values if v is not None])) if values else None
        return out

    def mean_counts(maps: Sequence[Mapping[str, float]]) -> dict[str, float]:
        keys = sorted({key for m in maps for key in m})
        return {key: float(np.mean([m.get(key, 0.0) for m in maps])) for key in keys}

    return Summary(
        policy=first.policy,
        seeds=tuple(seed for s in summaries for seed in s.seeds),
        jobs=first.jobs,
        te_slowdown=mean_map([s.te_slowdown for s in summaries]),
        be_slowdown=mean_map([s.be_slowdown for s in summaries]),
        te_jobs=round(float(np.mean([s.te_jobs for s in summaries]))),
        be_jobs=round(float(np.mean([s.be_jobs for s in summaries]))),
        preempted_fraction=float(np.mean([s.preempted_fraction for s in summaries])),
        preempted_by_count=mean_counts([s.preempted_by_count for s in summaries]),
        rescheduling_interval_minutes=mean_map([s.rescheduling_interval_minutes for s in summaries]),
        preemption_decisions=float(np.mean([s.preemption_decisions for s in summaries])),
        victims=float(np.mean([s.victims for s in summaries])),
        rules=mean_counts([s.rules for s in summaries]),
        events=float(np.mean([s.events for s in summaries])),
        per_seed=tuple(summaries),
    )
