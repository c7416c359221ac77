"""The API server as the leader's readers of pending pods meet it (scheduler/cluster/pending.py,
the requeue nudge's and the reclaim's view; before it, nudge.py's own watch and stranded.py's list
at every round): the pending pods of one kube-scheduler profile, listed as
``KubernetesApi.list_pending_pods`` lists them and watched as ``watch_pending_pods`` (or
``watch_path`` with their selector) streams them (from a resourceVersion, with kube-apiserver's
watch-cache rules: an event for each change, DELETED for a pod that stops matching the field
selector, an ERROR 410 once the version is gone), every call and byte counted; and the signal
pods created.

It imports nothing of cellfit, so a benchmark can point it at another checkout's readers."""

from __future__ import annotations

import copy
import json
import queue
import threading
from typing import Any, Iterable, Iterator

# What a watch is asked for: the profile's pods on no node, pending (the nudge's field selector).
PENDING_SELECTOR = "fieldSelector=spec.schedulerName=cellfit,spec.nodeName=,status.phase=Pending"
WAIT_SECONDS = 10.0  # for the watcher's thread to handle what was sent (a bound on a hang, never a measure)


class PendingPodsServer:
    def __init__(self, pods: Iterable[dict[str, Any]]) -> None:
        self._lock = threading.Lock()
        self._version = 1000
        self._pods: dict[str, dict[str, Any]] = {}
        for pod in pods:
            self._pods[_key(pod)] = self._versioned(pod)
        self._history: list[tuple[int, bytes]] = []  # (resourceVersion, watch line) of every change
        self._compacted_before = 0  # a watch from an older version is answered 410 Gone
        self._watchers: list[queue.Queue[bytes | None]] = []
        self._closed = False
        self._counted = threading.Condition(self._lock)  # told of every call and event handled
        # Counted: the calls and what they carried.
        self.lists = 0
        self.listed_at: list[str] = []  # the resourceVersion each list asked for
        self.listed_objects = 0
        self.listed_bytes = 0
        self.watches = 0
        self.watch_events = 0
        self.watched_bytes = 0
        self.events_read = 0  # events the watcher asked past: handled
        self.signals: list[str] = []
        self.signal_calls = 0

    # ------------------------------------------------------------------ the readers' calls

    def list_pending_pods(self, scheduler_name: str, *, resource_version: str = "0") -> bytes:
        """The pods now, whatever ``resource_version`` (recorded in ``listed_at``): this server's
        watch cache never lags (tests/cluster/test_relist_version.py has one that does)."""
        assert scheduler_name == "cellfit"
        body = self.pod_list()
        with self._lock:
            self.listed_at.append(resource_version)
            self.lists += 1
            self.listed_objects += len(self._pods)
            self.listed_bytes += len(body)
            self._counted.notify_all()
        return body

    def watch_pending_pods(self, scheduler_name: str, *, resource_version: str) -> Iterator[bytes]:
        assert scheduler_name == "cellfit"
        return self.watch_path(f"/api/v1/pods?{PENDING_SELECTOR}", resource_version=resource_version)

    def watch_path(self, path: str, *, resource_version: str) -> Iterator[bytes]:
        assert path == f"/api/v1/pods?{PENDING_SELECTOR}", path
        events: queue.Queue[bytes | None] = queue.Queue()
        with self._lock:
            self.watches += 1
            if self._closed:
                return
            if int(resource_version) < self._compacted_before:
                events.put(_expired())
            for version, line in self._history:
                if version > int(resource_version):
                    events.put(line)
            self._watchers.append(events)
            self._counted.notify_all()
        try:
            while (line := events.get()) is not None:
                with self._lock:
                    self.watch_events += 1
                    self.watched_bytes += len(line)
                yield line
                with self._lock:
                    self.events_read += 1
                    self._counted.notify_all()
        finally:
            with self._lock:
                if events in self._watchers:
                    self._watchers.remove(events)

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        self.signal_calls += 1
        self.signals.append(pod["metadata"]["name"])

    def delete_pod(self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None) -> None:
        self.signal_calls += 1

    # ------------------------------------------------------------------ the cluster changing

    def pod_list(self) -> bytes:
        """The PodList a list would answer now (not counted)."""
        with self._lock:
            items = list(self._pods.values())
            return json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(self._version)},
                               "items": items}).encode()

    def add(self, pod: dict[str, Any]) -> None:
        with self._lock:
            stored = self._pods[_key(pod)] = self._versioned(pod)
            self._send("ADDED", stored)

    def update(self, key: str, change: Any) -> None:
        """``change(pod)`` edits a copy of the pod, which becomes the pod (MODIFIED)."""
        with self._lock:
            pod = copy.deepcopy(self._pods[key])
            change(pod)
            stored = self._pods[key] = self._versioned(pod)
            self._send("MODIFIED", stored)

    def change_unseen(self, key: str, change: Any) -> None:
        """:meth:`update` whose event no watch will see (it was compacted away before a watcher
        came back for it): only a list shows it."""
        with self._lock:
            pod = copy.deepcopy(self._pods[key])
            change(pod)
            self._pods[key] = self._versioned(pod)

    def bind(self, key: str, node: str) -> None:
        """The pod is bound: it leaves the selector, so the watch says DELETED, with the pod as it
        was and the binding's resourceVersion (kube-apiserver's cacheWatcher)."""
        with self._lock:
            before = self._pods.pop(key)
            self._send("DELETED", self._versioned(before))

    def compact(self) -> None:
        """Compaction: a watch from any version before now is answered 410 Gone."""
        with self._lock:
            self._version += 1
            self._compacted_before = self._version
            self._history = []

    def end_watches(self) -> None:
        """The server ends every watch (its timeout): the watcher watches again."""
        with self._lock:
            for events in self._watchers:
                events.put(None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for events in self._watchers:
                events.put(None)

    def wait_read(self, events: int) -> None:
        """Until the watcher has handled ``events`` events in all."""
        self._wait(lambda: self.events_read >= events, f"the watcher to handle {events} events")

    def wait_watching(self, watches: int) -> None:
        """Until the ``watches``-th watch is open."""
        self._wait(lambda: self.watches >= watches and bool(self._watchers), f"watch {watches} to open")

    def _wait(self, done: Any, what: str) -> None:
        with self._counted:
            if not self._counted.wait_for(done, WAIT_SECONDS):
                raise AssertionError(f"waited {WAIT_SECONDS} s for {what}: lists {self.lists}, watches {self.watches}, "
                                     f"events handled {self.events_read}")

    # ------------------------------------------------------------------ internals

    def _versioned(self, pod: dict[str, Any]) -> dict[str, Any]:
        self._version += 1
        stored = copy.deepcopy(pod)
        stored["metadata"]["resourceVersion"] = str(self._version)
        return stored

    def _send(self, kind: str, pod: dict[str, Any]) -> None:
        line = json.dumps({"type": kind, "object": pod}).encode()
        self._history.append((self._version, line))
        for events in self._watchers:
            events.put(line)


def _key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def _expired() -> bytes:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired",
              "message": "too old resource version"}
    return json.dumps({"type": "ERROR", "object": status}).encode()
