"""Bounded HTTP listeners: what the clients of one listener may hold of cellfit's process.

uvicorn (0.54, httptools) bounds none of it. httptools buffers a header field until its end,
by concatenation (quadratic: the event loop is held as it grows), so one connection sending
1 GiB of headers grew cellfit by ~959 MB; no timer runs on a
connection before its first request, so a connection that sends nothing is kept forever; and
connections are accepted until the process runs out of file descriptors (21,000 idle ones made
every extender call fail). :class:`BoundedHttpProtocol` is uvicorn's httptools protocol with
the :class:`~scheduler.config.ListenerLimits` of its listener applied:

- a connection beyond ``maxConnections`` (TLS handshakes in progress included) is closed as
  soon as it is accepted;
- a request line and headers beyond ``maxHeaderBytes`` or ``maxHeaderCount`` get HTTP 431 and
  the connection is closed, before more than one read's worth beyond the limit is buffered;
- a request not read whole ``readTimeoutSeconds`` after its first byte gets HTTP 408 and the
  connection is closed (slowloris), and so is a TLS handshake that long;
- a connection with no request in progress is closed after ``idleTimeoutSeconds``, from its
  first moment on, and so is one whose client leaves an answer unread that long (the answer
  waiting on a full send buffer);
- after such an answer, what the client still sends is read and dropped for a moment (a
  lingering close), so that the answer is not lost to a connection reset; a refused request
  pipelined behind others is answered after them, in order.

On the extender's listener the protocol also answers kube-scheduler's verbs itself, from the
parser's callbacks to one write (:class:`~scheduler.extender.dispatch.VerbDispatch` deciding):
uvicorn's task, ASGI scope, messages and event per request cost as much CPU as a filter
decision under a burst. The limits above apply to those requests alike.

A TLS listener's accept loop outlives an accept that fails (out of descriptors: it pauses a
second, as asyncio's own servers do), so that the webhook listener never stops accepting.

Each listener has its own limits and its own count, so flooding the metrics port (on the pod
IP) spends none of the extender's connections. :func:`ensure_descriptor_budget` checks at start
that the listeners' connections fit the process's file descriptor limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import resource
import socket
import ssl
import struct
import time
from asyncio import TimerHandle
from typing import Any, Awaitable, Callable, Final, Mapping, cast

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.config import STARTUP_FAILURE
from uvicorn.server import ServerState

from scheduler.config import ListenerLimits
from scheduler.errors import ConfigError
from scheduler.extender.dispatch import VerbDispatch, VerbRoute, error_answer
from scheduler.extender.service import Answer

log = logging.getLogger(__name__)

# After answering a refusal, input is read and dropped this long, or until this much came,
# before the connection closes.
LINGER_SECONDS = 1.0
LINGER_BYTES = 65536

# File descriptors cellfit needs besides its listeners' connections: the connections to the
# Kubernetes API (the client's pool, which only the controllers' few requests use now; the
# watches; the event loop's pool for binds is counted apart in server.py, as many as the
# extender listener's), the AlloX solver's process pipes, the listening sockets, the event
# loop's own, files being read.
DESCRIPTOR_RESERVE = 192


# A TLS listener whose accept failed for want of descriptors or memory tries again this much
# later (asyncio's servers wait a second as well).
ACCEPT_RETRY_SECONDS = 1.0
_OUT_OF_RESOURCES: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

# Why a listener refused a connection or cut a request: maxConnections; maxHeaderBytes or
# maxHeaderCount (431); readTimeoutSeconds (408); not HTTP (400); a TLS handshake failed or
# timed out; an answer left unread for idleTimeoutSeconds.
REFUSALS: Final = ("connection_limit", "header_limit", "read_timeout", "invalid_request", "tls_handshake", "write_timeout")


class ListenerConfig(uvicorn.Config):
    """uvicorn's configuration of one listener, with the limits its connections get.
    ``setting``: the settings key of those limits, named in refusals (server.metricsListener).
    ``tls``: the listener's certificate; the handshake is then bounded and counted too.
    ``on_refusal``: told the :data:`REFUSALS` reason of each connection or request refused or
    cut (the log says only some of them: it is rate-limited)."""

    def __init__(
        self,
        app: Any,
        *,
        limits: ListenerLimits,
        setting: str,
        tls: ssl.SSLContext | None = None,
        on_refusal: Callable[[str], None] = lambda reason: None,
        **options: Any,
    ) -> None:
        # No X-Forwarded-* rewriting (nothing here reads the client's address, and headers
        # anyone can send should not change it) and no Server header naming the framework: the
        # first also takes a middleware layer off every verb call.
        options.setdefault("proxy_headers", False)
        options.setdefault("server_header", False)
        super().__init__(app, http=BoundedHttpProtocol, **options)
        # kube-scheduler's verbs are answered by the protocol itself (BoundedHttpProtocol's
        # "answering the verbs"), unless an option changes what the app would see.
        self.verbs = app if isinstance(app, VerbDispatch) and not self.root_path and self.limit_concurrency is None else None
        self.limits = limits
        self.setting = setting
        self.tls = tls
        self.on_refusal = on_refusal


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a head that breaks the limits."""


