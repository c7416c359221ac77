"""Running cellfit: the listeners (extender, metrics, inspect, webhook), TLS and its reloads, the
configuration's live reload, signals and shutdown, around the :class:`~scheduler.extender.runtime.Runtime`
that ``runtime.py`` assembles."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import ssl
from typing import Any, Callable, Coroutine, Final, Iterator, Literal

from uvicorn.config import SSL_PROTOCOL_VERSION, create_ssl_context
from starlette.types import ASGIApp

from scheduler.config import ConfigFile, ListenerLimits, Settings
from scheduler.errors import ConfigError
from scheduler.extender.certificates import CertificateReloader
from scheduler.extender.configuration import ConfigReloader
from scheduler.extender.listeners import REFUSALS, BoundedServer, ListenerConfig, ensure_descriptor_budget
from scheduler.extender.runtime import Runtime, build_runtime
from scheduler.kube import names

log = logging.getLogger(__name__)

# Seconds a listener waits for open requests at shutdown before closing them.
GRACEFUL_SHUTDOWN_SECONDS = 5


class _Listener(BoundedServer):
    """A uvicorn server that leaves SIGINT and SIGTERM to :func:`serve`. uvicorn's own
    handling assumes one server per process: each would install its handlers over the
    other's and re-raise the signal when it stops, ending the process before the other
    listener (the extender's, with the watch cache) has shut down."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _listener(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    lifespan: Literal["on", "off"],
    setting: str,
    limits: ListenerLimits,
    limits_setting: str,
    tls: tuple[str, str] | None = None,
) -> tuple[_Listener, socket.socket]:
    """A listener on ``host``:``port`` (``setting`` names them) whose connections get
    ``limits`` (``limits_setting``: their key, named in refusals); HTTPS with the ``tls``
    certificate and key files."""
    context = None
    if tls is not None:
        try:  # loaded before serving, not after the cluster was listed
            context = _tls_context(*tls)
        except (OSError, ssl.SSLError, ValueError) as error:
            raise ConfigError(f"admission.certFile/keyFile: cannot load {tls[0]} and {tls[1]}: {error}") from None
    config = ListenerConfig(
        app,
        limits=limits,
        setting=limits_setting,
        tls=context,
        host=host,
        port=port,
        lifespan=lifespan,
        log_config=None,  # keep cellfit's structured logging
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    return _Listener(config), _bind(host=host, port=port, setting=setting)


def _tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server context for the pair, as uvicorn makes its own (Config.load's defaults)."""
    return create_ssl_context(
        certfile=cert_file,
        keyfile=key_file,
        password=None,
        ssl_version=SSL_PROTOCOL_VERSION,
        cert_reqs=ssl.CERT_NONE,
        ca_certs=None,
        ciphers=None,
    )


def _certificate_reloader(config: ListenerConfig, cert_file: str, key_file: str) -> CertificateReloader:
    """Keeps the TLS listener of ``config`` presenting its certificate files' current pair."""
    assert config.tls is not None
    return CertificateReloader(
        context=config.tls, make_context=lambda: _tls_context(cert_file, key_file), cert_file=cert_file, key_file=key_file
    )


def _config_reloader(runtime: Runtime, config_file: ConfigFile) -> ConfigReloader:
    """Follows ``config_file``: its virtual clusters into the running HiveD engine, if any."""
    return ConfigReloader(
        path=config_file.path,
        running=config_file.settings,
        cells=runtime.cells,
        lock=runtime.lock,
        metrics=runtime.metrics,
        rebase=runtime.exchange_quotas.reconfigure_base if runtime.exchange_quotas is not None else None,
        # New VCs: kube-scheduler retries the pods it parked (the requeue signal, runtime.py).
        on_applied=lambda _reload: runtime.cells_changed(),
        loaded_digest=config_file.digest,
    )


def _bind(*, host: str, port: int, setting: str) -> socket.socket:
    """Bind before any listener starts, so that a port in use ends the process before the
    watch cache has started, with the setting to change (uvicorn would only log errno 98)."""
    sock = socket.socket(family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ConfigError(f"{setting}: cannot listen on {host}:{port}: {error.strerror or error}") from None
    sock.set_inheritable(True)
    return sock


@contextlib.contextmanager
def _sigterm_ends_startup() -> Iterator[None]:
    """SIGTERM while starting (the cluster's Nodes listed, retried while the API server is
    unreachable) ends the process as an exit does, its exit handlers run: Python's default
    action for it would leave the credentials folder (scheduler.cluster.private_folder)
    behind. Serving, the event loop's own handler drains and stops instead."""

    def exit_on_sigterm(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, exit_on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve(settings: Settings, *, config_file: ConfigFile | None = None) -> None:
    """Serve until SIGINT or SIGTERM: the extender (verbs, inspect, health, metrics) on
    server.host:port; when server.metricsPort is set, health and metrics alone on
    server.metricsHost:metricsPort; when server.inspectPort is set, inspect alone on
    server.inspectHost:inspectPort; when admission.enabled, the pod-create webhook over HTTPS on
    admission.host:port; in one event loop over one state. ``config_file``: the file
    ``settings`` came from, checked every server.configReloadSeconds for changes to apply live."""
    try:
        with _sigterm_ends_startup():
            runtime = build_runtime(settings)
    except ConfigError as error:  # refused at startup (against the cells discovered from the Nodes): named with the file, as when loaded
        if config_file is None:
            raise
        raise ConfigError(f"{config_file.path}: {error}") from None
    server = settings.server
    listeners = [
        _listener(
            runtime.app,
            host=server.host,
            port=server.port,
            lifespan="on",
            setting="server.port",
            limits=server.extender_listener,
            limits_setting="server.extenderListener",
        )
    ]
    if server.metrics_port is not None:
        listeners.append(
            _listener(
                runtime.metrics_app,
                host=server.metrics_host,
                port=server.metrics_port,
                lifespan="off",
                setting="server.metricsPort",
                limits=server.metrics_listener,
                limits_setting="server.metricsListener",
            )
        )
    if server.inspect_port is not None:
        listeners.append(
            _listener(
                runtime.inspect_app,
                host=server.inspect_host,
                port=server.inspect_port,
                lifespan="off",
                setting="server.inspectPort",
                limits=server.inspect_listener,
                limits_setting="server.inspectListener",
            )
        )
    admission = settings.admission
    chores: list[Callable[[], Coroutine[Any, Any, None]]] = []
    if runtime.admission_app is not None and admission.cert_file and admission.key_file:
        webhook = _listener(
            runtime.admission_app,
            host=admission.host,
            port=admission.port,
            lifespan="off",
            setting="admission.port",
            limits=server.admission_listener,
            limits_setting="server.admissionListener",
            tls=(admission.cert_file, admission.key_file),
        )
        listeners.append(webhook)
        reloader = _certificate_reloader(webhook[0].config, admission.cert_file, admission.key_file)
        runtime.metrics.track_certificate(lambda: reloader.not_after)
        chores.append(lambda: reloader.watch(interval_seconds=admission.cert_reload_seconds))
    if config_file is not None and server.config_reload_seconds > 0:
        watcher = _config_reloader(runtime, config_file)
        chores.append(lambda: watcher.watch(interval_seconds=server.config_reload_seconds))
    log.info(
        "cellfit extender listening",
        extra={
            "host": server.host,
            "port": server.port,
            "metrics_host": server.metrics_host if server.metrics_port is not None else None,
            "metrics_port": server.metrics_port,
            "inspect_port": server.inspect_port,
            "admission_port": admission.port if runtime.admission_app is not None else None,
            "policy": settings.policy.name,
            "config_file": config_file.path if config_file is not None else None,
            "config_reload_seconds": server.config_reload_seconds if config_file is not None else None,
            # False: installed without a C compiler; node names are decoded in Python (slower
            # at thousands of nodes, the same answers).
            "node_name_fast_path": names.native is not None,
        },
    )
    for listener, _ in listeners:
        listener.config.on_refusal = runtime.metrics.track_listener(
            listener.config.setting.removeprefix("server.").removesuffix("Listener"),
            reasons=REFUSALS,
            connections=listener.open_connections,
        )
    budget = {listener.config.setting + ".maxConnections": listener.config.limits.max_connections for listener, _ in listeners}
    if runtime.cache is not None:
        # kube-scheduler's binds each hold one connection to the Kubernetes API as well: the pool
        # is sized to the extender listener's connections (scheduler.cluster.api.KubernetesApi).
        budget["server.extenderListener.maxConnections (its binds' connections to the Kubernetes API)"] = (
            settings.server.extender_listener.max_connections
        )
    ensure_descriptor_budget(budget)
    with asyncio.Runner(loop_factory=listeners[0][0].config.get_loop_factory()) as runner:
        runner.run(_serve_until_signalled(listeners, chores))


class _OncePerProcess(logging.Filter):
    """uvicorn logs "Started server process [pid]", "Shutting down" and "Finished server process
    [pid]" once per server: with a listener each for the extender, metrics, inspect and the
    webhook in one process, the same line four times (user26 #9; life28 #2: "Shutting down" at
    each stop, naming no listener). Passes each of them once: the first "Shutting down" is the
    process's, its listeners all stopping together (:func:`_serve`)."""

    LINES: Final = frozenset({"Started server process [%d]", "Shutting down", "Finished server process [%d]"})

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[object] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg not in self.LINES:
            return True
        seen = record.msg in self._seen
        self._seen.add(record.msg)
        return not seen


async def _serve_until_signalled(
    listeners: list[tuple[_Listener, socket.socket]], chores: list[Callable[[], Coroutine[Any, Any, None]]]
) -> None:
    """Serve ``listeners`` until a signal or until one stops; ``chores`` run alongside until then."""
    once = _OncePerProcess()
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addFilter(once)
    try:
        await _serve(listeners, chores)
    finally:
        uvicorn_log.removeFilter(once)


async def _serve(listeners: list[tuple[_Listener, socket.socket]], chores: list[Callable[[], Coroutine[Any, Any, None]]]) -> None:
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for listener, _ in listeners:
            listener.should_exit = True

    def on_signal() -> None:
        # A second signal skips waiting for open requests and the lifespan's shutdown, as in
        # uvicorn.
        if any(listener.should_exit for listener, _ in listeners):
            for listener, _ in listeners:
                listener.force_exit = True
        stop()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    try:
        serving = [asyncio.create_task(listener.serve(sockets=[sock])) for listener, sock in listeners]
        background = [asyncio.create_task(chore()) for chore in chores]
        # Whichever listener stops first, for whatever reason, stops the other: never a
        # process serving probes "ok" without its extender, or the reverse.
        await asyncio.wait(serving, return_when=asyncio.FIRST_COMPLETED)
        stop()
        for task in background:
            task.cancel()
        await asyncio.gather(*serving)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
