"""kube-scheduler's scheduling queue, modelled for the simulator (the ``fitgpp`` workload's
``kube`` policy, the ``allox`` workload's pods): the order in which it tries pending pods and
when it tries a pod again (``pkg/scheduler/backend/queue``, Kubernetes 1.33 and later, where
``SchedulerPopFromBackoffQ`` is on by default).

* **activeQ** holds the pods ready to be tried, the highest priority first, then the earliest
  queue timestamp (``PrioritySort``). A new pod's timestamp is its arrival; a pod that failed
  gets the time of the failure (``AddUnschedulablePodIfNotPresent`` refreshes it).
* **Unschedulable pods** wait for a cluster event that may help them. A pod the extender
  rejected (the ``Extender`` pseudo-plugin among its rejectors, kubernetes#122019) moves on
  any event; the model counts those that change an assigned pod's room or its cellfit state: a
  pod deleted, bound, or marked for deletion by a preemption (kube-scheduler also moves it on
  the status updates that follow, which change nothing a retry would see). A pod
  kube-scheduler's own filter (NodeResourcesFit) rejected before the extender was called moves
  when an assigned pod is deleted. Pods left unschedulable longer than
  ``podMaxInUnschedulablePodsDuration`` (5 min) move anyway, at the next run of the flush
  every 30 s. A pod that preempted waits here too, nominated, and is retried like the others.
* **backoffQ**: a pod that moves while its backoff runs (1 s after its first failure, doubling
  up to 10 s, counted from its timestamp and cut to the whole second) waits there, ordered by
  when its backoff ends, then as activeQ orders. With ``SchedulerPopFromBackoffQ`` the
  scheduler pops from it whenever activeQ is empty, so backoff orders pods within an instant
  but never delays one that nothing else is waiting ahead of.

The simulator's scheduling is instantaneous, so at one instant every pod that is not
unschedulable is tried once, in the order :meth:`SchedulingQueue.take` gives; a pod that fails
becomes unschedulable until an event moves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Final, Generic, Hashable, Protocol, TypeVar

from scheduler.core.model import PodInfo

INITIAL_BACKOFF_SECONDS: Final = 1.0  # DefaultPodInitialBackoffDuration
MAX_BACKOFF_SECONDS: Final = 10.0  # DefaultPodMaxBackoffDuration
BACKOFF_WINDOW_SECONDS: Final = 1.0  # backoffQOrderingWindowDuration
MAX_UNSCHEDULABLE_SECONDS: Final = 300.0  # DefaultPodMaxInUnschedulablePodsDuration
LEFTOVER_FLUSH_EVERY_SECONDS: Final = 30.0  # flushUnschedulableEntitiesLeftover's period


def backoff_seconds(failures: int) -> float:
    """The backoff after ``failures`` unschedulable attempts (``calculateBackoffDuration``)."""
    if failures <= 0:
        return 0.0
    doublings = min(failures - 1, 32)  # the cap is reached long before; keeps the power finite
    return min(INITIAL_BACKOFF_SECONDS * 2.0**doublings, MAX_BACKOFF_SECONDS)


class Pending(Protocol):
    """What a pending pod is queued for (a job, a sampling run): its current pod."""

    @property
    def pod(self) -> PodInfo: ...


T = TypeVar("T", bound=Pending)


@dataclass(slots=True, eq=False, kw_only=True)
class QueuedPod(Generic[T]):
    """A pending pod in the queue (kube-scheduler's ``QueuedPodInfo``), for ``item``, queued
    under ``key``. ``sequence`` orders pods queued at the same simulated instant as the real
    clock's nanoseconds would."""

    item: T
    key: Hashable
    uid: str  # the pod's: a preempted Job's next pod is a new pod
    timestamp: float
    sequence: int
    failures: int = 0  # UnschedulableCount
    by_extender: bool = False  # the last failure had the extender among its rejectors
    events_seen: int = 0  # assigned-pod events before the last failure: a later one moves it

    @property
    def priority(self) -> int:
        return self.item.pod.priority

    def backoff_ends(self) -> float:
        """When its backoff completes, cut to the ordering window (``getBackoffTime``)."""
        if not self.failures:
            return -math.inf
        return math.floor((self.timestamp + backoff_seconds(self.failures)) / BACKOFF_WINDOW_SECONDS) * BACKOFF_WINDOW_SECONDS

    def backing_off(self, now: float) -> bool:
        """``isEntityBackingoff``: its backoff ends in the current window or later."""
        return self.backoff_ends() >= math.floor(now / BACKOFF_WINDOW_SECONDS) * BACKOFF_WINDOW_SECONDS

    def active_order(self) -> tuple[int, float, int]:
        return (-self.priority, self.timestamp, self.sequence)


class SchedulingQueue(Generic[T]):
    """The pending pods of one simulation, by their items' keys."""

    __slots__ = ("_ready", "_unschedulable", "_sequence")

    def __init__(self) -> None:
        self._ready: dict[Hashable, QueuedPod[T]] = {}  # in activeQ or backoffQ: tried at the next pass
        self._unschedulable: dict[Hashable, QueuedPod[T]] = {}
        self._sequence = 0

    def __len__(self) -> int:
        return len(self._ready) + len(self._unschedulable)

    @property
    def unschedulable(self) -> int:
        return len(self._unschedulable)

    def _next(self) -> int:
        self._sequence += 1
        return self._sequence

    def add(self, item: T, *, key: Hashable, now: float) -> None:
        """A new pending pod (``Add``): activeQ, no backoff. A pod already queued (a preemptor
        whose nominated node lost its room) keeps its place and count, and is ready."""
        queued = self._unschedulable.pop(key, None) or self._ready.get(key)
        if queued is not None and queued.uid == item.pod.uid:
            self._ready[key] = queued
            return
        self._ready[key] = QueuedPod(item=item, key=key, uid=item.pod.uid, timestamp=now, sequence=self._next())

    def discard(self, key: Hashable) -> None:
        """The pod queued under ``key`` was deleted before it was bound."""
        self._ready.pop(key, None)
        self._unschedulable.pop(key, None)

    def failed(self, pod: QueuedPod[T], *, now: float, by_extender: bool, events: int) -> None:
        """The pod's attempt failed (or it preempted and waits, nominated): unschedulable until
        an event moves it. ``events``: assigned-pod events so far."""
        pod.failures += 1
        pod.timestamp = now
        pod.sequence = self._next()
        pod.by_extender = by_extender
        pod.events_seen = events
        self._unschedulable[pod.key] = pod

    def pod_deleted(self) -> None:
        """An assigned pod is gone: every unschedulable pod may fit now."""
        self._move(lambda pod: True)

    def assigned_pod_changed(self, events: int) -> bool:
        """Assigned-pod event number ``events`` happened (a bind, a victim marked for
        deletion): the pods the extender rejected before it move (the extender declares no
        narrower events). True if any moved."""
        return self._move(lambda pod: pod.by_extender and pod.events_seen < events)

    def flush_leftover(self, now: float) -> None:
        """Pods unschedulable for longer than 5 minutes move (the periodic flush)."""
        self._move(lambda pod: now - pod.timestamp > MAX_UNSCHEDULABLE_SECONDS)

    def _move(self, moves: Callable[[QueuedPod[T]], bool]) -> bool:
        """The unschedulable pods ``moves`` picks, ready again; True if any moved."""
        moving = [index for index, pod in self._unschedulable.items() if moves(pod)]
        for index in moving:
            self._ready[index] = self._unschedulable.pop(index)
        return bool(moving)

    def next_flush(self) -> float | None:
        """When the periodic flush next moves an unschedulable pod (the flush runs every 30 s,
        here at multiples of 30 s of simulated time); None when no pod is unschedulable."""
        if not self._unschedulable:
            return None
        due = min(pod.timestamp for pod in self._unschedulable.values()) + MAX_UNSCHEDULABLE_SECONDS
        at = math.ceil(due / LEFTOVER_FLUSH_EVERY_SECONDS) * LEFTOVER_FLUSH_EVERY_SECONDS
        return at if at > due else at + LEFTOVER_FLUSH_EVERY_SECONDS  # moved only once past due

    def take(self, now: float) -> list[QueuedPod[T]]:
        """Every ready pod, removed, in the order kube-scheduler pops them at ``now``: activeQ
        (pods not backing off) by priority and timestamp, then, activeQ being empty, backoffQ by
        the end of the backoff, then priority and timestamp."""
        active: list[QueuedPod[T]] = []
        backing_off: list[QueuedPod[T]] = []
        for pod in self._ready.values():
            (backing_off if pod.backing_off(now) else active).append(pod)
        self._ready.clear()
        active.sort(key=QueuedPod.active_order)
        backing_off.sort(key=lambda pod: (pod.backoff_ends(), *pod.active_order()))
        return active + backing_off
