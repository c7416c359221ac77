"""The extender's ASGI entry point: kube-scheduler's verbs answered straight from ASGI messages,
or, on cellfit's own listener, from the request the protocol read (:meth:`VerbDispatch.decide`,
called by scheduler/extender/listeners.py without any ASGI message).

Every other request (inspect, health, metrics, the OpenAPI document) goes on to the FastAPI app.
Why the verbs bypass it: Starlette's middleware stack, router and Request/Response objects cost
~60-90 µs per call on the development machine (tests/benchmarks/bench_extender.py measures the
same trivial endpoint behind the router and here), as much as a 500-node filter decision, and
kube-scheduler calls an extender several times per pod, one call at a time.

The contract is unchanged: a verb reads the raw body (refused past ``server.maxRequestBytes``
before it is buffered), its handler answers status and JSON bytes, and anything unexpected is
a logged 500 with a JSON ``Error`` and never a traceback to the caller.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Generator, Generic, Iterable, Mapping, TypeVar

from starlette.types import ASGIApp, Receive, Scope, Send

from scheduler.errors import InvalidRequest, NotReady
from scheduler.extender.service import Answer
from scheduler.kube import wire

log = logging.getLogger(__name__)

_JSON_HEADER = (b"content-type", b"application/json")
App = TypeVar("App", bound=ASGIApp)


class RequestTooLarge(Exception):
    """The body exceeds the configured limit (HTTP 413)."""


class ClientDisconnected(Exception):
    """The client went away before its body arrived: there is nobody to answer."""


@dataclass(frozen=True, slots=True)
class VerbRoute:
    """One verb: the handler deciding on the raw body, and where its outcome is counted. A
    handler that waits on the API server (bind) is a coroutine function, awaited on the loop."""

    handler: Callable[[bytes], Answer] | Callable[[bytes], Awaitable[Answer]]
    observe_seconds: Callable[[float], None]  # the verb's request-duration histogram
    count_rejected: Callable[[], None]  # HTTP 4xx answers
    count_failed: Callable[[], None]  # HTTP 500 answers (a defect: logged with its traceback)
    add_cpu_seconds: Callable[[float], None] = lambda _: None  # the verb's CPU-time counter


# A body larger than this is decided on a thread of its own, not on the event loop: parsing
# 8 MiB of full Nodes takes hundreds of milliseconds, which every other request (the extender's
# and the metrics listener's, one event loop) would otherwise wait out. Small bodies, what
# kube-scheduler sends with nodeCacheCapable, stay on the loop, where they cost least.
LARGE_BODY_BYTES = 256 * 1024


class VerbDispatch(Generic[App]):
    """ASGI app: POST ``path`` of a :class:`VerbRoute` is answered by it, any other path under
    ``verb_prefix`` 404 with an ``Error`` naming the verbs (as the verbs answer their errors,
    not the API's ``detail``), everything else by ``api``. Lifespan events go to ``api`` too,
    so its startup and shutdown hooks run."""

    def __init__(
        self, *, api: App, routes: Mapping[str, VerbRoute], max_request_bytes: int, verb_prefix: str | None = None
    ) -> None:
        if max_request_bytes < 1:
            raise ValueError(f"max_request_bytes must be positive, got {max_request_bytes}")
        self.api = api
        self.routes: Mapping[str, VerbRoute] = dict(routes)
        self.max_request_bytes = max_request_bytes
        self.verb_prefix = verb_prefix
        self._routes_by_url = {path.encode("ascii"): route for path, route in self.routes.items()}
        # One thread: large bodies queue behind each other rather than all parsing at once.
        self._large_bodies = ThreadPoolExecutor(max_workers=1, thread_name_prefix="large-body")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            route = self.routes.get(path)
            if route is not None:
                await self._answer(route, scope, receive, send)
                return
            prefix = self.verb_prefix
            if prefix is not None and (path == prefix or path.startswith(prefix + "/")):
                await _send(send, self.unknown_verb(path))
                return
        await self.api(scope, receive, send)

    def unknown_verb(self, path: str) -> Answer:
        """The answer to a path under the verbs' prefix that names no verb: what a typo in
        kube-scheduler's ``filterVerb`` (or another) meets, and its FailedScheduling event shows."""
        log.warning("no extender verb at this path", extra={"path": path})
        return error_answer(404, f"no extender verb at {path}; cellfit's verbs are {', '.join(self.routes)}")

    def verb_route(self, url: bytes) -> VerbRoute | None:
        """The verb a request line's target ``url`` names exactly (no query, nothing escaped):
        what the listener answers without the ASGI messages (:meth:`decide`)."""
        return self._routes_by_url.get(url)

    async def _answer(self, route: VerbRoute, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            answer = error_answer(405, f"{scope['method']} is not allowed here; kube-scheduler POSTs its extender calls")
            await _send(send, answer, extra_headers=((b"allow", b"POST"),))
            return
        started = time.perf_counter()
        try:
            body = await receive_body(receive, scope["headers"], limit=self.max_request_bytes)
        except ClientDisconnected:
            return
        except RequestTooLarge:
            answer = self.too_large(route, scope["path"], started=started)
        else:
            decided = self.decide(route, scope["path"], body, started=started)
            answer = decided if isinstance(decided, Answer) else await decided
        await _send(send, answer)

    def decide(self, route: VerbRoute, path: str, body: bytes, *, started: float) -> Answer | Awaitable[Answer]:
        """The answer to ``body`` (read whole, within the size limit since ``started``), counted
        in the verb's metrics; a handler's refusal or defect is an error answer, never an
        exception. Answered now when the handler decides at once on the loop; awaitable when it
        waits (bind, on the API server) or runs on the large-body thread."""
        if len(body) > LARGE_BODY_BYTES:
            return self._settled(route, path, started, self._on_large_body_thread(route, body))
        try:
            answer = _timed_call(route.handler, body, route.add_cpu_seconds)
        except Exception as error:  # noqa: BLE001 - every failure becomes an answer (_failure)
            answer = _failure(route, path, error)
        if not isinstance(answer, Answer):
            return self._settled(route, path, started, _TimedSteps(answer, route.add_cpu_seconds))
        route.observe_seconds(time.perf_counter() - started)
        return answer

    def too_large(self, route: VerbRoute, path: str, *, started: float) -> Answer:
        """The answer to a body over ``server.maxRequestBytes``, counted as a rejection."""
        limit = self.max_request_bytes
        route.count_rejected()
        log.warning("request body too large", extra={"path": path, "limit_bytes": limit})
        route.observe_seconds(time.perf_counter() - started)
        return error_answer(
            413,
            f"request body is larger than server.maxRequestBytes ({limit} bytes); "
            "raise it, or set nodeCacheCapable: true so kube-scheduler sends node names only",
        )

    async def _on_large_body_thread(self, route: VerbRoute, body: bytes) -> Answer:
        answer = await asyncio.get_running_loop().run_in_executor(
            self._large_bodies, _timed_call, route.handler, body, route.add_cpu_seconds
        )
        if not isinstance(answer, Answer):  # a coroutine handler: awaited here, on the loop
            answer = await _TimedSteps(answer, route.add_cpu_seconds)
        return answer

    @staticmethod
    async def _settled(route: VerbRoute, path: str, started: float, answering: Awaitable[Answer]) -> Answer:
        try:
            answer = await answering
        except Exception as error:  # noqa: BLE001 - every failure becomes an answer (_failure)
            answer = _failure(route, path, error)
        route.observe_seconds(time.perf_counter() - started)
        return answer


def _failure(route: VerbRoute, path: str, error: Exception) -> Answer:
    """A handler's exception as the answer kube-scheduler gets, counted and logged."""
    if isinstance(error, InvalidRequest):
        route.count_rejected()
        log.warning("request rejected", extra={"path": path, "reason": str(error)})
        return error_answer(400, str(error))
    if isinstance(error, NotReady):  # verbs without an Error field; kube-scheduler retries the pod
        route.count_rejected()
        log.info("not ready to decide", extra={"path": path, "reason": str(error)})
        return error_answer(503, str(error))
    # A defect must not take the connection down.
    route.count_failed()
    log.error("request failed", extra={"path": path}, exc_info=error)
    return error_answer(500, f"internal error ({type(error).__name__}); see cellfit's log")


def _timed_call(handler: Callable[[bytes], Any], body: bytes, add_cpu_seconds: Callable[[float], None]) -> Any:
    """``handler(body)``, its CPU time on this thread added to the verb's counter."""
    started = time.thread_time()
    try:
        return handler(body)
    finally:
        add_cpu_seconds(time.thread_time() - started)


class _TimedSteps:
    """Awaits a handler's coroutine, adding the CPU time of each of its steps to the verb's
    counter: what the verb's own code costs on the loop, without the waits between the steps
    (other requests run then). It steps the coroutine as an asyncio Task would."""

    __slots__ = ("_coroutine", "_add")

    def __init__(self, coroutine: Awaitable[Answer], add_cpu_seconds: Callable[[float], None]) -> None:
        self._coroutine: Coroutine[Any, Any, Answer] = coroutine  # type: ignore[assignment]
        self._add = add_cpu_seconds

    def __await__(self) -> Generator[Any, Any, Answer]:
        coroutine, add, clock = self._coroutine, self._add, time.thread_time
        value: Any = None
        error: BaseException | None = None
        while True:
            started = clock()
            try:
                yielded = coroutine.send(value) if error is None else coroutine.throw(error)
            except StopIteration as stop:
                add(clock() - started)
                return stop.value  # type: ignore[no-any-return]
            except BaseException:
                add(clock() - started)
                raise
            add(clock() - started)
            try:
                value, error = (yield yielded), None
            except BaseException as thrown:  # cancellation: handed to the coroutine
                value, error = None, thrown


async def receive_body(receive: Receive, headers: Iterable[tuple[bytes, bytes]], *, limit: int) -> bytes:
    """The request body, refused (:class:`RequestTooLarge`) as soon as it is known to exceed
    ``limit`` bytes, from Content-Length or while it streams in, so an oversized body is never
    buffered."""
    for name, value in headers:
        if name == b"content-length":
            if value.isdigit() and int(value) > limit:
                raise RequestTooLarge
            break
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def error_answer(status: int, message: str) -> Answer:
    return Answer(status, wire.ENCODER.encode(wire.ErrorBody(Error=message)))


async def _send(send: Send, answer: Answer, *, extra_headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    headers = [_JSON_HEADER, (b"content-length", str(len(answer.body)).encode()), *extra_headers]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})
