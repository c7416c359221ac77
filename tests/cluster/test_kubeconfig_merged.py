"""``cellfit serve`` with a ``KUBECONFIG`` of several files (scheduler/cluster/api.py,
KubernetesApi.connect and KubeconfigCredentials), merged as kubectl and client-go merge them,
against real servers on loopback:

- contexts and clusters in one file, users in another (CI runners, multi-cluster setups): only
  the first file was read, and its context's user was "no such entry";
- the first file to set a cluster, user or context wins; current-context comes from the first
  file that sets it; files that do not exist are skipped;
- relative paths (a CA file, a client certificate and key, a ``tokenFile``) are resolved
  against the file that names them (an exec plugin's command too: tests/kubectl/
  test_exec_plugin_as_client_go.py);
- the credentials follower watches every merged file: a token rotated in the users' file is
  sent from the next refresh, a rewrite of it that does not load is named by that file;
- ``--kubeconfig`` (``cluster.kubeconfig``) is one file, as kubectl's flag is: not split.

The credentials' refresh interval is 0 here, as in test_kubeconfig_rotation.py: each request
refreshes them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings
from scheduler.errors import ConfigError
# refresh_every_request: each request refreshes the credentials (pytestmark below).
from tests.cluster.test_kubeconfig_rotation import TokenServer, b64, refresh_every_request  # noqa: F401
from tests.cluster.test_loop_http_tls_rotation import ApiServer, ClientAuthority
from tests.support.tls import ServingCertificate, make_serving_certificate

GET = "/api/v1/namespaces/default"


pytestmark = pytest.mark.usefixtures("refresh_every_request")


@pytest.fixture
def token_server() -> Iterator[TokenServer]:
    """An API server taking any bearer token, recording those sent."""
    server = TokenServer()
    yield server
    server.stop()


def write(path: Path, *, current: str | None = None, clusters: dict[str, Any] | None = None,
          users: dict[str, Any] | None = None, contexts: dict[str, tuple[str, str]] | None = None) -> Path:
    """A kubeconfig file holding only what it is given (``contexts``: name to cluster and user)."""
    document: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    if current is not None:
        document["current-context"] = current
    if clusters is not None:
        document["clusters"] = [{"name": name, "cluster": cluster} for name, cluster in clusters.items()]
    if users is not None:
        document["users"] = [{"name": name, "user": user} for name, user in users.items()]
    if contexts is not None:
        document["contexts"] = [{"name": name, "context": {"cluster": cluster, "user": user}}
                                for name, (cluster, user) in contexts.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def connect_through(monkeypatch: pytest.MonkeyPatch, *files: Path) -> KubernetesApi:
    """``cellfit serve`` with ``KUBECONFIG`` listing ``files`` and no ``--kubeconfig``."""
    monkeypatch.setenv("KUBECONFIG", ":".join(str(file) for file in files))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    api = KubernetesApi.connect(ClusterSettings(mode="auto"))
    assert api is not None
    return api


def test_contexts_in_one_file_and_users_in_another_connect(
    token_server: TokenServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The setup kubectl reads and ``cellfit serve`` refused: only the first file was read."""
    contexts = write(tmp_path / "contexts", current="ci", clusters={"ci": {"server": token_server.url}},
                     contexts={"ci": ("ci", "robot")})
    users = write(tmp_path / "users", users={"robot": {"token": "robot-token"}})
    api = connect_through(monkeypatch, tmp_path / "absent", contexts, users)
    api.get_path(GET)
    assert token_server.sent == ["Bearer robot-token"]
    assert api.source == f"kubeconfig {contexts}:{users}"


