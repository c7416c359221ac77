"""A kubeconfig user's ``exec`` plugin run as client-go (kubectl, kube-scheduler) runs it, by
``cellfit serve`` and by ``kubectl cellfit`` alike (scheduler/cluster/api.py, run_exec_plugin;
scheduler/kubectl/kubeconfig.py), against a real server on loopback, with a ``KUBECONFIG`` of
two files in two folders (clusters and contexts in one, the user in the other) and the process
in a third:

- a ``command`` given as a relative path is found beside the users' file (client-go's
  ResolveLocalPaths resolves it against the file that names it) and runs in the process's own
  working folder (client-go sets no folder). ``cellfit serve`` ran it in the users' file's
  folder; the kubectl plugin (the Kubernetes client's runner) looked for it, and ran it, in the
  clusters' file's folder: not found, logged, and the request sent without credentials;
- a bare ``command`` is looked up on PATH; one not found says the plugin's ``installHint``
  (``cellfit serve`` said "No such file or directory"; the kubectl plugin said nothing and sent
  the request without credentials, the API server's 401 being all the user saw);
- the plugin's ``env`` is added to the process's environment;
- ``kubectl cellfit`` hands the plugin its terminal as ``interactiveMode`` says (``cellfit
  serve`` never does: tests/cluster/test_review21b_credentials.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

from scheduler.cluster.api import KubernetesApi
from scheduler.config import ClusterSettings
from scheduler.errors import ConfigError
from scheduler.kubectl.api import KubeApi
from scheduler.kubectl.errors import PluginError
from scheduler.kubectl.kubeconfig import open_session
from tests.cluster.test_kubeconfig_merged import write
from tests.cluster.test_kubeconfig_rotation import TokenServer
from tests.cluster.test_kubeconfig_rotation import refresh_every_request  # noqa: F401  (autouse: each request refreshes)

# Reports its working folder and the environment variable the kubeconfig's env sets; answers a token.
PLUGIN = f'''#!{sys.executable}
import json, os, pathlib
pathlib.Path(os.environ["REPORT_TO"]).write_text(json.dumps({{"cwd": os.getcwd(), "greeting": os.environ.get("GREETING")}}))
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {{"token": "plugin-token"}}}}))
'''
GET = "/api/v1/namespaces/default"


@pytest.fixture
def api_server() -> Iterator[TokenServer]:
    server = TokenServer()
    yield server
    server.stop()


def serve_sends(path: str) -> None:
    """``cellfit serve`` connected through KUBECONFIG, one request sent."""
    try:
        api = KubernetesApi.connect(ClusterSettings(mode="kubeconfig"))
    except ConfigError as error:
        raise RuntimeError(str(error)) from None
    assert api is not None
    api.get_path(path)


def kubectl_sends(path: str) -> None:
    """``kubectl cellfit``'s session through KUBECONFIG, one request sent."""
    try:
        session = open_session(kubeconfig=None, context=None, namespace=None)
    except PluginError as error:
        raise RuntimeError(str(error)) from None
    KubeApi(session).raw(path)


CLIENTS: dict[str, Callable[[str], None]] = {"serve": serve_sends, "kubectl": kubectl_sends}


class Folders:
    """The clusters' file, the users' folder (the plugin in its bin/) and the working folder."""

    def __init__(self, root: Path, server: TokenServer, monkeypatch: pytest.MonkeyPatch) -> None:
        self.contexts = write(root / "clusters" / "config", current="ci", clusters={"ci": {"server": server.url}},
                              contexts={"ci": ("ci", "robot")})
        self.users_folder = root / "users"
        (self.users_folder / "bin").mkdir(parents=True)
        plugin = self.users_folder / "bin" / "token-plugin"
        plugin.write_text(PLUGIN)
        plugin.chmod(0o755)
        self.report = root / "report.json"
        self.working = root / "working"
        self.working.mkdir()
        self.monkeypatch = monkeypatch
        monkeypatch.chdir(self.working)
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    def user(self, **exec_fields: object) -> None:
        users = write(self.users_folder / "config", users={"robot": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "interactiveMode": "Never",
            "env": [{"name": "REPORT_TO", "value": str(self.report)}, {"name": "GREETING", "value": "hello"}], **exec_fields}}})
        self.monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(self.contexts), str(users)]))


