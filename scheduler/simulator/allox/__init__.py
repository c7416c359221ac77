"""Interchangeable jobs in the simulator: AlloX, AlloX+ and the paper's baselines (EuroSys'20
§5) on the ``allox`` workload, driving :mod:`scheduler.matching`. See ../README.md,
"Workload ``allox``"."""

from scheduler.simulator.allox.experiment import (
    AlloxExperiment,
    AlloxOutcome,
    AlloxSweepPoint,
    AlloxVariant,
    run_allox_experiment,
    run_allox_sweep,
)
from scheduler.simulator.allox.policies import (
    InterchangeablePolicy,
    interchangeable_policy_names,
    make_interchangeable_policy,
)
from scheduler.simulator.allox.results import AlloxSummary
from scheduler.simulator.allox.simulation import AlloxRunResult, InterchangeableSimulation
from scheduler.simulator.allox.workload import ALLOX_CLUSTER, AlloxJobSpec, AlloxWorkload, max_throughput

__all__ = [
    "ALLOX_CLUSTER",
    "AlloxExperiment",
    "AlloxJobSpec",
    "AlloxOutcome",
    "AlloxRunResult",
    "AlloxSummary",
    "AlloxSweepPoint",
    "AlloxVariant",
    "AlloxWorkload",
    "InterchangeablePolicy",
    "InterchangeableSimulation",
    "interchangeable_policy_names",
    "make_interchangeable_policy",
    "max_throughput",
    "run_allox_experiment",
    "run_allox_sweep",
]
