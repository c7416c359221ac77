"""HTTP/1.1 requests to the Kubernetes API on the event loop that serves kube-scheduler.

The bind verb is the one request on kube-scheduler's path that waits on the API server, and a
burst sends hundreds at once. Sent from a pool of threads through urllib3, each bind cost ~0.9 ms
of CPU in Python (request building, http.client's header parsing) and, worse, a wait for the GIL
after every blocking call: with 64 bind threads beside the event loop and the watch threads, a
bind under a 1,000-pod burst took 0.2-1.6 s, almost all of it queued (e2e/bench_throughput.py).
Here a request is a few bytes written to a kept-alive connection and a response parsed by
httptools (C), on the loop itself: no thread, no GIL hand-over, tens of microseconds of CPU.

Only what kube-scheduler's path needs: one request at a time per connection, keep-alive, a pool
that grows to ``max_connections`` and waits beyond, a total timeout per request (one that runs
out closes the idle connections as well: they are likely dead alike), and one retry
when a kept-alive connection turns out to have been closed by the server before it answered
anything (as Go's http.Transport does). Credentials and TLS come from the Kubernetes client's
Configuration (token, client certificate, CA, server name); a proxy is not spoken here, so
:func:`for_configuration` answers ``None`` for one and callers keep the client's own path.

Certificates rotate under a running cellfit (kubeadm's and cert-manager's client certificates,
the service account's projected CA bundle, an exec plugin's certificate where it gave a token
before), so the TLS context is built again from the Configuration's files when they change or
it names others (:class:`TlsContext`): checked at most every
:data:`TLS_FILES_CHECK_SECONDS`, and at once after a TLS failure, which also closes the idle
connections (made with the old files, they are likely refused alike). A connection whose
handshake fails is opened once more when the files changed meanwhile: nothing was sent on it.
The Kubernetes client's own path (urllib3) reads the files for each new connection itself
(told which they are when the Configuration names others: api._ClientPoolRotation).
A kept-alive connection made with the files before they changed is closed rather than used
again (as client-go's transport/cert_rotation.go closes them all): the API server checks the
client certificate of each request, so one made with an expired or revoked certificate is
refused (HTTP 401) for as long as it is kept; a 401 has the files looked at before the next
request.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Final, Mapping, NamedTuple, Protocol, Sequence
from urllib.parse import urlsplit

import httptools

from scheduler.cluster.file_stamps import FileStamp, file_stamps
from scheduler.errors import KubernetesApiError

log = logging.getLogger(__name__)
_USER_AGENT = b"cellfit"
CREDENTIALS_REFRESH_SECONDS = 10.0
# How often the client certificate, key and CA files are looked at (a stat each) for a rotation.
TLS_FILES_CHECK_SECONDS: Final = 10.0


class ConnectionLost(Exception):
    """The server closed the connection before the response was complete."""

    def __init__(self, *, answered: bool, tls: bool = False) -> None:
        super().__init__("connection closed by the server" + (" mid-response" if answered else "") + (" (TLS error)" if tls else ""))
        self.answered = answered  # some response bytes had arrived: the request was read
        self.tls = tls  # TLS failed: the server refused the handshake (TLS 1.3 says so only now)


class RequestNotSent(KubernetesApiError):
    """No byte of the request reached the server (no connection came free or opened in time,
    the connection was refused): it was not carried out, whatever it asked."""


class _Connection(asyncio.Protocol):
    """One kept-alive connection: a request written, its response parsed as it arrives."""

    def __init__(self) -> None:
        # uvloop's TLS transport is no asyncio.Transport subclass; both write and close alike.
        self.transport: Any = None
        self.open = False
        self._parser = httptools.HttpResponseParser(self)
        self.generation = 0  # the TlsContext.generation it was made with
        self._response: asyncio.Future[tuple[int, bytes, bool]] | None = None
        self._body: list[bytes] = []
        self._status = 0
        self._answered = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.open = True

    def data_received(self, data: bytes) -> None:
        self._answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(KubernetesApiError(f"malformed HTTP response from the Kubernetes API: {error}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self._fail(ConnectionLost(answered=self._answered, tls=isinstance(exc, ssl.SSLError)))

    # httptools callbacks
    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        response, self._response = self._response, None
        body = b"".join(self._body)
        self._body = []
        if response is not None and not response.done():
            response.set_result((self._status, body, self._parser.should_keep_alive()))

    # the pool's side
    def send(self, request: bytes) -> asyncio.Future[tuple[int, bytes, bool]]:
        assert self.transport is not None and self._response is None
        self._answered = False
        self._response = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self._response

    def close(self) -> None:
        self.open = False
        if self.transport is not None:
            self.transport.close()

    def _fail(self, error: Exception) -> None:
        response, self._response = self._response, None
        if response is not None and not response.done():
            response.set_exception(error)


class TlsContext:
    """The TLS context new connections take, built by ``build`` from the files ``files`` names
    (the client certificate, its key, the CA) and built again when one of them changed, or when
    ``files`` names others (an exec plugin's client certificate where there was none, or none
    any more): looked at, a stat each, at most every ``check_seconds``, or at the next use after
    :meth:`expire`. Files that do not build (a rotation half-written: a certificate whose key is
    still the old one) keep the last context, logged, and are tried again at the next look."""

    def __init__(
        self, build: Callable[[], ssl.SSLContext], *, files: Callable[[], Sequence[str]] = tuple,
        check_seconds: float = TLS_FILES_CHECK_SECONDS, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._build = build
        self._files = files
        self._check_seconds = check_seconds
        self._clock = clock
        self._built = tls_identity(files())
        self.generation = 0  # counts the builds since: a connection made with an older one presents old files
        self._context = build()  # raises as the Configuration's files do not load: a startup error
        self._checked_at = clock()
        self._stale = False

    @classmethod
    def fixed(cls, context: ssl.SSLContext) -> TlsContext:
        """``context`` for good: no files to follow."""
        return cls(lambda: context)

    def expire(self) -> None:
        """Look at the files at the next use, whenever they were last looked at: TLS failed."""
        self._stale = True

    def current(self) -> ssl.SSLContext:
        now = self._clock()
        if self._stale or now - self._checked_at >= self._check_seconds:
            self.reload()
        return self._context

    def reload(self) -> bool:
        """Look at the files now and build the context again if they changed; whether it was."""
        self._stale, self._checked_at = False, self._clock()
        identity = tls_identity(self._files())
        if identity == self._built:
            return False
        files = ", ".join(identity.files) or "none"
        try:
            context = self._build()
        except (OSError, ssl.SSLError, ValueError) as error:
            log.warning("the Kubernetes API client's changed certificate, key or CA files did not load; the last ones are used",
                        extra={"files": files, "reason": str(error)})
            return False
        self._context, self._built = context, identity
        self.generation += 1
        log.info("the Kubernetes API client's certificate, key or CA files changed: new connections use them",
                 extra={"files": files})
        return True


@dataclass(frozen=True)
class Endpoint:
    """Where the API server is and how to reach it."""

    host: str
    port: int
    path_prefix: str  # a kubeconfig server URL may carry one (e.g. behind a gateway)
    ssl: TlsContext | None
    server_hostname: str | None


class LoopHttpClient:
    """A pool of kept-alive HTTP/1.1 connections to one API server, used from one event loop."""

    def __init__(
        self,
        *,
        endpoint: Endpoint,
        headers: Callable[[], Mapping[str, str]],
        timeout_seconds: float,
        max_connections: int,
    ) -> None:
        """``headers``: the credentials' headers, asked for every request (tokens rotate)."""
        if max_connections < 1:
            raise ValueError(f"max_connections must be positive, got {max_connections}")
        self._endpoint = endpoint
        self._headers = headers
        self._timeout = timeout_seconds
        self._max_connections = max_connections
        self._idle: list[_Connection] = []
        self._slots: asyncio.Semaphore | None = None
        self._header_lines: tuple[dict[str, str], bytes] | None = None  # the credentials' headers and their lines
        default_port = 443 if endpoint.ssl is not None else 80
        self._host_header = endpoint.host if endpoint.port == default_port else f"{endpoint.host}:{endpoint.port}"
        if ":" in endpoint.host and not endpoint.host.startswith("["):  # an IPv6 literal
            self._host_header = f"[{endpoint.host}]" + ("" if endpoint.port == default_port else f":{endpoint.port}")

    @property
    def idle_connections(self) -> int:
        return len(self._idle)

    async def request(
        self, method: str, path: str, body: bytes | None = None, *, content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        """Status and body of ``method path``; raises :class:`KubernetesApiError` when no
        answer came (unreachable, timed out, closed mid-response), :class:`RequestNotSent` when
        the request never reached the server. The timeout counts from the call: the wait for a
        free connection is part of it."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max_connections)
        request = self._encode(method, path, body, content_type)  # the credentials refreshed: files rewritten
        if self._endpoint.ssl is not None:
            self._endpoint.ssl.current()  # looked at (a stat each, at most every few seconds): rotated?
        sent: list[bool] = []  # one entry once the request was written to a connection
        try:
            # The wait for a free connection counts: a request queued behind hanging ones gives
            # up on time, not once each before it has timed out.
            async with asyncio.timeout(self._timeout), self._slots:
                status, data = await self._exchange(request, sent)
            if status == 401 and self._endpoint.ssl is not None:
                # The client certificate may be what was refused (expired, revoked): the files
                # are looked at before the next request, a rotated one's connections closed.
                self._endpoint.ssl.expire()
            return status, data
        except TimeoutError:
            if not sent:
                raise RequestNotSent(
                    f"Kubernetes API request not sent: no connection to it came free or opened within {self._timeout:g}s "
                    f"(all {self._max_connections} in use, or connecting)"
                ) from None
            # The idle connections likely share this one's fate (the API server's node gone, a
            # load balancer that forgot its flows: no FIN, no reset): each would hold a later
            # request for the whole timeout. Fresh ones cost a handshake each.
            self.close()
            raise KubernetesApiError(f"Kubernetes API did not answer within {self._timeout:g}s") from None
        except (OSError, ConnectionLost, ssl.SSLError) as error:
            if isinstance(error, ssl.SSLError) or (isinstance(error, ConnectionLost) and error.tls):
                self._tls_failed()
            elif self._endpoint.ssl is not None:
                # A server refusing the client certificate after the handshake (TLS 1.3) may show
                # as a reset rather than its alert: the files are looked at again, a stat each.
                self._endpoint.ssl.expire()
            unreachable = RequestNotSent if not sent else KubernetesApiError
            raise unreachable(f"Kubernetes API unreachable: {error}") from None

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()

    def _tls_failed(self) -> None:
        """The idle connections were made with the same certificates, likely refused alike now
        (rotated on the server's side): closed, and the files looked at before the next connection."""
        self.close()
        if self._endpoint.ssl is not None:
            self._endpoint.ssl.expire()

    async def _exchange(self, request: bytes, sent: list[bool]) -> tuple[int, bytes]:
        tls = self._endpoint.ssl
        while self._idle:
            connection = self._idle.pop()
            if not connection.open:
                continue
            if tls is not None and connection.generation != tls.generation:
                connection.close()  # made with the files before they changed: their certificate
                continue
            try:
                return await self._send_on(connection, request, sent)
            except ConnectionLost as error:
                if error.answered:
                    raise
                # The server closed this kept-alive connection before reading the request (its
                # idle timeout): nothing was done, so a fresh connection may carry it.
        return await self._send_on(await self._connect(), request, sent)

    async def _send_on(self, connection: _Connection, request: bytes, sent: list[bool]) -> tuple[int, bytes]:
        sent.append(True)
        try:
            status, body, keep_alive = await connection.send(request)
        except BaseException:
            connection.close()  # cancelled or failed mid-exchange: its state is unknown
            raise
        if keep_alive and connection.open:
            self._idle.append(connection)
        else:
            connection.close()
        return status, body

    async def _connect(self) -> _Connection:
        tls = self._endpoint.ssl
        try:
            return await self._open(tls.current() if tls is not None else None)
        except ssl.SSLError:
            self.close()
            if tls is None or not tls.reload():
                raise
        # The handshake failed and the files changed since (the server's CA rotated before this
        # replica looked): nothing was sent, so a connection with them may carry the request.
        return await self._open(tls.current())

    async def _open(self, context: ssl.SSLContext | None) -> _Connection:
        endpoint = self._endpoint
        generation = endpoint.ssl.generation if endpoint.ssl is not None else 0
        _, connection = await asyncio.get_running_loop().create_connection(
            _Connection,
            endpoint.host,
            endpoint.port,
            ssl=context,
            server_hostname=endpoint.server_hostname if context is not None else None,
        )
        connection.generation = generation
        return connection

    def _encode(self, method: str, path: str, body: bytes | None, content_type: str) -> bytes:
        headers = self._headers()
        made = self._header_lines
        if made is None or made[0] != headers:
            # Host, Accept and the credentials' lines, encoded once for as long as the credentials
            # are the same (a service account's token is ~1 kB, encoded per bind before).
            lines = [f"Host: {self._host_header}", "Accept: application/json", *(f"{name}: {value}" for name, value in headers.items())]
            made = self._header_lines = (dict(headers), ("\r\n".join(lines) + "\r\n").encode("latin-1"))
        head = f"{method} {self._endpoint.path_prefix}{path} HTTP/1.1\r\n".encode("latin-1") + made[1]
        if body is None:
            return head + b"User-Agent: " + _USER_AGENT + b"\r\n\r\n"
        return head + f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n".encode("latin-1") + b"User-Agent: " + _USER_AGENT + b"\r\n\r\n" + body


def for_configuration(
    configuration: Any, *, headers: Callable[[], Mapping[str, str]], timeout_seconds: float, max_connections: int,
    clock: Callable[[], float] = time.monotonic,
) -> LoopHttpClient | None:
    """A client speaking to the API server of a ``kubernetes.client.Configuration`` with its TLS
    settings (its files followed as they rotate, by ``clock``) and ``headers`` (its
    :class:`Credentials`); ``None`` when it goes through a proxy (the Kubernetes client's own
    path then)."""
    if configuration.proxy:
        return None
    url = urlsplit(configuration.host)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise KubernetesApiError(f"cannot reach the Kubernetes API at {configuration.host!r}: not an http(s) URL")
    secure = url.scheme == "https"
    endpoint = Endpoint(
        host=url.hostname,
        port=url.port or (443 if secure else 80),
        path_prefix=url.path.rstrip("/"),
        ssl=TlsContext(lambda: _ssl_context(configuration), files=lambda: tls_files(configuration), clock=clock) if secure else None,
        server_hostname=_server_hostname(configuration, url.hostname) if secure else None,
    )

    return LoopHttpClient(endpoint=endpoint, headers=headers, timeout_seconds=timeout_seconds, max_connections=max_connections)


class Follow(Protocol):
    """What follows credentials beyond the client's refresh hook (credentials.KubeconfigCredentials: a
    rewritten kubeconfig, an exec plugin's expiry), run with each refresh; ``refused``: the API
    server answered the credentials sent with HTTP 401. It logs its own failures; it never raises."""

    def __call__(self, *, refused: bool) -> None: ...


class Credentials:
    """The credentials' headers of a ``kubernetes.client.Configuration``, refreshed at most every
    ``CREDENTIALS_REFRESH_SECONDS``: ``follow`` first (a kubeconfig rewritten, an exec plugin's
    credentials expired or refused), then the client's refresh hook (an auth-provider's token
    loaded again once it expires; a token file, a kubeconfig's ``tokenFile`` or the service
    account's, read again as it changes, credentials.TokenFileRefresh): ~140 µs of CPU per call, more than
    the rest of a bind request. Rotated tokens stay valid long past their replacement (the
    kubelet rotates at 80% of their lifetime), so a few seconds' delay costs nothing, and a
    refresh that fails (an exec plugin's network call, a token file being replaced) keeps the
    last good headers until the next try. With none yet, the request fails as an API error."""

    def __init__(self, configuration: Any, *, follow: Follow | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._configuration = configuration
        self._follow = follow
        self._clock = clock
        self._headers: dict[str, str] = {}
        self._refreshed_at: float | None = None
        self._stale = False

    def expire(self) -> None:
        """Read the credentials again at the next call, whenever they were last read: the API
        server refused them (HTTP 401), so they were revoked or rotated meanwhile."""
        self._stale = True

    def refused(self) -> Mapping[str, str]:
        """The API server refused the credentials sent (HTTP 401): read anew now, whenever they
        were last, the follower told so (an exec plugin run again, or a run under way in another
        thread waited for: never call this on the event loop); the headers to send the request
        again with. Unlike :meth:`expire`, no later call of another request takes the refusal
        over (it would not wait for the plugin, and this one would find nothing left to do)."""
        return self._refresh(refused=True)

    def __call__(self) -> Mapping[str, str]:
        stale, self._stale = self._stale, False
        if stale or self._refreshed_at is None or self._clock() - self._refreshed_at >= CREDENTIALS_REFRESH_SECONDS:
            return self._refresh(refused=stale)
        return self._headers

    def _refresh(self, *, refused: bool) -> Mapping[str, str]:
        now = self._clock()
        try:
            if self._follow is not None:
                self._follow(refused=refused)
            # auth_settings() runs the refresh hook (token files, an auth-provider's token).
            settings = self._configuration.auth_settings()
        except Exception as error:  # the hook's own errors, the follower's unforeseen ones: ConfigException, OSError, ...
            if self._refreshed_at is None:
                raise KubernetesApiError(f"Kubernetes API credentials unavailable: {error}") from None
            log.warning("credentials refresh failed; the last ones are sent", extra={"reason": str(error)})
            self._refreshed_at = now  # tried again after the usual interval, not every request
            return self._headers
        self._headers = {
            setting["key"]: setting["value"]
            for setting in settings.values()
            if setting.get("in") == "header" and setting.get("value")
        }
        self._refreshed_at = now
        return self._headers


def _server_hostname(configuration: Any, host: str) -> str:
    """The name sent in SNI and checked against the certificate: ``tls_server_name``, else a
    name given as ``assert_hostname``, else the URL's host."""
    if configuration.tls_server_name:
        return str(configuration.tls_server_name)
    if isinstance(configuration.assert_hostname, str) and configuration.assert_hostname:
        return configuration.assert_hostname
    return host


def tls_files(configuration: Any) -> list[str]:
    """The files :func:`_ssl_context` reads now (a kubeconfig's embedded data is written to files
    of cellfit's own, rewritten as the kubeconfig is, and an exec plugin's client certificate
    named once it gives one: credentials.KubeconfigCredentials)."""
    return [path for path in (configuration.ssl_ca_cert, configuration.cert_file, configuration.key_file) if path]


class TlsIdentity(NamedTuple):
    """What a TLS client presents and trusts, as far as a stat tells: the files named (in
    :func:`tls_files`' order) and each one's stamp. Unequal: connections made before present
    another client certificate (or none) or trust another CA."""

    files: tuple[str, ...]
    stamps: tuple[FileStamp, ...]


def tls_identity(files: Sequence[str]) -> TlsIdentity:
    return TlsIdentity(files=tuple(files), stamps=file_stamps(files))


def _ssl_context(configuration: Any) -> ssl.SSLContext:
    """TLS as the Kubernetes client sets up urllib3 (kubernetes.client.rest): its CA file or
    data, client certificate and key, ``verify_ssl`` and ``assert_hostname``."""
    context = ssl.create_default_context(
        cafile=configuration.ssl_ca_cert or None, cadata=getattr(configuration, "ca_cert_data", None) or None
    )
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.assert_hostname is False:
        context.check_hostname = False
    context.set_alpn_protocols(["http/1.1"])
    return context
