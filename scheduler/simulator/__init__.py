"""A discrete-event simulator of a GPU cluster that drives cellfit's own scheduling core (the
resource-fit engine and the FitGpp preemption core) over a trace or the FitGpp paper's
synthetic workload, with a virtual clock. See README.md in this directory."""

from scheduler.simulator.experiment import Experiment, Outcome, Variant, run_experiment, run_sweep
from scheduler.simulator.policies import Policy, PolicyOptions, make_policy, policy_names, register_policy
from scheduler.simulator.results import Summary, average, summarise
from scheduler.simulator.simulation import RunResult, Simulation
from scheduler.simulator.trace import dump_trace, load_trace
from scheduler.simulator.workload import ClusterSpec, FitGppWorkload, JobSpec

__all__ = [
    "ClusterSpec",
    "Experiment",
    "FitGppWorkload",
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
    "policy_names",
    "register_policy",
    "run_experiment",
    "run_sweep",
    "summarise",
]
