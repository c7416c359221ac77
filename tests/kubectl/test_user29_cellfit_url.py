"""``kubectl cellfit --cellfit-url``: a cellfit run with ``cellfit serve`` beside a kube-scheduler
outside the cluster (README "Point kube-scheduler at it") has no Service for the plugin's service
proxy. Seen live (user29): every command, ``why job/...`` included, ended "cellfit is not
installed here", with no way to point the plugin at the cellfit that was running. Now
``--cellfit-url`` (or ``CELLFIT_URL``) reads the inspect API at cellfit's own address, and the
"not installed" error names it."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from scheduler.kubectl import cli
from scheduler.kubectl.errors import NotInstalled, Unreachable, UsageError
from tests.kubectl.test_cli import NO_SERVICE, ApiServer, config, inspect_url  # noqa: F401 - fixtures

PROXY_VIEWS = "/api/v1/namespaces/cellfit-system/services/http:cellfit:inspect/proxy/v1/inspect/virtual-clusters"


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    """An API server where no cellfit Service exists: the proxy answers 404."""
    server = ApiServer(None)
    server.routes[PROXY_VIEWS] = (404, NO_SERVICE)
    yield server
    server.close()


def test_the_views_are_read_at_cellfits_own_address(config: Path, inspect_url: str) -> None:  # noqa: F811
    view = httpx.get(f"{inspect_url}/v1/inspect/virtual-clusters", timeout=10).json()
    assert json.loads(cli.run(["--cellfit-url", inspect_url, "vcs", "-o", "json"])) == view
    assert json.loads(cli.run(["vcs", "-o", "json", "--cellfit-url", inspect_url + "/"])) == view


def test_cellfit_url_from_the_environment(config: Path, inspect_url: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("CELLFIT_URL", inspect_url)
    assert cli.run(["cells", "--node", "gpu-a"]).splitlines()[1].split()[:2] == ["gpu-a", "A100-NODE"]


def test_without_it_the_missing_service_error_names_the_flag(config: Path) -> None:  # noqa: F811
    with pytest.raises(NotInstalled, match=r"--cellfit-url \(CELLFIT_URL\), e\.g\. http://127\.0\.0\.1:8888"):
        cli.run(["vcs"])


def test_an_address_nothing_listens_on_is_named(config: Path) -> None:  # noqa: F811
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(Unreachable, match=rf"cannot reach cellfit at --cellfit-url http://127\.0\.0\.1:{port}: "):
        cli.run(["--cellfit-url", f"http://127.0.0.1:{port}", "vcs"])


@pytest.mark.parametrize("url", ["127.0.0.1:8888", "ftp://x", "http://"])
def test_a_value_that_is_no_url_is_a_usage_error(config: Path, url: str) -> None:  # noqa: F811
    with pytest.raises(UsageError, match=r"--cellfit-url \(CELLFIT_URL\): .* is not an http:// or https:// URL"):
        cli.run(["--cellfit-url", url, "vcs"])
