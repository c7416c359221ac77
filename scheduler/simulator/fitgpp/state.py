"""The mutable state of one job during a simulation, and the plan a policy hands back when it
wants jobs preempted. Kept apart from the event loop so that policies can import it without
importing the loop.

Each job is a batch/v1 Job as the engine sees it: its pods are owned by it, and a job preempted
and resumed runs its next pod (a new UID, as the Job controller makes one), so that the
engine's per-Job state (FitGpp's preemption count P, resume holds) is the live one."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Sequence

from scheduler.core.model import OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption.model import JobClass
from scheduler.simulator.fitgpp.workload import JobSpec


# The PriorityClasses the simulated pods carry, the chart's values: trial pods go before
# best-effort pods in kube-scheduler's queue and preempt them; a preempted Job's next pod gets
# the resumed class (cellfit's admission webhook gives it), between the two.
TRIAL_PRIORITY = 1000
RESUMED_PRIORITY = 750
BEST_EFFORT_PRIORITY = 500


class JobState(IntEnum):
    FUTURE = 0  # not submitted yet
    QUEUED = 1  # waiting in the TE or BE queue (a preempted BE job too, once its GP is over)
    RUNNING = 2
    TERMINATING = 3  # preempted, in its grace period: holds its resources, does no work
    RESERVED = 4  # a TE job waiting for its victims' grace periods on its node
    DONE = 5


class SimJob:
    """One job's progress. ``work_done`` only grows while RUNNING: work stops at the preemption
    signal (the GP is spent checkpointing, §2), and the job resumes with what is left."""

    __slots__ = (
        "index",
        "spec",
        "pod",
        "trial",
        "demand",
        "state",
        "arrival_seq",
        "submitted_at",
        "started_at",
        "first_start",
        "finished_at",
        "work_done",
        "node",
        "epoch",
        "preemptions",
        "signalled_at",
        "intervals",
        "preempted_for",
        "reserved_node",
        "pending_victims",
        "runs",
    )

    def __init__(self, index: int, spec: JobSpec) -> None:
        self.index = index
        self.spec = spec
        self.trial = spec.job_class is JobClass.TRIAL
        self.demand: Resources = spec.demand
        self.runs = 0  # pods this Job has had before the current one
        self.pod = self._pod()
        self.state = JobState.FUTURE
        self.arrival_seq = -1
        self.submitted_at = spec.submit_time
        self.started_at = 0.0
        self.first_start = -1.0
        self.finished_at = -1.0
        self.work_done = 0.0
        self.node: str | None = None
        # Bumped at every stop so that a completion scheduled for an earlier run is ignored.
        self.epoch = 0
        self.preemptions = 0
        self.signalled_at = -1.0
        self.intervals: list[float] = []
        self.preempted_for: SimJob | None = None
        self.reserved_node: str | None = None
        self.pending_victims = 0

    @property
    def uid(self) -> str:
        return self.spec.job_id

    def next_pod(self) -> PodInfo:
        """The pod the Job controller creates after this one was preempted (pending)."""
        self.runs += 1
        self.pod = self._pod()
        return self.pod

    def _pod(self) -> PodInfo:
        spec = self.spec
        # The first pod's UID is the job's id: traces and decisions name jobs by it.
        uid = spec.job_id if not self.runs else f"{spec.job_id}-run{self.runs}"
        return PodInfo(
            uid=uid,
            namespace="sim",
            name=uid,
            requests=spec.demand,
            labels={"cellfit.io/job-class": spec.job_class.value},
            priority=TRIAL_PRIORITY if self.trial else RESUMED_PRIORITY if self.runs else BEST_EFFORT_PRIORITY,
            grace_period_seconds=round(spec.grace_period),
            owner=OwnerRef(kind="Job", name=spec.job_id, uid=f"job/{spec.job_id}"),
        )

    def remaining(self, now: float) -> float:
        """Work left; for a running job, as of ``now`` (LRTP's perfect knowledge)."""
        done = self.work_done + (now - self.started_at if self.state is JobState.RUNNING else 0.0)
        return self.spec.duration - done


@dataclass(frozen=True, slots=True, kw_only=True)
class PreemptionPlan:
    """Suspend ``victims`` so that the TE job runs on ``node``. Victims on other nodes are
    allowed (LRTP and RAND as the paper runs them preempt cluster-wide until one node has
    room); only those on ``node`` hand their resources to the TE job. ``rule`` is recorded
    (``fitgpp``, ``fallback``, ``lrtp``, ``rand``) so reports can count fallbacks."""

    node: str
    victims: Sequence[SimJob]
    rule: str
