"""A discrete-event simulator of a GPU cluster that drives the engine ``cellfit serve`` composes
through a model of kube-scheduler, with a virtual clock, over three workloads: FitGpp's
(single-pod jobs, or a trace: :mod:`.fitgpp`), AlloX's (interchangeable CPU/GPU jobs:
:mod:`.allox`) and HiveD's (tenants' gang jobs: :mod:`.hived`). The modules at this level are
what every workload shares. See README.md in this directory."""

from scheduler.simulator.cluster import ClusterSpec
from scheduler.simulator.fitgpp import (
    Experiment,
    FitGppWorkload,
    JobSpec,
    Outcome,
    Policy,
    RunResult,
    Simulation,
    Summary,
    Variant,
    average,
    dump_trace,
    load_trace,
    make_policy,
    run_experiment,
    run_sweep,
    summarise,
)
from scheduler.simulator.policy_registry import PolicyOptions, policy_names, register_policy

# Last: registers the interchangeable-job policies (allox, allox+, es, drff, ...).
from scheduler.simulator.allox import (  # noqa: E402
    AlloxExperiment,
    AlloxJobSpec,
    AlloxWorkload,
    InterchangeableSimulation,
    run_allox_experiment,
    run_allox_sweep,
)

__all__ = [
    "AlloxExperiment",
    "AlloxJobSpec",
    "AlloxWorkload",
    "ClusterSpec",
    "Experiment",
    "FitGppWorkload",
    "InterchangeableSimulation",
    "JobSpec",
    "Outcome",
    "Policy",
    "PolicyOptions",
    "RunResult",
    "Simulation",
    "Summary",
    "Variant",
    "average",
    "dump_trace",
    "load_trace",
    "make_policy",
    "run_allox_experiment",
    "run_allox_sweep",
    "policy_names",
    "register_policy",
    "run_experiment",
    "run_sweep",
    "summarise",
]
