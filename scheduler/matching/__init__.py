"""AlloX (EuroSys'20): choose CPU or GPU and the order of interchangeable jobs by min-cost
bipartite matching, with a fairness knob α. Pure: no I/O (except :mod:`.cli`), no wall clock,
deterministic. See README.md in this directory."""

from scheduler.matching.allox import AlloxScheduler
from scheduler.matching.alloxplus import AlloxPlusScheduler
from scheduler.matching.baselines import (
    BestFitScheduler,
    DrfaScheduler,
    DrfScheduler,
    EqualShareScheduler,
    JsqPlusScheduler,
    SjfPlusScheduler,
    srpt_allocation,
)
from scheduler.matching.capacity import NodeResources, cluster_capacity, default_demands, machines_for
from scheduler.matching.errors import InfeasibleInstance, InvalidInstance, PolicyViolation, StalledSchedule
from scheduler.matching.fairness import Capacity, DemandShare, MachineShare, ShareModel, job_value, user_progress
from scheduler.matching.model import KIND_CPU, KIND_GPU, Assignment, Demand, Job, Machine
from scheduler.matching.plan import plan
from scheduler.matching.policy import Policy
from scheduler.matching.solve import Fleet, Problem, Queues, fleet, prepare, prepare_on, schedule, solve

__all__ = [
    "KIND_CPU",
    "KIND_GPU",
    "AlloxPlusScheduler",
    "AlloxScheduler",
    "Assignment",
    "BestFitScheduler",
    "DrfScheduler",
    "DrfaScheduler",
    "EqualShareScheduler",
    "Fleet",
    "JsqPlusScheduler",
    "SjfPlusScheduler",
    "Capacity",
    "Demand",
    "DemandShare",
    "InfeasibleInstance",
    "InvalidInstance",
    "Job",
    "Machine",
    "MachineShare",
    "NodeResources",
    "Policy",
    "PolicyViolation",
    "Problem",
    "Queues",
    "ShareModel",
    "StalledSchedule",
    "cluster_capacity",
    "default_demands",
    "fleet",
    "job_value",
    "machines_for",
    "plan",
    "prepare",
    "prepare_on",
    "schedule",
    "solve",
    "srpt_allocation",
    "user_progress",
]
