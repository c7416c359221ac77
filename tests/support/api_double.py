"""A stand-in for scheduler.cluster.api.KubernetesApi serving canned lists, for tests of what
cellfit does while it lists the cluster (the real API is exercised against kube-apiserver in e2e/)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Iterator


class ListingApi:
    """Lists ``nodes``, ``pods`` (only once :meth:`release_pods` is called, when ``hold_pods``)
    and ``jobs``; watches stay quiet; records bindings, and the pods created and deleted (the
    requeue signal's: without them a due signal failed on an AttributeError, and was retried and
    logged every second for as long as the test's service ran)."""

    source = "test double"

    def __init__(
        self,
        *,
        nodes: list[dict[str, Any]],
        pods: list[dict[str, Any]] | None = None,
        jobs: list[dict[str, Any]] | None = None,
        hold_pods: bool = False,
    ) -> None:
        self.nodes = list(nodes)
        self.pods = list(pods or ())
        self.jobs = list(jobs or ())
        self.pods_released = threading.Event()
        if not hold_pods:
            self.pods_released.set()
        self.bindings: list[tuple[str, str]] = []
        self.binding_annotations: dict[str, dict[str, str]] = {}  # by pod UID: what the binding wrote
        self.pages_listed = 0
        self.pods_created: list[dict[str, Any]] = []  # the requeue signal pods, as created
        self.pods_deleted: list[str] = []  # namespace/name

    def fenced(self, acting: Any) -> "ListingApi":
        """The double has no writes to fence: a term's drivers get the double itself."""
        return self

    def release_pods(self) -> None:
        self.pods_released.set()

    def list_raw(self, kind: str, *, limit: int | None = None, continue_token: str | None = None) -> bytes:
        """The list, or with ``limit`` the page from ``continue_token`` on (the token is the
        offset of its first item), as the API server pages it."""
        items: list[dict[str, Any]] = []
        if kind == "nodes":
            items = self.nodes
        elif kind in ("pods", "all-pods"):
            self.pods_released.wait(30)
            items = self.pods
        elif kind == "jobs":
            items = self.jobs
        self.pages_listed += 1
        start = int(continue_token) if continue_token else 0
        end = len(items) if limit is None else min(start + limit, len(items))
        metadata = {"resourceVersion": "100"}
        if end < len(items):
            metadata["continue"] = str(end)
        return json.dumps({"metadata": metadata, "items": items[start:end]}).encode()

    def watch(self, kind: str, *, resource_version: str) -> Iterator[bytes]:
        time.sleep(0.2)  # the server ends an idle watch; the reflector watches again
        return iter(())

    def list_path(self, path: str) -> bytes:
        """Lists by URL path (the cell exchange's ledger ConfigMap, its custom resources): empty,
        as on a cluster where nothing was exchanged yet."""
        return json.dumps({"metadata": {"resourceVersion": "100"}, "items": []}).encode()

    def watch_path(self, path: str, *, resource_version: str) -> Iterator[bytes]:
        return self.watch(path, resource_version=resource_version)

    def list_pending_pods(self, scheduler_name: str, *, resource_version: str = "0") -> bytes:
        """The profile's pending pods on no node, as the requeue nudge's field selector lists them."""
        pending = [
            pod for pod in self.pods
            if pod.get("spec", {}).get("schedulerName", "default-scheduler") == scheduler_name
            and not pod.get("spec", {}).get("nodeName")
            and pod.get("status", {}).get("phase", "Pending") == "Pending"
        ]
        return json.dumps({"metadata": {"resourceVersion": "100"}, "items": pending}).encode()

    def watch_pending_pods(self, scheduler_name: str, *, resource_version: str) -> Iterator[bytes]:
        return self.watch("pending-pods", resource_version=resource_version)

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        """Records the pod (cellfit creates only requeue signal pods)."""
        self.pods_created.append(pod)

    def delete_pod(
        self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        self.pods_deleted.append(f"{namespace}/{name}")

    async def get_pod(self, namespace: str, name: str) -> None:
        return None

    async def create_binding(self, *, namespace: str, name: str, uid: str, node_name: str, annotations: dict[str, str]) -> None:
        self.bindings.append((f"{namespace}/{name}", node_name))
        self.binding_annotations[uid] = dict(annotations)


class EventRecordingApi(ListingApi):
    """:class:`ListingApi` that also records the Events cellfit writes (``create_event``'s keywords)."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.events: list[dict[str, Any]] = []

    def create_event(self, **event: Any) -> None:
        self.events.append(event)
