"""Assembly: configuration -> engine, cluster connection, service, app; and running it."""

from __future__ import annotations

import logging
import gc
import threading
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable, TypeVar
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from scheduler.cells import HivedEngine
from scheduler.cluster.api import KubernetesApi
from scheduler.cluster.cache import ClusterCache
from scheduler.config import Settings
from scheduler.core.engine import SchedulingEngine
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo
from scheduler.errors import CellfitError, ConfigError, KubernetesApiError
from scheduler.extender.app import create_app
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.inspect import inspect_router
from scheduler.extender.service import ExtenderService
from scheduler.kube import translate, wire
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine

log = logging.getLogger(__name__)
T = TypeVar("T")


class _AlwaysReady:
    def ready(self) -> tuple[bool, str]:
        return True, "standalone: no watch cache to sync"


@dataclass
class Runtime:
    app: FastAPI
    engine: SchedulingEngine
    cache: ClusterCache | None
    metrics: ExtenderMetrics


# Discovery waits this long for the API at startup before giving up (the pod then restarts).
DISCOVERY_TIMEOUT_SECONDS = 60.0


def build_engine(settings: Settings, api: KubernetesApi | None) -> SchedulingEngine:
    """The placement engine ``settings`` ask for, inside FitGpp's preemption unless disabled."""
    placement = build_placement_engine(settings, api)
    preemption = settings.preemption
    if preemption.policy == "placement":
        return placement
    return FitGppEngine(
        placement,
        settings=FitGppSettings(
            grace_period_weight=preemption.grace_period_weight, max_preemptions=preemption.max_preemptions
        ),
        seed=preemption.seed,
    )


def placement_engine(engine: SchedulingEngine) -> SchedulingEngine:
    return engine.inner if isinstance(engine, FitGppEngine) else engine


def build_placement_engine(settings: Settings, api: KubernetesApi | None) -> SchedulingEngine:
    """HiveD without a configured topology discovers its cells from the cluster's Nodes, listed
    once here before anything is served."""
    policy = settings.resolved_policy(connected=api is not None)
    if policy == "resource-fit":
        log.info("policy resource-fit")
        return ResourceFitEngine()
    nodes: list[NodeInfo] | None = None
    if settings.cells.topology is None:
        if api is None:
            raise ConfigError(
                "policy.name: hived needs cells.topology, or a cluster connection to discover the cells from"
            )
        nodes = _list_nodes(api, settings)
    engine = HivedEngine.from_config(
        settings.cells, nodes=nodes, rack_label=settings.policy.rack_label, prefix="cells"
    )
    log.info("policy hived", extra={"cells": engine.summary})
    # The cell tree is large and lives for the whole process: keep the collector from walking
    # it on every full collection (millisecond pauses inside kube-scheduler's calls).
    gc.collect()
    gc.freeze()
    return engine


def _list_nodes(api: KubernetesApi, settings: Settings) -> list[NodeInfo]:
    deadline = time.monotonic() + DISCOVERY_TIMEOUT_SECONDS
    delay = 0.5
    while True:
        try:
            listing = wire.NODE_LIST_DECODER.decode(api.list_raw("nodes"))
            break
        except KubernetesApiError as error:
            if time.monotonic() > deadline:
                raise ConfigError(f"cells: cannot discover cells, listing Nodes failed: {error}") from None
            log.warning("listing nodes for cell discovery failed; retrying", extra={"reason": str(error)})
            time.sleep(delay)
            delay = min(delay * 2, 8.0)
    nodes = []
    for node in listing.items:
        try:
            nodes.append(translate.node_info(node, gpu_resource=settings.policy.gpu_resource_name))
        except CellfitError as error:
            log.warning("node left out of discovery", extra={"node": node.metadata.name, "reason": str(error)})
    return nodes


def build_runtime(settings: Settings, *, api: KubernetesApi | None = None, standalone: bool = False) -> Runtime:
    """Wire everything for ``settings``. ``api`` overrides the connection ``cluster.mode`` would
    make; ``standalone`` forces none."""
    if api is None and not standalone:
        api = KubernetesApi.connect(settings.cluster)
    engine = build_engine(settings, api)
    lock = threading.RLock()
    metrics = ExtenderMetrics()
    cache = (
        ClusterCache(api=api, engine=engine, lock=lock, gpu_resource=settings.policy.gpu_resource_name)
        if api is not None
        else None
    )
    service = ExtenderService(
        engine=engine,
        lock=lock,
        metrics=metrics,
        gpu_resource=settings.policy.gpu_resource_name,
        cluster=cache,
    )

    metrics.track_sizes(lambda: _locked(lock, engine.stats), ("nodes", "pods"))
    placement = placement_engine(engine)
    if isinstance(placement, HivedEngine):
        cells = placement
        metrics.track_cells(lambda: _locked(lock, cells.metrics))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if cache is not None:
            cache.start()
        try:
            yield
        finally:
            if cache is not None:
                cache.stop()

    app = create_app(
        service=service,
        metrics=metrics,
        readiness=cache if cache is not None else _AlwaysReady(),
        max_request_bytes=settings.server.max_request_bytes,
        lifespan=lifespan,
    )
    app.include_router(inspect_router(engine=placement, lock=lock))
    runtime = Runtime(app=app, engine=engine, cache=cache, metrics=metrics)

    if cache is None:
        log.info(
            "standalone mode: node capacity comes from the Node objects kube-scheduler sends; bind is unavailable",
        )
    return runtime


def _locked(lock: threading.RLock, read: Callable[[], T]) -> T:
    with lock:
        return read()


def serve(settings: Settings) -> None:
    runtime = build_runtime(settings)
    log.info(
        "cellfit extender listening",
        extra={"host": settings.server.host, "port": settings.server.port, "policy": settings.policy.name},
    )
    uvicorn.run(
        runtime.app,
        host=settings.server.host,
        port=settings.server.port,
        log_config=None,  # keep cellfit's structured logging
        access_log=False,
        timeout_graceful_shutdown=5,
    )
