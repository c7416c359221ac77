"""A kubeconfig user's ``exec`` plugin run as client-go runs it (``client.authentication.k8s.io``):
a relative command found beside the file that names the user, the process's working folder and
environment plus ``env``, interactive only on a terminal and as ``interactiveMode`` says, a
server's plugin killed after :data:`EXEC_PLUGIN_TIMEOUT_SECONDS`; its ``ExecCredential`` read
and handed to the Kubernetes client's configuration. One runner for ``cellfit serve`` and
``kubectl cellfit``.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec


from scheduler.cluster.kubeconfig import KubeconfigFieldError, MergedKubeconfig, check_pair, context_entry, static_credentials, write_private

log = logging.getLogger(__name__)


# A plugin that has not answered within this long is killed (with what it started) and its run is
# a failure: client-go waits for good, and the run holds the follower's lock, which every refresh
# of the credentials takes, the event loop's among them.
EXEC_PLUGIN_TIMEOUT_SECONDS = 30.0
# A plugin's standard error kept in the failure's reason (its last characters: the error).
_EXEC_STDERR_KEPT = 500


class ExecPlugin(msgspec.Struct, frozen=True):
    """A kubeconfig user's ``exec`` entry, with what running it as client-go does needs."""

    config: dict[str, Any]  # the entry: command, args, env, apiVersion, interactiveMode, installHint...
    field: str  # its name in messages: users[name].user.exec
    user_folder: Path  # the folder of the file that set the user: a command given as a relative path is in it
    cluster: dict[str, Any]  # the context's cluster (provideClusterInfo)
    cluster_folder: Path  # the folder of the file that set the cluster (its CA file's)


class ExecCredential(msgspec.Struct, frozen=True):
    """What an exec plugin gave (its ExecCredential's status)."""

    token: str | None
    pair: bytes | None  # the client certificate's PEM and its key's, one file's content
    expires: str | None  # expirationTimestamp as written
    expires_at: float | None


def exec_plugin_of(merged: MergedKubeconfig, *, context: str) -> ExecPlugin | None:
    """The exec plugin of ``context``'s user in merged kubeconfig files; None when it has none
    (or the context names no user or cluster: the Kubernetes client's loader says what is missing)."""
    document = merged.document
    entry = context_entry(merged, context=context)
    if entry is None:
        return None
    user_name, cluster_name = entry.get("user"), entry.get("cluster")
    users = [item.get("user") for item in document.get("users") or () if isinstance(item, dict) and item.get("name") == user_name]
    config = users[0].get("exec") if users and isinstance(users[0], dict) and not static_credentials(users[0]) else None
    if config is None:
        return None
    field = f"users[{user_name}].user.exec"
    if not (isinstance(config, dict) and config.get("command")):
        raise KubeconfigFieldError(field, "no command to run")
    clusters = [item.get("cluster") for item in document.get("clusters") or ()
                if isinstance(item, dict) and item.get("name") == cluster_name]
    context_file = merged.origins[("contexts", context)]
    return ExecPlugin(config=config, field=field, user_folder=merged.origins.get(("users", str(user_name)), context_file).parent,
                      cluster=clusters[0] if clusters and isinstance(clusters[0], dict) else {},
                      cluster_folder=merged.origins.get(("clusters", str(cluster_name)), context_file).parent)


