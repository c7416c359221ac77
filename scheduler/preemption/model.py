"""The values FitGpp decides on (arXiv:1902.01613 §2–3): job classes, the two settings s and P,
and a running pod as a preemption candidate.

Everything here is a plain immutable value; the drivers translate Kubernetes objects into it
(the extender from kube-scheduler's preempt request and its watch cache, the simulator from its
trace), so both reach :func:`scheduler.preemption.fitgpp.choose_victims` with the same types.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Mapping, Sequence

from scheduler.constants import (
    ANNOTATION_PREEMPTIONS,
    JOB_CLASS_BEST_EFFORT,
    JOB_CLASS_TRIAL,
    DEFAULT_VIRTUAL_CLUSTER,
    LABEL_JOB_CLASS,
    LABEL_PRIORITY,
    LABEL_VIRTUAL_CLUSTER,
    PRIORITY_OPPORTUNISTIC,
)
from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from scheduler.errors import InvalidAnnotation
from scheduler.preemption.errors import InvalidPreemptionSettings


class JobClass(StrEnum):
    """§2: users say whether a job is trial-and-error (starts now) or best-effort (may wait and
    be suspended). The values are the label values users write."""

    TRIAL = JOB_CLASS_TRIAL
    BEST_EFFORT = JOB_CLASS_BEST_EFFORT


def job_class_of(labels: Mapping[str, str]) -> JobClass:
    """The class a pod's ``cellfit.io/job-class`` label asks for.

    No label means best-effort: an unlabelled job must never be able to preempt others, so the
    safe default is the class that only ever loses resources. A value that is neither class is
    refused rather than guessed, because a typo in ``trial`` would otherwise silently give up
    the fast start the user asked for.
    """
    value = labels.get(LABEL_JOB_CLASS)
    if value is None:
        return JobClass.BEST_EFFORT
    try:
        return JobClass(value)
    except ValueError:
        raise InvalidAnnotation(
            f"{value!r} is not a job class (use {JOB_CLASS_TRIAL!r} or {JOB_CLASS_BEST_EFFORT!r})",
            field=f"metadata.labels[{LABEL_JOB_CLASS}]",
        ) from None


def job_class_or_best_effort(labels: Mapping[str, str]) -> JobClass:
    """:func:`job_class_of`, reading a label cellfit cannot understand as best-effort (the class
    that never preempts): for state kept from the watch, which a bad label must not stop. The
    filter and preempt verbs refuse such a pod themselves."""
    try:
        return job_class_of(labels)
    except InvalidAnnotation:
        return JobClass.BEST_EFFORT


def tenancy_of(pod: PodInfo) -> str | None:
    """The VC whose cells a pod holds as its own: its label's, the default VC's without one; None
    for an opportunistic pod, which runs on borrowed cells."""
    if pod.labels.get(LABEL_PRIORITY) == PRIORITY_OPPORTUNISTIC:
        return None
    return pod.labels.get(LABEL_VIRTUAL_CLUSTER, DEFAULT_VIRTUAL_CLUSTER)


def vc_of(pod: PodInfo) -> str:
    """The VC a pod asks for: its label's, the default VC's without one."""
    return pod.labels.get(LABEL_VIRTUAL_CLUSTER, DEFAULT_VIRTUAL_CLUSTER)


def may_claim_cells(claimant: PodInfo, holder: PodInfo) -> bool:
    """HiveD's tenancy rule, enforced whatever the placement engine: a guaranteed pod's cells
    belong to its VC; opportunistic pods run on borrowed cells and may lose them to anyone."""
    tenancy = tenancy_of(holder)
    # A pod without the label is in the default VC, like one that names it.
    return tenancy is None or tenancy == vc_of(claimant)


MAX_PREEMPTION_COUNT: Final = 2**31 - 1  # the largest cellfit.io/preemptions read


def preemption_count_of(annotations: Mapping[str, str]) -> int:
    """How often FitGpp has already preempted a job, from its ``cellfit.io/preemptions``
    annotation (absent: never). Kept on the Job so that the count, and with it P's guarantee
    against starvation, survives both the pod's deletion and a scheduler restart."""
    value = annotations.get(ANNOTATION_PREEMPTIONS)
    if value is None:
        return 0
    field = f"metadata.annotations[{ANNOTATION_PREEMPTIONS}]"
    text = value.strip()
    # ASCII only: str.isdigit also passes superscripts, which int() then refuses.
    if not (text.isascii() and text.isdigit()):
        raise InvalidAnnotation(f"{value!r} is not a non-negative integer", field=field)
    # Bounded so that the victim table's 64-bit counts hold it, raised by any preemption to come
    # (and measured before int(), which refuses strings of thousands of digits).
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_PREEMPTION_COUNT)) or int(digits) > MAX_PREEMPTION_COUNT:
        raise InvalidAnnotation(f"{value!r} is larger than {MAX_PREEMPTION_COUNT}", field=field)
    return int(digits)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitGppSettings:
    """FitGpp's two knobs (§3.2).

    ``grace_period_weight`` is *s* in eq. 3: how much a long grace period (GP) counts against a
    victim relative to its size. Dimensionless, finite, >= 0; both terms of the score are
    normalised to [0, 1], so s = 4 (the paper's choice) makes a job with the longest GP cost
    four times as much as the largest job. s = 0 ignores GPs.

    ``max_preemptions`` is *P*: a best-effort job already preempted P times is never chosen
    again, which bounds how often one job can be pushed back (starvation, §3.2). A count
    (>= 0; 0 disables preemption) or ``None`` for no limit (the paper's "P infinite", Table 4).
    The paper's experiments use P = 1.
    """

    grace_period_weight: float = 4.0
    max_preemptions: int | None = 1

    def __post_init__(self) -> None:
        weight = self.grace_period_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise InvalidPreemptionSettings(f"{weight!r} is not a finite number", field="grace_period_weight")
        if weight < 0:
            raise InvalidPreemptionSettings(f"{weight!r} is negative", field="grace_period_weight")
        limit = self.max_preemptions
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int):
                raise InvalidPreemptionSettings(
                    f"{limit!r} is not a whole number (or None for no limit)", field="max_preemptions"
                )
            if limit < 0:
                raise InvalidPreemptionSettings(f"{limit!r} is negative", field="max_preemptions")

    def below_limit(self, preemptions: int) -> bool:
        """``PreemptionCount_j < P`` of eq. 4."""
        return self.max_preemptions is None or preemptions < self.max_preemptions

    def describe_limit(self) -> str:
        return "unlimited" if self.max_preemptions is None else str(self.max_preemptions)


