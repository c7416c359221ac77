"""The inspect listener (``server.inspectPort``): the read-only ``/v1/inspect/...`` of the same
process on a port of its own, which the chart exposes through its Service so that the API
server's service proxy (``kubectl cellfit``) reaches it, and nothing else: no extender verb
(bind binds any pod), no metrics, no OpenAPI document, no webhook."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from scheduler.config import Settings, parse_settings
from scheduler.errors import ConfigError
from scheduler.extender.runtime import Runtime, build_runtime
from tests.integration.test_metrics_listener import _wait_ok
from tests.support.ports import free_port
from tests.support import hived
from tests.support.server import running_server

ROOT = Path(__file__).resolve().parents[2]
NOT_ON_INSPECT = [
    ("POST", "/v1/extender/filter"),
    ("POST", "/v1/extender/prioritize"),
    ("POST", "/v1/extender/preempt"),
    ("POST", "/v1/extender/bind"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
]
HIVED = "policy: {name: hived}\n" + hived.CONFIG


@pytest.fixture
def runtime() -> Runtime:
    return build_runtime(parse_settings(HIVED), standalone=True)


@pytest.fixture
def both(runtime: Runtime) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """(extender listener, inspect listener) of one runtime."""
    with running_server(runtime.app) as extender_url, running_server(runtime.inspect_app) as inspect_url:
        with httpx.Client(base_url=extender_url, timeout=10) as extender, httpx.Client(base_url=inspect_url, timeout=10) as inspect:
            yield extender, inspect


@pytest.mark.parametrize("path", ["/v1/inspect/engine", "/v1/inspect/virtual-clusters", "/v1/inspect/virtual-clusters/vision",
                                  "/v1/inspect/cells?node=gpu-a", "/v1/inspect/resume-holds"])
def test_inspect_listener_answers_what_the_extenders_listener_answers(both: tuple[httpx.Client, httpx.Client], path: str) -> None:
    extender, inspect = both
    here, there = inspect.get(path), extender.get(path)
    assert here.status_code == 200, here.text
    assert here.json() == there.json()


def test_inspect_listener_answers_the_same_404s(both: tuple[httpx.Client, httpx.Client]) -> None:
    extender, inspect = both
    for path in ("/v1/inspect/virtual-clusters/nope", "/v1/inspect/estimates", "/v1/inspect/allox"):
        assert inspect.get(path).status_code == 404
        assert inspect.get(path).json() == extender.get(path).json()


@pytest.mark.parametrize(("method", "path"), NOT_ON_INSPECT)
def test_inspect_listener_serves_no_verb_and_no_metrics(both: tuple[httpx.Client, httpx.Client], method: str, path: str) -> None:
    extender, inspect = both
    assert inspect.request(method, path, content=b"{}").status_code in (404, 405)
    assert extender.request(method, path, content=b"{}").status_code not in (404, 405)  # the path is real


def test_inspect_app_routes_are_read_only(runtime: Runtime) -> None:
    """A route added to the inspect app later is a decision, not an accident: every one is a GET."""
    routes = [inner for route in runtime.inspect_app.routes
              for inner in (route.original_router.routes if hasattr(route, "original_router") else [route])]
    methods = {getattr(route, "path", None): getattr(route, "methods", set()) for route in routes}
    assert set(methods) == {
        "/healthz", "/v1/inspect/engine", "/v1/inspect/virtual-clusters", "/v1/inspect/virtual-clusters/{name}",
        "/v1/inspect/cells", "/v1/inspect/resume-holds", "/v1/inspect/estimates", "/v1/inspect/allox",
        "/v1/inspect/exchanges",
    }
    assert all(m <= {"GET", "HEAD"} for m in methods.values()), methods


def test_inspect_port_is_off_by_default_and_must_differ_from_the_others() -> None:
    assert Settings().server.inspect_port is None
    settings = parse_settings("server:\n  inspectPort: 8890\n")
    assert (settings.server.inspect_host, settings.server.inspect_port) == ("0.0.0.0", 8890)
    with pytest.raises(ConfigError, match="inspectPort 9000 must differ from port and metricsPort"):
        parse_settings("server:\n  port: 9000\n  inspectPort: 9000\n")
    with pytest.raises(ConfigError, match="inspectPort 8889 must differ"):
        parse_settings("server:\n  metricsPort: 8889\n  inspectPort: 8889\n")
    with pytest.raises(ConfigError, match="admission.port 8890 is already"):
        parse_settings("server:\n  inspectPort: 8890\nadmission: {enabled: true, port: 8890, certFile: /c, keyFile: /k}\n")


@pytest.mark.slow
def test_cellfit_serve_runs_the_inspect_listener(tmp_path: Path) -> None:
    port, inspect_port = free_port(), free_port()
    config = tmp_path / "cellfit.yaml"
    config.write_text(f"server: {{port: {port}, inspectHost: 127.0.0.1, inspectPort: {inspect_port}}}\nlogging: {{format: text}}\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "scheduler.cli", "serve", "--standalone", "--config", str(config)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        _wait_ok(f"http://127.0.0.1:{inspect_port}/healthz", process)
        assert httpx.get(f"http://127.0.0.1:{inspect_port}/v1/inspect/engine", timeout=5).json()["policy"] == "resource-fit"
        assert httpx.post(f"http://127.0.0.1:{inspect_port}/v1/extender/bind", content=b"{}", timeout=5).status_code == 404
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output