@pytest.fixture
def folders(tmp_path: Path, api_server: TokenServer, monkeypatch: pytest.MonkeyPatch) -> Folders:
    return Folders(tmp_path, api_server, monkeypatch)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_relative_command_is_found_beside_the_users_file_and_runs_in_the_working_folder(
    client: str, folders: Folders, api_server: TokenServer,
) -> None:
    folders.user(command="bin/token-plugin")
    CLIENTS[client](GET)
    assert api_server.sent == ["Bearer plugin-token"]
    assert folders.report.read_text() == f'{{"cwd": "{folders.working}", "greeting": "hello"}}'


@pytest.mark.parametrize("client", CLIENTS)
def test_a_bare_command_is_looked_up_on_path(
    client: str, folders: Folders, api_server: TokenServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{folders.users_folder / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    folders.user(command="token-plugin")
    CLIENTS[client](GET)
    assert api_server.sent == ["Bearer plugin-token"]


@pytest.mark.parametrize("command", ["cellfit-test-no-such-plugin", "bin/cellfit-test-no-such-plugin"])
@pytest.mark.parametrize("client", CLIENTS)
def test_a_command_not_installed_says_its_install_hint(client: str, command: str, folders: Folders, api_server: TokenServer) -> None:
    folders.user(command=command, installHint="Install it with: brew install no-such-plugin")
    with pytest.raises(RuntimeError) as raised:
        CLIENTS[client](GET)
    said = str(raised.value)
    assert "users[robot].user.exec" in said and "cellfit-test-no-such-plugin not found" in said
    assert "brew install no-such-plugin" in said
    assert api_server.sent == []


# Reports whether it was told it is interactive and what its standard input is; answers a token.
REPORTING_PLUGIN = f'''#!{sys.executable}
import json, os, pathlib
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
pathlib.Path(os.environ["REPORT_TO"]).write_text(json.dumps({{
    "interactive": info["spec"]["interactive"], "stdin_is_terminal": os.isatty(0),
    "stdin": os.path.realpath("/proc/self/fd/0")}}))
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {{"token": "plugin-token"}}}}))
'''


@pytest.mark.parametrize(("mode", "interactive"), [("Never", False), ("IfAvailable", True)])
def test_kubectl_cellfit_hands_the_plugin_its_terminal_as_interactive_mode_says(
    mode: str, interactive: bool, folders: Folders, api_server: TokenServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kubectl runs the plugin interactive (its terminal as standard input, ``spec.interactive``
    true) when ``interactiveMode`` allows and standard input is a terminal, as a login prompt
    needs; ``Never`` gets none. The Kubernetes client's runner went by standard output alone and
    handed a ``Never`` plugin the terminal all the same."""
    plugin = folders.users_folder / "bin" / "reporting-plugin"
    plugin.write_text(REPORTING_PLUGIN)
    plugin.chmod(0o755)
    leader, follower = os.openpty()  # a terminal for standard input and output, as a shell gives
    terminal_in, terminal_out = os.fdopen(follower, "r"), os.fdopen(os.dup(follower), "w")
    monkeypatch.setattr(sys, "stdin", terminal_in)
    monkeypatch.setattr(sys, "stdout", terminal_out)
    try:
        folders.user(command="bin/reporting-plugin", interactiveMode=mode)
        kubectl_sends(GET)
    finally:
        terminal_in.close()
        terminal_out.close()
        os.close(leader)
    told = json.loads(folders.report.read_text())
    assert (told["interactive"], told["stdin_is_terminal"]) == (interactive, interactive)
    assert (told["stdin"] == "/dev/null") is not interactive
    assert api_server.sent == ["Bearer plugin-token"]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_plugin_beside_a_token_of_the_user_s_own_is_not_run(client: str, folders: Folders, api_server: TokenServer) -> None:
    """client-go never runs the plugin of a user with credentials of its own (a token here, a
    client certificate, a username): kubectl and kube-scheduler send the token. ``cellfit
    serve`` ran the plugin and sent its token instead: another identity than theirs."""
    users = write(folders.users_folder / "config", users={"robot": {"token": "the-users-own", "exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "interactiveMode": "Never", "command": "bin/token-plugin",
        "env": [{"name": "REPORT_TO", "value": str(folders.report)}]}}})
    folders.monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(folders.contexts), str(users)]))
    CLIENTS[client](GET)
    assert api_server.sent == ["Bearer the-users-own"]
    assert not folders.report.exists()