def run_exec_plugin(plugin: ExecPlugin, *, terminal: bool) -> ExecCredential:
    """Run the kubeconfig's exec ``plugin`` as client-go runs it, and answer what it gave;
    raises KubeconfigFieldError naming ``plugin.field``.

    As client-go: a ``command`` with a path separator is resolved against the folder of the
    kubeconfig file that set the user (clientcmd's ResolveLocalPaths), a bare name is looked up
    on this process's PATH (not on a PATH the plugin's ``env`` sets); the plugin runs in this
    process's working folder, with its environment and the plugin's ``env`` over it, and
    KUBERNETES_EXEC_INFO (with ``provideClusterInfo``, the cluster as client-go describes it);
    one not found says its ``installHint``.

    ``terminal``: whether the caller may hand the plugin its terminal (``kubectl cellfit``): it
    is interactive (given this process's standard input) as ``interactiveMode`` says and
    standard input is a terminal, its standard error is this process's, and it is waited for
    (a login in a browser takes what it takes). Otherwise (``cellfit serve``, a server) it is
    never interactive (``interactiveMode: Always`` refused, as client-go refuses it without a
    terminal), its standard input is none, the end of its standard error is kept in the
    failure's reason, and it runs in a session of its own, killed with what it started after
    EXEC_PLUGIN_TIMEOUT_SECONDS."""
    config, field = plugin.config, plugin.field
    api_version = config.get("apiVersion")
    if not isinstance(api_version, str) or not api_version:
        raise KubeconfigFieldError(f"{field}.apiVersion", "missing: client.authentication.k8s.io/v1 or v1beta1")
    interactive = _exec_interactive(config, field=field, terminal=terminal)
    spec: dict[str, Any] = {"interactive": interactive}
    if config.get("provideClusterInfo"):
        spec["cluster"] = _exec_cluster(plugin.cluster, base=plugin.cluster_folder)
    try:
        env = dict(os.environ) | {str(item["name"]): str(item["value"]) for item in config.get("env") or ()}
        arguments = [str(arg) for arg in config.get("args") or ()]
    except (KeyError, TypeError) as error:
        raise KubeconfigFieldError(field, f"env or args do not read: {error!r}") from None
    env["KUBERNETES_EXEC_INFO"] = json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "spec": spec})
    command = _exec_command(str(config["command"]), plugin=plugin)
    answer = _exec_output([command, *arguments], env=env, field=field, terminal=terminal, interactive=interactive)
    try:
        document = json.loads(answer)
    except ValueError as error:
        raise KubeconfigFieldError(field, f"the credential plugin failed: its output is no JSON: {error}") from None
    if not isinstance(document, dict) or "status" not in document:
        raise KubeconfigFieldError(field, "the credential plugin failed: its output is no ExecCredential with a status")
    if document.get("apiVersion") != api_version:
        raise KubeconfigFieldError(field, f"the credential plugin failed: it answered apiVersion {document.get('apiVersion')!r}, "
                                   f"not the {api_version!r} asked for")
    return _exec_credential(document["status"], field=field)


def _exec_interactive(config: dict[str, Any], *, field: str, terminal: bool) -> bool:
    """Whether the plugin runs interactive, as client-go decides (an unset mode: IfAvailable,
    v1beta1's default)."""
    mode = config.get("interactiveMode") or "IfAvailable"
    if mode not in ("Never", "IfAvailable", "Always"):
        raise KubeconfigFieldError(f"{field}.interactiveMode", f"{mode!r}: not Never, IfAvailable or Always")
    if mode == "Never":
        return False
    if not terminal and mode == "Always":
        raise KubeconfigFieldError(f"{field}.interactiveMode", "Always: the plugin needs a terminal, and cellfit, a server, "
                                   "runs it without one (Never or IfAvailable run it so)")
    if not terminal:
        return False
    on_terminal = sys.stdin is not None and sys.stdin.isatty()
    if mode == "Always" and not on_terminal:
        raise KubeconfigFieldError(f"{field}.interactiveMode", "Always: the plugin needs a terminal, and standard input is none")
    return on_terminal


def _exec_command(command: str, *, plugin: ExecPlugin) -> str:
    """The program to run: a path (a separator in it) against the user's file's folder, a name
    on this process's PATH; one not found says the plugin's installHint."""
    if os.sep in command:
        path = plugin.user_folder / command  # an absolute one stays as it is
        if not path.exists():
            raise _not_installed(str(path), plugin=plugin)
        return str(path)
    found = shutil.which(command)
    if found is None:
        raise _not_installed(command, plugin=plugin)
    return found


def _not_installed(command: str, *, plugin: ExecPlugin) -> KubeconfigFieldError:
    hint = plugin.config.get("installHint")
    return KubeconfigFieldError(plugin.field, f"the credential plugin failed: executable {command} not found"
                                + (f"; {str(hint).strip()}" if hint else ""))


