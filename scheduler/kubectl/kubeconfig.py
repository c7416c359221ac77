"""Which cluster, user and namespace: the kubeconfig read as kubectl reads it.

``--kubeconfig`` (one file) wins; else ``KUBECONFIG`` (a list of files, merged as kubectl
merges them: scheduler/cluster/api.py's merged_kubeconfig, as ``cellfit serve``'s); else
``~/.kube/config``; else, inside a pod, its ServiceAccount. ``--context`` picks another
context than the current one; ``-n`` another namespace than the context's (else ``default``).
A user's ``exec`` plugin is run as kubectl runs it (as ``cellfit serve`` runs it, with the
terminal: scheduler/cluster/api.py's run_exec_plugin).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as kube_config
from kubernetes.config.config_exception import ConfigException

from scheduler.cluster.exec_plugin import ExecPlugin, exec_plugin_of, present_exec_credential, run_exec_plugin
from scheduler.cluster.kubeconfig import (
    KubeconfigFieldError,
    auth_provider_persister,
    kubeconfig_files,
    loadable_without_exec,
    merged_kubeconfig,
)
from scheduler.kubectl.errors import PluginError

IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True, kw_only=True)
class Session:
    client: k8s.ApiClient
    namespace: str
    # Where it came from, for messages: "context kind-ml of /home/u/.kube/config".
    source: str
    server: str


def open_session(*, kubeconfig: str | None, context: str | None, namespace: str | None) -> Session:
    files = kubeconfig_files(kubeconfig)
    present = tuple(file for file in files if file.is_file())
    configuration = k8s.Configuration()
    if not present:
        if kubeconfig:
            raise PluginError(f"--kubeconfig {kubeconfig}: no such file")
        if os.environ.get("KUBERNETES_SERVICE_HOST") and context is None:
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]  # unannotated
            own = IN_CLUSTER_NAMESPACE.read_text().strip() if IN_CLUSTER_NAMESPACE.is_file() else "default"
            return Session(client=k8s.ApiClient(configuration), namespace=namespace or own, source="in-cluster ServiceAccount",
                           server=configuration.host)
        raise PluginError(f"no kubeconfig: {os.pathsep.join(map(str, files))} does not exist (set KUBECONFIG or pass --kubeconfig)")
    merged = os.pathsep.join(map(str, present))
    try:
        kubeconfigs = merged_kubeconfig(present)
    except KubeconfigFieldError as error:
        # "(the file)" and "(the files)" say nothing the file's name does not.
        said = error.reason if error.field.startswith("(the file") else str(error)
        raise PluginError(f"kubeconfig {error.file or merged}: {said}") from None
    contexts = kubeconfigs.document["contexts"]
    wanted = context or kubeconfigs.document["current-context"]
    chosen = next((c for c in contexts if c.get("name") == wanted), None)
    if chosen is None and context is None:
        raise PluginError(f"kubeconfig {merged}: no current context (kubectl config use-context NAME, or --context)")
    if chosen is None:
        names = ", ".join(sorted(str(c.get("name")) for c in contexts)) or "none"
        raise PluginError(f"--context {context}: no such context in {merged} (it has: {names})")
    try:
        plugin = exec_plugin_of(kubeconfigs, context=chosen["name"])
        loadable = loadable_without_exec(kubeconfigs, context=chosen["name"])
        # No base path: each entry's relative paths against its own file's folder. An
        # auth-provider's token the loader refreshes is written back, as kubectl writes it.
        kube_config.kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]  # kubernetes.config is unannotated
            config_dict=loadable, active_context=chosen["name"], config_base_path=None,
            config_persister=auth_provider_persister(kubeconfigs, loadable, context=chosen["name"]),
        ).load_and_set(configuration)
        if plugin is not None:
            _run_exec_plugin(configuration, plugin)
    except (KubeconfigFieldError, ConfigException, OSError, ValueError) as error:
        raise PluginError(f"kubeconfig {merged}: {error}") from None
    own = (chosen.get("context") or {}).get("namespace") or "default"
    return Session(
        client=k8s.ApiClient(configuration),
        namespace=namespace or own,
        source=f"context {chosen['name']} of {merged}",
        server=configuration.host,
    )


def _run_exec_plugin(configuration: k8s.Configuration, plugin: ExecPlugin) -> None:
    """The user's exec plugin run as kubectl runs it (scheduler/cluster/api.py's run_exec_plugin,
    as ``cellfit serve``'s, with the terminal: a login may prompt on it), its credentials sent;
    raises KubeconfigFieldError."""
    credential = run_exec_plugin(plugin, terminal=True)
    folder = Path(tempfile.mkdtemp(prefix="kubectl-cellfit-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    present_exec_credential(configuration, credential, pair_file=folder / "client.pem", field=plugin.field,
                            own_token=bool(configuration.api_key.get("BearerToken")), own_certificate=bool(configuration.cert_file))
