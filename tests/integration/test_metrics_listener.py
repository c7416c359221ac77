"""The metrics listener (``server.metricsPort``): /metrics, /healthz and /readyz of the same
process on a second port, which the chart exposes to the kubelet and Prometheus, and nothing
else: no extender verb (bind binds any pod), no /v1/inspect, no OpenAPI document."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from scheduler.config import Settings, parse_settings
from scheduler.errors import ConfigError
from scheduler.extender.app import create_metrics_app
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.runtime import Runtime, build_runtime
from tests.support import kube_objects as k
from tests.support.ports import free_port
from tests.support.server import running_server

ROOT = Path(__file__).resolve().parents[2]
FILTER = "/v1/extender/filter"
# Every path of the extender's listener that must not answer on the metrics listener.
EXTENDER_ONLY = [
    ("POST", "/v1/extender/filter"),
    ("POST", "/v1/extender/prioritize"),
    ("POST", "/v1/extender/preempt"),
    ("POST", "/v1/extender/bind"),
    ("GET", "/v1/inspect/engine"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
]


@pytest.fixture
def runtime() -> Runtime:
    return build_runtime(Settings(), standalone=True)


@pytest.fixture
def both(runtime: Runtime) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """(extender listener, metrics listener) of one runtime."""
    with running_server(runtime.app) as extender_url, running_server(runtime.metrics_app) as metrics_url:
        with httpx.Client(base_url=extender_url, timeout=10) as extender, httpx.Client(base_url=metrics_url, timeout=10) as metrics:
            yield extender, metrics


def test_metrics_listener_serves_health_and_the_extenders_metrics(both: tuple[httpx.Client, httpx.Client]) -> None:
    extender, metrics = both
    assert metrics.get("/healthz").json() == {"status": "ok"}
    assert metrics.get("/readyz").status_code == 200
    body = k.extender_args(k.pod("train-0", gpus=1), [k.node("gpu-a", gpus=8)], node_cache_capable=False)
    assert extender.post(FILTER, content=k.dumps(body), headers={"Content-Type": "application/json"}).status_code == 200
    # One registry: the metrics listener counts what the extender's listener answered.
    scraped = metrics.get("/metrics")
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    assert 'cellfit_extender_requests_total{result="ok",verb="filter"} 1.0' in scraped.text, scraped.text[:2000]
    assert _steady(scraped.text) == _steady(extender.get("/metrics").text)


def _steady(metrics_text: str) -> list[str]:
    """The scrape without what moves between two scrapes by itself: the threads' CPU time, and the
    garbage collections the process happened to run (a scrape allocates enough to start one)."""
    moving = ("cellfit_thread_cpu_seconds_total{", "cellfit_gc_pause_seconds_")
    return [line for line in metrics_text.splitlines() if not line.startswith(moving)]


@pytest.mark.parametrize(("method", "path"), EXTENDER_ONLY)
def test_metrics_listener_serves_no_verb_and_no_inspect(both: tuple[httpx.Client, httpx.Client], method: str, path: str) -> None:
    extender, metrics = both
    assert metrics.request(method, path, content=b"{}").status_code in (404, 405)
    assert extender.request(method, path, content=b"{}").status_code not in (404, 405)  # the path is real


def test_metrics_app_has_exactly_three_routes(runtime: Runtime) -> None:
    """A route added to the metrics app later is a decision, not an accident."""
    paths = {getattr(route, "path", None) for route in runtime.metrics_app.routes}
    assert paths == {"/healthz", "/readyz", "/metrics"}


def test_metrics_listener_readiness_is_the_extenders() -> None:
    class Syncing:
        def ready(self) -> tuple[bool, str]:
            return False, "watch cache not synced yet"

    with running_server(create_metrics_app(metrics=ExtenderMetrics(), readiness=Syncing())) as url:
        response = httpx.get(f"{url}/readyz", timeout=10)
        assert response.status_code == 503 and response.json()["reason"] == "watch cache not synced yet"
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200


def test_metrics_port_is_off_by_default_and_must_differ_from_port() -> None:
    assert Settings().server.metrics_port is None
    settings = parse_settings("server:\n  metricsPort: 8889\n")
    assert (settings.server.metrics_host, settings.server.metrics_port) == ("0.0.0.0", 8889)
    with pytest.raises(ConfigError, match="metricsPort must differ from port"):
        parse_settings("server:\n  port: 9000\n  metricsPort: 9000\n")
    with pytest.raises(ConfigError, match="server.metricsPort"):
        parse_settings("server:\n  metricsPort: 0\n")


# ------------------------------------------------------------------------------ cellfit serve


def _serve(config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", "serve", "--standalone", "--config", str(config)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _wait_ok(url: str, process: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"cellfit serve exited with {process.returncode}:\n{process.communicate()[0]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer within {timeout:.0f}s")


@pytest.mark.slow
def test_cellfit_serve_runs_both_listeners_and_stops_both_on_sigterm(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    config = tmp_path / "cellfit.yaml"
    config.write_text(f"server: {{port: {port}, metricsHost: 127.0.0.1, metricsPort: {metrics_port}}}\nlogging: {{format: text}}\n")
    process = _serve(config)
    try:
        _wait_ok(f"http://127.0.0.1:{metrics_port}/readyz", process)
        _wait_ok(f"http://127.0.0.1:{port}/readyz", process)
        assert "cellfit_extender_request_duration_seconds" in httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
        assert httpx.post(f"http://127.0.0.1:{metrics_port}{FILTER}", content=b"{}", timeout=5).status_code == 404
        assert httpx.post(f"http://127.0.0.1:{port}{FILTER}", content=b"{}", timeout=5).status_code == 400  # served there
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output
    assert "Application shutdown complete" in output, output  # the extender's lifespan ran to its end
    for listening in (port, metrics_port):
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", listening)) != 0, f"port {listening} still open"


@pytest.mark.slow
def test_cellfit_serve_names_the_setting_when_the_metrics_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        metrics_port = taken.getsockname()[1]
        config = tmp_path / "cellfit.yaml"
        config.write_text(f"server: {{port: {free_port()}, metricsHost: 127.0.0.1, metricsPort: {metrics_port}}}\n")
        process = _serve(config)
        output = process.communicate(timeout=60)[0]
    assert process.returncode == 2, output
    assert f"server.metricsPort: cannot listen on 127.0.0.1:{metrics_port}" in output, output