def test_the_first_file_to_set_an_entry_and_the_current_context_wins(
    token_server: TokenServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """client-go's merge: a name's first entry is kept, later ones ignored; the first
    current-context set is the one used (the Python client's merger lets the last one win)."""
    first = write(tmp_path / "first", users={"robot": {"token": "first-token"}})  # no current-context
    second = write(tmp_path / "second", current="ci", clusters={"ci": {"server": token_server.url}},
                   users={"robot": {"token": "second-token"}}, contexts={"ci": ("ci", "robot")})
    third = write(tmp_path / "third", current="elsewhere", clusters={"elsewhere": {"server": "https://10.0.0.9:6443"}},
                  users={"robot": {"token": "third-token"}},
                  contexts={"elsewhere": ("elsewhere", "robot"), "ci": ("elsewhere", "robot")})
    api = connect_through(monkeypatch, first, second, third)
    api.get_path(GET)
    assert token_server.sent == ["Bearer first-token"]


def test_relative_paths_are_resolved_against_the_file_that_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cluster's CA file beside the clusters' file, the client certificate and key beside
    the users' file, in two other folders than the one cellfit runs in."""
    serving: ServingCertificate = make_serving_certificate(tmp_path / "serving")
    authority = ClientAuthority("client-ca")
    server = ApiServer(serving, authority, keep_alive=False)
    try:
        clusters_folder, users_folder = tmp_path / "clusters", tmp_path / "users"
        clusters_folder.mkdir()
        (clusters_folder / "ca.crt").write_bytes(serving.ca_pem)
        certificate, key = authority.issue("robot")
        users_folder.mkdir()
        (users_folder / "robot.crt").write_bytes(certificate)
        (users_folder / "robot.key").write_bytes(key)
        contexts = write(clusters_folder / "config", current="ci", clusters={"ci": {"server": server.url, "certificate-authority": "ca.crt"}},
                         contexts={"ci": ("ci", "robot")})
        users = write(users_folder / "config", users={"robot": {"client-certificate": "robot.crt", "client-key": "robot.key"}})
        api = connect_through(monkeypatch, contexts, users)
        answer = api.get_path("/whoami")
        assert answer is not None and b'"robot"' in answer
    finally:
        server.stop()


def test_a_relative_token_file_is_read_beside_the_users_file(
    token_server: TokenServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    contexts = write(tmp_path / "contexts", current="ci", clusters={"ci": {"server": token_server.url}},
                     contexts={"ci": ("ci", "robot")})
    (tmp_path / "users").mkdir()
    (tmp_path / "users" / "token").write_text("file-token\n")
    users = write(tmp_path / "users" / "config", users={"robot": {"tokenFile": "token"}})
    api = connect_through(monkeypatch, contexts, users)
    api.get_path(GET)
    (tmp_path / "users" / "token").write_text("rotated-file-token\n")
    api.get_path(GET)
    assert token_server.sent == ["Bearer file-token", "Bearer rotated-file-token"]


def test_a_token_rotated_in_the_users_file_is_followed(
    token_server: TokenServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """The follower watches every merged file, not only the first."""
    contexts = write(tmp_path / "contexts", current="ci", clusters={"ci": {"server": token_server.url}},
                     contexts={"ci": ("ci", "robot")})
    users = write(tmp_path / "users", users={"robot": {"token": "first"}})
    api = connect_through(monkeypatch, contexts, users)
    api.get_path(GET)
    write(users, users={"robot": {"token": "rotated"}})
    api.get_path(GET)
    users.write_text("users:\n- name: robot\n  user: {token: \"half")  # half-written: the last good token stays
    api.get_path(GET)
    assert token_server.sent == ["Bearer first", "Bearer rotated", "Bearer rotated"]
    [broken] = [r for r in caplog.records if r.levelno == logging.WARNING and "does not load" in r.getMessage()]
    assert broken.file == str(users) and broken.field.startswith("(line")  # type: ignore[attr-defined]


def test_a_file_that_appears_later_in_the_list_is_merged_in(
    token_server: TokenServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listed file absent at start is skipped, and read once it is written; the first file
    to set the user then wins."""
    early = tmp_path / "early"
    contexts = write(tmp_path / "contexts", current="ci", clusters={"ci": {"server": token_server.url}},
                     contexts={"ci": ("ci", "robot")}, users={"robot": {"token": "late-token"}})
    api = connect_through(monkeypatch, early, contexts)
    api.get_path(GET)
    write(early, users={"robot": {"token": "early-token"}})
    api.get_path(GET)
    assert token_server.sent == ["Bearer late-token", "Bearer early-token"]


def test_the_kubeconfig_setting_is_one_file_as_kubectl_s_flag_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--kubeconfig a:b`` names the file ``a:b``, as kubectl's ``--kubeconfig`` does: not
    the first of a list (KUBECONFIG is not read beside it either)."""
    whole = write(tmp_path / "whole", current="ci", clusters={"ci": {"server": "https://127.0.0.1:1"}},
                  users={"robot": {"token": "t"}}, contexts={"ci": ("ci", "robot")})
    monkeypatch.setenv("KUBECONFIG", str(whole))
    with pytest.raises(ConfigError, match="no kubeconfig file"):
        KubernetesApi.connect(ClusterSettings(mode="kubeconfig", kubeconfig=f"{whole}:{tmp_path / 'other'}"))


def test_a_list_with_no_file_that_exists_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    with pytest.raises(ConfigError, match="no kubeconfig file") as raised:
        KubernetesApi.connect(ClusterSettings(mode="kubeconfig"))
    assert str(tmp_path / "b") in str(raised.value)


def test_a_context_s_entry_missing_from_every_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    contexts = write(tmp_path / "contexts", current="ci", clusters={"ci": {"server": "https://127.0.0.1:1"}},
                     contexts={"ci": ("ci", "robot")})
    users = write(tmp_path / "users", users={"someone": {"token": b64(b"x")}})
    monkeypatch.setenv("KUBECONFIG", f"{contexts}:{users}")
    with pytest.raises(ConfigError, match=r"users\[robot\]: no such entry") as raised:
        KubernetesApi.connect(ClusterSettings(mode="kubeconfig"))
    assert f"{contexts}:{users}" in str(raised.value)  # the files looked in, all of them
