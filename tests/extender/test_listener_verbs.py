"""kube-scheduler's verbs answered by the listener's protocol itself (scheduler/extender/listeners.py,
"answering the verbs"), on a real socket and a real uvloop server: without a task or ASGI
messages per request, without a timer made per request, and with everything the ASGI path did:
the answer's head, keep-alive and Connection: close, the body limit, pipelining in order, a
client gone before its bind is answered."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from typing import Any, Callable, Iterator

import pytest
import uvloop
from fastapi import FastAPI

from scheduler.config import ListenerLimits
from scheduler.extender.dispatch import VerbDispatch, VerbRoute
from scheduler.extender.listeners import BoundedHttpProtocol, BoundedServer, ListenerConfig, _Deadline
from scheduler.extender.service import Answer

FILTER = b"/v1/extender/filter"
BIND = b"/v1/extender/bind"
LIMIT = 4096


class CountingLoop(uvloop.Loop):  # type: ignore[misc]
    """uvloop's loop, counting the timers the connections make on it (not the server's own
    tick, which comes every 0.1 s however many requests there are)."""

    timers = 0

    @staticmethod
    def _count(callback: Callable[..., Any]) -> None:
        if isinstance(getattr(callback, "__self__", None), (BoundedHttpProtocol, _Deadline)):
            CountingLoop.timers += 1

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        self._count(callback)
        return super().call_later(delay, callback, *args, **kwargs)  # type: ignore[no-any-return]

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        self._count(callback)
        return super().call_at(when, callback, *args, **kwargs)  # type: ignore[no-any-return]


class Listener:
    """A :class:`BoundedServer` of a :class:`VerbDispatch` in a thread: filter answers at once
    and says whether it ran in an asyncio task; bind waits until :attr:`release` is set."""

    def __init__(self) -> None:
        self.tasks_seen: list[bool] = []
        self.bodies: list[bytes] = []
        self.release = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.answer = b'{"NodeNames":["gpu-a"],"Error":""}'

        def filter_verb(body: bytes) -> Answer:
            self.tasks_seen.append(asyncio.current_task() is not None)
            self.bodies.append(body)
            return Answer(200, self.answer)

        async def bind_verb(body: bytes) -> Answer:
            while not self.release.is_set():
                await asyncio.sleep(0.01)
            return Answer(200, b'{"Error":""}')

        def route(handler: Any) -> VerbRoute:
            return VerbRoute(handler=handler, observe_seconds=lambda _: None, count_rejected=lambda: None,
                             count_failed=lambda: None)

        app = VerbDispatch(api=FastAPI(), routes={"/v1/extender/filter": route(filter_verb), "/v1/extender/bind": route(bind_verb)},
                           max_request_bytes=LIMIT)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = ListenerConfig(app, limits=ListenerLimits(), setting="server.extenderListener", host="127.0.0.1",
                                port=self.port, lifespan="off", log_config=None, access_log=False)
        self.server = BoundedServer(config)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        loop = CountingLoop()
        self.loop = loop
        loop.run_until_complete(self.server.serve(sockets=[self.sock]))

    def __enter__(self) -> "Listener":
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the listener did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.should_exit = True
        self.thread.join(10)

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


@pytest.fixture
def listener() -> Iterator[Listener]:
    with Listener() as served:
        yield served


def post(path: bytes, body: bytes = b'{"Pod":{}}', *, headers: bytes = b"", version: bytes = b"1.1") -> bytes:
    return (b"POST " + path + b" HTTP/" + version + b"\r\nHost: cellfit\r\nContent-Type: application/json\r\n"
            + headers + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def read_answer(sock: socket.socket) -> tuple[bytes, dict[bytes, bytes], bytes]:
    """One answer: its status line, its headers (names lower case) and its body."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        assert chunk, f"closed before an answer: {received!r}"
        received += chunk
    head, rest = received.split(b"\r\n\r\n", 1)
    status, *lines = head.split(b"\r\n")
    headers = {name.lower(): value for name, value in (line.split(b": ", 1) for line in lines)}
    length = int(headers[b"content-length"])
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed inside an answer"
        rest += chunk
    assert len(rest) == length, f"more than one answer arrived: {rest!r}"
    return status, headers, rest


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_verb_decided_at_once_is_answered_in_the_parsers_callback_without_a_task(listener: Listener) -> None:
    """The ASGI path made a task per request (and its scope, messages, event and done
    callback), and wrote the answer a turn of the loop later."""
    with listener.connect() as sock:
        for _ in range(3):
            sock.sendall(post(FILTER))
            status, headers, body = read_answer(sock)
            assert status == b"HTTP/1.1 200 OK"
            assert body == b'{"NodeNames":["gpu-a"],"Error":""}'
    assert listener.tasks_seen == [False, False, False]