class BoundedHttpProtocol(HttpToolsProtocol):
    """One connection of a listener configured by :class:`ListenerConfig` (see the module)."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        if not isinstance(config, ListenerConfig):
            raise TypeError("BoundedHttpProtocol needs a ListenerConfig")
        self.limits = config.limits
        self.setting = config.setting
        self.refused = config.on_refusal
        self.verbs = config.verbs
        # uvicorn's keep-alive timer, armed from the connection's first moment as well.
        self.timeout_keep_alive = self.limits.idle_timeout_seconds  # type: ignore[assignment]
        # Both moved at every request, reached almost never (_Deadline).
        self._idle_deadline = _Deadline(self.loop, self.timeout_keep_alive_handler)
        self._read_deadline = _Deadline(self.loop, self._read_deadline_passed)
        self._write_deadline: TimerHandle | None = None
        # The request line and headers being read: their size as parsed (exact) and as
        # received (whole reads that began and ended inside them), and their field count.
        self._head_open = False
        self._head_parsed_bytes = 0
        self._head_received_bytes = 0
        self._head_fields = 0
        self._content_length: bytes | None = None  # the request's first Content-Length, as read
        self._refusal: tuple[int, str] | None = None
        self._lingering = False
        self._linger_bytes = 0
        self._deferred_refusal: bytes | None = None

    # ------------------------------------------------------------------ connection lifetime

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections:
            self.refused("connection_limit")
            log.warning(
                "connection refused: the listener is at its connection limit",
                extra={"setting": f"{self.setting}.maxConnections", "limit": self.limits.max_connections,
                       "client": _peer(transport)},
            )
            transport.abort()  # before the app or a parser sees a byte; frees the descriptor now
            return
        super().connection_made(_CoalescedWrites(transport, self.loop))  # type: ignore[arg-type]
        self._arm_idle_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is None:  # refused
            return
        self._idle_deadline.stop()
        self._read_deadline.stop()
        self._cancel_write_deadline()
        super().connection_lost(exc)

    # ------------------------------------------------------------------ writing answers

    def pause_writing(self) -> None:
        """The client reads the answer slower than it is written. The answer is already out of
        uvicorn's hands, and the idle timer's close waits for it to drain: forever, for a
        client that reads nothing. This timer bounds the wait."""
        super().pause_writing()
        self._cancel_write_deadline()
        self._write_deadline = self.loop.call_later(self.limits.idle_timeout_seconds, self._write_deadline_passed)

    def resume_writing(self) -> None:
        self._cancel_write_deadline()
        super().resume_writing()

    def _write_deadline_passed(self) -> None:
        self._write_deadline = None
        # Closing or not (the idle timer's close waits for the answer to drain): aborted.
        self.refused("write_timeout")
        log.warning(
            "answer not read in time: connection closed",
            extra={"setting": f"{self.setting}.idleTimeoutSeconds", "limit_seconds": self.limits.idle_timeout_seconds,
                   "client": _peer(self.transport)},
        )
        self.transport.abort()  # nothing more can reach a client that reads nothing

    def _cancel_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _arm_idle_timer(self) -> None:
        self._idle_deadline.set(self.timeout_keep_alive)

    def _unset_keepalive_if_required(self) -> None:  # uvicorn's name, for its calls too
        self._idle_deadline.clear()

    # ------------------------------------------------------------------ reading requests

    def data_received(self, data: bytes) -> None:
        if self._lingering:  # answered and closing: what still arrives is dropped, up to a point
            self._linger_bytes += len(data)
            if self._linger_bytes > LINGER_BYTES:
                self.transport.abort()
            return
        self._unset_keepalive_if_required()
        head_was_open = self._head_open
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError as error:
            if isinstance(error, httptools.HttpParserCallbackError) and self._refusal is not None:
                self._reply_and_close(*self._refusal)
            else:
                self.refused("invalid_request")
                log.warning("invalid HTTP request", extra={"setting": self.setting, "client": _peer(self.transport),
                                                           "reason": str(error)})
                self._reply_and_close(400, "Invalid HTTP request received.")
            return
        if head_was_open and self._head_open:
            # The whole read lies inside one unfinished head: what httptools holds of it grows.
            self._head_received_bytes += len(data)
            if self._head_received_bytes > self.limits.max_header_bytes:
                self._reply_and_close(*self._head_refusal(f"request line and headers exceed {self.limits.max_header_bytes} bytes"))

    # uvicorn's parser callbacks for the request line and headers, made here whole rather than
    # around uvicorn's (a super() call each, five headers a request): on kube-scheduler's verbs
    # they were a third of the protocol's CPU per request. What uvicorn's keep is kept: the
    # URL, the lower-cased headers, Expect: 100-continue; its ASGI scope is made only for a
    # request the ASGI path answers (_asgi_scope), the verbs' path reads none of it.

    def on_message_begin(self) -> None:
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self.scope = None  # type: ignore[assignment]  # made by _asgi_scope where the ASGI path needs it
        self._content_length = None
        self._head_open = True
        self._head_parsed_bytes = self._head_received_bytes = self._head_fields = 0
        self._read_deadline.set(self.limits.read_timeout_seconds)

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        fields = self._head_fields = self._head_fields + 1
        if fields > self.limits.max_header_count:
            self._refusal = self._head_refusal(f"more than {self.limits.max_header_count} header fields", setting="maxHeaderCount")
            raise _HeadRefused  # httptools stops parsing; data_received answers the refusal
        self._head_parsed_bytes += len(name) + len(value) + 4  # "name: value\r\n"
        if self._head_parsed_bytes > self.limits.max_header_bytes:
            self._refusal = self._head_refusal(f"request line and headers exceed {self.limits.max_header_bytes} bytes")
            raise _HeadRefused
        name = name.lower()
        if name == b"content-length":
            if self._content_length is None:
                self._content_length = value
        elif name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._head_open = False
        existing = self.cycle
        if self.transport.is_closing() and (existing is None or existing.response_complete):
            # Pipelined in the same read behind an answer that closed the connection (Connection:
            # close, a graceful shutdown, a failed write): nobody reads its answer, and a bind
            # would bind the pod while kube-scheduler counts the call failed. The ASGI path,
            # answering a turn later, queued such a request and never started it; neither is it
            # started here (its body is read and dropped, as after any answer). Behind an answer
            # still under way, uvicorn queues it as it always did, never to start.
            self.cycle = _ANSWERED  # type: ignore[assignment]
            return
        route = self._verb_route()
        if route is None:
            self.scope = self._asgi_scope()
            super().on_headers_complete()
        else:
            self._begin_verb(route)

    def _asgi_scope(self) -> Any:
        """The ASGI scope uvicorn's on_message_begin makes (its on_headers_complete adds the
        method, the path and the query), for a request the ASGI path answers."""
        return {
            "type": "http",
            "asgi": {"version": self.asgi_version, "spec_version": "2.3"},
            "http_version": "1.1",
            "server": self.server,
            "client": self.client,
            "scheme": self.scheme,
            "root_path": self.root_path,
            "headers": self.headers,
            "state": self.app_state.copy(),
        }

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if not isinstance(cycle, _VerbCycle):
            super().on_body(body)
            return
        if cycle.response_complete:  # answered already (too large): the rest is read and dropped
            return
        cycle.size += len(body)
        assert self.verbs is not None  # a _VerbCycle is begun only with them
        if cycle.size > self.verbs.max_request_bytes:
            self._write_verb_answer(cycle, self.verbs.too_large(cycle.route, cycle.path, started=cycle.started))
            return
        cycle.chunks.append(body)

    def on_message_complete(self) -> None:
        self._cancel_read_deadline()
        cycle = self.cycle
        if not isinstance(cycle, _VerbCycle):
            super().on_message_complete()
            return
        cycle.more_body = False
        if cycle.response_complete or self.verbs is None:
            return
        chunks = cycle.chunks
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        cycle.chunks = []
        decided = self.verbs.decide(cycle.route, cycle.path, body, started=cycle.started)
        if isinstance(decided, Answer):
            self._write_verb_answer(cycle, decided)
            return
        task = self.loop.create_task(self._answer_when_decided(cycle, decided))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)  # graceful shutdown waits for it, as for uvicorn's own requests

    # ------------------------------------------------------------------ answering the verbs
    #
    # A verb kube-scheduler POSTs is read and answered here rather than through uvicorn's
    # RequestResponseCycle and ASGI messages: no task per request (a verb decided at once on
    # the loop is answered in the parser's callback; bind gets one task for its wait on the API
    # server), no scope, message or event objects, and the answer is one write. The ASGI path
    # cost as much CPU per request as a filter decision under a burst
    # (tests/benchmarks/bench_extender_burst.py). Every limit above applies alike: the request's
    # head is counted and timed as any other, the body is refused past server.maxRequestBytes
    # before it is buffered, and VerbDispatch decides, counts and logs as on the ASGI path.
    # What that path would answer differently goes there: another method (405), Expect:
    # 100-continue, a request pipelined behind one not yet answered, an upgrade; and so does a
    # request while the client leaves earlier answers unread (the ASGI path waits for them to
    # drain and reads nothing more meanwhile, so unread answers do not pile up in memory).

    def _verb_route(self) -> VerbRoute | None:
        verbs = self.verbs
        if verbs is None or self.expect_100_continue or self.parser.get_method() != b"POST" or self.parser.should_upgrade():
            return None
        existing = self.cycle
        if existing is not None and not existing.response_complete:
            return None  # pipelined: uvicorn queues it behind the answer under way
        if self.flow.write_paused:
            return None
        return verbs.verb_route(self.url)

    def _begin_verb(self, route: VerbRoute) -> None:
        assert self.verbs is not None
        keep_alive = self.parser.get_http_version() != "1.0" and self.parser.should_keep_alive()
        cycle = _VerbCycle(route, self.url.decode("ascii"), keep_alive=keep_alive)
        # In uvicorn's place: what uvicorn and this protocol read of a cycle, a _VerbCycle has.
        self.cycle = cycle  # type: ignore[assignment]
        length = self._content_length
        if length is not None and length.isdigit() and int(length) > self.verbs.max_request_bytes:
            self._write_verb_answer(cycle, self.verbs.too_large(route, cycle.path, started=cycle.started))

    async def _answer_when_decided(self, cycle: _VerbCycle, decided: Awaitable[Answer]) -> None:
        try:
            answer = await decided
        except asyncio.CancelledError:
            # uvicorn cancels what still runs when timeout_graceful_shutdown passes: answered
            # 500 and closed, as the ASGI path did, rather than left open until the process ends.
            if not cycle.response_complete:
                cycle.keep_alive = False
                self._write_verb_answer(cycle, error_answer(500, "cellfit is shutting down; the call was cut short"))
            raise
        self._write_verb_answer(cycle, answer)

    def _write_verb_answer(self, cycle: _VerbCycle, answer: Answer) -> None:
        """The whole answer in one write, then what uvicorn does after an answer (the next
        pipelined request, or the idle timer; a deferred refusal)."""
        cycle.response_started = True
        if cycle.disconnected:  # nobody is left to read it
            cycle.response_complete = True
            return
        body = answer.body
        answered = b"%s%scontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
            STATUS_LINE[answer.status], _header_lines(self.server_state.default_headers), len(body),
            b"" if cycle.keep_alive else b"connection: close\r\n", body,
        )
        cycle.response_complete = True
        transport = cast(_CoalescedWrites, self.transport)
        transport.write_whole(answered)
        if not cycle.keep_alive:
            transport.close()
        self.on_response_complete()

    def _count_head(self, size: int) -> None:
        self._head_parsed_bytes += size
        if self._head_parsed_bytes > self.limits.max_header_bytes:
            self._refusal = self._head_refusal(f"request line and headers exceed {self.limits.max_header_bytes} bytes")
            raise _HeadRefused

    def _head_refusal(self, reason: str, *, setting: str = "maxHeaderBytes") -> tuple[int, str]:
        self.refused("header_limit")
        log.warning(
            "request refused: headers too large",
            extra={"setting": f"{self.setting}.{setting}", "client": _peer(self.transport), "reason": reason},
        )
        return 431, f"{reason} ({self.setting}.{setting})"

    def _read_deadline_passed(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if self.flow.read_paused:  # cellfit has not taken the body in yet: not the client's delay
            self._read_deadline.set(self.limits.read_timeout_seconds)
            return
        seconds = self.limits.read_timeout_seconds
        self.refused("read_timeout")
        log.warning(
            "request not read in time: connection closed",
            extra={"setting": f"{self.setting}.readTimeoutSeconds", "limit_seconds": seconds,
                   "client": _peer(self.transport)},
        )
        answered = not self._head_open and self.cycle is not None and self.cycle.response_started
        if answered:  # the app answered before the body ended: only closing is left
            self.transport.close()
        else:
            self._reply_and_close(
                408, f"request not read within {seconds:g} seconds of its first byte ({self.setting}.readTimeoutSeconds)"
            )

    def _cancel_read_deadline(self) -> None:
        self._read_deadline.clear()

    def _reply_and_close(self, status: int, message: str) -> None:
        """Answer ``status`` and close. The client may still be sending: closing at once, with
        its bytes unread, would reset the connection and drop the answer before it is read, so
        input is read and dropped for :data:`LINGER_SECONDS` after the answer (HTTP's lingering
        close), the connection counted against the cap meanwhile; past :data:`LINGER_BYTES` the
        connection is reset (a flood). A refused request pipelined behind requests still being
        answered waits for their answers: HTTP/1.1 answers in order, and written at once the
        refusal would be read as the answer to the first of them."""
        self._cancel_read_deadline()
        self._unset_keepalive_if_required()
        self._lingering = True
        self.flow.resume_reading()
        body = message.encode("ascii", "replace")
        refusal = b"".join([
            STATUS_LINE[status],
            b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
            body,
        ])
        if self._earlier_answer_pending():
            self._deferred_refusal = refusal  # written by on_response_complete
            return
        self._write_refusal(refusal)

    def _earlier_answer_pending(self) -> bool:
        """A request before the one being read (its body read whole) is not answered yet. The
        cycle is the last request whose headers were read, so the answers before it are sent."""
        cycle = self.cycle
        return cycle is not None and not cycle.more_body and not cycle.response_complete

    def on_response_complete(self) -> None:
        # uvicorn's, except that the idle deadline moves (_Deadline) rather than a timer being
        # made for every answer.
        self.server_state.total_requests += 1
        if not self.transport.is_closing():
            self.flow.resume_reading()
            if self.pipeline:  # the next pipelined request
                self._idle_deadline.clear()
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
            else:
                self._arm_idle_timer()
        refusal = self._deferred_refusal
        if refusal is not None and not self._earlier_answer_pending():
            self._deferred_refusal = None
            self._unset_keepalive_if_required()  # the refusal closes the connection, not the idle timer
            self._write_refusal(refusal)

    def _write_refusal(self, refusal: bytes) -> None:
        self.transport.write(refusal)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


_header_lines_made: list[tuple[list[tuple[bytes, bytes]], bytes]] = []


def _header_lines(headers: list[tuple[bytes, bytes]]) -> bytes:
    """uvicorn's default headers (its Date, a second's; configured ones) as the lines of an
    answer: joined once for each list uvicorn makes (a new one every second), not per answer."""
    if _header_lines_made and _header_lines_made[0][0] is headers:
        return _header_lines_made[0][1]
    lines = b"".join(b"%s: %s\r\n" % (name, value) for name, value in headers)
    _header_lines_made[:] = [(headers, lines)]
    return lines


class _Deadline:
    """A deadline moved at every request and reached almost never (the idle and read timeouts
    of a connection): one event-loop timer, made when none is armed; when it fires before the
    deadline (moved since), it is armed again for the rest. Moving or clearing the deadline
    only stores a time, where uvicorn made a timer and cancelled it twice per request (the idle
    timer after each answer, the read deadline at each request's first byte)."""

    __slots__ = ("_loop", "_on_due", "_due", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, on_due: Callable[[], None]) -> None:
        self._loop = loop
        self._on_due = on_due
        self._due: float | None = None
        self._timer: TimerHandle | None = None

    def set(self, seconds: float) -> None:
        """Due ``seconds`` from now (every caller of one deadline passes the same ``seconds``,
        so a timer armed before fires no later than the new deadline)."""
        due = self._due = self._loop.time() + seconds
        if self._timer is None:
            self._timer = self._loop.call_at(due, self._fire)

    def clear(self) -> None:
        self._due = None

    def stop(self) -> None:
        """Cleared, and the timer cancelled (the connection ends)."""
        self._due = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        due = self._due
        if due is None:
            return
        if self._loop.time() < due:
            self._timer = self._loop.call_at(due, self._fire)
            return
        self._due = None
        self._on_due()


class _NoEvent:
    """What uvicorn's connection_lost sets on a cycle's message event: a verb's cycle has none."""

    __slots__ = ()

    def set(self) -> None:
        pass


class _VerbCycle:
    """A verb's request answered by the protocol itself: its body as it arrives, and the state
    of uvicorn's RequestResponseCycle that the protocol and uvicorn's server read (answered or
    not, keep-alive, the client gone)."""

    __slots__ = ("route", "path", "started", "chunks", "size", "more_body", "keep_alive", "response_started",
                 "response_complete", "disconnected")
    message_event: Final = _NoEvent()

    def __init__(self, route: VerbRoute, path: str, *, keep_alive: bool) -> None:
        self.route = route
        self.path = path
        self.started = time.perf_counter()
        self.chunks: list[bytes] = []
        self.size = 0
        self.more_body = True
        self.keep_alive = keep_alive
        self.response_started = False
        self.response_complete = False
        self.disconnected = False


class _AnsweredCycle:
    """In uvicorn's cycle's place for a request that gets no answer (the connection closing):
    answered already, to uvicorn's callbacks and this protocol's, so its body is dropped."""

    __slots__ = ()
    response_started: Final = True
    response_complete: Final = True
    more_body: Final = False
    keep_alive: Final = False
    disconnected: Final = False
    message_event: Final = _NoEvent()


_ANSWERED: Final = _AnsweredCycle()


class _CoalescedWrites:
    """A connection's transport whose writes within one turn of the event loop leave as one.
    uvicorn writes an answer's head and its body apart: two system calls and two TCP segments
    (the socket is TCP_NODELAY) for every answer, and kube-scheduler reads twice. On the verbs'
    path that was a fifth of cellfit's busy time under a burst (py-spy); joined, it is one write
    at the end of the turn, microseconds later. Closing, half-closing and aborting keep their
    order with the writes before them."""

    __slots__ = ("_transport", "_loop", "_pending")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def write_whole(self, data: bytes) -> None:
        """A whole answer: written now, unless writes of this turn wait (then after them)."""
        if self._pending:
            self._pending.append(data)
        else:
            self._transport.write(data)

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending = []
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(chunk) for chunk in self._pending)

    def is_closing(self) -> bool:  # asked at every request: not through __getattr__
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class BoundedServer(uvicorn.Server):
    """A uvicorn server for a :class:`ListenerConfig`. A TLS listener accepts its connections
    itself (:class:`_TlsAcceptor`) rather than through uvicorn's ``create_server(ssl=...)``,
    whose handshakes run unseen by the protocol: they would be neither counted against
    ``maxConnections`` nor closed early, each holding a descriptor for asyncio's 60 s."""

    config: ListenerConfig

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if self.config.tls is None:
            await super().startup(sockets=sockets)
            return
        if not sockets:
            raise ValueError("a TLS listener is started on sockets bound beforehand")
        await self.lifespan.startup()
        if self.lifespan.should_exit:
            raise SystemExit(STARTUP_FAILURE)
        config = self.config

        def protocol() -> asyncio.Protocol:  # as uvicorn's startup makes them
            return BoundedHttpProtocol(config=config, server_state=self.server_state, app_state=self.lifespan.state)

        self.servers = cast(  # uvicorn types them asyncio servers, but uses only their close() and wait_closed()
            "list[asyncio.Server]",
            [
                _TlsAcceptor(sock, protocol=protocol, config=config, connections=self.server_state.connections)
                for sock in sockets
            ],
        )
        self.started = True

    def open_connections(self) -> int:
        """Connections open now, TLS handshakes in progress included: what maxConnections caps."""
        handshakes = sum(server.handshakes() for server in getattr(self, "servers", ()) if isinstance(server, _TlsAcceptor))
        return len(self.server_state.connections) + handshakes


