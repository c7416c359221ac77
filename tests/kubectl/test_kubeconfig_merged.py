"""``kubectl cellfit`` with a ``KUBECONFIG`` of several files, merged as kubectl merges them
(scheduler/kubectl/kubeconfig.py, through scheduler/cluster/api.py's merged_kubeconfig, the
one ``cellfit serve`` uses), against a real TLS server on loopback that asks for a client
certificate:

- contexts and clusters in one file, a user with a *relative* client certificate and key in
  another, in other folders than the one the plugin runs in: kubectl reads them beside the
  users' file; the Kubernetes client's loader looked for them beside the clusters' file, and
  the plugin said "File does not exist";
- the same with the ``KUBECONFIG`` entries themselves relative to the working folder;
- ``--kubeconfig a:b`` names one file, as kubectl's flag does: not a list split."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from scheduler.kubectl.api import KubeApi
from scheduler.kubectl.errors import PluginError
from scheduler.kubectl.kubeconfig import open_session
from tests.cluster.test_kubeconfig_merged import write
from tests.cluster.test_loop_http_tls_rotation import ApiServer, ClientAuthority
from tests.support.tls import ServingCertificate, make_serving_certificate


class Setup:
    """The clusters' file (a relative CA file beside it) and the users' file (a relative client
    certificate and key beside it), in two folders of their own."""

    def __init__(self, root: Path, server: ApiServer, serving: ServingCertificate, authority: ClientAuthority) -> None:
        clusters_folder, users_folder = root / "clusters", root / "users"
        clusters_folder.mkdir()
        users_folder.mkdir()
        (clusters_folder / "ca.crt").write_bytes(serving.ca_pem)
        certificate, key = authority.issue("robot")
        (users_folder / "robot.crt").write_bytes(certificate)
        (users_folder / "robot.key").write_bytes(key)
        self.contexts = write(clusters_folder / "config", current="ci",
                              clusters={"ci": {"server": server.url, "certificate-authority": "ca.crt"}},
                              contexts={"ci": ("ci", "robot")})
        self.users = write(users_folder / "config", users={"robot": {"client-certificate": "robot.crt", "client-key": "robot.key"}})


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Setup]:
    serving = make_serving_certificate(tmp_path / "serving")
    authority = ClientAuthority("client-ca")
    server = ApiServer(serving, authority, keep_alive=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # neither file's folder
    try:
        yield Setup(tmp_path, server, serving, authority)
    finally:
        server.stop()


def whoami(**flags: str | None) -> object:
    session = open_session(kubeconfig=flags.get("kubeconfig"), context=flags.get("context"), namespace=None)
    return KubeApi(session).get("/whoami", what="whoami")


def test_a_relative_client_certificate_is_read_beside_the_users_file(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(setup.contexts), str(setup.users)]))
    assert whoami() == {"client": "robot"}
    assert whoami(context="ci") == {"client": "robot"}


def test_relative_kubeconfig_entries_are_read_from_the_working_folder(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """``KUBECONFIG=clusters/config:users/config``: each entry against the folder the plugin
    runs in, and each file's relative paths against that file's folder (``users/robot.crt``,
    not the loader's join of it to the clusters' folder, ``clusters/users/robot.crt``)."""
    monkeypatch.chdir(setup.contexts.parent.parent)
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([os.path.relpath(setup.contexts), os.path.relpath(setup.users)]))
    assert os.environ["KUBECONFIG"] == os.pathsep.join(["clusters/config", "users/config"])
    assert whoami() == {"client": "robot"}


def test_the_kubeconfig_flag_is_one_file_not_a_list(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """kubectl's ``--kubeconfig`` is one file (KUBECONFIG is not read beside it): a file named
    ``a:b`` does not exist, and is not the merge of ``a`` and ``b``."""
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(setup.contexts), str(setup.users)]))
    both = os.pathsep.join([str(setup.contexts), str(setup.users)])
    with pytest.raises(PluginError, match="--kubeconfig .*: no such file"):
        open_session(kubeconfig=both, context=None, namespace=None)
