"""The one record of the cluster's pods: each pod once, by UID, as its driver last heard of it.

A driver (the watch cache live, the simulator's model of kube-scheduler) records every pod event
here before it hands the pod to the engine, and forgets a pod after the engine has heard of its
deletion, so that the store holds every pod the engine knows for as long as it knows it. The
policies keep only indexes derived from the pods (which pods each node, Job or hold has) and
look a pod up here when they need the rest of it. A policy built without a store (a test, a
tool) makes its own and is its one writer.
"""

from __future__ import annotations

from typing import Iterator, Protocol

from scheduler.core.model import PodInfo


class PodLookup(Protocol):
    """What the policies may do with the store: read."""

    def get(self, uid: str) -> PodInfo | None: ...


class PodStore:
    """Pods by UID, and by ``namespace/name`` (the bind verb names a pod so)."""

    __slots__ = ("_by_uid", "_uid_by_name")

    def __init__(self) -> None:
        self._by_uid: dict[str, PodInfo] = {}
        self._uid_by_name: dict[str, str] = {}

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

    def forget(self, uid: str) -> PodInfo | None:
        pod = self._by_uid.pop(uid, None)
        if pod is not None:
            key = pod.key
            if self._uid_by_name.get(key) == uid:
                del self._uid_by_name[key]
        return pod