class _TlsAcceptor:
    """Accepts on ``sock`` and hands each connection, TLS handshake first, to a ``protocol()``:
    connections beyond ``maxConnections`` (``connections`` being served plus handshakes in
    progress) are closed at once, and a handshake gets ``readTimeoutSeconds``."""

    def __init__(
        self,
        sock: socket.socket,
        *,
        protocol: Callable[[], asyncio.Protocol],
        config: ListenerConfig,
        connections: set[Any],
    ) -> None:
        assert config.tls is not None
        self._sock = sock
        self._protocol = protocol
        self._context = config.tls
        self._limits = config.limits
        self._setting = config.setting
        self._refused = config.on_refusal
        self._connections = connections
        self._handshakes: set[asyncio.Task[None]] = set()
        sock.setblocking(False)
        sock.listen(config.backlog)
        self._accepting = asyncio.get_running_loop().create_task(self._accept())

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                connection, peer = await loop.sock_accept(self._sock)
            except ConnectionAbortedError:  # reset before it was taken: nothing to serve
                continue
            except OSError as error:
                if error.errno not in _OUT_OF_RESOURCES:
                    raise  # the listening socket itself is unusable
                await self._pause_accepting(error)
                continue
            if len(self._connections) + self.handshakes() >= self._limits.max_connections:
                self._refused("connection_limit")
                log.warning(
                    "connection refused: the listener is at its connection limit",
                    extra={"setting": f"{self._setting}.maxConnections", "limit": self._limits.max_connections,
                           "client": _address(peer)},
                )
                _close_now(connection)
                continue
            handshake = loop.create_task(self._handshake(connection, peer))
            self._handshakes.add(handshake)
            handshake.add_done_callback(self._handshakes.discard)

    @staticmethod
    async def _pause_accepting(error: OSError) -> None:
        """Out of descriptors or memory, every accept fails until a connection ends: accepting
        pauses :data:`ACCEPT_RETRY_SECONDS` rather than spinning, and goes on after, as
        asyncio's own servers do (the connections waiting stay in the backlog)."""
        log.warning(
            "cannot accept connections: the process is out of resources; retrying",
            extra={"reason": str(error), "retry_seconds": ACCEPT_RETRY_SECONDS},
        )
        await asyncio.sleep(ACCEPT_RETRY_SECONDS)

    async def _handshake(self, connection: socket.socket, peer: Any) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                self._protocol, connection, ssl=self._context, ssl_handshake_timeout=self._limits.read_timeout_seconds
            )
        except asyncio.CancelledError:
            connection.close()
            raise
        except Exception as error:  # noqa: BLE001 - a failed handshake ends its connection only
            self._refused("tls_handshake")
            log.warning(
                "TLS handshake failed",
                extra={"setting": self._setting, "client": _address(peer), "reason": str(error) or type(error).__name__},
            )
            connection.close()

    def handshakes(self) -> int:
        """TLS handshakes in progress."""
        return len(self._handshakes)

    def close(self) -> None:
        self._accepting.cancel()
        for handshake in self._handshakes:
            handshake.cancel()

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(self._accepting, *self._handshakes, return_exceptions=True)


