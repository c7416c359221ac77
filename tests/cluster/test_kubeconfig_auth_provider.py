"""A kubeconfig user with a legacy ``auth-provider`` (oidc's ``id-token``, gcp's
``access-token``) whose token is refreshed into the file while ``cellfit serve`` runs
(scheduler/cluster/api.py, KubeconfigCredentials and _AuthProviderToken): kubectl refreshes an
oidc id-token with its refresh-token and writes both back to the kubeconfig, as a login tool
does. The follower left such users to the Kubernetes client, which read the file once: the
token refreshed into it was never sent, and once the old one expired every request was refused
until a restart. It is now followed as an embedded token is, and a refresh's rewrite is not
taken for a change only a restart takes; the client's own renewal of an expired gcp token (its
cmd-path) is still sent; a token the client's loader refreshes is written back to the file, as
client-go writes it back."""

from __future__ import annotations

import base64
import json
import logging
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings
from tests.cluster.test_kubeconfig_rotation import TokenServer
from tests.cluster.test_kubeconfig_rotation import refresh_every_request  # noqa: F401  (autouse: each request refreshes)

GET = "/api/v1/namespaces/default"


def jwt(subject: str) -> str:
    """An unsigned JWT that expires in 2999 (the client's oidc loader reads its exp, and takes
    only a token of three url-safe base64 parts without padding)."""
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return ".".join([part({"alg": "none"}), part({"sub": subject, "exp": 32503680000}), "signature"])


def provider(name: str, *, token: str, refresh: str) -> dict[str, Any]:
    if name == "oidc":
        return {"name": "oidc", "config": {"client-id": "cellfit", "idp-issuer-url": "https://127.0.0.1:1",
                                           "id-token": token, "refresh-token": refresh}}
    return {"name": "gcp", "config": {"access-token": token, "expiry": "2999-01-01T00:00:00Z"}}


def kubeconfig(*, server: str, auth_provider: dict[str, Any]) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "here",
        "clusters": [{"name": "here", "cluster": {"server": server}}],
        "users": [{"name": "cellfit", "user": {"auth-provider": auth_provider}}],
        "contexts": [{"name": "here", "context": {"cluster": "here", "user": "cellfit"}}],
    })


@pytest.fixture
def api_server() -> Iterator[TokenServer]:
    server = TokenServer()
    yield server
    server.stop()


@pytest.mark.parametrize("name", ["oidc", "gcp"])
def test_an_auth_provider_token_refreshed_into_the_file_is_sent(
    name: str, api_server: TokenServer, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    first, refreshed = (jwt("first"), jwt("refreshed")) if name == "oidc" else ("ya29.first", "ya29.refreshed")
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=api_server.url, auth_provider=provider(name, token=first, refresh="r1")))
    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(path)))
    assert api is not None
    api.get_path(GET)
    path.write_text(kubeconfig(server=api_server.url, auth_provider=provider(name, token=refreshed, refresh="r2")))
    api.get_path(GET)
    api.get_priority_class("cellfit-trial")  # the generated client's path reads the same
    assert api_server.sent == [f"Bearer {first}", f"Bearer {refreshed}", f"Bearer {refreshed}"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # no "takes effect at its restart"


# The gcp auth-provider's cmd-path: a numbered token each run, expired at once.
EXPIRED_TOKEN_COMMAND = '''
import json, pathlib, sys
runs = pathlib.Path(sys.argv[1])
run = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(run))
print(json.dumps({"credential": {"access_token": f"cmd-{run}", "token_expiry": "2000-01-01T00:00:00Z"}}))
'''


def expired_gcp_command(api_server: TokenServer, tmp_path: Path) -> tuple[Path, dict[str, str], KubernetesApi]:
    """A kubeconfig whose gcp user's cmd-path gives a token expired at once, its config, and the
    client connected with it (the command run once, at load)."""
    script, runs = tmp_path / "token-command.py", tmp_path / "runs"
    script.write_text(EXPIRED_TOKEN_COMMAND)
    command = {"cmd-path": sys.executable, "cmd-args": f"{script} {runs}"}
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=api_server.url, auth_provider={"name": "gcp", "config": command}))
    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(path)))
    assert api is not None
    return path, command, api


