"""The cellfit profile's pending pods that kube-scheduler found unschedulable, as the leader reads
them: its requeue nudge (nudge.py) and HiveD's reclaim of stranded guaranteed pods (stranded.py).

The process's own pod watch (cache.py) keeps neither a pod's PodScheduled condition, nor its
time and message, nor the parts of its spec kube-scheduler's node filters read, so these pods are
read from the API server: listed once (from its watch cache, no etcd read) and then followed by
a watch of them alone (the same field selector: the profile's pods on no node, pending), which
sends an event only for a pending pod that changed, and DELETED for one that stops matching
(bound, finished, deleted); relisted only when the watch's place is lost (HTTP 410), no older
than the last version seen (a watch cache behind it, another API server's, would show bound
pods pending again), or the latest when that version is not served (reflector.py). A list of
every pending pod every 5 s was, with 5,000 pending pods of ~2.2 KB, 12 lists and 130 MB a
minute from the leader, for each reader, for as long as they waited
(tests/benchmarks/bench_nudge_api.py counts both ways).

One :class:`PendingPods` serves both readers when both are given it (``pending=``; a term's
driver, which starts and stops with the term), each reading its own part of every pod, decoded
once per change (a nudge given none keeps its own, without the reclaim's part):

- the nudge: each pod with a PodScheduled=False condition and its time, with that time and the
  condition's message (:class:`UnschedulablePod`);
- the reclaim: each pod kube-scheduler marked Unschedulable, decoded as the node rules read it
  (:class:`scheduler.kube.node_rules.ConstrainedPod`), in the API server's list order (by
  namespace, then name).

Pods being deleted are neither's.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Iterator, Protocol, Sequence

import msgspec

from scheduler.cluster.api import WatchExpired
from scheduler.cluster.reflector import Reflector
from scheduler.kube import node_rules
from scheduler.kube.lists import read_page

log = logging.getLogger(__name__)


class PendingPodsApi(Protocol):
    """The calls the view makes (implemented by scheduler.cluster.api.KubernetesApi)."""

    def list_pending_pods(self, scheduler_name: str, *, resource_version: str = "0") -> bytes: ...

    def watch_pending_pods(self, scheduler_name: str, *, resource_version: str) -> Iterator[bytes]: ...


# ------------------------------------------------------------------ what the nudge reads of a pod


class _Condition(msgspec.Struct, frozen=True, gc=False):
    type: str = ""
    status: str = ""
    message: str = ""
    lastTransitionTime: str | None = None


class _Status(msgspec.Struct, frozen=True, gc=False):
    conditions: list[_Condition] | None = None


class _Meta(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""
    deletionTimestamp: str | None = None


class _Pod(msgspec.Struct, frozen=True, gc=False):
    metadata: _Meta = _Meta()
    status: _Status | None = None

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


class _PodList(msgspec.Struct, frozen=True, gc=False):
    items: list[_Pod] = []


class _Named(msgspec.Struct, frozen=True, gc=False):
    metadata: _Meta = _Meta()


_POD_DECODER = msgspec.json.Decoder(_Pod)
_NAMED_DECODER = msgspec.json.Decoder(_Named)
_POD_LIST_DECODER = msgspec.json.Decoder(_PodList)
_CONSTRAINED_DECODER = msgspec.json.Decoder(node_rules.ConstrainedPod)


@dataclass(frozen=True)
class UnschedulablePod:
    """A pending pod whose PodScheduled condition is False: kube-scheduler tried and failed."""

    key: str  # namespace/name
    since: float  # the condition's lastTransitionTime, seconds since the epoch
    message: str


def unschedulable_pods(raw_pod_list: bytes) -> list[UnschedulablePod]:
    """The pods of a PodList that kube-scheduler found unschedulable (not being deleted), as the
    nudge reads them."""
    return [found for pod in _POD_LIST_DECODER.decode(raw_pod_list).items if (found := _unschedulable(pod)) is not None]


def _unschedulable(pod: _Pod) -> UnschedulablePod | None:
    """``pod`` if kube-scheduler found it unschedulable and it is not being deleted."""
    if pod.metadata.deletionTimestamp or pod.status is None:
        return None
    for condition in pod.status.conditions or ():
        if condition.type == "PodScheduled" and condition.status == "False" and condition.lastTransitionTime:
            return UnschedulablePod(key=pod.key, since=_epoch(condition.lastTransitionTime), message=condition.message)
    return None


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


# ------------------------------------------------------------------ what the reclaim reads of a pod


def marked_unschedulable(pod: node_rules.ConstrainedPod) -> bool:
    """Whether kube-scheduler marked the pod Unschedulable (PodScheduled False for that reason)
    and it is not being deleted: a pod the reclaim looks at."""
    return not pod.metadata.deletionTimestamp and pod.status is not None and any(
        c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable" for c in pod.status.conditions or ())


def _constrained(raw: msgspec.Raw | bytes) -> node_rules.ConstrainedPod | None:
    """The pod as the node rules read it, if it is one the reclaim looks at; a pod whose spec
    does not read as Kubernetes writes it is none (its placement cannot be checked), as
    :func:`scheduler.kube.node_rules.pods_of` leaves it out."""
    try:
        pod = _CONSTRAINED_DECODER.decode(raw)
    except msgspec.MsgspecError:
        return None
    return pod if marked_unschedulable(pod) else None


# ------------------------------------------------------------------ the view


@dataclass(frozen=True)
class PendingPod:
    """One pending pod as the watch last showed it: each reader's part (None: not its pod)."""

    key: str  # namespace/name
    resource_version: str
    unschedulable: UnschedulablePod | None  # the nudge's
    constrained: node_rules.ConstrainedPod | None  # the reclaim's

    @property
    def wanted(self) -> bool:
        return self.unschedulable is not None or self.constrained is not None


