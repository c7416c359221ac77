"""The resourceVersion a relist asks for (scheduler/cluster/reflector.py, the pending pods' view
of scheduler/cluster/pending.py through KubernetesApi): after a watch's 410, a list from the API
server's watch cache must be no older than what the view already saw.

Against an API server over HTTP on loopback whose watch cache lags (as one of several API
servers behind one address does, or one whose cache is still catching up): a list at
resourceVersion 0 is served from that cache, whatever its age; a list at a version with
``resourceVersionMatch=NotOlderThan`` is served from it only once it holds that version, else
answered 504 "Too large resource version" (kube-apiserver's answer after its wait); a list
without a resourceVersion is a consistent read (etcd's latest). Its pods, watches and
compaction are tests/support/pending_pods_api.py's."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client as k8s

from scheduler.cluster.api import KubernetesApi
from scheduler.cluster.pending import PendingPods
from scheduler.config import ClusterSettings
from tests.support.loopback_http import LoopbackServer, QuietHandler
from tests.support.pending_pods_api import PENDING_SELECTOR, WAIT_SECONDS, PendingPodsServer

SINCE = "2024-05-01T10:00:00Z"


def pending(name: str) -> dict[str, Any]:
    """A pod of the cellfit profile that kube-scheduler found unschedulable."""
    return {"metadata": {"name": name, "namespace": "ml"},
            "spec": {"schedulerName": "cellfit", "containers": [{"name": "main", "image": "trainer"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                           "message": "0/4 nodes are available", "lastTransitionTime": SINCE}]}}


class LaggingCacheApiServer:
    """The pending pods of ``state`` served over HTTP, lists from a watch cache frozen at
    :meth:`freeze_cache` (until then it is current). Every list's query is recorded."""

    def __init__(self, state: PendingPodsServer) -> None:
        self.state = state
        self.cache: bytes | None = None  # the lagging watch cache's PodList; None: current
        self.list_queries: list[dict[str, list[str]]] = []
        self.too_large_watches = 0  # the next watches answered 504 "Too large resource version"
        self._lock = threading.Lock()
        owner = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urlsplit(self.path)
                query = parse_qs(url.query, keep_blank_values=True)
                assert url.path == "/api/v1/pods" and query["fieldSelector"] == [PENDING_SELECTOR.partition("=")[2]], self.path
                if query.get("watch") == ["true"] and owner.take_too_large_watch():
                    self._answer(504, owner.too_large_status(query["resourceVersion"][0]))
                    return
                if query.get("watch") == ["true"]:
                    self._stream(owner.state.watch_path(f"/api/v1/pods?{PENDING_SELECTOR}", resource_version=query["resourceVersion"][0]))
                    return
                self._answer(*owner.list_answer(query))

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _stream(self, lines: Iterator[bytes]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")  # a chunk per event, as kube-apiserver sends
                self.end_headers()
                for line in lines:
                    self.wfile.write(b"%x\r\n%s\n\r\n" % (len(line) + 1, line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        self.server = LoopbackServer(Handler)

    @property
    def url(self) -> str:
        return self.server.url

    def freeze_cache(self) -> None:
        """The watch cache stops here: later lists from it show the pods as they are now."""
        self.cache = self.state.pod_list()

    def list_answer(self, query: dict[str, list[str]]) -> tuple[int, bytes]:
        with self._lock:
            self.list_queries.append(query)
        current = self.state.pod_list()
        cached = self.cache or current
        version = query.get("resourceVersion", [""])[0]
        if version == "":  # a consistent read
            return 200, current
        if version == "0":
            return 200, cached
        assert query.get("resourceVersionMatch") == ["NotOlderThan"], query
        if int(json.loads(cached)["metadata"]["resourceVersion"]) >= int(version):
            return 200, cached
        return 504, self.too_large_status(version)

    def too_large_status(self, version: str) -> bytes:
        """kube-apiserver's answer to a list or watch at a version its watch cache does not hold yet."""
        held = json.loads(self.cache or self.state.pod_list())["metadata"]["resourceVersion"]
        return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Timeout", "code": 504,
                           "message": f"Too large resource version: {version}, current: {held}",
                           "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]}}).encode()

    def take_too_large_watch(self) -> bool:
        """Whether this watch is answered 504 "Too large resource version" (``too_large_watches`` more)."""
        with self._lock:
            if self.too_large_watches <= 0:
                return False
            self.too_large_watches -= 1
            return True

    def stop(self) -> None:
        self.state.close()
        self.server.stop()


def asked_versions(queries: list[dict[str, list[str]]]) -> list[tuple[str, ...]]:
    """Each list's resourceVersion and resourceVersionMatch, as sent (absent ones left out)."""
    return [tuple(query[key][0] for key in ("resourceVersion", "resourceVersionMatch") if key in query) for query in queries]


@pytest.fixture
def apiserver() -> Iterator[LaggingCacheApiServer]:
    server = LaggingCacheApiServer(PendingPodsServer([pending("train-0"), pending("train-1")]))
    yield server
    server.stop()


def view_through_http(url: str) -> PendingPods:
    configuration = k8s.Configuration()
    configuration.host = url
    api = KubernetesApi(k8s.ApiClient(configuration), settings=ClusterSettings(), source="test")
    return PendingPods(api=api, scheduler_name="cellfit")


def waiting(view: PendingPods) -> list[str]:
    found = view.unschedulable(wait=WAIT_SECONDS)
    assert found is not None, "the view never listed"
    return sorted(pod.key for pod in found)


def shown_bound(view: PendingPods) -> None:
    """Until the view has applied the binding its watch was sent (a bound on a hang: the
    server tells when it wrote the event, not when the view applied it)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while waiting(view) != ["ml/train-1"]:
        assert time.monotonic() < deadline, "the view never applied the binding"
        time.sleep(0.01)


def test_a_relist_after_the_watch_expired_never_shows_a_bound_pod_pending_again(apiserver: LaggingCacheApiServer) -> None:
    """The view saw train-0 bound (its watch said DELETED); the watch's place was then compacted
    away (410) and the view relisted. That relist asked for resourceVersion 0, which the API
    server serves from its watch cache at whatever version it holds: a cache behind the binding
    (another API server's, behind the same address) showed train-0 pending again, and the
    nudge and the reclaim acted on a pod already bound until the next change. It asks, as
    client-go's reflector does, for a list no older than the version seen, and, since this cache
    does not hold that version yet, for the latest."""
    state = apiserver.state
    view = view_through_http(apiserver.url)
    view.start()
    try:
        assert waiting(view) == ["ml/train-0", "ml/train-1"]
        state.wait_watching(1)
        apiserver.freeze_cache()
        state.bind("ml/train-0", "gpu-a")
        shown_bound(view)
        seen = json.loads(state.pod_list())["metadata"]["resourceVersion"]  # the binding's

        state.compact()
        state.end_watches()  # the watch comes back from its version, compacted away: ERROR 410
        state.wait_watching(3)  # relisted, then watching again

        assert waiting(view) == ["ml/train-1"]
        assert asked_versions(apiserver.list_queries) == [("0",), (seen, "NotOlderThan"), ()]
    finally:
        view.stop()


def test_a_watch_answered_too_large_resource_version_is_followed_by_a_consistent_list(apiserver: LaggingCacheApiServer) -> None:
    """The watch landed on an API server whose watch cache does not hold the version listed yet
    (504 "Too large resource version"): a list no older than that version would land there alike;
    the next list is the latest, as client-go's reflector asks for it."""
    apiserver.too_large_watches = 1
    view = view_through_http(apiserver.url)
    view.start()
    try:
        apiserver.state.wait_watching(1)  # the watch the 504 did not answer
        assert asked_versions(apiserver.list_queries) == [("0",), ()]
        assert waiting(view) == ["ml/train-0", "ml/train-1"]
    finally:
        view.stop()
