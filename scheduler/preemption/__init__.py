"""FitGpp (arXiv:1902.01613 §2–4): preempt the best-effort pods that are cheapest to suspend and
quickest to resume so that trial-and-error pods start now. Pure: no I/O, no wall clock,
deterministic for a seed. See README.md in this directory."""

from scheduler.preemption.errors import InvalidPreemptionSettings
from scheduler.preemption.fitgpp import (
    RULE_FALLBACK,
    RULE_FITGPP,
    NoVictims,
    Normalisers,
    PreemptionDecision,
    VictimScore,
    choose_victims,
    format_weight,
    resource_size,
)
from scheduler.preemption.model import (
    Candidate,
    FitGppSettings,
    JobClass,
    NodeState,
    job_class_of,
    preemption_count_of,
)
from scheduler.preemption.resume import ResumedPriorityClass, resumed_pod_patch
from scheduler.preemption.table import CandidateTable, PreemptionIndex, sizes_of

__all__ = [
    "RULE_FALLBACK",
    "RULE_FITGPP",
    "Candidate",
    "CandidateTable",
    "FitGppSettings",
    "InvalidPreemptionSettings",
    "JobClass",
    "NoVictims",
    "NodeState",
    "Normalisers",
    "PreemptionDecision",
    "PreemptionIndex",
    "ResumedPriorityClass",
    "VictimScore",
    "choose_victims",
    "format_weight",
    "job_class_of",
    "preemption_count_of",
    "resource_size",
    "resumed_pod_patch",
    "sizes_of",
]
