"""The HTTP surface: a thin FastAPI adapter over :class:`ExtenderService`.

Routes read the raw body and return raw bytes: FastAPI's own model validation would build the
whole v1.Pod and every Node as Python objects and cost milliseconds per call (measured in
tests/benchmarks/bench_extender.py). The OpenAPI document still describes every body exactly,
from the same msgspec structs the service decodes with.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from typing import Any, Awaitable, Callable, Protocol

import msgspec
from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scheduler import __version__
from scheduler.constants import (
    ADMISSION_PODS_PATH,
    EXTENDER_URL_PREFIX,
    PATH_HEALTHZ,
    PATH_METRICS,
    PATH_READYZ,
    VERB_BIND,
    VERB_FILTER,
    VERB_PREEMPT,
    VERB_PRIORITIZE,
)
from scheduler.cluster.api import CONNECTION_POOL_SIZE
from scheduler.errors import InvalidRequest
from scheduler.extender.admission import PodAdmission
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import Answer, ExtenderService
from scheduler.kube import wire

log = logging.getLogger(__name__)
JSON = "application/json"
# Binds in flight at once: one per connection of the Kubernetes client's pool.
BIND_CONCURRENCY = CONNECTION_POOL_SIZE


class Readiness(Protocol):
    def ready(self) -> tuple[bool, str]:
        """Whether cellfit may take traffic, and why not."""
        ...


class RequestTooLarge(Exception):
    pass


def create_app(
    *,
    service: ExtenderService,
    metrics: ExtenderMetrics,
    readiness: Readiness,
    max_request_bytes: int,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
) -> FastAPI:
    app = FastAPI(
        lifespan=lifespan,
        title="cellfit",
        version=__version__,
        description=(
            "Kubernetes scheduler extender for deep-learning GPU clusters. kube-scheduler POSTs "
            f"its extender calls to {EXTENDER_URL_PREFIX}/<verb>; field names are Go's, as "
            "kube-scheduler writes them (k8s.io/kube-scheduler/extender/v1)."
        ),
    )

    # Bind waits on the API server, and kube-scheduler binds many pods at once: bind gets threads
    # of its own, one per connection of the client's pool, rather than sharing the framework's
    # 40 with everything else that blocks.
    bind_threads = ThreadPoolExecutor(max_workers=BIND_CONCURRENCY, thread_name_prefix="bind")

    def verb_route(verb: str, handler: Callable[[bytes], Answer], *, blocking: bool = False) -> Callable[[Request], Awaitable[Response]]:
        observe = metrics.duration_by_verb[verb].observe
        rejected = metrics.answered[verb, "rejected"]

        async def route(request: Request) -> Response:
            started = time.perf_counter()
            try:
                body = await _read_body(request, limit=max_request_bytes)
                if blocking:
                    answer = await asyncio.get_running_loop().run_in_executor(bind_threads, handler, body)
                else:
                    answer = handler(body)
            except RequestTooLarge:
                rejected.inc()
                log.warning("request body too large", extra={"verb": verb, "limit_bytes": max_request_bytes})
                answer = _error(
                    413,
                    f"request body is larger than server.maxRequestBytes ({max_request_bytes} bytes); "
                    "raise it, or set nodeCacheCapable: true so kube-scheduler sends node names only",
                )
            except InvalidRequest as error:
                rejected.inc()
                log.warning("request rejected", extra={"verb": verb, "reason": str(error)})
                answer = _error(400, str(error))
            observe(time.perf_counter() - started)
            return Response(content=answer.body, status_code=answer.status, media_type=JSON)

        route.__name__ = verb
        return route

    verbs: list[tuple[str, Callable[[bytes], Answer], type, Any, str]] = [
        (VERB_FILTER, service.filter, wire.ExtenderArgs, wire.ExtenderFilterResult,
         "Which of the offered nodes can take the pod; the others with a reason."),
        (VERB_PRIORITIZE, service.prioritize, wire.ExtenderArgs, list[wire.HostPriority],
         "Scores 0..10 for the offered nodes."),
        (VERB_PREEMPT, service.preempt, wire.ExtenderPreemptionArgs, wire.ExtenderPreemptionResult,
         "The nodes and victims cellfit accepts among kube-scheduler's candidates."),
        (VERB_BIND, service.bind, wire.ExtenderBindingArgs, wire.ExtenderBindingResult,
         "Bind the pod to the node (creates pods/binding with cellfit's annotations)."),
    ]
    schemas, components = _schemas([args for _, _, args, _, _ in verbs] + [result for *_, result, _ in verbs] + [wire.ErrorBody])
    for index, (verb, handler, _, _, summary) in enumerate(verbs):
        app.add_api_route(
            f"{EXTENDER_URL_PREFIX}/{verb}",
            verb_route(verb, handler, blocking=(verb == VERB_BIND)),
            methods=["POST"],
            summary=summary,
            response_class=Response,
            openapi_extra={
                "requestBody": {"required": True, "content": {JSON: {"schema": schemas[index]}}},
                "responses": {
                    "200": {"description": "The verb's result.", "content": {JSON: {"schema": schemas[len(verbs) + index]}}},
                    "400": {"description": "The body is not a valid request.", "content": {JSON: {"schema": schemas[-1]}}},
                    "413": {"description": "The body exceeds server.maxRequestBytes.", "content": {JSON: {"schema": schemas[-1]}}},
                },
            },
        )

    add_health_and_metrics_routes(app, metrics=metrics, readiness=readiness)

    original_openapi = app.openapi

    def openapi_with_wire_schemas() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = original_openapi()
            document.setdefault("components", {}).setdefault("schemas", {}).update(components)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi_with_wire_schemas  # type: ignore[method-assign]
    return app


def create_metrics_app(*, metrics: ExtenderMetrics, readiness: Readiness) -> FastAPI:
    """The app of the second listener (``server.metricsPort``): /healthz, /readyz and /metrics
    of the same process, nothing else. It may listen on every address, so it must never
    grow a route that changes state or reveals more than the metrics do (no verbs, no
    inspect, no OpenAPI document)."""
    app = FastAPI(title="cellfit metrics", version=__version__, openapi_url=None, docs_url=None, redoc_url=None)
    add_health_and_metrics_routes(app, metrics=metrics, readiness=readiness)
    return app


def create_admission_app(*, admission: PodAdmission, max_request_bytes: int) -> FastAPI:
    """The app of the webhook listener (``admission.port``, HTTPS): the pod-create review and
    /healthz. The API server calls it; a review it cannot read is answered 400, which the
    webhook's ``failurePolicy: Ignore`` turns into "pod admitted unchanged"."""
    app = FastAPI(title="cellfit admission", version=__version__, openapi_url=None, docs_url=None, redoc_url=None)

    @app.post(ADMISSION_PODS_PATH, response_class=Response)
    async def review_pod(request: Request) -> Response:
        try:
            body = await _read_body(request, limit=max_request_bytes)
            # Blocking: the first review reads the resumed PriorityClass from the API server.
            answer = await run_in_threadpool(admission.review, body)
        except RequestTooLarge:
            answer = _error(413, f"request body is larger than server.maxRequestBytes ({max_request_bytes} bytes)")
        except InvalidRequest as error:
            log.warning("admission review rejected", extra={"reason": str(error)})
            answer = _error(400, str(error))
        return Response(content=answer.body, status_code=answer.status, media_type=JSON)

    _add_healthz(app)
    return app


