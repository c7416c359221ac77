"""/healthz/kube-scheduler on the metrics listener: the liveness of the kube-scheduler beside
cellfit, asked over real TLS of a server that plays kube-scheduler's /healthz (its own
certificate, not one the client could verify), served by the real metrics app over HTTP.

Why it exists: with several replicas a kube-scheduler whose cellfit died kept its Lease, and
every pod of the profile waited while the standby, whose cellfit was fine, stood by.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from scheduler.config import parse_settings
from scheduler.constants import PATH_HEALTHZ_KUBE_SCHEDULER
from scheduler.errors import ConfigError
from scheduler.extender.app import create_metrics_app
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.paired import PairedSchedulerHealth, Verdict
from tests.support.server import running_server
from tests.support.tls import make_serving_certificate


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b"ok" if self.status == 200 else b"[-]ping failed"
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
        pass


@contextlib.contextmanager
def kube_scheduler_healthz(tmp_path: Path, *, status: int = 200, tls: bool = True) -> Iterator[str]:
    """A real HTTPS listener answering /healthz with ``status``, as kube-scheduler's secure port does."""
    handler = type("Health", (_Health,), {"status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls:
        certificate = make_serving_certificate(tmp_path)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate.cert_file, certificate.key_file)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}/healthz"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def silent_listener() -> Iterator[str]:
    """Accepts connections (the kernel completes them from the backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"https://127.0.0.1:{listener.getsockname()[1]}/healthz"


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"https://127.0.0.1:{port}/healthz"


def check(url: str, *, timeout_seconds: float = 3.0) -> Verdict:
    return asyncio.run(PairedSchedulerHealth(url, timeout_seconds=timeout_seconds).check())


# ---------------------------------------------------------------- the check


def test_a_healthy_kube_scheduler_over_its_self_signed_tls_is_alive(tmp_path: Path) -> None:
    with kube_scheduler_healthz(tmp_path) as url:
        verdict = check(url)
    assert verdict.alive and "HTTP 200" in verdict.reason


def test_a_kube_scheduler_whose_healthz_fails_is_not_alive(tmp_path: Path) -> None:
    with kube_scheduler_healthz(tmp_path, status=500) as url:
        verdict = check(url)
    assert not verdict.alive and "answered HTTP 500" in verdict.reason and url in verdict.reason


def test_a_kube_scheduler_that_is_gone_is_not_alive() -> None:
    url = closed_port_url()
    verdict = check(url)
    assert not verdict.alive and "cannot be reached" in verdict.reason and url in verdict.reason


def test_a_kube_scheduler_that_never_answers_is_not_alive_once_the_check_times_out() -> None:
    with silent_listener() as url:
        verdict = check(url, timeout_seconds=0.3)
    assert not verdict.alive and "did not answer within 0.3 s" in verdict.reason


def test_plain_http_is_asked_without_tls(tmp_path: Path) -> None:
    with kube_scheduler_healthz(tmp_path, tls=False) as url:
        assert check(url).alive


def test_an_answer_that_is_not_http_is_not_alive() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/healthz"

        def answer_garbage() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(1024)
                connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

        thread = threading.Thread(target=answer_garbage, daemon=True)
        thread.start()
        verdict = check(url)
        thread.join(5)
    assert not verdict.alive and "not an HTTP status line" in verdict.reason


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/healthz", "https:///healthz", "127.0.0.1:10259"])
def test_a_url_that_is_not_http_with_a_host_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        PairedSchedulerHealth(url)


# ---------------------------------------------------------------- the route on the metrics listener


class _NotReady:
    def ready(self) -> tuple[bool, str]:
        return False, "the watch cache has not synced yet"


def metrics_app(url: str | None) -> object:
    return create_metrics_app(
        metrics=ExtenderMetrics(), readiness=_NotReady(), paired_scheduler=PairedSchedulerHealth(url) if url else None
    )


def test_the_metrics_listener_answers_200_while_kube_scheduler_is_healthy_even_before_cellfit_is_ready(tmp_path: Path) -> None:
    # Only cellfit's liveness counts: restarting kube-scheduler while cellfit syncs (or the API
    # server is away) would put it into the kubelet's restart backoff for nothing.
    with kube_scheduler_healthz(tmp_path) as url, running_server(metrics_app(url)) as base:  # type: ignore[arg-type]
        answer = httpx.get(base + PATH_HEALTHZ_KUBE_SCHEDULER, timeout=10)
        assert httpx.get(base + "/readyz", timeout=10).status_code == 503
    assert answer.status_code == 200 and answer.json()["status"] == "ok"


def test_the_metrics_listener_answers_503_with_the_reason_when_kube_scheduler_fails(tmp_path: Path) -> None:
    with kube_scheduler_healthz(tmp_path, status=500) as url, running_server(metrics_app(url)) as base:  # type: ignore[arg-type]
        answer = httpx.get(base + PATH_HEALTHZ_KUBE_SCHEDULER, timeout=10)
    assert answer.status_code == 503
    assert answer.json() == {"status": "failing", "reason": f"kube-scheduler's {url} answered HTTP 500"}


def test_without_the_setting_the_metrics_listener_has_no_such_path() -> None:
    with running_server(metrics_app(None)) as base:  # type: ignore[arg-type]
        assert httpx.get(base + PATH_HEALTHZ_KUBE_SCHEDULER, timeout=10).status_code == 404


# ---------------------------------------------------------------- the setting


def test_the_setting_reads_and_keeps_the_url() -> None:
    settings = parse_settings("server:\n  metricsPort: 8889\n  pairedSchedulerHealthUrl: https://127.0.0.1:10259/healthz\n")
    assert settings.server.paired_scheduler_health_url == "https://127.0.0.1:10259/healthz"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("server:\n  pairedSchedulerHealthUrl: https://127.0.0.1:10259/healthz\n", "set metricsPort too"),
        ("server:\n  metricsPort: 8889\n  pairedSchedulerHealthUrl: 127.0.0.1:10259\n", "http:// or https:// URL with a host"),
        ("server:\n  metricsPort: 8889\n  pairedSchedulerHealthUrl: https://127.0.0.1:port/healthz\n", "does not read as a URL"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match="pairedSchedulerHealthUrl") as refused:
        parse_settings(text)
    assert message in str(refused.value)
