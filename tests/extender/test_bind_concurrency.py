"""kube-scheduler's binds are not queued in cellfit for a connection to the API server, nor for a
thread behind a proxy: as many bindings reach the API server at once as kube-scheduler has bind
calls open to cellfit (each holds one of the extender listener's connections).

Before, cellfit's event-loop pool to the API server held 64 connections whatever the listener
allowed (256), so a burst whose bindings took the API server ~0.45 s queued them in cellfit past
~140 a second (tests/benchmarks/bench_extender_burst.py --api-tls: bind p50 1.15 s against the
API's 0.45 s, and kube-scheduler's connections held for the queued binds refused at the
listener's limit); behind a proxy the binds ran on asyncio's default executor, min(32, CPUs + 4)
threads.

The bindings server here holds every binding unanswered until ``WANTED`` are open at once (or a
fallback of a few seconds passes, so that the code before fails on the count, not by hanging)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings, parse_settings
from scheduler.extender.runtime import build_runtime

WANTED = 100  # above the old pool's 64 and asyncio's default executor's threads, below the listener's default
FALLBACK_SECONDS = 5.0


class HoldingBindings:
    """An HTTP/1.1 server answering each POST 201 once ``wanted`` requests are held at once, or
    after the fallback; ``peak``: the most held at once."""

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted
        self.held = 0
        self.peak = 0
        self.paths: list[str] = []
        self._all_held: asyncio.Event | None = None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._all_held is not None
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = next((int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")), 0)
                await reader.readexactly(length)
                self.paths.append(lines[0].split()[1])
                self.held += 1
                self.peak = max(self.peak, self.held)
                if self.held >= self.wanted:
                    self._all_held.set()
                try:
                    await asyncio.wait_for(self._all_held.wait(), FALLBACK_SECONDS)
                except TimeoutError:
                    pass
                self.held -= 1
                writer.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def start(self) -> tuple[asyncio.Server, int]:
        self._all_held = asyncio.Event()
        server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return server, server.sockets[0].getsockname()[1]


async def _bind_all(api: KubernetesApi, count: int) -> None:
    await asyncio.gather(*(
        api.create_binding(namespace="ns", name=f"p{i}", uid=f"u{i}", node_name="n", annotations={}) for i in range(count)
    ))


def test_the_runtime_sizes_the_api_pool_to_the_extender_listener_so_no_bind_waits_for_a_connection(tmp_path: Path) -> None:
    holding = HoldingBindings(WANTED)

    async def run() -> None:
        server, port = await holding.start()
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
            "users: [{name: u, user: {token: t0ken}}]\n"
            "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        )
        settings = parse_settings(
            f"cluster: {{mode: kubeconfig, kubeconfig: {str(kubeconfig)!r}}}\n"
            f"server: {{extenderListener: {{maxConnections: {WANTED}}}}}\n"
            "policy: {name: resource-fit}\n"  # no cells to discover from the Nodes at build
            "estimator: {enabled: false}\nnudge: {enabled: false}\nexchange: {enabled: false}\n"
            "leaderElection: {enabled: false}\nreclaim: {enabled: false}\nadmission: {enabled: false}\n"
        )
        runtime = build_runtime(settings)
        assert runtime.cache is not None
        api: KubernetesApi = runtime.cache._api  # what the bind verb binds through
        async with server:
            await _bind_all(api, WANTED)

    asyncio.run(run())
    assert len(holding.paths) == WANTED
    assert holding.paths[0] == "/api/v1/namespaces/ns/pods/p0/binding"
    # Before: 64, the pool's fixed size, and the other 36 waited in cellfit for one of them.
    assert holding.peak == WANTED


def test_behind_a_proxy_the_binds_get_as_many_threads_as_the_pool_has_connections() -> None:
    configuration = k8s.Configuration()
    configuration.host = "http://127.0.0.1:1"
    configuration.proxy = "http://127.0.0.1:2"  # the client's own path, on threads
    api = KubernetesApi(k8s.ApiClient(configuration), settings=ClusterSettings(), source="test")  # 256 by default
    together = threading.Barrier(WANTED, timeout=FALLBACK_SECONDS)

    def post(path: str, body: bytes, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        together.wait()  # broken unless every binding's thread is running at once
        return 201, b"{}"

    vars(api)["_post"] = post
    # Before: asyncio's default executor, min(32, CPUs + 4) threads: BrokenBarrierError.
    asyncio.run(_bind_all(api, WANTED))


class _Budgeted(Exception):
    """Stops serve() once the descriptor budget was asked for."""


def test_the_descriptor_budget_counts_the_binds_connections_to_the_api(monkeypatch: Any) -> None:
    """Each bind holds one of the pool's connections to the API server too: the file
    descriptors checked at start (RLIMIT_NOFILE) count them beside the listeners'. Before, the
    pool's 64 were inside a fixed reserve; sized to the listener now, they are counted apart."""
    import socket

    from scheduler.extender import server
    from tests.support.api_double import ListingApi
    from tests.support import kube_objects as k

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = parse_settings(
        f"server: {{host: 127.0.0.1, port: {port}, extenderListener: {{maxConnections: {WANTED}}}}}\n"
        "policy: {name: resource-fit}\nestimator: {enabled: false}\nnudge: {enabled: false}\nexchange: {enabled: false}\n"
        "leaderElection: {enabled: false}\nreclaim: {enabled: false}\nadmission: {enabled: false}\n"
    )
    asked: list[dict[str, int]] = []

    def budget(max_connections: dict[str, int]) -> None:
        asked.append(dict(max_connections))
        raise _Budgeted

    monkeypatch.setattr(server, "build_runtime", lambda settings: build_runtime(settings, api=ListingApi(nodes=[k.node("n")])))  # type: ignore[arg-type]
    monkeypatch.setattr(server, "ensure_descriptor_budget", budget)
    try:
        server.serve(settings)
    except _Budgeted:
        pass
    assert len(asked) == 1
    # The extender listener's WANTED, and as many connections to the API for its binds.
    assert sum(asked[0].values()) - asked[0]["server.extenderListener.maxConnections"] >= WANTED, asked
