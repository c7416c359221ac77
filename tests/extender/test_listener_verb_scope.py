"""The listener's protocol reads a request's line and headers itself (scheduler/extender/listeners.py,
its parser callbacks) and makes uvicorn's ASGI scope only for a request the ASGI path answers:
kube-scheduler's verbs get none (it was a dict, a copy of the app state and a nested dict per
call), every other request the scope uvicorn's own protocol makes for it, headers, method, path,
query and Expect: 100-continue included. Driven in process with a transport that records the
writes, on uvloop."""

from __future__ import annotations

import asyncio
from typing import Any

import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from starlette.types import Receive, Scope, Send
from uvicorn.server import ServerState

from scheduler.config import ListenerLimits
from scheduler.extender.dispatch import VerbDispatch, VerbRoute
from scheduler.extender.listeners import BoundedHttpProtocol, ListenerConfig
from scheduler.extender.service import Answer
from tests.benchmarks.bench_listener_connections import Transport

FILTER_REQUEST = (
    b"POST /v1/extender/filter HTTP/1.1\r\nHost: cellfit\r\nUser-Agent: Go-http-client/1.1\r\n"
    b"Content-Length: 10\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n"
    b'{"Pod":{}}'
)


class ScopeRecorder:
    """An ASGI app answering 204 and keeping the scope of each request."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Any]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(dict(scope))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def _serve(protocol_class: type[HttpToolsProtocol], request: bytes) -> tuple[ScopeRecorder, HttpToolsProtocol, Transport]:
    """``request`` fed to one connection of ``protocol_class`` (the verbs' dispatch before the
    recorder), run until the ASGI path has answered."""
    recorder = ScopeRecorder()
    filter_route = VerbRoute(
        handler=lambda body: Answer(200, b'{"NodeNames":[],"Error":""}'), observe_seconds=lambda _: None, count_rejected=lambda: None, count_failed=lambda: None
    )
    app = VerbDispatch(api=recorder, routes={"/v1/extender/filter": filter_route}, max_request_bytes=4096)
    config = ListenerConfig(
        app, limits=ListenerLimits(), setting="server.extenderListener", host="127.0.0.1", port=8888, lifespan="off", log_config=None, access_log=False
    )
    config.load()

    async def run() -> tuple[HttpToolsProtocol, Transport]:
        protocol = protocol_class(config=config, server_state=ServerState(), app_state={"shared": "state"})
        transport = Transport()
        protocol.connection_made(transport)
        protocol.data_received(request)
        for _ in range(20):  # the ASGI path's task, and the coalesced write at the end of the turn
            await asyncio.sleep(0)
        return protocol, transport

    protocol, transport = uvloop.run(run())
    return recorder, protocol, transport


def test_a_verb_request_is_answered_without_an_asgi_scope() -> None:
    recorder, protocol, transport = _serve(BoundedHttpProtocol, FILTER_REQUEST)

    assert protocol.scope is None
    assert recorder.scopes == []
    assert b"".join(transport.written).startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"".join(transport.written).endswith(b'{"NodeNames":[],"Error":""}')


def test_a_request_for_the_app_gets_the_scope_uvicorn_makes() -> None:
    requests = [
        b"GET /healthz?verbose=1 HTTP/1.1\r\nHost: cellfit\r\nX-Seen: A\r\nAccept: */*\r\n\r\n",
        b"POST /inspect/x HTTP/1.1\r\nHost: cellfit\r\nContent-Length: 2\r\nExpect: 100-Continue\r\n\r\n{}",
        b"PUT /inspect/a%20b HTTP/1.0\r\nHost: cellfit\r\nContent-Length: 0\r\n\r\n",
    ]
    for request in requests:
        ours, protocol, _ = _serve(BoundedHttpProtocol, request)
        uvicorns, reference, _ = _serve(HttpToolsProtocol, request)

        assert len(ours.scopes) == 1, request
        assert ours.scopes == uvicorns.scopes, request
        assert protocol.expect_100_continue == reference.expect_100_continue, request


def test_a_verb_request_the_asgi_path_answers_gets_uvicorns_scope() -> None:
    # Expect: 100-continue on a verb's path is answered by the ASGI path, as uvicorn answers it.
    request = b"POST /v1/extender/filter HTTP/1.1\r\nHost: cellfit\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n{}"
    _, protocol, _ = _serve(BoundedHttpProtocol, request)
    _, reference, _ = _serve(HttpToolsProtocol, request)

    assert protocol.expect_100_continue and reference.expect_100_continue
    assert protocol.scope is not None
    assert protocol.scope == reference.scope