def test_the_answer_carries_the_head_the_asgi_path_wrote(listener: Listener) -> None:
    with listener.connect() as sock:
        sock.sendall(post(FILTER))
        status, headers, body = read_answer(sock)
    assert status == b"HTTP/1.1 200 OK"
    assert headers[b"content-type"] == b"application/json"
    assert int(headers[b"content-length"]) == len(body)
    assert b"date" in headers  # uvicorn's default header
    assert b"connection" not in headers  # kept alive


def test_a_body_arriving_in_pieces_is_decided_whole(listener: Listener) -> None:
    body = b'{"Pod":{},"NodeNames":[' + b",".join(b'"gpu-%d"' % n for n in range(200)) + b"]}"
    request = post(FILTER, body)
    with listener.connect() as sock:
        for start in range(0, len(request), 300):
            sock.sendall(request[start:start + 300])
            time.sleep(0.005)
        assert read_answer(sock)[0] == b"HTTP/1.1 200 OK"
    assert listener.bodies == [body]


def test_connection_close_and_http_1_0_are_answered_and_closed(listener: Listener) -> None:
    for request in (post(FILTER, headers=b"Connection: close\r\n"), post(FILTER, version=b"1.0")):
        with listener.connect() as sock:
            sock.sendall(request)
            status, headers, _ = read_answer(sock)
            assert status.endswith(b"200 OK")
            assert headers[b"connection"] == b"close"
            assert closed(sock)