def add_health_and_metrics_routes(app: FastAPI, *, metrics: ExtenderMetrics, readiness: Readiness) -> None:
    """/healthz, /readyz and /metrics: on the extender's listener and on the metrics one."""
    _add_healthz(app)

    @app.get(
        PATH_READYZ,
        summary="Readiness: the watch cache has synced (always ready in standalone mode).",
        responses={503: {"description": "Not ready yet; the body says why."}},
    )
    async def readyz() -> JSONResponse:
        ready, why = readiness.ready()
        return JSONResponse({"status": "ok" if ready else "not ready", "reason": why}, status_code=200 if ready else 503)

    @app.get(PATH_METRICS, summary="Prometheus metrics.", response_class=Response)
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)


def _add_healthz(app: FastAPI) -> None:
    @app.get(PATH_HEALTHZ, summary="Liveness: the process serves requests.")
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok"})


async def _read_body(request: Request, *, limit: int) -> bytes:
    """The body, refused (:class:`RequestTooLarge`) as soon as it is known to exceed ``limit``
    bytes, from Content-Length or while streaming, so an oversized body is never buffered."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        if int(declared) > limit:
            raise RequestTooLarge
        return await request.body()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, message: str) -> Answer:
    return Answer(status, wire.ENCODER.encode(wire.ErrorBody(Error=message)))


def _schemas(types: list[Any]) -> tuple[tuple[dict[str, Any], ...], dict[str, Any]]:
    schemas, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    return schemas, components
