"""The ``hived`` experiment (HiveD §5.2): the same arrivals under four settings.

* ``private`` — each tenant alone on a private cluster of its quota's cells, under HiveD (one
  virtual cluster owning all of them): the yardstick of sharing safety;
* ``hived`` — the shared cluster under HiveD, one virtual cluster per tenant;
* ``quota-spread`` — the shared cluster, each tenant limited to its quota's GPU count
  (:class:`~.quota.QuotaGate`), pods placed by kube-scheduler's default scoring
  (``NodeResourcesFit`` LeastAllocated over GPUs: spreading);
* ``quota-pack`` — the same quota, pods placed by cellfit's
  :class:`~scheduler.core.fit.ResourceFitEngine` (most-allocated GPUs: packing, the paper's
  YARN-CS "packs jobs as compactly as possible").

Every setting of a seed replays the same jobs (same arrival times, sizes, durations).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np

from scheduler.cells import HivedEngine
from scheduler.core.engine import SchedulingEngine
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo
from scheduler.composition import Composition, assemble_configured, compose_cells, with_preemption
from scheduler.config import Settings, load_settings
from scheduler.simulator.errors import UnknownPolicy
from scheduler.simulator.grid import ProgressCallback, RunProgress, run_grid
from scheduler.simulator.hived.cluster import (
    gpu_nodes,
    private_cells_config,
    private_node_names,
    shared_cells_config,
)
from scheduler.simulator.hived.quota import QuotaGate
from scheduler.simulator.hived.results import HivedSummary, summarise_outcome
from scheduler.simulator.hived.simulation import (
    QUEUES,
    ClusterScheduler,
    GangRunResult,
    GangSimulation,
    spread_choice,
)
from scheduler.simulator.hived.workload import GangJob, HivedWorkload

SETTINGS: Final = ("private", "hived", "quota-spread", "quota-pack")
DEFAULT_JOBS: Final = 4000
# --sweep load: the workload's load multiplier (every tenant's load times it), as §5.2.2 shrinks
# the cluster from 279 to 200 nodes to raise the load.
HIVED_SWEEPS: Final = ("load",)
DEFAULT_LOADS: Final = (0.6, 0.8, 1.0, 1.2)


@dataclass(frozen=True, slots=True, kw_only=True)
class HivedExperiment:
    workload: HivedWorkload = field(default_factory=HivedWorkload)
    jobs: int = DEFAULT_JOBS
    seeds: tuple[int, ...] = (1,)
    settings: tuple[str, ...] = SETTINGS
    queue: str = "fifo"
    # Under the kube queue, a job retried while nothing was bound or released since it failed
    # is not asked again (the same decisions: the tests compare); False asks every time.
    reuse_failures: bool = True

    def __post_init__(self) -> None:
        for name in self.settings:
            if name not in SETTINGS:
                raise UnknownPolicy(name, list(SETTINGS))
        if self.queue not in QUEUES:
            raise UnknownPolicy(self.queue, list(QUEUES))

    def jobs_for(self, seed: int) -> list[GangJob]:
        return self.workload.generate(jobs=self.jobs, seed=seed)


@dataclass(frozen=True, slots=True, kw_only=True)
class HivedOutcome:
    """Per setting, one run per seed (in seed order)."""

    runs: dict[str, list[GangRunResult]]


def as_served(placement: SchedulingEngine, *, cells: HivedEngine | None = None) -> Composition:
    """The placement engine inside FitGpp's preemption, as ``cellfit serve`` composes it under
    its default configuration (:func:`scheduler.composition.with_preemption`; ``cells``: the
    placement, when it is HiveD's). Nothing here preempts (regular pods, no job class), so
    FitGpp forwards every decision to the placement engine and keeps its index of the bound
    pods; no resume hold ever starts, so nothing asks the clock."""
    return with_preemption(placement, load_settings(None).preemption, clock=_no_clock, cells=cells)


def _scheduler(served: Composition, nodes: Sequence[NodeInfo], **options: Any) -> ClusterScheduler:
    return ClusterScheduler(engine=served.engine, jobs=served.jobs, nodes=nodes, **options)


def _hived(config: Mapping[str, Any], *, now: Callable[[], float]) -> Composition:
    """What ``cellfit serve`` composes from a configuration whose ``cells:`` section is ``config``
    (HiveD inside FitGpp, its default preemption); HiveD's cells read the simulation's time
    ``now`` (a pod gone starts its 5 s freed-cells wait: freeing.py JustFreed)."""
    settings = Settings.model_validate({"policy": {"name": "hived"}, "cells": config})
    cells = compose_cells(settings, connected=False, clock=now)
    return assemble_configured(settings, cells=cells, clock=_no_clock)


class _SimulationTime:
    """The virtual time of the simulation that drives the cells (set once it is made)."""

    def __init__(self) -> None:
        self.simulation: GangSimulation | None = None

    def __call__(self) -> float:
        return 0.0 if self.simulation is None else self.simulation.now


def _no_clock() -> float:
    raise AssertionError("nothing preempts in the hived workload, so no resume hold asks the time")


def run_setting(
    experiment: HivedExperiment,
    setting: str,
    jobs: Sequence[GangJob],
    *,
    seed: int,
    on_progress: Callable[[int, int], None] | None = None,
) -> GangRunResult:
    """One setting on one seed's jobs."""
    workload = experiment.workload
    shape = workload.shape
    tenants = [t.name for t in workload.tenants]
    window = max(job.submit_time for job in jobs)
    if setting == "private":
        return _private(experiment, jobs, seed=seed, window=window)
    nodes = gpu_nodes(shape.node_names(), shape.gpus_per_node)
    quota = QuotaGate({t.name: t.quota_gpus(shape) for t in workload.tenants})
    now = _SimulationTime()
    if setting == "hived":
        scheduler = _scheduler(_hived(shared_cells_config(workload), now=now), nodes)
    elif setting == "quota-spread":
        fit = ResourceFitEngine(initial_capacity=max(64, shape.nodes))
        scheduler = _scheduler(as_served(fit), nodes, choice=spread_choice(fit, shape.gpus_per_node), quota=quota)
    else:
        assert setting == "quota-pack"
        scheduler = _scheduler(as_served(ResourceFitEngine(initial_capacity=max(64, shape.nodes))), nodes, quota=quota)
    simulation = now.simulation = GangSimulation(
        jobs=jobs,
        scheduler=scheduler,
        tenants=tenants,
        setting=setting,
        seed=seed,
        gpus_per_node=shape.gpus_per_node,
        queue=experiment.queue,
        reuse_failures=experiment.reuse_failures,
        window=window,
        on_progress=on_progress,
    )
    return simulation.run()


def _private(experiment: HivedExperiment, jobs: Sequence[GangJob], *, seed: int, window: float) -> GangRunResult:
    """Each tenant's jobs alone on its private cluster, merged back into the jobs' order."""
    workload = experiment.workload
    shape = workload.shape
    tenants = tuple(t.name for t in workload.tenants)
    start = np.full(len(jobs), np.nan)
    finish = np.full(len(jobs), np.nan)
    events = 0
    busy = used = 0.0
    for tenant in workload.tenants:
        positions = [i for i, job in enumerate(jobs) if job.tenant == tenant.name]
        names = private_node_names(workload, tenant)
        nodes = gpu_nodes(names, shape.gpus_per_node)
        now = _SimulationTime()
        scheduler = _scheduler(_hived(private_cells_config(workload, tenant), now=now), nodes)
        simulation = now.simulation = GangSimulation(
            jobs=[jobs[i] for i in positions],
            scheduler=scheduler,
            tenants=[tenant.name],
            setting="private",
            seed=seed,
            gpus_per_node=shape.gpus_per_node,
            queue=experiment.queue,
            reuse_failures=experiment.reuse_failures,
            window=window,
        )
        result = simulation.run()
        start[positions] = result.start
        finish[positions] = result.finish
        events += result.events
        busy += result.busy_gpu_seconds
        used += result.used_node_seconds
    return GangRunResult(
        setting="private",
        seed=seed,
        tenants=tenants,
        tenant=np.array([tenants.index(job.tenant) for job in jobs], dtype=np.int64),
        gpus=np.array([job.gpus for job in jobs], dtype=np.int64),
        submit=np.array([job.submit_time for job in jobs], dtype=np.float64),
        start=start,
        finish=finish,
        events=events,
        window=window,
        nodes=shape.nodes,  # the private clusters together: the quotas' nodes
        cluster_gpus=sum(t.quota_gpus(shape) for t in workload.tenants),
        busy_gpu_seconds=busy,
        used_node_seconds=used,
    )


def _run(args: tuple[HivedExperiment, str, list[GangJob], int], on_progress: RunProgress | None) -> GangRunResult:
    experiment, setting, jobs, seed = args
    return run_setting(experiment, setting, jobs, seed=seed, on_progress=on_progress)


def run_hived_experiment(
    experiment: HivedExperiment, *, workers: int = 1, progress: ProgressCallback | None = None
) -> HivedOutcome:
    """Every setting on every seed; ``workers`` > 1 runs them in processes (same results)."""
    arrivals = {seed: experiment.jobs_for(seed) for seed in experiment.seeds}
    pending = [
        (setting, seed, (experiment, setting, arrivals[seed], seed)) for seed in experiment.seeds for setting in experiment.settings
    ]
    runs: dict[str, list[GangRunResult]] = {setting: [] for setting in experiment.settings}
    run_grid(pending, run=_run, runs=runs, workers=workers, progress=progress)
    return HivedOutcome(runs=runs)


@dataclass(frozen=True, slots=True, kw_only=True)
class HivedSweepPoint:
    value: float
    summaries: dict[str, HivedSummary]


def run_hived_sweep(
    experiment: HivedExperiment, values: Sequence[float], *, workers: int = 1, progress: ProgressCallback | None = None
) -> list[HivedSweepPoint]:
    """The experiment once per load multiplier (``HivedWorkload.load``)."""
    points = []
    for value in values:
        point = replace(experiment, workload=replace(experiment.workload, load=value))
        outcome = run_hived_experiment(point, workers=workers, progress=progress)
        points.append(HivedSweepPoint(value=value, summaries=summarise_outcome(outcome.runs)))
    return points
