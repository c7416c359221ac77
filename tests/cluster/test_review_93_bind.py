"""The bind verb against an API server that misbehaves as a busy one does, over real sockets.

The server (Python's http.server, HTTP/1.1 with keep-alive) keeps the pods and applies a Binding
as kube-apiserver does: it sets ``spec.nodeName``, and refuses a pod bound already with HTTP 409.
What it answers after that is scripted per binding: a reset connection, a 500, an answer slower
than cellfit's timeout. cellfit's own path is real from the verb down to the socket: the service,
the watch cache's gateway, the engine (resource fit), KubernetesApi and its event-loop connection
pool. Only the list and watch come from the usual double (they show the pods as first listed).

What must hold: the pod's GPUs are booked exactly when the API server holds the pod bound, so
no second pod is ever reserved onto them, and kube-scheduler is told the truth."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest
from kubernetes import client as k8s

from scheduler.cluster.api import KubernetesApi
from scheduler.cluster.cache import ClusterCache
from scheduler.config import ClusterSettings
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import AlwaysReady, ExtenderService
from tests.support import kube_objects as k
from tests.support.api_double import ListingApi

TIMEOUT_SECONDS = 0.5  # cellfit's client timeout here; the "slow" answer comes after it
RUNNING = k.pod("run-0", uid="uid-run-0", gpus=8, node_name="gpu-b", phase="Running")


class PodServer:
    """The API server's pods, and what it does with each binding posted (``script``, in order;
    ``commit`` when it runs out)."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = {pod["metadata"]["name"]: pod for pod in pods}
        self.script: list[str] = []
        self.posted: list[str] = []  # the pod names of every binding received
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.garbled_reads = False

    def bind(self, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Apply a Binding as kube-apiserver does; its status and answer."""
        pod = self.pods.get(name)
        if pod is None:
            return 404, status(404, f'pods "{name}" not found')
        if body["metadata"].get("uid") and body["metadata"]["uid"] != pod["metadata"]["uid"]:
            return 409, status(409, f"Precondition failed: UID in precondition: {body['metadata']['uid']}")
        bound_to = pod["spec"].get("nodeName")
        if bound_to:
            return 409, status(409, f'pod {name} is already assigned to node "{bound_to}"')
        pod["spec"]["nodeName"] = body["target"]["name"]
        pod["metadata"]["annotations"].update(body["metadata"].get("annotations") or {})
        return 201, status(201, "Success")

    def hold(self) -> None:
        """Until :attr:`release`: the API server busy with the binding (step ``hold``)."""
        assert self.release.wait(10)

    def next_step(self) -> str:
        with self.lock:
            return self.script.pop(0) if self.script else "commit"


def status(code: int, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Success" if code < 300 else "Failure", "message": message, "code": code}


def make_handler(server: PodServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _reply(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            for header, value in (("Content-Type", "application/json"), ("Content-Length", str(len(data)))):
                self.send_header(header, value)
            self.end_headers()
            self.wfile.write(data)

        def _drop(self) -> None:
            """Close the connection without a byte of answer (a reset, a proxy's idle cut)."""
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

        def do_GET(self) -> None:
            if server.garbled_reads:  # a proxy's error page, with 200
                page = b"<html><body>upstream connect error</body></html>"
                self.send_response(200)
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
                return
            name = self.path.rsplit("/", 1)[-1]
            with server.lock:
                pod = server.pods.get(name)
                answer = json.loads(json.dumps(pod)) if pod is not None else None
            self._reply(200, answer) if answer is not None else self._reply(404, status(404, f'pods "{name}" not found'))

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            name = self.path.split("/")[-2]
            step = server.next_step()
            with server.lock:
                server.posted.append(name)
            if step == "hold":
                server.hold()
            with server.lock:
                if step == "drop-before":
                    self._drop()
                    return
                code, answer = (500, status(500, "etcdserver: request timed out")) if step == "refuse-500" else server.bind(name, body)
            if step == "commit-drop":
                self._drop()
            elif step == "commit-500":
                self._reply(500, status(500, "etcdserver: leader changed"))
            elif step == "commit-slow":
                time.sleep(TIMEOUT_SECONDS * 3)
                self._reply(code, answer)
            else:
                self._reply(code, answer)

    return Handler


class ListedHere(ListingApi):
    """Lists and watches from the double; binds and reads pods through the real KubernetesApi."""

    def __init__(self, real: KubernetesApi, **lists: Any) -> None:
        super().__init__(**lists)
        self.create_binding = real.create_binding  # type: ignore[method-assign]
        self.get_pod = real.get_pod  # type: ignore[method-assign]


class Cluster:
    def __init__(self, url: str, pods: PodServer) -> None:
        configuration = k8s.Configuration()
        configuration.host = url
        configuration.api_key = {"authorization": "s3cr3t"}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        real = KubernetesApi(k8s.ApiClient(configuration), settings=ClusterSettings(request_timeout_seconds=TIMEOUT_SECONDS), source="test")
        self.server = pods
        nodes = [k.node("gpu-a", gpus=8, cpu="64"), k.node("gpu-b", gpus=8, cpu="64")]
        self.api = ListedHere(real, nodes=nodes, pods=[json.loads(json.dumps(p)) for p in pods.pods.values()])
        self.engine, lock = ResourceFitEngine(), threading.RLock()
        self.cache = ClusterCache(api=self.api, engine=self.engine, lock=lock, gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                                  pods=PodStore(), jobs=None)
        self.cache.nodes._list_and_replace()
        self.cache.pods._list_and_replace()
        self.service = ExtenderService(engine=self.engine, lock=lock, metrics=ExtenderMetrics(), gpu_resource="nvidia.com/gpu",
                                       cluster=self.cache, readiness=AlwaysReady())
        self.loop = asyncio.new_event_loop()

    def bind(self, name: str) -> str:
        """The bind verb's Error ("" when bound)."""
        uid = self.server.pods[name]["metadata"]["uid"]
        body = json.dumps({"PodName": name, "PodNamespace": "ml", "PodUID": uid, "Node": "gpu-a"}).encode()
        return str(json.loads(self.loop.run_until_complete(self.service.bind(body)).body)["Error"])

    def read_pod(self) -> None:
        """One GET through the pool: its connection stays open, idle, for the next request."""
        self.loop.run_until_complete(self.api.get_pod("ml", "warm-0"))

    def bound_on_server(self) -> dict[str, str | None]:
        with self.server.lock:
            return {name: pod["spec"].get("nodeName") for name, pod in self.server.pods.items()}


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    pods = PodServer([k.pod("train-0", uid="uid-train-0", gpus=8), k.pod("train-1", uid="uid-train-1", gpus=8), RUNNING])
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(pods))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    made = Cluster(f"http://127.0.0.1:{httpd.server_address[1]}", pods)
    yield made
    made.loop.close()
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("step", ["commit-drop", "commit-500", "commit-slow"])
def test_a_binding_made_but_answered_as_failed_is_taken_as_made_and_no_second_pod_gets_its_gpus(cluster: Cluster, step: str) -> None:
    """The API server bound the pod, and its answer was lost (a reset), an error (a 500 after the
    commit: etcd's leader changed) or later than cellfit's timeout. The watch had not shown the
    pod bound yet, so the verb handed the 8 GPUs back and told kube-scheduler the bind failed:
    the next pod was reserved onto them and bound there too, two pods on one node's 8 GPUs."""
    cluster.server.script = [step]
    assert cluster.bind("train-0") == ""
    assert cluster.engine.free_on("gpu-a").gpus == 0
    assert "no longer has room" in cluster.bind("train-1")
    assert cluster.bound_on_server() == {"train-0": "gpu-a", "train-1": None, "run-0": "gpu-b"}


def test_a_binding_sent_again_after_a_kept_alive_connection_dropped_it_unanswered_is_taken_as_made(cluster: Cluster) -> None:
    """A kept-alive connection closed after the server read (and made) the binding, before any
    answer: the pool sends it again on a fresh connection, as for a connection the server
    closed while idle, and the API server answers 409 (already assigned, to this very node)."""
    cluster.read_pod()  # leaves a kept-alive connection in the pool
    cluster.server.script = ["commit-drop"]
    assert cluster.bind("train-0") == ""
    assert cluster.server.posted == ["train-0", "train-0"]
    assert cluster.engine.free_on("gpu-a").gpus == 0
    assert "no longer has room" in cluster.bind("train-1")


@pytest.mark.parametrize("step", ["refuse-500", "drop-before"])
def test_a_binding_not_made_hands_its_gpus_back(cluster: Cluster, step: str) -> None:
    """The other side: a 500 or a reset before anything was written, and the pod is not bound
    when read back. The verb fails, and the GPUs go to the next pod."""
    cluster.server.script = [step]
    error = cluster.bind("train-0")
    assert "bind pod ml/train-0 to gpu-a" in error and ("HTTP 500" in error or "unreachable" in error), error
    assert cluster.engine.free_on("gpu-a").gpus == 8
    assert cluster.bind("train-1") == ""
    assert cluster.bound_on_server() == {"train-0": None, "train-1": "gpu-a", "run-0": "gpu-b"}


def test_a_pod_bound_to_another_node_meanwhile_is_refused_and_holds_nothing_here(cluster: Cluster) -> None:
    """Someone else bound the pod (``spec.nodeName`` set by hand) before cellfit's binding: 409,
    and the read-back shows it elsewhere. Not taken as made."""
    with cluster.server.lock:
        cluster.server.pods["train-0"]["spec"]["nodeName"] = "cpu-z"
    assert 'already assigned to node "cpu-z"' in cluster.bind("train-0")
    assert cluster.engine.free_on("gpu-a").gpus == 8


def test_a_pod_whose_binding_is_in_flight_is_placed_only_where_it_goes_and_preempts_no_one(cluster: Cluster) -> None:
    """The API server takes longer than kube-scheduler's 5 s bind timeout (cellfit waits 10 s):
    kube-scheduler gives up and tries the pod again while cellfit's binding is still in flight.
    The filter counted the pod's own reservation against it, found every node full, and let
    kube-scheduler preempt for it: the preempt verb chose the running pod on the other node,
    killed for a pod about to run where its binding was going."""
    cluster.server.script = ["hold"]
    pod = cluster.server.pods["train-0"]
    binding = cluster.loop.create_task(cluster.service.bind(json.dumps(
        {"PodName": "train-0", "PodNamespace": "ml", "PodUID": "uid-train-0", "Node": "gpu-a"}).encode()))
    while not cluster.server.posted:  # the binding has reached the API server, which holds it
        cluster.loop.run_until_complete(asyncio.sleep(0.01))
    filtered = json.loads(cluster.service.filter(k.dumps(k.extender_args(pod, [], node_cache_capable=True) | {"NodeNames": ["gpu-a", "gpu-b"]})).body)
    preempted = json.loads(cluster.service.preempt(k.dumps(k.preemption_args(pod, {"gpu-b": [RUNNING]}, node_cache_capable=True))).body)
    cluster.server.release.set()
    assert json.loads(cluster.loop.run_until_complete(binding).body) == {"Error": ""}
    assert filtered["NodeNames"] == ["gpu-a"], filtered
    assert filtered["FailedNodes"] == {}  # nothing for preemption to free
    assert not preempted["NodeNameToMetaVictims"], preempted
    assert cluster.bound_on_server() == {"train-0": "gpu-a", "train-1": None, "run-0": "gpu-b"}


def test_a_failed_binding_whose_pod_reads_back_as_garbage_hands_its_gpus_back(cluster: Cluster) -> None:
    """The read-back of a binding that failed with a 500 got a body that is no pod (a proxy's
    page answered 200): the decoder's error escaped the bind verb, which neither handed the
    reservation back nor answered; the node's GPUs stayed reserved for a pod never bound."""
    cluster.server.script = ["refuse-500"]
    cluster.server.garbled_reads = True
    error = cluster.bind("train-0")
    assert "bind pod ml/train-0 to gpu-a: etcdserver: request timed out (HTTP 500)" in error
    assert cluster.engine.free_on("gpu-a").gpus == 8
