"""The one record of the cluster's pods: each pod once, by UID, as its driver last heard of it.

A driver (the watch cache live, the simulator's model of kube-scheduler) records every pod event
here before it hands the pod to the engine, and forgets a pod after the engine has heard of its
deletion, so that the store holds every pod the engine knows for as long as it knows it. The
policies keep only indexes derived from the pods (which pods each node, Job or hold has) and
look a pod up here when they need the rest of it. A policy built without a store (a test, a
tool) makes its own and is its one writer.

Beside each pod's watched state the store keeps, as kube-scheduler's cache keeps its assumed
pods, the state this scheduler gave a pod that the watch has not shown yet: bound by the bind
verb, or pending again after that binding failed (the verb may have read the pod from the API
before the watch delivered it). :meth:`current` reads it first; the watch's next state of the
pod ends it, except a pending state older than the binding, which a bound assumption outlives.
"""

from __future__ import annotations

from typing import Iterator, Protocol

from scheduler.core.model import TERMINAL_PHASES, PodInfo


class PodLookup(Protocol):
    """What the policies may do with the store: read."""

    def get(self, uid: str) -> PodInfo | None: ...


class PodStore:
    """Pods by UID, and by ``namespace/name`` (the bind verb names a pod so)."""

    __slots__ = ("_by_uid", "_uid_by_name", "_assumed", "_assumptions")

    def __init__(self) -> None:
        self._by_uid: dict[str, PodInfo] = {}
        self._uid_by_name: dict[str, str] = {}
        # This scheduler's state of a pod the watch has not shown yet, and when it was assumed
        # (counted in assumptions: assumption_mark).
        self._assumed: dict[str, tuple[PodInfo, int]] = {}
        self._assumptions = 0

    def __len__(self) -> int:
        return len(self._by_uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._by_uid

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_uid)

    def get(self, uid: str) -> PodInfo | None:
        return self._by_uid.get(uid)

    def named(self, namespace: str, name: str) -> PodInfo | None:
        uid = self._uid_by_name.get(f"{namespace}/{name}")
        return None if uid is None else self._by_uid.get(uid)

    def pods(self) -> Iterator[PodInfo]:
        return iter(self._by_uid.values())

    def record(self, pod: PodInfo) -> None:
        """The pod's latest state (a pod recreated under its name replaces the old one's name)."""
        self._by_uid[pod.uid] = pod
        self._uid_by_name[pod.key] = pod.uid
        assumed = self.assumed(pod.uid)
        if assumed is not None and not (assumed.node_name is not None and _pending(pod)):
            del self._assumed[pod.uid]

    def assume(self, pod: PodInfo) -> None:
        """This scheduler's own state of the pod (bound, or pending after a failed binding),
        read by :meth:`current` until the watch shows the pod."""
        self._assumptions += 1
        self._assumed[pod.uid] = (pod, self._assumptions)

    def assumption_mark(self) -> int:
        """A mark of the assumptions made so far, for :meth:`unwatched_assumed`."""
        return self._assumptions

    def unwatched_assumed(self, *, before: int) -> list[PodInfo]:
        """The assumed pods the watch has never shown, assumed before ``before`` (a mark): a list
        of the cluster taken after they were assumed that does not list one says it is gone."""
        return [pod for uid, (pod, at) in self._assumed.items() if uid not in self._by_uid and at <= before]

    def assumed(self, uid: str) -> PodInfo | None:
        entry = self._assumed.get(uid)
        return None if entry is None else entry[0]

    def drop_assumed(self, uid: str, *, bound: bool) -> None:
        """End the assumed state of the pod if it is bound (``bound``) or pending (not ``bound``):
        the binding failed, or the pod's wait ended; the other kind stays."""
        assumed = self.assumed(uid)
        if assumed is not None and (assumed.node_name is not None) == bound:
            del self._assumed[uid]

    def current(self, uid: str) -> PodInfo | None:
        """The pod as this scheduler assumes it, else as the watch showed it."""
        return self.assumed(uid) or self._by_uid.get(uid)

    def forget(self, uid: str) -> PodInfo | None:
        self._assumed.pop(uid, None)
        pod = self._by_uid.pop(uid, None)
        if pod is not None:
            key = pod.key
            if self._uid_by_name.get(key) == uid:
                del self._uid_by_name[key]
        return pod


def _pending(pod: PodInfo) -> bool:
    return pod.node_name is None and pod.phase not in TERMINAL_PHASES
