"""HiveD's sharing-anomaly experiment (``../shared/papers/hived.txt`` §2, §5.2) on cellfit's
production engines: tenants' gang jobs on their private clusters, on the shared cluster under
:class:`~scheduler.cells.HivedEngine`, and under a quota-only baseline
(:class:`~scheduler.core.fit.ResourceFitEngine` behind a per-tenant GPU count). See the
simulator's README, workload ``hived``."""

from scheduler.simulator.hived.experiment import (
    SETTINGS,
    HivedExperiment,
    HivedOutcome,
    HivedSweepPoint,
    run_hived_experiment,
    run_hived_sweep,
    run_setting,
)
from scheduler.simulator.hived.quota import QuotaGate, least_allocated
from scheduler.simulator.hived.results import HivedSummary, summarise, summarise_outcome
from scheduler.simulator.hived.simulation import (
    ClusterScheduler,
    GangRunResult,
    GangSimulation,
)
from scheduler.simulator.hived.workload import (
    ClusterShape,
    GangJob,
    HivedWorkload,
    Tenant,
)

__all__ = [
    "SETTINGS",
    "ClusterScheduler",
    "ClusterShape",
    "GangJob",
    "GangRunResult",
    "GangSimulation",
    "HivedExperiment",
    "HivedOutcome",
    "HivedSummary",
    "HivedSweepPoint",
    "HivedWorkload",
    "QuotaGate",
    "Tenant",
    "least_allocated",
    "run_hived_experiment",
    "run_hived_sweep",
    "run_setting",
    "summarise",
    "summarise_outcome",
]
