"""``kubectl cellfit`` with a legacy ``auth-provider`` user whose token the Kubernetes client's
loader refreshes (scheduler/kubectl/kubeconfig.py, through scheduler/cluster/api.py's
auth_provider_persister): the refreshed token is written back to the file that names the user,
as kubectl writes it back. Since the plugin read KUBECONFIG through the shared merge it wrote
nothing back: every run refreshed again, and an oidc refresh-token, used once, was spent while
the file kept the old one, so kubectl's next refresh failed."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from scheduler.kubectl.api import KubeApi
from scheduler.kubectl.kubeconfig import open_session
from tests.cluster.test_kubeconfig_merged import write
from tests.cluster.test_kubeconfig_rotation import TokenServer

# The gcp auth-provider's cmd-path: a numbered token each run, valid until 2999.
COMMAND = '''
import json, pathlib, sys
runs = pathlib.Path(sys.argv[1])
run = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(run))
print(json.dumps({"credential": {"access_token": f"cmd-{run}", "token_expiry": "2999-01-01T00:00:00Z"}}))
'''
GET = "/api/v1/namespaces/default"


@pytest.fixture
def server_sent() -> Iterator[tuple[str, list[str]]]:
    """A server's URL and the bearer tokens it is sent."""
    server = TokenServer()
    yield server.url, server.sent
    server.stop()


def test_a_refreshed_auth_provider_token_is_written_back_to_the_users_file(
    server_sent: tuple[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, sent = server_sent
    script, runs = tmp_path / "token-command.py", tmp_path / "runs"
    script.write_text(COMMAND)
    contexts = write(tmp_path / "clusters" / "config", current="ci", clusters={"ci": {"server": url}},
                     contexts={"ci": ("ci", "robot")})
    users = write(tmp_path / "users" / "config", users={"robot": {"auth-provider": {"name": "gcp", "config": {
        "cmd-path": sys.executable, "cmd-args": f"{script} {runs}"}}}, "someone": {"token": "theirs"}})
    users.chmod(0o600)
    contexts_before = contexts.read_text()
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(contexts), str(users)]))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for _ in range(2):
        KubeApi(open_session(kubeconfig=None, context=None, namespace=None)).raw(GET)
    assert sent == ["Bearer cmd-1", "Bearer cmd-1"]  # the second run read the token written back
    assert runs.read_text() == "1"
    written = {user["name"]: user["user"] for user in yaml.safe_load(users.read_text())["users"]}
    assert written["robot"]["auth-provider"]["config"]["access-token"] == "cmd-1"
    assert written["robot"]["auth-provider"]["config"]["expiry"].startswith("2999-01-01")
    assert written["someone"] == {"token": "theirs"}
    assert users.stat().st_mode & 0o777 == 0o600
    assert contexts.read_text() == contexts_before