def _close_now(connection: socket.socket) -> None:
    """Close an accepted socket with a reset rather than a graceful FIN: nothing is owed to a
    connection refused before its first byte, and no TIME_WAIT is left behind."""
    with contextlib.suppress(OSError):
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


def _address(peer: Any) -> str | None:
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else None


def _peer(transport: asyncio.BaseTransport | None) -> str | None:
    return _address(transport.get_extra_info("peername") if transport is not None else None)


def ensure_descriptor_budget(max_connections: Mapping[str, int]) -> None:
    """Make sure the listeners' connections (``max_connections`` by the setting that caps
    each) fit the file descriptors the process may open, with :data:`DESCRIPTOR_RESERVE` and
    those open now besides: raise the soft RLIMIT_NOFILE up to the hard one if needed, or
    refuse to start, naming the settings, if even the hard limit is too low (a flood would
    then take the descriptors the extender verbs need)."""
    connections = sum(max_connections.values())
    needed = connections + DESCRIPTOR_RESERVE + _open_descriptors()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    caps = ", ".join(f"{setting} {count}" for setting, count in max_connections.items())
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise ConfigError(
            f"the listeners may hold {connections} connections ({caps}), which with {needed - connections} "
            f"descriptors for the rest of cellfit needs {needed} file descriptors, but the process may open "
            f"only {hard} (RLIMIT_NOFILE): lower those maxConnections, or raise the limit (ulimit -n, the "
            "container runtime's nofile)"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    log.info(
        "file descriptor limit raised for the listeners' connections",
        extra={"from": soft, "to": needed, "hard_limit": hard, "connections": dict(max_connections)},
    )


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: the reserve alone
        return 0