def _exec_output(command: list[str], *, env: dict[str, str], field: str, terminal: bool, interactive: bool) -> bytes:
    """What the plugin printed on its standard output (see :func:`run_exec_plugin` for how it runs)."""
    try:
        process = subprocess.Popen(command, stdin=sys.stdin if interactive else subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=None if terminal else subprocess.PIPE, env=env, start_new_session=not terminal)
    except FileNotFoundError:
        raise KubeconfigFieldError(field, f"the credential plugin failed: executable {command[0]} not found") from None
    except OSError as error:
        raise KubeconfigFieldError(field, f"the credential plugin failed: {error}") from None
    try:
        stdout, stderr = process.communicate(timeout=None if terminal else EXEC_PLUGIN_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # its session: what it started too
        except OSError:
            pass
        process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        raise KubeconfigFieldError(
            field, f"the credential plugin did not answer within {EXEC_PLUGIN_TIMEOUT_SECONDS:g}s: it was killed") from None
    if process.returncode != 0:
        said = (stderr or b"").decode(errors="replace").strip()[-_EXEC_STDERR_KEPT:]
        raise KubeconfigFieldError(field, f"the credential plugin failed: exit status {process.returncode}" + (f": {said}" if said else ""))
    return bytes(stdout)


def _exec_credential(status: Any, *, field: str) -> ExecCredential:
    """An ExecCredential's status read: a token, a client certificate and key, or both."""
    if not isinstance(status, dict):
        raise KubeconfigFieldError(field, "the credential plugin's status is not a mapping")
    expires = status.get("expirationTimestamp")
    try:
        expires_at = datetime.fromisoformat(str(expires).replace("Z", "+00:00")).timestamp() if expires else None
    except ValueError:
        raise KubeconfigFieldError(field, f"the plugin's expirationTimestamp {expires!r} is no RFC 3339 time") from None
    token = status.get("token")
    pair = (f"{status['clientCertificateData']}\n{status['clientKeyData']}".encode()
            if status.get("clientCertificateData") and status.get("clientKeyData") else None)
    if not token and pair is None:
        raise KubeconfigFieldError(field, "the plugin gave neither a token nor a client certificate and key")
    return ExecCredential(token=str(token) if token else None, pair=pair, expires=str(expires) if expires else None,
                          expires_at=expires_at)


def present_exec_credential(configuration: Any, credential: ExecCredential, *, pair_file: Path, field: str,
                            own_token: bool, own_certificate: bool) -> None:
    """Send what an exec plugin gave from now on (its client certificate and key written to
    ``pair_file``, checked first), and nothing an earlier run gave instead, as client-go sends
    its last run's credentials: no token header where it gave none (unless the kubeconfig has
    its own: ``own_token``), no client certificate where it gave none (unless ``own_certificate``).
    The connections' pools see the certificate file named, or no longer named
    (_ClientPoolRotation, loop_http.TlsContext), and close those made before."""
    if credential.pair is not None:
        check_pair(credential.pair, folder=pair_file.parent, field=f"{field} (clientKeyData)")
        write_private(pair_file, credential.pair)
        configuration.cert_file, configuration.key_file = str(pair_file), None
    elif not own_certificate and configuration.cert_file == str(pair_file):
        configuration.cert_file = None
    if credential.token is not None:
        configuration.api_key["BearerToken"] = f"Bearer {credential.token}"
    elif not own_token:
        configuration.api_key.pop("BearerToken", None)


def _exec_cluster(cluster: dict[str, Any], *, base: Path) -> dict[str, Any]:
    """The cluster as an ExecCredential's ``spec.cluster`` describes it (client-go's
    clientauthentication Cluster): the kubeconfig's fields of the same names, the CA's content
    where the kubeconfig names a file, and the ``client.authentication.k8s.io/exec`` extension
    as ``config``."""
    described = {name: cluster[name] for name in (
        "server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority-data", "proxy-url", "disable-compression",
    ) if cluster.get(name) is not None}
    ca_file = cluster.get("certificate-authority")
    if "certificate-authority-data" not in described and isinstance(ca_file, str) and ca_file:
        try:
            described["certificate-authority-data"] = base64.b64encode((base / ca_file).read_bytes()).decode()
        except OSError:
            pass  # the client's loader read it at start: a file gone since is left out
    for extension in cluster.get("extensions") or ():
        if isinstance(extension, dict) and extension.get("name") == "client.authentication.k8s.io/exec":
            described["config"] = extension.get("extension")
    return described
