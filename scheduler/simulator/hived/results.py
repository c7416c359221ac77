"""The ``hived`` experiment's figures: queueing delay (minutes) per tenant and job size — mean,
p50, p95, pooled over seeds — per setting; the share of jobs that waited longer than on their
tenant's private cluster (HiveD §5.2.2: "14% of res-f's multi-GPU jobs ... experience
excessive queuing delays"); GPU utilisation and the share of nodes in use over the arrival
window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from scheduler.simulator.hived.simulation import GangRunResult
from scheduler.simulator.hived.workload import JOB_SIZES, MINUTE

ALL_SIZES: Final = 0  # the key of a tenant's row over every job size
# A job "waited longer than on its private cluster" by more than this (absorbs nothing real:
# the shared settings replay the same arrivals, so equal decisions give equal delays).
EXCESS_MINUTES: Final = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class DelayStats:
    jobs: int
    mean: float
    p50: float
    p95: float

    def to_document(self) -> dict[str, float | int]:
        return {"jobs": self.jobs, "mean_minutes": self.mean, "p50_minutes": self.p50, "p95_minutes": self.p95}


def delay_stats(minutes: npt.NDArray[np.float64]) -> DelayStats | None:
    if not len(minutes):
        return None
    p50, p95 = np.percentile(minutes, [50, 95])
    return DelayStats(jobs=len(minutes), mean=float(minutes.mean()), p50=float(p50), p95=float(p95))


@dataclass(frozen=True, slots=True, kw_only=True)
class HivedSummary:
    """One setting over its seeds. ``delays[tenant][gpus]`` (``gpus`` = ``ALL_SIZES`` for the
    tenant's every job); ``longer_than_private[tenant]``: share of the tenant's multi-GPU jobs
    (2 GPUs and more) that waited over ``EXCESS_MINUTES`` longer than on the private cluster
    (None without a private run)."""

    setting: str
    seeds: tuple[int, ...]
    delays: dict[str, dict[int, DelayStats]]
    longer_than_private: dict[str, float] | None
    # Every tenant's jobs of a whole node or more (node- and rack-level), pooled.
    node_level: DelayStats | None
    node_level_longer_than_private: float | None
    utilisation: float
    nodes_in_use: float
    events: int

    def to_document(self) -> dict[str, object]:
        return {
            "seeds": list(self.seeds),
            "queueing_delay": {
                tenant: {("all" if size == ALL_SIZES else f"{size}gpu"): s.to_document() for size, s in by_size.items()}
                for tenant, by_size in self.delays.items()
            },
            "multi_gpu_jobs_longer_than_private": self.longer_than_private,
            "node_level_jobs": None if self.node_level is None else self.node_level.to_document(),
            "node_level_jobs_longer_than_private": self.node_level_longer_than_private,
            "gpu_utilisation": self.utilisation,
            "nodes_in_use": self.nodes_in_use,
            "events": self.events,
        }


def summarise(runs: Sequence[GangRunResult], *, private: Sequence[GangRunResult] | None = None) -> HivedSummary:
    """Pool the runs (one per seed); ``private`` are the same seeds' private-cluster runs."""
    first = runs[0]
    tenants = first.tenants
    tenant = np.concatenate([r.tenant for r in runs])
    gpus = np.concatenate([r.gpus for r in runs])
    delay = np.concatenate([r.delay for r in runs]) / MINUTE
    delays: dict[str, dict[int, DelayStats]] = {}
    for index, name in enumerate(tenants):
        mine = tenant == index
        by_size: dict[int, DelayStats] = {}
        for size in (ALL_SIZES, *JOB_SIZES):
            stats = delay_stats(delay[mine if size == ALL_SIZES else mine & (gpus == size)])
            if stats is not None:
                by_size[size] = stats
        delays[name] = by_size
    node_level = gpus >= first.cluster_gpus // max(first.nodes, 1)
    longer: dict[str, float] | None = None
    node_level_longer: float | None = None
    if private is not None:
        base = np.concatenate([r.delay for r in private]) / MINUTE
        excess = delay - base > EXCESS_MINUTES
        longer = {}
        for index, name in enumerate(tenants):
            multi = (tenant == index) & (gpus > 1)
            longer[name] = float(excess[multi].mean()) if multi.any() else 0.0
        node_level_longer = float(excess[node_level].mean()) if node_level.any() else 0.0
    window = sum(r.window for r in runs)
    return HivedSummary(
        setting=first.setting,
        seeds=tuple(r.seed for r in runs),
        delays=delays,
        longer_than_private=longer,
        node_level=delay_stats(delay[node_level]),
        node_level_longer_than_private=node_level_longer,
        utilisation=sum(r.busy_gpu_seconds for r in runs) / sum(r.cluster_gpus * r.window for r in runs) if window else 0.0,
        nodes_in_use=sum(r.used_node_seconds for r in runs) / sum(r.nodes * r.window for r in runs) if window else 0.0,
        events=sum(r.events for r in runs),
    )


def summarise_outcome(runs: Mapping[str, Sequence[GangRunResult]]) -> dict[str, HivedSummary]:
    private = runs.get("private")
    return {setting: summarise(results, private=private) for setting, results in runs.items()}
