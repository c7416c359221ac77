"""VerbDispatch, driven with ASGI messages as uvicorn sends them: verbs answered on the fast
path, everything else (and lifespan) handed to the app behind it, bad requests and defects
answered in JSON without losing the server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from scheduler.errors import InvalidRequest
from scheduler.extender.dispatch import VerbDispatch, VerbRoute
from scheduler.extender.service import Answer

PATH = "/v1/extender/filter"


class Recorder:
    """Counts what a route reports, and the app behind the dispatch."""

    def __init__(self) -> None:
        self.durations: list[float] = []
        self.rejected = 0
        self.failed = 0
        self.behind: list[dict[str, Any]] = []

    def route(self, handler) -> VerbRoute:  # type: ignore[no-untyped-def]
        def rejected() -> None:
            self.rejected += 1

        def failed() -> None:
            self.failed += 1

        return VerbRoute(handler=handler, observe_seconds=self.durations.append, count_rejected=rejected, count_failed=failed)

    async def app(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        self.behind.append(scope)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})


def echo(body: bytes) -> Answer:
    return Answer(200, json.dumps({"got": len(body)}).encode())


def call(app: VerbDispatch, *, path: str = PATH, method: str = "POST", chunks: list[bytes] | None = None,
         headers: list[tuple[bytes, bytes]] | None = None, disconnect: bool = False) -> tuple[int | None, dict[bytes, bytes], bytes, int]:
    """One request; returns status, headers, body and how many body messages were read."""
    messages: list[dict[str, Any]] = []
    parts = chunks if chunks is not None else [b"{}"]
    for index, part in enumerate(parts):
        messages.append({"type": "http.request", "body": part, "more_body": index < len(parts) - 1})
    if disconnect:
        messages = messages[:1]
        messages[0]["more_body"] = True
        messages.append({"type": "http.disconnect"})
    read = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return messages[read - 1]

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": headers or []}
    asyncio.run(app(scope, receive, send))
    if not sent:
        return None, {}, b"", read
    start, body = sent
    return start["status"], dict(start["headers"]), body["body"], read


def test_a_verb_is_answered_by_its_handler_with_json_and_its_length() -> None:
    recorder = Recorder()
    app = VerbDispatch(api=recorder.app, routes={PATH: recorder.route(echo)}, max_request_bytes=1000)
    status, headers, body, _ = call(app, chunks=[b'{"a":', b" 1}"])
    assert status == 200 and json.loads(body) == {"got": 8}
    assert headers[b"content-type"] == b"application/json" and headers[b"content-length"] == str(len(body)).encode()
    assert len(recorder.durations) == 1 and recorder.behind == []


def test_other_paths_and_lifespan_go_to_the_app_behind() -> None:
    recorder = Recorder()
    app = VerbDispatch(api=recorder.app, routes={PATH: recorder.route(echo)}, max_request_bytes=1000)
    status, *_ = call(app, path="/healthz", method="GET")
    assert status == 204

    async def lifespan() -> None:
        async def nothing() -> dict[str, Any]:
            return {}

        async def ignore(_: dict[str, Any]) -> None:
            return None

        await app({"type": "lifespan"}, nothing, ignore)

    asyncio.run(lifespan())
    assert [scope["type"] for scope in recorder.behind] == ["http", "lifespan"]


def test_a_verb_path_with_another_method_is_405_naming_post() -> None:
    recorder = Recorder()
    app = VerbDispatch(api=recorder.app, routes={PATH: recorder.route(echo)}, max_request_bytes=1000)
    status, headers, body, _ = call(app, method="GET")
    assert status == 405 and headers[b"allow"] == b"POST" and "POST" in json.loads(body)["Error"]


def test_an_invalid_request_is_400_with_the_reason_and_counted() -> None:
    def refuse(body: bytes) -> Answer:
        raise InvalidRequest("is required", field="Pod")

    recorder = Recorder()
    app = VerbDispatch(api=recorder.app, routes={PATH: recorder.route(refuse)}, max_request_bytes=1000)
    status, _, body, _ = call(app)
    assert status == 400 and "Pod" in json.loads(body)["Error"] and recorder.rejected == 1


def test_a_declared_oversized_body_is_refused_before_it_is_read() -> None:
    recorder = Recorder()
    app = VerbDispatch(api=recorder.app, routes={PATH: recorder.route(echo)}, max_request_bytes=10)
    status, _, body, read = call(app, chunks=[b"x" * 11], headers=[(b"content-length", b"11")])
    assert status == 413 and "server.maxRequestBytes (10 bytes)" in json.loads(body)["Error"]
    assert read == 0 and recorder.rejected == 1


def test_a_streamed_body_is_refused_as_soon_as_it_passes_the_limit() -> None:
    recorder = Recorder()
    app = VerbDispatch(api=recorder.app, routes={PATH: recorder.route(echo)}, max_request_bytes=10)
    status, _, _, read = call(app, chunks=[b"x" * 6, b"x" * 6, b"x" * 6])
    assert status == 413 and read == 2


def test_a_defect_is_a_logged_500_in_json_and_the_next_call_is_served(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    def flaky(body: bytes) -> Answer:
        calls.append(body)
        if len(calls) == 1:
            raise KeyError("boom")
        return echo(body)

    recorder = Recorder()
    app = VerbDispatch(api=recorder.app, routes={PATH: recorder.route(flaky)}, max_request_bytes=1000)
    status, _, body, _ = call(app)
    assert status == 500 and json.loads(body) == {"Error": "internal error (KeyError); see cellfit's log"}
    assert recorder.failed == 1 and "request failed" in caplog.text and "boom" in caplog.text
    assert call(app)[0] == 200


def test_a_client_gone_before_its_body_arrived_gets_nothing() -> None:
    recorder = Recorder()
    app = VerbDispatch(api=recorder.app, routes={PATH: recorder.route(echo)}, max_request_bytes=1000)
    assert call(app, disconnect=True)[0] is None and recorder.durations == []


def test_a_non_positive_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="max_request_bytes"):
        VerbDispatch(api=Recorder().app, routes={}, max_request_bytes=0)
