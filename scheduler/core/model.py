"""The core's view of the cluster: plain, immutable values translated from Kubernetes objects by
the drivers (extender, watch cache, simulator). Only what a decision needs is kept.

They are structs the garbage collector never tracks (``gc=False``; they hold strings, numbers,
mappings of strings and each other, never a cycle): a cluster's pods are tens of thousands of
long-lived records, and tracked they lengthened every full collection, which stalls every verb,
by ~1 ms per thousand pods. ``msgspec.structs.replace`` makes a changed copy."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final, Mapping

import msgspec

from scheduler.core.resources import ZERO, Resources

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})


class OwnerRef(msgspec.Struct, frozen=True, gc=False):
    """The controller that owns a pod (usually a batch/v1 Job)."""

    kind: str
    name: str
    uid: str
    # Its ownerReference's apiVersion ("" where unknown): kind alone does not tell a batch/v1 Job
    # from another group's kind "Job" (Volcano's batch.volcano.sh).
    api_version: str = ""

    @property
    def is_batch_job(self) -> bool:
        """Whether the owner is a Kubernetes Job (batch/v1): :func:`is_batch_job`."""
        return is_batch_job(kind=self.kind, api_version=self.api_version)


def is_batch_job(*, kind: str, api_version: str) -> bool:
    """Whether an owner of this kind and apiVersion is a Kubernetes Job (batch/v1), whose pods get
    cellfit's Job handling (preemption counts, resume holds, podFailurePolicy, the resumed class):
    kind "Job" of the group ``batch``, or of no apiVersion known. Every ownerReference the API
    server holds names its apiVersion; only owners built in this process without one (the
    simulator's, the validating webhook's Job template) lack it, and those are batch/v1 Jobs.
    Another group's kind "Job" (Volcano's batch.volcano.sh, Kubeflow's) is another controller:
    it gets none of that."""
    return kind == "Job" and (api_version == "" or api_version.split("/")[0] == "batch")


# The DisruptionTarget reason kube-scheduler's preemption writes on each victim (and cellfit's own).
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"


class Disruption(msgspec.Struct, frozen=True, gc=False):
    """A pod's ``DisruptionTarget`` condition (status True): why it is being disrupted.
    kube-scheduler's preemption writes reason ``PreemptionByScheduler`` and the message
    ``<preemptor's schedulerName>: preempting to accommodate a higher priority Pod``."""

    reason: str
    message: str = ""

    @property
    def by_preemption(self) -> bool:
        """Whether a preemption marked the pod (reason ``PreemptionByScheduler``)."""
        return self.reason == PREEMPTION_BY_SCHEDULER


class PodInfo(msgspec.Struct, frozen=True, gc=False):
    """A pod as the scheduling core sees it."""

    uid: str
    namespace: str
    name: str
    requests: Resources = ZERO
    labels: Mapping[str, str] = msgspec.field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = msgspec.field(default_factory=lambda: _EMPTY)
    priority: int = 0
    node_name: str | None = None
    phase: str = "Pending"
    terminating: bool = False
    grace_period_seconds: int = 30
    owner: OwnerRef | None = None
    # Evidence of a preemption in progress, which outlives cellfit's memory of it: the node
    # kube-scheduler nominated a pending pod to, the scheduler (profile) that schedules it,
    # and the DisruptionTarget condition kube-scheduler writes on each victim.
    nominated_node_name: str | None = None
    scheduler_name: str | None = None
    disruption: Disruption | None = None
    # False for a pod whose preemptionPolicy is Never: kube-scheduler preempts nobody for it, and
    # neither does cellfit's own reclaim.
    may_preempt: bool = True

    @property
    def key(self) -> str:
        """``namespace/name``, the form users and kubectl use."""
        return f"{self.namespace}/{self.name}"

    @property
    def holds_resources(self) -> bool:
        """Bound and not finished: its requests count against its node. A terminating pod still
        holds its resources until it is gone, as in kube-scheduler's accounting."""
        return self.node_name is not None and self.phase not in TERMINAL_PHASES


class NodeInfo(msgspec.Struct, frozen=True, gc=False):
    """A node as the scheduling core sees it."""

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = msgspec.field(default_factory=lambda: _EMPTY)
    unschedulable: bool = False
    ready: bool = True


class JobInfo(msgspec.Struct, frozen=True, gc=False):
    """A batch/v1 Job as the core sees it: where per-job state (FitGpp's preemption count)
    lives, because the Job outlives each of its pods."""

    uid: str
    namespace: str
    name: str
    annotations: Mapping[str, str] = msgspec.field(default_factory=lambda: _EMPTY)
    # spec.parallelism and spec.completions as written (None: unset); how many pods run at once
    parallelism: int | None = None
    completions: int | None = None
    # The action of its spec.podFailurePolicy's rule on a preempted pod (DisruptionTarget;
    # scheduler/wording.py disruption_action): Ignore (the Job makes a new pod instead of counting
    # a failure), Count, FailJob (the Job fails at once), FailIndex (the index fails at once), or
    # None (no rule: counted); and the failed pods it tolerates, named by their field
    # (backoffLimit, backoffLimitPerIndex): what a victim's Preempted Event tells. Ignore where
    # the spec is not known (a Job the simulator makes resumes).
    disruption_action: str | None = "Ignore"
    backoff_limit: tuple[str, int] = ("backoffLimit", 6)
    # status.failed: the failed pods the Job controller has counted, against backoff_limit (the
    # Job fails once they exceed it): whether a preemption counted too fails it.
    failed: int = 0
    # Its podFailurePolicy's rules on exit codes before its rule on DisruptionTarget that take a
    # preempted pod exiting with 143 or 137 (SIGTERM's, SIGKILL's usual codes), as (index, action,
    # those codes): scheduler/wording.py exit_code_rules_before_disruption. A Job that ignores
    # DisruptionTarget resumes its preempted pod unless it exits so.
    disruption_exit_codes: tuple[tuple[int, str, tuple[int, ...]], ...] = ()

    @property
    def ignores_disruption(self) -> bool:
        """Whether a preempted pod of it is no failure to it: its Job makes a new pod."""
        return self.disruption_action == "Ignore"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
