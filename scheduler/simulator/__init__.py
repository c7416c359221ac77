"""A discrete-event simulator of a GPU cluster that drives cellfit's own scheduling core (the
resource-fit engine, the FitGpp preemption core, AlloX's matching) over a trace, the FitGpp
paper's synthetic workload or AlloX's (interchangeable CPU/GPU jobs, :mod:`.allox`), with a
virtual clock. See README.md in this directory."""

from scheduler.simulator.experiment import Experiment, Outcome, Variant, run_experiment, run_sweep
from scheduler.simulator.policies import Policy, PolicyOptions, make_policy, policy_names, register_policy
from scheduler.simulator.results import Summary, average, summarise
from scheduler.simulator.simulation import RunResult, Simulation
from scheduler.simulator.trace import dump_trace, load_trace
from scheduler.simulator.workload import ClusterSpec, FitGppWorkload, JobSpec

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
