"""The controllers' Lease lost in the middle of a driver's pass: from that moment the pass
sends no more deletions, patches or Events, though its thread runs on until it sees its stop.

A reclaim pass deletes pod after pod, each a request that may take the client's timeout; its
stop() only sets a flag the loop reads between passes. The API here is the real KubernetesApi
against an HTTP server on loopback that records every request; leader election runs on the
Lease store of tests/unit/test_leadership.py, and the Lease is handed to the other replica by
hand (``kubectl edit``) between two deletions of one pass."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest
from kubernetes import client as k8s

from scheduler.cluster.api import KubernetesApi, TermEnded
from scheduler.cluster.leadership import Driver, LeaderElector, Terms
from scheduler.config import ClusterSettings
from tests.cluster.test_review_93_leadership import edit
from tests.unit.test_leadership import SETTINGS, Clock, LeaseStore


class Recorded:
    def __init__(self) -> None:
        self.requests: list[str] = []
        self.lock = threading.Lock()


def make_handler(recorded: Recorded) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            with recorded.lock:
                recorded.requests.append(f"{self.command} {self.path}")
            data = json.dumps({"kind": "Status", "code": 200}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _any

    return Handler


def connect(port: int) -> KubernetesApi:
    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    configuration.api_key = {"authorization": "s3cr3t"}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return KubernetesApi(k8s.ApiClient(configuration), settings=ClusterSettings(), source="test")


@pytest.fixture
def api() -> Iterator[tuple[KubernetesApi, Recorded]]:
    recorded = Recorded()
    with ThreadingHTTPServer(("127.0.0.1", 0), make_handler(recorded)) as httpd:
        httpd.daemon_threads = True
        serving = threading.Thread(target=httpd.serve_forever, daemon=True)
        serving.start()
        yield connect(httpd.server_address[1]), recorded
        httpd.shutdown()


class PassUnderWay:
    """A term's driver, built as the runtime builds them, whose pass is driven by the test: its
    stop() only sets a flag (as reclaim's does), the pass goes on."""

    def __init__(self, api: KubernetesApi) -> None:
        self.api = api
        self.stopping = threading.Event()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.stopping.set()

    def delete(self, name: str) -> str:
        try:
            self.api.delete_pod(namespace="ml", name=name, uid=f"uid-{name}")
        except TermEnded as error:
            return str(error)
        return "deleted"


@pytest.fixture
def terms(api: tuple[KubernetesApi, Recorded]) -> tuple[Terms, list[PassUnderWay]]:
    """The terms of leadership, each built as the runtime builds its drivers: with the API
    fenced to that term."""
    connected, _ = api
    built: list[PassUnderWay] = []

    def build() -> list[Driver]:
        built.append(PassUnderWay(connected.fenced(made.in_term())))
        return list(built[-1:])

    made = Terms(build)
    return made, built


def test_a_pass_under_way_when_the_lease_is_lost_deletes_nothing_more(api: tuple[KubernetesApi, Recorded], terms: Any) -> None:
    connected, recorded = api
    each_term, built = terms
    clock, store = Clock(), LeaseStore()
    elector = LeaderElector(api=store, settings=SETTINGS.model_copy(update={"identity": "a"}), on_started=each_term.begin,
                            on_stopped=each_term.end, monotonic=clock.monotonic, wall=clock.wall)
    elector.campaign_once()
    [driver] = built
    assert driver.delete("opportunistic-0") == "deleted"
    edit(store, holderIdentity="b")  # handed to the other replica by hand, mid-pass
    elector.campaign_once()
    assert not elector.leading and driver.stopping.is_set()
    # The pass goes on where it was: the next victims are not deleted, nor told so.
    assert "term of leadership has ended" in driver.delete("opportunistic-1")
    with pytest.raises(TermEnded):
        driver.api.create_event(namespace="ml", pod_name="opportunistic-1", pod_uid="uid-opportunistic-1", reason="Preempted", message="m")
    with pytest.raises(TermEnded):
        driver.api.patch_job(namespace="ml", name="train", operations=[])
    assert driver.api.get_path("/api/v1/namespaces/ml/pods/opportunistic-1") is not None  # reads go on
    # The replica's own writes outside any term (the verbs', the victims' nudge) still go.
    connected.delete_pod(namespace="ml", name="signal-0")
    deletions = [request for request in recorded.requests if request.startswith("DELETE")]
    assert deletions == ["DELETE /api/v1/namespaces/ml/pods/opportunistic-0", "DELETE /api/v1/namespaces/ml/pods/signal-0"]


def test_a_later_term_writes_while_an_earlier_terms_drivers_stay_fenced(api: tuple[KubernetesApi, Recorded], terms: Any) -> None:
    _, recorded = api
    each_term, built = terms
    each_term.begin()
    each_term.end()
    each_term.begin()
    first, second = built
    assert "term of leadership has ended" in first.delete("p-0")
    assert second.delete("p-1") == "deleted"
    assert [r for r in recorded.requests if r.startswith("DELETE")] == ["DELETE /api/v1/namespaces/ml/pods/p-1"]
