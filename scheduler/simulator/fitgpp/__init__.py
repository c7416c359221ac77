"""The ``fitgpp`` workload (FitGpp, arXiv:1902.01613 §4): single-pod TE and BE jobs from the
paper's calibrated synthetic workload or a trace, under FIFO-based policies with preemption
(``fifo``, ``lrtp``, ``rand``, ``fitgpp``) or kube-scheduler's own queue (``kube``), through the
engine ``cellfit serve`` composes and the simulator's model of kube-scheduler. See the
simulator's README."""

from scheduler.simulator.fitgpp.experiment import Experiment, Outcome, Variant, run_experiment, run_sweep
from scheduler.simulator.fitgpp.policies import Policy, make_policy
from scheduler.simulator.fitgpp.results import Summary, average, summarise
from scheduler.simulator.fitgpp.simulation import RunResult, Simulation
from scheduler.simulator.fitgpp.trace import dump_trace, load_trace
from scheduler.simulator.fitgpp.workload import FitGppWorkload, JobSpec

__all__ = [
    "Experiment",
    "FitGppWorkload",
    "JobSpec",
    "Outcome",
    "Policy",
    "RunResult",
    "Simulation",
    "Summary",
    "Variant",
    "average",
    "dump_trace",
    "load_trace",
    "make_policy",
    "run_experiment",
    "run_sweep",
    "summarise",
]
