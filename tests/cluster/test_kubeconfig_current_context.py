"""A kubeconfig rewritten with a ``current-context`` naming another context (``kubectl config
use-context``, a login tool switching clusters) while ``cellfit serve`` runs
(scheduler/cluster/api.py, KubeconfigCredentials): cellfit goes on with the context it started
with (its cluster's server, its user's credentials still followed), as client-go's long-running
clients do, and says so once per change, naming the field, both contexts and the restart that
switches. Before, it went on silently: the operator who switched believed cellfit had too."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings
from tests.cluster.test_kubeconfig_rotation import TokenServer
from tests.cluster.test_kubeconfig_rotation import refresh_every_request  # noqa: F401  (autouse: each request refreshes)


@pytest.fixture
def api_server() -> Iterator[TokenServer]:
    server = TokenServer()
    yield server
    server.stop()


def two_contexts(*, server: str, current: str, token: str) -> str:
    """Contexts "here" (``server``, user "cellfit" with ``token``) and "there" (another
    cluster and user), ``current`` the current one."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": "here", "cluster": {"server": server}},
                     {"name": "there", "cluster": {"server": "https://10.0.0.9:6443"}}],
        "users": [{"name": "cellfit", "user": {"token": token}}, {"name": "someone", "user": {"token": "theirs"}}],
        "contexts": [{"name": "here", "context": {"cluster": "here", "user": "cellfit"}},
                     {"name": "there", "context": {"cluster": "there", "user": "someone"}}],
    })


def warnings_of_current_context(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and getattr(r, "field", None) == "current-context"]


def test_a_current_context_rewritten_to_another_is_warned_of_once_and_not_followed(
    api_server: TokenServer, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(two_contexts(server=api_server.url, current="here", token="first"))
    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(path)))
    assert api is not None
    path.write_text(two_contexts(server=api_server.url, current="there", token="rotated"))
    api.get_path("/api/v1/namespaces/default")
    path.write_text(two_contexts(server=api_server.url, current="there", token="rotated-again"))
    api.get_path("/api/v1/namespaces/default")
    assert api_server.sent == ["Bearer rotated", "Bearer rotated-again"]  # here's user, followed still
    [warning] = warnings_of_current_context(caplog)
    assert (warning.file, warning.was, warning.now) == (str(path), "here", "there")  # type: ignore[attr-defined]
    assert "'there'" in warning.getMessage() and "'here'" in warning.getMessage() and "restart" in warning.getMessage()


def test_a_current_context_rewritten_is_not_warned_of_when_a_context_was_named(
    api_server: TokenServer, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """``cluster.context`` names the context: the file's current-context is not what cellfit follows."""
    path = tmp_path / "kubeconfig"
    path.write_text(two_contexts(server=api_server.url, current="there", token="first"))
    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(path), context="here"))
    assert api is not None
    path.write_text(two_contexts(server=api_server.url, current="here", token="rotated"))
    api.get_path("/api/v1/namespaces/default")
    assert api_server.sent == ["Bearer rotated"]
    assert warnings_of_current_context(caplog) == []
