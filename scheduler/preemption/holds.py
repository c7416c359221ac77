"""Resume holds: the room a preempted best-effort pod left, kept for its Job's next pod.

FitGpp resumes a suspended best-effort (BE) job at the head of the BE queue (§2). The resumed
PriorityClass (``resume.py``) puts its new pod before other BE pods in kube-scheduler's active
queue, but only there: a pod that failed to schedule first waits out a backoff (1 s doubling to
10 s), and a resumed pod has failed at least once while the trial pod held its GPUs. When those
GPUs free up, a BE pod whose backoff ends sooner takes them and the resumed Job waits behind it.
kube-scheduler keeps room for a pod in one case only, a nominated node after a preemption, and a
BE pod never preempts.

So cellfit keeps the room, much as kube-scheduler honours nominated pods: a pending pod of a Job
FitGpp preempted holds its requests on the node its predecessor was preempted from (where its
node selector, affinity and tolerations were met). Another pod is refused that node when placing
it there would leave too little for the held pods, if it

* is not a trial pod and has a priority no higher than theirs,
* is not itself a pod of a preempted Job, and
* runs in the same virtual cluster, or is opportunistic (a hold never spends another tenant's
  guaranteed cells).

A hold refuses only while its pods fit on the node now, so it never keeps room that nothing
could use; it ends when the Job's pod is bound (anywhere), the Job or pod goes away, or
``hold_seconds`` after it first refused a pod: a resumed pod kube-scheduler will not place there
(a new taint, a changed label, a scheduling gate) must not keep the room forever.

Pure: the driver feeds pod and Job changes; time comes from the ``clock`` it passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping

from scheduler.constants import LABEL_PRIORITY, LABEL_VIRTUAL_CLUSTER, PRIORITY_OPPORTUNISTIC
from scheduler.core.model import TERMINAL_PHASES, PodInfo
from scheduler.core.resources import ZERO, Resources
from scheduler.errors import InvalidAnnotation
from scheduler.preemption.errors import InvalidPreemptionSettings
from scheduler.preemption.model import JobClass, job_class_of

Clock = Callable[[], float]


@dataclass(slots=True)
class _Displacement:
    """Pods of one Job preempted on ``node`` whose successors are not bound yet."""

    node: str
    pods: int
    refusing_since: float | None = None  # clock reading of the first refusal


@dataclass(frozen=True, slots=True)
class Hold:
    """Room kept on one node for the pending pods of preempted Jobs (for inspection)."""

    node: str
    requests: Resources
    pods: tuple[str, ...]  # namespace/name of the pods it is kept for


@dataclass(slots=True)
class ResumeHolds:
    """Which nodes keep room for resumed pods, and which pods they turn away.

    ``hold_seconds``: how long a hold may keep refusing pods, from its first refusal (seconds,
    > 0); ``None`` (with or without a clock) keeps it until the resumed pod is bound.
    """

    hold_seconds: float | None = None
    clock: Clock | None = None
    _displaced: dict[str, _Displacement] = field(default_factory=dict)  # Job UID ->
    _pending: dict[str, dict[str, PodInfo]] = field(default_factory=dict)  # Job UID -> pod UID ->
    _job_of_pending: dict[str, str] = field(default_factory=dict)  # pod UID -> Job UID
    # pod UID -> (Job UID, node) of a hold a binding ended, until the watch confirms it: a
    # binding that fails (unreserve) gives the hold back.
    _ended_by_binding: dict[str, tuple[str, str]] = field(default_factory=dict)
    refused: int = 0  # nodes turned away from a pod, all filters together
    lapsed: int = 0  # holds ended by hold_seconds

    def __post_init__(self) -> None:
        seconds = self.hold_seconds
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0):
            raise InvalidPreemptionSettings(f"{seconds!r} is not a positive number of seconds", field="resume_hold_seconds")

    # ------------------------------------------------------------------ changes

    def displaced(self, *, job_uid: str, node_name: str) -> None:
        """FitGpp preempted one pod of the Job on ``node_name``."""
        record = self._displaced.get(job_uid)
        if record is None or record.node != node_name:
            # A Job preempted again elsewhere before it resumed: its newest place is the one
            # its pods can use now; the older one was taken by a trial pod since.
            pods = 1 if record is None else record.pods + 1
            self._displaced[job_uid] = _Displacement(node=node_name, pods=pods)
        else:
            record.pods += 1

    def apply_pod(self, pod: PodInfo) -> None:
        """Record a pod's latest state (every pod, whatever its Job)."""
        if pod.owner is None or pod.owner.kind != "Job":
            return
        job = pod.owner.uid
        if pod.node_name is None and pod.phase not in TERMINAL_PHASES and not pod.terminating:
            self._pending.setdefault(job, {})[pod.uid] = pod
            self._job_of_pending[pod.uid] = job
            return
        self._ended_by_binding.pop(pod.uid, None)
        was_pending = self._forget(pod.uid)
        if was_pending and pod.node_name is not None:
            self._resumed_one(job)

    def bound(self, pod: PodInfo) -> None:
        """The pod is being bound by this scheduler (before the watch says so)."""
        if not self._forget(pod.uid) or pod.owner is None:
            return
        record = self._displaced.get(pod.owner.uid)
        if record is not None:
            self._ended_by_binding[pod.uid] = (pod.owner.uid, record.node)
        self._resumed_one(pod.owner.uid)

    def unbound(self, pod: PodInfo) -> None:
        """The binding :meth:`bound` announced failed: the pod waits again, and so does its hold."""
        ended = self._ended_by_binding.pop(pod.uid, None)
        if ended is not None:
            job, node = ended
            record = self._displaced.get(job)
            if record is None:
                self._displaced[job] = _Displacement(node=node, pods=1)
            else:
                record.pods += 1
        self.apply_pod(replace(pod, node_name=None, phase="Pending"))

    def delete_pod(self, pod_uid: str) -> None:
        self._ended_by_binding.pop(pod_uid, None)
        self._forget(pod_uid)

    def delete_job(self, job_uid: str) -> None:
        self._displaced.pop(job_uid, None)
        for uid in self._pending.pop(job_uid, {}):
            self._job_of_pending.pop(uid, None)

    # ------------------------------------------------------------------ decisions

    def holds(self) -> list[Hold]:
        """Every node that keeps room now, with what it keeps and for whom."""
        by_node: dict[str, list[PodInfo]] = {}
        for job, record in self._displaced.items():
            by_node.setdefault(record.node, []).extend(self._held_pods(job, record))
        return [
            Hold(node=node, requests=_total(pods), pods=tuple(p.key for p in pods))
            for node, pods in sorted(by_node.items())
            if pods
        ]

    def refusals(self, pod: PodInfo, *, free_on: Callable[[str], Resources | None]) -> dict[str, str]:
        """The nodes ``pod`` may not take, each with the sentence its FailedScheduling event
        shows. ``free_on`` gives a node's free resources now (``None``: an unknown node)."""
        if not self._displaced or (pod.owner is not None and pod.owner.uid in self._displaced):
            return {}
        self._lapse()
        held: dict[str, list[PodInfo]] = {}
        for job, record in self._displaced.items():
            pods = [r for r in self._held_pods(job, record) if _yields_to(pod, r)]
            if pods:
                held.setdefault(record.node, []).extend(pods)
        refusals: dict[str, str] = {}
        for node, pods in held.items():
            free = free_on(node)
            kept = _total(pods)
            # Only while the held pods fit: room nothing can use now is not kept.
            if free is None or not kept.fits_in(free) or kept.fits_in(free - pod.requests):
                continue
            names = ", ".join(p.key for p in pods[:3]) + (f" and {len(pods) - 3} more" if len(pods) > 3 else "")
            refusals[node] = (
                f"its free resources are kept for {names}, a best-effort Job preempted there and "
                "now resuming (FitGpp resumes preempted jobs first)"
            )
        if refusals:
            self.refused += len(refusals)
            self._refusing(refusals.keys())
        return refusals

    @property
    def active(self) -> bool:
        """Whether any Job waits to resume (a cheap test before :meth:`refusals`)."""
        return bool(self._displaced)

    def stats(self) -> Mapping[str, int]:
        return {"resumeHolds": len(self.holds()), "resumeHoldRefusals": self.refused, "resumeHoldsLapsed": self.lapsed}

    # ------------------------------------------------------------------ internals

    def _held_pods(self, job: str, record: _Displacement) -> list[PodInfo]:
        pending = self._pending.get(job)
        if not pending:
            return []
        return [pending[uid] for uid in sorted(pending)[: record.pods]]

    def _forget(self, pod_uid: str) -> bool:
        job = self._job_of_pending.pop(pod_uid, None)
        if job is None:
            return False
        pending = self._pending[job]
        del pending[pod_uid]
        if not pending:
            del self._pending[job]
        return True

    def _resumed_one(self, job: str) -> None:
        record = self._displaced.get(job)
        if record is None:
            return
        record.pods -= 1
        if record.pods <= 0:
            del self._displaced[job]

    def _refusing(self, nodes: Iterable[str]) -> None:
        if self.clock is None:
            return
        now = self.clock()
        refused = set(nodes)
        for record in self._displaced.values():
            if record.node in refused and record.refusing_since is None:
                record.refusing_since = now

    def _lapse(self) -> None:
        if self.clock is None or self.hold_seconds is None:
            return
        now = self.clock()
        expired = [
            job
            for job, record in self._displaced.items()
            if record.refusing_since is not None and now - record.refusing_since > self.hold_seconds
        ]
        for job in expired:
            del self._displaced[job]
        self.lapsed += len(expired)


def _yields_to(pod: PodInfo, resumed: PodInfo) -> bool:
    """Whether ``pod`` must leave room for ``resumed``."""
    if pod.priority > resumed.priority or _is_trial(pod):
        return False
    if pod.labels.get(LABEL_PRIORITY) == PRIORITY_OPPORTUNISTIC:
        return True
    return pod.labels.get(LABEL_VIRTUAL_CLUSTER) == resumed.labels.get(LABEL_VIRTUAL_CLUSTER)


def _is_trial(pod: PodInfo) -> bool:
    """Trial pods go before every best-effort pod, resumed or not, whatever their priority."""
    try:
        return job_class_of(pod.labels) is JobClass.TRIAL
    except InvalidAnnotation:
        return False  # the filter verb refuses such a pod anyway


def _total(pods: list[PodInfo]) -> Resources:
    total = ZERO
    for pod in pods:
        total = total + pod.requests
    return total
