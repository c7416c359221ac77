"""Assembly: configuration -> engine, cluster connection, service, app; and running it."""

from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager
from typing import AsyncIterator
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from scheduler.cluster.api import KubernetesApi
from scheduler.cluster.cache import ClusterCache
from scheduler.config import Settings
from scheduler.core.engine import SchedulingEngine
from scheduler.core.fit import ResourceFitEngine
from scheduler.extender.app import create_app
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import ExtenderService

log = logging.getLogger(__name__)


class _AlwaysReady:
    def ready(self) -> tuple[bool, str]:
        return True, "standalone: no watch cache to sync"


@dataclass
class Runtime:
    app: FastAPI
    engine: SchedulingEngine
    cache: ClusterCache | None
    metrics: ExtenderMetrics


def build_engine(settings: Settings) -> SchedulingEngine:
    # One policy today; HiveD, FitGpp and AlloX join behind the same interface.
    return ResourceFitEngine()


def build_runtime(settings: Settings, *, api: KubernetesApi | None = None, standalone: bool = False) -> Runtime:
    """Wire everything for ``settings``. ``api`` overrides the connection ``cluster.mode`` would
    make; ``standalone`` forces none."""
    engine = build_engine(settings)
    lock = threading.RLock()
    metrics = ExtenderMetrics()
    if api is None and not standalone:
        api = KubernetesApi.connect(settings.cluster)
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

    def sizes() -> dict[str, int]:
        with lock:
            return dict(engine.stats())

    metrics.track_sizes(sizes, ("nodes", "pods"))

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
    runtime = Runtime(app=app, engine=engine, cache=cache, metrics=metrics)

    if cache is None:
        log.info(
            "standalone mode: node capacity comes from the Node objects kube-scheduler sends; bind is unavailable",
        )
    return runtime


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