def pending_pod(raw: msgspec.Raw | bytes, *, constrained: bool = True) -> PendingPod:
    """A pod of the list or the watch, read once for each reader (for the nudge alone, without
    ``constrained``). Raises ``msgspec.MsgspecError`` when not even its name and status read (the
    list or the watch fails then, and is retried)."""
    pod = _POD_DECODER.decode(raw)
    return PendingPod(key=pod.key, resource_version=pod.metadata.resourceVersion, unschedulable=_unschedulable(pod),
                      constrained=_constrained(raw) if constrained else None)


def gone_pod(raw: msgspec.Raw | bytes) -> PendingPod:
    """A pod the watch shows deleted (bound, finished, deleted): its key and version, all that is
    read of it; neither reader's."""
    meta = _NAMED_DECODER.decode(raw).metadata
    return PendingPod(key=f"{meta.namespace}/{meta.name}", resource_version=meta.resourceVersion, unschedulable=None, constrained=None)


def _listed(raw: bytes, *, constrained: bool) -> tuple[str, list[PendingPod]]:
    # Split as the watch cache's relist splits its pages: with the GIL released.
    page = read_page(raw)
    return page.metadata.resourceVersion, [pending_pod(item, constrained=constrained) for item in page.items]


class PendingPods:
    """The profile's pending pods that kube-scheduler found unschedulable, listed once and kept
    current by a watch of those pods alone (a reflector: relisted only when the watch's place is
    lost). Only the pods one of its readers looks at are kept, and of them only what it reads.
    ``constrained``: whether the reclaim reads it (its part of 5,000 pods, decoded as the node
    rules read them, is ~16 MB; the nudge's, ~1.5 MB)."""

    def __init__(self, *, api: PendingPodsApi, scheduler_name: str, constrained: bool = True) -> None:
        self._constrained = constrained
        self._found: dict[str, PendingPod] = {}  # by namespace/name
        self._lock = threading.Lock()
        self._began = False  # the watch's thread was started
        self._ended = False  # stopped: never started again
        self._reflector: Reflector[PendingPod] = Reflector(
            kind="pending-pods",
            list_from=lambda version: _listed(
                api.list_pending_pods(scheduler_name, resource_version=version), constrained=constrained),
            watch_lines=lambda version: api.watch_pending_pods(scheduler_name, resource_version=version),
            decode_object=lambda raw: pending_pod(raw, constrained=constrained),
            decode_deleted=gone_pod,  # every binding: the pod no longer matches the selector
            version_of=lambda pod: pod.resource_version,
            replace=self._replace,
            apply=self._apply,
            delete=self._delete,
            expired=WatchExpired,
        )

    def start(self) -> None:
        """Begin the list and watch (once; a call after the first, or after :meth:`stop`, does nothing)."""
        with self._lock:
            if self._began or self._ended:
                return
            self._began = True
            self._reflector.start()

    def stop(self) -> None:
        with self._lock:
            self._ended = True
        self._reflector.stop()

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for the watch's thread to end once stopped (it ends at
        the watch's next line, or when the server ends the watch)."""
        with self._lock:
            began = self._began
        if began:
            self._reflector.join(timeout)

    @property
    def constrained(self) -> bool:
        """Whether it keeps the reclaim's part (:meth:`marked_unschedulable`)."""
        return self._constrained

    @property
    def relists(self) -> int:
        return self._reflector.relists

    def unschedulable(self, *, wait: float) -> list[UnschedulablePod] | None:
        """The nudge's part: the pods with a PodScheduled=False condition, with its time and
        message; None while the first list has not come within ``wait`` seconds (started here
        if :meth:`start` was not called)."""
        pods = self._read(wait=wait)
        return None if pods is None else [pod.unschedulable for pod in pods if pod.unschedulable is not None]

    def marked_unschedulable(self, *, wait: float) -> list[node_rules.ConstrainedPod] | None:
        """The reclaim's part: the pods kube-scheduler marked Unschedulable, as the node rules
        read them, by namespace and name; None as :meth:`unschedulable`. Only of a view built
        ``constrained``."""
        if not self._constrained:
            raise ValueError("this view of the pending pods keeps only the nudge's part: build it with constrained=True")
        pods = self._read(wait=wait)
        return None if pods is None else [pod.constrained for pod in pods if pod.constrained is not None]

    def _read(self, *, wait: float) -> list[PendingPod] | None:
        self.start()
        with self._lock:
            ended = self._ended
        if not self._reflector.synced.wait(0 if ended else wait):  # a stopped view lists no more
            return None
        with self._lock:
            return [self._found[key] for key in sorted(self._found)]

    def _replace(self, pods: Sequence[PendingPod]) -> None:
        found = {pod.key: pod for pod in pods if pod.wanted}
        with self._lock:
            self._found = found

    def _apply(self, pod: PendingPod) -> None:
        with self._lock:
            if pod.wanted:
                self._found[pod.key] = pod
            else:
                self._found.pop(pod.key, None)

    def _delete(self, pod: PendingPod) -> None:
        with self._lock:
            self._found.pop(pod.key, None)
