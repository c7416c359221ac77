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
from asyncio import TimerHandle
from typing import Any, Callable, Final, Mapping, cast

import httptools
import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.config import STARTUP_FAILURE
from uvicorn.server import ServerState

from scheduler.config import ListenerLimits
from scheduler.errors import ConfigError

log = logging.getLogger(__name__)

# After answering a refusal, input is read and dropped this long, or until this much came,
# before the connection closes.
LINGER_SECONDS = 1.0
LINGER_BYTES = 65536

# File descriptors cellfit needs besides its listeners' connections: the connections to the
# Kubernetes API (the event loop's pool for binds, up to scheduler.cluster.api.CONNECTION_POOL_SIZE,
# 64; the client's pool, which only the controllers' few requests use now; the watches), the
# AlloX solver's process pipes, the listening sockets, the event loop's own, files being read.
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
        # uvicorn's keep-alive timer, armed from the connection's first moment as well.
        self.timeout_keep_alive = self.limits.idle_timeout_seconds  # type: ignore[assignment]
        self._read_deadline: TimerHandle | None = None
        self._write_deadline: TimerHandle | None = None
        # The request line and headers being read: their size as parsed (exact) and as
        # received (whole reads that began and ended inside them), and their field count.
        self._head_open = False
        self._head_parsed_bytes = 0
        self._head_received_bytes = 0
        self._head_fields = 0
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
        self._cancel_read_deadline()
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
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

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

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_open = True
        self._head_parsed_bytes = self._head_received_bytes = self._head_fields = 0
        self._cancel_read_deadline()
        self._read_deadline = self.loop.call_later(self.limits.read_timeout_seconds, self._read_deadline_passed)

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_fields += 1
        if self._head_fields > self.limits.max_header_count:
            self._refusal = self._head_refusal(f"more than {self.limits.max_header_count} header fields", setting="maxHeaderCount")
            raise _HeadRefused  # httptools stops parsing; data_received answers the refusal
        self._count_head(len(name) + len(value) + 4)  # "name: value\r\n"
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head_open = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._cancel_read_deadline()
        super().on_message_complete()

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
        self._read_deadline = None
        if self.transport is None or self.transport.is_closing():
            return
        if self.flow.read_paused:  # cellfit has not taken the body in yet: not the client's delay
            self._read_deadline = self.loop.call_later(self.limits.read_timeout_seconds, self._read_deadline_passed)
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
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

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
        super().on_response_complete()
        refusal = self._deferred_refusal
        if refusal is not None and not self._earlier_answer_pending():
            self._deferred_refusal = None
            self._unset_keepalive_if_required()  # armed again by uvicorn for the next request
            self._write_refusal(refusal)

    def _write_refusal(self, refusal: bytes) -> None:
        self.transport.write(refusal)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, self.transport.close)


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
