"""The HTTP surface: thin adapters over :class:`ExtenderService` and :class:`PodAdmission`.

The verbs take the raw body and answer raw bytes on :class:`VerbDispatch`'s path in front of
FastAPI: FastAPI's model validation would build the whole v1.Pod and every Node as Python
objects (milliseconds per call), and its routing alone costs as much as a small filter decision
(both measured in tests/benchmarks/bench_extender.py). The OpenAPI document still describes every
body exactly, from the same msgspec structs the service decodes with.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Any, Awaitable, Callable

import msgspec
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scheduler import __version__
from scheduler.constants import (
    ADMISSION_PODS_PATH,
    ADMISSION_VALIDATE_JOBS_PATH,
    ADMISSION_VALIDATE_PODS_PATH,
    EXTENDER_URL_PREFIX,
    PATH_HEALTHZ,
    PATH_HEALTHZ_KUBE_SCHEDULER,
    PATH_METRICS,
    PATH_READYZ,
    RESOURCE_NVIDIA_GPU,
    VERB_BIND,
    VERB_FILTER,
    VERB_PREEMPT,
    VERB_PRIORITIZE,
)
from scheduler.errors import InvalidRequest
from scheduler.extender.admission import PodAdmission
from scheduler.extender.dispatch import ClientDisconnected, RequestTooLarge, VerbDispatch, VerbRoute, error_answer, receive_body
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.paired import PairedSchedulerHealth
from scheduler.extender.service import Answer, ExtenderService, Readiness
from scheduler.extender.validating import ObjectValidation
from scheduler.kube import wire

log = logging.getLogger(__name__)
JSON = "application/json"


def create_app(
    *,
    service: ExtenderService,
    metrics: ExtenderMetrics,
    readiness: Readiness,
    max_request_bytes: int,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    gpu_resource: str = RESOURCE_NVIDIA_GPU,
) -> VerbDispatch[FastAPI]:
    """The extender's listener: the four verbs on :class:`VerbDispatch`'s fast path, in front of
    a FastAPI app with health, metrics and the OpenAPI document (``.api``, where the inspect
    routes are added). ``gpu_resource``: policy.gpuResourceName, whose count the document says
    is whole."""
    api = FastAPI(
        lifespan=lifespan,
        title="cellfit",
        version=__version__,
        description=(
            "Kubernetes scheduler extender for deep-learning GPU clusters. kube-scheduler POSTs "
            f"its extender calls to {EXTENDER_URL_PREFIX}/<verb>; field names are Go's, as "
            "kube-scheduler writes them (k8s.io/kube-scheduler/extender/v1)."
        ),
    )

    verbs: list[tuple[str, Callable[[bytes], Any], type, Any, str]] = [
        (VERB_FILTER, service.filter, wire.ExtenderArgs, wire.ExtenderFilterResult,
         "Which of the offered nodes can take the pod; the others with a reason."),
        (VERB_PRIORITIZE, service.prioritize, wire.ExtenderArgs, list[wire.HostPriority],
         "Scores 0..10 for the offered nodes."),
        (VERB_PREEMPT, service.preempt, wire.ExtenderPreemptionArgs, wire.ExtenderPreemptionResult,
         "The nodes and victims cellfit accepts among kube-scheduler's candidates."),
        (VERB_BIND, service.bind, wire.ExtenderBindingArgs, wire.ExtenderBindingResult,
         "Bind the pod to the node (creates pods/binding with cellfit's annotations)."),
    ]
    routes = {
        f"{EXTENDER_URL_PREFIX}/{verb}": VerbRoute(
            handler=handler,
            observe_seconds=metrics.duration_by_verb[verb].observe,
            count_rejected=metrics.answered[verb, "rejected"].inc,
            count_failed=metrics.answered[verb, "error"].inc,
            add_cpu_seconds=metrics.cpu_seconds_by_verb[verb].inc,
        )
        for verb, handler, *_ in verbs
    }

    add_health_and_metrics_routes(api, metrics=metrics, readiness=readiness)

    # The verbs are not FastAPI routes, so the document describes them here, from the same
    # msgspec structs the service decodes with.
    # OfferedNode: what RawNodeList's raw items refer to.
    documented = [args for _, _, args, _, _ in verbs] + [result for *_, result, _ in verbs] + [wire.ErrorBody, wire.OfferedNode]
    schemas, components = _schemas(documented)
    schemas, components = tuple(wire.device_count_named(list(schemas), gpu_resource=gpu_resource)), wire.device_count_named(
        components, gpu_resource=gpu_resource)
    error_body = schemas[documented.index(wire.ErrorBody)]
    verb_paths = {
        f"{EXTENDER_URL_PREFIX}/{verb}": {
            "post": {
                "summary": summary,
                "operationId": verb,
                "requestBody": {"required": True, "content": {JSON: {"schema": schemas[index]}}},
                "responses": {
                    "200": {"description": "The verb's result.", "content": {JSON: {"schema": schemas[len(verbs) + index]}}},
                    "400": {"description": "The body is not a valid request.", "content": {JSON: {"schema": error_body}}},
                    "413": {"description": "The body exceeds server.maxRequestBytes.", "content": {JSON: {"schema": error_body}}},
                    **({"503": {
                        "description": "cellfit is starting (its watch cache has not synced); kube-scheduler retries the pod.",
                        "content": {JSON: {"schema": error_body}},
                    }} if verb in (VERB_PRIORITIZE, VERB_PREEMPT) else {}),
                },
            }
        }
        for index, (verb, _, _, _, summary) in enumerate(verbs)
    }
    original_openapi = api.openapi

    def openapi_with_verbs() -> dict[str, Any]:
        if api.openapi_schema is None:
            document = original_openapi()
            document["paths"] = {**verb_paths, **document.get("paths", {})}
            document.setdefault("components", {}).setdefault("schemas", {}).update(components)
            api.openapi_schema = document
        return api.openapi_schema

    api.openapi = openapi_with_verbs  # type: ignore[method-assign]
    return VerbDispatch(api=api, routes=routes, max_request_bytes=max_request_bytes, verb_prefix=EXTENDER_URL_PREFIX)


def create_metrics_app(
    *, metrics: ExtenderMetrics, readiness: Readiness, paired_scheduler: PairedSchedulerHealth | None = None
) -> FastAPI:
    """The app of the second listener (``server.metricsPort``): /healthz, /readyz and /metrics
    of the same process, and with ``paired_scheduler`` the liveness of the kube-scheduler
    beside it; nothing else. It may listen on every address, so it must never grow a route
    that changes state or reveals more than the metrics do (no verbs, no inspect, no OpenAPI
    document)."""
    app = FastAPI(title="cellfit metrics", version=__version__, openapi_url=None, docs_url=None, redoc_url=None)
    add_health_and_metrics_routes(app, metrics=metrics, readiness=readiness)
    if paired_scheduler is not None:
        _add_paired_scheduler_healthz(app, paired_scheduler)
    return app


def _add_paired_scheduler_healthz(app: FastAPI, paired: PairedSchedulerHealth) -> None:
    @app.get(
        PATH_HEALTHZ_KUBE_SCHEDULER,
        summary="Liveness of the kube-scheduler beside this cellfit, and of this cellfit (it answers).",
        responses={503: {"description": "That kube-scheduler's /healthz failed; the body says how."}},
    )
    async def paired_scheduler_healthz() -> JSONResponse:
        verdict = await paired.check()
        if not verdict.alive:
            log.warning("the kube-scheduler beside this cellfit fails its health check", extra={"reason": verdict.reason})
        return JSONResponse({"status": "ok" if verdict.alive else "failing", "reason": verdict.reason},
                            status_code=200 if verdict.alive else 503)


def create_inspect_app(*, inspect: APIRouter) -> FastAPI:
    """The app of the inspect listener (``server.inspectPort``): the read-only ``inspect``
    routes and /healthz, nothing else. The API server's service proxy reaches it on the pod IP
    for ``kubectl cellfit`` (RBAC's services/proxy decides who may), so it must never grow a
    route that changes state (no verbs, no webhook)."""
    app = FastAPI(title="cellfit inspect", version=__version__, openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(inspect)
    _add_healthz(app)
    return app


def create_admission_app(
    *, admission: PodAdmission, validation: ObjectValidation | None = None, max_request_bytes: int
) -> FastAPI:
    """The app of the webhook listener (``admission.port``, HTTPS): the pod-create review, the
    validating reviews of Pods and Jobs (``validation``), and /healthz. The API server calls it;
    a review it cannot read is answered 400, which the webhooks' ``failurePolicy: Ignore`` turns
    into "admitted unchanged"."""
    app = FastAPI(title="cellfit admission", version=__version__, openapi_url=None, docs_url=None, redoc_url=None)
    reviews: list[tuple[str, Callable[[bytes], Answer]]] = [(ADMISSION_PODS_PATH, admission.review)]
    if validation is not None:
        reviews += [(ADMISSION_VALIDATE_PODS_PATH, validation.review_pod), (ADMISSION_VALIDATE_JOBS_PATH, validation.review_job)]
    for path, review in reviews:
        app.add_api_route(path, _review_endpoint(review, max_request_bytes=max_request_bytes), methods=["POST"], response_class=Response)
    _add_healthz(app)
    return app


def _review_endpoint(review: Callable[[bytes], Answer], *, max_request_bytes: int) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            body = await receive_body(request.receive, request.scope["headers"], limit=max_request_bytes)
            # In a thread: the first pod review reads the resumed PriorityClass from the API
            # server, and the validating ones wait for the engine's lock.
            answer = await run_in_threadpool(review, body)
        except ClientDisconnected:
            return Response(status_code=400)  # nobody is left to read it
        except RequestTooLarge:
            answer = error_answer(413, f"request body is larger than server.maxRequestBytes ({max_request_bytes} bytes)")
        except InvalidRequest as error:
            log.warning("admission review rejected", extra={"path": request.url.path, "reason": str(error)})
            answer = error_answer(400, str(error))
        return Response(content=answer.body, status_code=answer.status, media_type=JSON)

    return endpoint


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


def _schemas(types: list[Any]) -> tuple[tuple[dict[str, Any], ...], dict[str, Any]]:
    schemas, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    return schemas, components