def test_the_client_s_own_renewal_of_an_expired_gcp_token_is_still_sent(api_server: TokenServer, tmp_path: Path) -> None:
    """The client's refresh hook renews an expired gcp token (its cmd-path) on every refresh here:
    each renewal is the newer token, sent over the one the file was last rewritten with."""
    path, command, api = expired_gcp_command(api_server, tmp_path)  # run 1, at load
    api.get_path(GET)
    path.write_text(kubeconfig(server=api_server.url, auth_provider={"name": "gcp", "config": command | {
        "access-token": "from-the-file", "expiry": "2000-01-01T00:00:00Z"}}))
    api.get_path(GET)
    assert api_server.sent == ["Bearer cmd-2", "Bearer cmd-3"]
    # The loader took the rewrite (an expired token) before it renewed it: its renewal is newer
    # than what the file holds, and written back.
    [user] = yaml.safe_load(path.read_text())["users"]
    assert user["user"]["auth-provider"]["config"] == command | {"access-token": "cmd-3", "expiry": "2000-01-01T00:00:00Z"}


def test_the_client_takes_the_tokens_another_writer_rewrote_into_the_file(api_server: TokenServer, tmp_path: Path) -> None:
    """Two writers of the file: cellfit's client (its gcp renewals, written back) and a login
    tool (kubectl, gcloud) refreshing the same user's token. The client's loader reads the
    file's rewrite as the follower reads it: a valid token there is used, not renewed over
    (before: the loader kept its own expired copy, ran the command on every request and sent
    its token over the file's). That the next renewal is then written back over the rewrite is
    the test above's."""
    path, command, api = expired_gcp_command(api_server, tmp_path)  # run 1, at load
    runs = tmp_path / "runs"
    api.get_path(GET)  # run 2: renewed, written back
    path.write_text(kubeconfig(server=api_server.url, auth_provider={"name": "gcp", "config": command | {
        "access-token": "from-the-login-tool", "expiry": "2999-01-01T00:00:00Z"}}))
    api.get_path(GET)
    api.get_path(GET)
    assert api_server.sent == ["Bearer cmd-2", "Bearer from-the-login-tool", "Bearer from-the-login-tool"]
    assert runs.read_text() == "2"
    [user] = yaml.safe_load(path.read_text())["users"]
    assert user["user"]["auth-provider"]["config"]["access-token"] == "from-the-login-tool"


def test_each_renewal_of_the_client_is_written_back(api_server: TokenServer, tmp_path: Path) -> None:
    """The renewals after the one at load are written back too: the loader's own write is not
    another writer's rewrite. Only what the renewal changes is written."""
    path, command, api = expired_gcp_command(api_server, tmp_path)  # run 1, at load
    api.get_path(GET)
    api.get_path(GET)
    assert api_server.sent == ["Bearer cmd-2", "Bearer cmd-3"]
    [user] = yaml.safe_load(path.read_text())["users"]
    assert user["user"]["auth-provider"]["config"] == command | {"access-token": "cmd-3", "expiry": "2000-01-01T00:00:00Z"}


def test_a_token_the_client_refreshes_at_load_is_written_back(api_server: TokenServer, tmp_path: Path) -> None:
    """As client-go writes an auth-provider's refreshed config back (its persister): the file
    that names the user holds the token the loader obtained."""
    script, runs = tmp_path / "token-command.py", tmp_path / "runs"
    script.write_text(EXPIRED_TOKEN_COMMAND.replace("2000-01-01", "2999-01-01"))
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig(server=api_server.url, auth_provider={"name": "gcp", "config": {
        "cmd-path": sys.executable, "cmd-args": f"{script} {runs}"}}))
    api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=str(path)))
    assert api is not None
    api.get_path(GET)
    assert api_server.sent == ["Bearer cmd-1"] and runs.read_text() == "1"
    [user] = yaml.safe_load(path.read_text())["users"]
    assert user["user"]["auth-provider"]["config"]["access-token"] == "cmd-1"