PINNED_OWNERS: Final = frozenset({"DaemonSet", "Node"})  # a Node owns its static (mirror) pods


def is_pinned(pod: PodInfo) -> bool:
    """A DaemonSet's pod or a static pod: recreated on the same node at once (by its controller,
    by the kubelet), preempting it frees nothing, and it is often the node's own machinery (the
    GPU device plugin)."""
    return pod.owner is not None and pod.owner.kind in PINNED_OWNERS


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """A running pod seen as a possible victim.

    Only best-effort pods that are not already terminating can be chosen; the others are still
    worth passing in a :class:`NodeState` (they are skipped) but need not be.
    ``grace_period_seconds`` is the GP of §2 (the pod's ``terminationGracePeriodSeconds``).
    """

    uid: str
    key: str
    job_class: JobClass
    requests: Resources
    grace_period_seconds: float
    preemptions: int = 0
    terminating: bool = False
    priority: int = 0  # a preemptor takes no pod of a higher priority (kube-scheduler's rule)
    pinned: bool = False  # a DaemonSet's pod: recreated on its node at once, it frees nothing

    @property
    def preemptible(self) -> bool:
        # TE jobs are never victims (§3: only BE jobs are suspended); a terminating pod is
        # already on its way out and its resources are promised elsewhere.
        return self.job_class is JobClass.BEST_EFFORT and not self.terminating and not self.pinned

    @classmethod
    def from_pod(cls, pod: PodInfo, *, preemptions: int | None = None) -> Candidate:
        """A candidate from a pod. ``preemptions`` should come from the pod's Job (where the
        count survives the pod); without it the pod's own annotation is read."""
        return cls(
            uid=pod.uid,
            key=pod.key,
            job_class=job_class_of(pod.labels),
            requests=pod.requests,
            grace_period_seconds=float(pod.grace_period_seconds),
            preemptions=preemption_count_of(pod.annotations) if preemptions is None else preemptions,
            terminating=pod.terminating,
            priority=pod.priority,
            pinned=is_pinned(pod),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeState:
    """One node as eq. 2/4 needs it: ``capacity`` normalises sizes (eq. 1), ``free`` is *N*,
    what is unallocated now (allocatable minus every bound pod, the candidates included)."""

    name: str
    capacity: Resources
    free: Resources
    candidates: Sequence[Candidate] = field(default_factory=tuple)
