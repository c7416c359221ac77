"""Which cluster, user and namespace: the kubeconfig read as kubectl reads it.

``--kubeconfig`` wins; else ``KUBECONFIG`` (a list of files, merged, first one wins per key);
else ``~/.kube/config``; else, inside a pod, its ServiceAccount. ``--context`` picks another
context than the current one; ``-n`` another namespace than the context's (else ``default``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes import config as kube_config
from kubernetes.config.config_exception import ConfigException

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
    files = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    present = [f for f in files.split(os.pathsep) if f and Path(f).expanduser().is_file()]
    configuration = k8s.Configuration()
    if not present:
        if kubeconfig:
            raise PluginError(f"--kubeconfig {kubeconfig}: no such file")
        if os.environ.get("KUBERNETES_SERVICE_HOST") and context is None:
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]  # unannotated
            own = IN_CLUSTER_NAMESPACE.read_text().strip() if IN_CLUSTER_NAMESPACE.is_file() else "default"
            return Session(client=k8s.ApiClient(configuration), namespace=namespace or own, source="in-cluster ServiceAccount",
                           server=configuration.host)
        raise PluginError(f"no kubeconfig: {files} does not exist (set KUBECONFIG or pass --kubeconfig)")
    merged = os.pathsep.join(present)
    documents = [_document(name) for name in present]
    try:
        contexts, _ = kube_config.list_kube_config_contexts(config_file=merged)  # type: ignore[no-untyped-call]  # unannotated
        wanted = context or _first_current_context(documents)
        chosen = next((c for c in contexts if c.get("name") == wanted), None)
        if chosen is None and context is None:
            raise PluginError(f"kubeconfig {merged}: no current context (kubectl config use-context NAME, or --context)")
        if chosen is None:
            names = ", ".join(sorted(str(c.get("name")) for c in contexts)) or "none"
            raise PluginError(f"--context {context}: no such context in {merged} (it has: {names})")
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]  # kubernetes.config is unannotated
            config_file=merged, context=chosen["name"], client_configuration=configuration
        )
    except (ConfigException, yaml.YAMLError) as error:
        raise PluginError(f"kubeconfig {merged}: {error}") from None
    own = (chosen.get("context") or {}).get("namespace") or "default"
    return Session(
        client=k8s.ApiClient(configuration),
        namespace=namespace or own,
        source=f"context {chosen['name']} of {merged}",
        server=configuration.host,
    )


def _document(name: str) -> dict[str, object]:
    """One kubeconfig file, read as kubectl would before merging: one that is not a YAML mapping
    is named, not handed to the client's merger (which fails with a TypeError on it)."""
    path = Path(name).expanduser()
    try:
        document = yaml.safe_load(path.read_bytes().decode("utf-8")) or {}
    except OSError as error:
        raise PluginError(f"kubeconfig {name}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise PluginError(f"kubeconfig {name}: cannot read: not UTF-8 (byte {error.start:,})") from None
    except yaml.YAMLError as error:
        raise PluginError(f"kubeconfig {name}: {error}") from None
    if not isinstance(document, dict):
        raise PluginError(f"kubeconfig {name}: not a kubeconfig: its top level is a {type(document).__name__}, not a mapping")
    return document


def _first_current_context(documents: list[dict[str, object]]) -> str | None:
    """kubectl's merge rule: the first file that sets current-context wins (the Python
    client's merger lets the last one win)."""
    for document in documents:
        if document.get("current-context"):
            return str(document["current-context"])
    return None