def test_a_body_over_the_limit_is_refused_before_it_is_sent_and_the_connection_serves_on(listener: Listener) -> None:
    big = b"x" * (LIMIT + 1)
    with listener.connect() as sock:
        head = post(FILTER, big)[: -len(big)]
        sock.sendall(head)  # the body never comes: the answer must not wait for it
        status, _, body = read_answer(sock)
        assert status == b"HTTP/1.1 413 Request Entity Too Large"
        assert b"server.maxRequestBytes" in body
    chunked = (b"POST /v1/extender/filter HTTP/1.1\r\nHost: cellfit\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"%x\r\n" % len(big) + big + b"\r\n0\r\n\r\n")
    with listener.connect() as sock:
        sock.sendall(chunked)
        assert read_answer(sock)[0] == b"HTTP/1.1 413 Request Entity Too Large"
        sock.sendall(post(FILTER))  # the rest of the refused body was read and dropped
        assert read_answer(sock)[0] == b"HTTP/1.1 200 OK"
    assert listener.bodies == [b'{"Pod":{}}']


def test_pipelined_requests_are_answered_in_order_behind_a_bind_in_flight(listener: Listener) -> None:
    with listener.connect() as sock:
        sock.sendall(post(BIND) + post(FILTER) + b"GET /nowhere HTTP/1.1\r\nHost: cellfit\r\n\r\n")
        time.sleep(0.2)
        assert listener.bodies == []  # the filter waits for the bind's answer
        listener.release.set()
        answers = b""
        while answers.count(b"HTTP/1.1 ") < 3:
            chunk = sock.recv(65536)
            assert chunk
            answers += chunk
    statuses = re.findall(rb"HTTP/1\.1 \d{3}", answers)
    assert statuses == [b"HTTP/1.1 200", b"HTTP/1.1 200", b"HTTP/1.1 404"]
    assert answers.index(b'{"Error":""}') < answers.index(b'{"NodeNames"')


def test_a_client_gone_before_its_bind_is_answered_leaves_the_listener_serving(listener: Listener) -> None:
    sock = listener.connect()
    sock.sendall(post(BIND))
    time.sleep(0.1)
    sock.close()
    listener.release.set()
    time.sleep(0.1)
    with listener.connect() as again:
        again.sendall(post(BIND))
        assert read_answer(again)[0] == b"HTTP/1.1 200 OK"


def test_a_client_that_reads_no_answer_gets_no_more_decided_than_the_socket_buffers_hold(listener: Listener) -> None:
    """Answers left unread wait in the transport: the verbs' own path would decide and buffer
    one for every request the client sends. Once writing is paused the ASGI path takes the
    request, waits for the answers to drain and reads nothing more meanwhile."""
    listener.answer = b'{"NodeNames":["' + b"n" * 1_000_000 + b'"],"Error":""}'
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", listener.port))
    sock.settimeout(1)
    with sock:
        sent = 0
        try:
            for _ in range(40):
                sock.sendall(post(FILTER))
                sent += 1
        except socket.timeout:
            pass
        time.sleep(0.5)
        # What the kernel's socket buffers take (a few MB) and one answer beyond: not all 40.
        assert len(listener.bodies) < 20, f"{len(listener.bodies)} answers of 1 MB decided for a client reading none"


def test_requests_on_a_kept_alive_connection_make_no_timer_each(listener: Listener) -> None:
    """The idle and read timeouts move at every request: a timer made and cancelled for each
    (two per request before) would be most of the timers a burst makes."""
    with listener.connect() as sock:
        sock.sendall(post(FILTER))
        read_answer(sock)
        before = CountingLoop.timers
        for _ in range(200):
            sock.sendall(post(FILTER))
            read_answer(sock)
        made = CountingLoop.timers - before
    assert made <= 2, f"{made} timers for 200 requests"


class ManualClock:
    """An event loop's time and timers, moved by hand."""

    def __init__(self) -> None:
        self.now = 0.0
        self.timers: list[tuple[float, Callable[[], None], "ManualClock.Handle"]] = []

    class Handle:
        cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> "ManualClock.Handle":
        handle = ManualClock.Handle()
        self.timers.append((when, callback, handle))
        return handle

    def advance(self, to: float) -> None:
        self.now = to
        due = [timer for timer in self.timers if timer[0] <= to and not timer[2].cancelled]
        self.timers = [timer for timer in self.timers if timer not in due]
        for _, callback, _ in due:
            callback()


def test_a_deadline_moved_before_it_passes_fires_once_at_the_last_time_it_was_set() -> None:
    clock = ManualClock()
    passed: list[float] = []
    deadline = _Deadline(clock, lambda: passed.append(clock.now))  # type: ignore[arg-type]
    deadline.set(1.0)
    for step in range(1, 10):  # a request every 0.1 s moves it on
        clock.advance(step / 10)
        deadline.set(1.0)
    assert len(clock.timers) == 1  # one timer, armed at the first set
    clock.advance(1.0)  # the first timer fires early: armed again for the rest
    assert passed == [] and len(clock.timers) == 1
    clock.advance(1.9)
    assert passed == [1.9]
    clock.advance(5.0)
    assert passed == [1.9]  # once


def test_a_cleared_deadline_never_fires_and_a_stopped_one_cancels_its_timer() -> None:
    clock = ManualClock()
    passed: list[float] = []
    deadline = _Deadline(clock, lambda: passed.append(clock.now))  # type: ignore[arg-type]
    deadline.set(1.0)
    deadline.clear()
    clock.advance(2.0)
    assert passed == [] and clock.timers == []
    deadline.set(1.0)  # armed afresh after the timer found nothing due
    assert len(clock.timers) == 1
    deadline.stop()
    assert clock.timers[0][2].cancelled
    clock.advance(5.0)
    assert passed == []
