"""A kubeconfig as kubectl reads it: the files (``--kubeconfig`` or every file of
``KUBECONFIG``, merged as kubectl merges them), a context's cluster and user, the user's
credentials with every field checked (:class:`KubeconfigFieldError` names the one that does not
read), and the form the Kubernetes client loads, its refreshed ``auth-provider`` tokens written
back to the file that names the user, as client-go writes them.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import logging
import os
import ssl
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import msgspec
import yaml

from kubernetes import config as k8s_config


log = logging.getLogger(__name__)


def kubeconfig_files(explicit: str | None) -> tuple[Path, ...]:
    """The kubeconfig files to read, as kubectl picks them: ``explicit`` (``--kubeconfig``,
    ``cluster.kubeconfig``) is one file, never split; else the files ``KUBECONFIG`` lists
    (merged: :func:`merged_kubeconfig`); else ``~/.kube/config``."""
    if explicit:
        return (Path(explicit).expanduser(),)
    listed = [Path(name).expanduser() for name in os.environ.get("KUBECONFIG", "").split(os.pathsep) if name]
    return tuple(listed) or (Path.home() / ".kube" / "config",)
# Taken from the kubeconfig at start only (the connections' pool is built with them): a rewrite
# changing one is logged as needing a restart.
_CLUSTER_FIELDS_AT_START = ("server", "insecure-skip-tls-verify", "tls-server-name", "proxy-url", "certificate-authority")
_USER_FIELDS_AT_START = ("client-certificate", "client-key", "tokenFile", "username", "password")
# An auth-provider's token, by provider name: the field of its config holding the token sent
# (followed, as an embedded token is); and the fields its refresh rewrites (kubectl writes them
# back to the file after each refresh: no change a restart must take).
_AUTH_PROVIDER_TOKEN_FIELDS = {"oidc": "id-token", "gcp": "access-token"}
_AUTH_PROVIDER_REFRESHED_FIELDS = frozenset({"id-token", "access-token", "refresh-token", "expiry"})


class KubeconfigFieldError(Exception):
    """A kubeconfig field that cannot be used, named as ``users[name].user.field`` is."""

    def __init__(self, field: str, reason: str, *, file: Path | None = None) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
        self.file = file  # the one of several merged files it is in, where known


class UserCredentials(msgspec.Struct, frozen=True):
    """What cellfit follows of a kubeconfig's user and its cluster, read and decoded."""

    user: str  # the user's name, for the fields' names
    cluster_name: str
    auth_provider: bool  # the user's token comes from an auth-provider (renewed by the client's hook too)
    provider_token: str | None  # the auth-provider's token in the file (oidc's id-token, gcp's access-token)
    token: str | None
    client_pair: bytes | None  # the client certificate's PEM and its key's, in one file's bytes
    ca: bytes | None  # certificate-authority-data's PEM
    exec_plugin: dict[str, Any] | None
    cluster: dict[str, Any]  # the cluster's entry (an exec plugin may be given it)
    at_start: dict[str, Any]  # what only a restart takes (_CLUSTER_FIELDS_AT_START...), by field name
    # The files that set the user and the cluster (of several merged): their relative paths are
    # resolved against their folders, as client-go resolves them.
    user_file: str
    cluster_file: str
    token_file: str | None  # tokenFile, resolved


def _parsed_kubeconfig(path: Path) -> dict[str, Any]:
    """The kubeconfig at ``path``, parsed; raises :class:`KubeconfigFieldError` when it does not
    read or parse (half-written: the field is its line)."""
    try:
        document = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except OSError as error:
        raise KubeconfigFieldError("(the file)", f"unreadable: {error}") from None
    except UnicodeDecodeError as error:  # not an OSError: it escaped the follower's reread
        raise KubeconfigFieldError("(the file)", f"unreadable: not UTF-8 (byte {error.start:,})") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"(line {mark.line + 1})" if mark is not None else "(the file)"
        said = ", ".join(str(part) for part in (getattr(error, "context", None), getattr(error, "problem", None)) if part)
        raise KubeconfigFieldError(where, f"does not parse as YAML: {said or error}") from None
    if not isinstance(document, dict):
        top = "it is empty" if document is None else f"its top level is a {type(document).__name__}, not a mapping"
        raise KubeconfigFieldError("(the file)", f"not a kubeconfig: {top}")
    return document


_SECTIONS = ("clusters", "contexts", "users")


class MergedKubeconfig(msgspec.Struct, frozen=True):
    """Kubeconfig files merged (:func:`merged_kubeconfig`)."""

    document: dict[str, Any]  # clusters, contexts and users as plain entries; the current-context
    loadable: Any  # the same for the Kubernetes client's loader: its ConfigNode, each entry knowing its file
    origins: dict[tuple[str, str], Path]  # (section, name): the file that set the entry


def merged_kubeconfig(files: tuple[Path, ...]) -> MergedKubeconfig:
    """The kubeconfig ``files`` merged as kubectl and client-go merge a ``KUBECONFIG`` list,
    with the Kubernetes client's merger (as the kubectl plugin's open_session): files that do
    not exist are skipped; a cluster, context or user comes from the first file that names it;
    relative paths are resolved against the file that names them; the current-context is the
    first file's that sets one (the client's merger keeps the last). Raises
    :class:`KubeconfigFieldError` naming the file that does not read or parse."""
    present = [file for file in files if file.is_file()]
    if not present:
        raise KubeconfigFieldError("(the files)", "none of them exists")
    current = None
    for file in present:
        try:
            document = _parsed_kubeconfig(file)  # each one: a broken file is named
        except KubeconfigFieldError as error:
            raise KubeconfigFieldError(error.field, error.reason, file=file) from None
        current = current or document.get("current-context") or None
    try:
        loadable = k8s_config.kube_config.KubeConfigMerger(os.pathsep.join(map(str, present))).config  # type: ignore[no-untyped-call]  # unannotated
        document = {"current-context": current}
        origins: dict[tuple[str, str], Path] = {}
        for section in _SECTIONS:
            document[section] = [node.value for node in loadable.value[section]]
            origins |= {(section, str(node.value.get("name"))): Path(node.path) for node in loadable.value[section]}
        for node in loadable.value["users"]:
            # The client's loader resolves these against the cluster's file; client-go, as the
            # rest, against the file that names them (the user's). Absolute: a KUBECONFIG entry
            # may be relative to the working folder, and the loader joins them to the cluster's.
            user = node.value.get("user")
            for field in ("client-certificate", "client-key"):
                if isinstance(user, dict) and isinstance(user.get(field), str) and user[field]:
                    user[field] = str(Path(node.path).absolute().parent / user[field])
    except (k8s_config.ConfigException, OSError, yaml.YAMLError, TypeError, KeyError, AttributeError) as error:
        raise KubeconfigFieldError("(the files)", f"do not merge: {error}") from None
    return MergedKubeconfig(document=document, loadable=loadable, origins=origins)


def user_credentials(merged: MergedKubeconfig, *, context: str) -> UserCredentials:
    """The credentials of ``context``'s user in merged kubeconfig files; raises
    :class:`KubeconfigFieldError` naming the field that is missing or does not decode."""
    document = merged.document
    entry = _named(document, "contexts", context, inner="context")
    user_name, cluster_name = entry.get("user"), entry.get("cluster")
    user = _named(document, "users", user_name, inner="user") if user_name else {}
    cluster = _named(document, "clusters", cluster_name, inner="cluster")
    prefix = f"users[{user_name}].user"
    certificate = _base64_field(user, "client-certificate-data", prefix=prefix)
    key = _base64_field(user, "client-key-data", prefix=prefix)
    if (certificate is None) != (key is None):
        absent = "client-key-data" if key is None else "client-certificate-data"
        raise KubeconfigFieldError(f"{prefix}.{absent}", "missing: the client certificate and its key come together")
    token = user.get("token")
    if token is not None and (not isinstance(token, str) or not token.strip()):
        raise KubeconfigFieldError(f"{prefix}.token", "not a token: empty or not a string")
    exec_plugin = None if static_credentials(user) else user.get("exec")
    if exec_plugin is not None and not (isinstance(exec_plugin, dict) and exec_plugin.get("command")):
        raise KubeconfigFieldError(f"{prefix}.exec", "no command to run")
    ca = _base64_field(cluster, "certificate-authority-data", prefix=f"clusters[{cluster_name}].cluster")
    at_start = {f"contexts[{context}].context.{name}": entry.get(name) for name in ("user", "cluster")}
    at_start |= {f"clusters[{cluster_name}].cluster.{name}": cluster.get(name) for name in _CLUSTER_FIELDS_AT_START}
    at_start |= {f"{prefix}.{name}": user.get(name) for name in _USER_FIELDS_AT_START}
    at_start[f"{prefix}.auth-provider"] = _auth_provider_at_start(user.get("auth-provider"))
    at_start |= {f"{prefix}.{name} (present)": present for name, present in (
        ("token", token is not None), ("client-certificate-data", certificate is not None), ("exec", exec_plugin is not None),
    )} | {f"clusters[{cluster_name}].cluster.certificate-authority-data (present)": ca is not None}
    context_file = merged.origins[("contexts", context)]
    user_file = merged.origins.get(("users", str(user_name)), context_file)
    token_file = user.get("tokenFile")
    return UserCredentials(
        user=str(user_name), cluster_name=str(cluster_name), auth_provider="auth-provider" in user,
        provider_token=_auth_provider_token(user.get("auth-provider")),
        token=token.strip() if token else None,
        client_pair=certificate + b"\n" + key if certificate is not None and key is not None else None,
        ca=ca, exec_plugin=exec_plugin, cluster=cluster, at_start=at_start,
        user_file=str(user_file), cluster_file=str(merged.origins.get(("clusters", str(cluster_name)), context_file)),
        token_file=str(user_file.parent / token_file) if isinstance(token_file, str) and token_file else None,
    )


def static_credentials(user: dict[str, Any]) -> bool:
    """Whether a kubeconfig user has credentials of its own beside any exec plugin (a token or
    token file, a client certificate, a username): client-go then never runs the plugin
    (exec.Authenticator.UpdateTransportConfig), and neither does cellfit."""
    return any(user.get(name) for name in (
        "token", "tokenFile", "client-certificate", "client-certificate-data", "username"))


def _auth_provider_token(provider: Any) -> str | None:
    """The token an auth-provider entry holds (oidc's id-token, gcp's access-token); None for
    another provider or none yet."""
    if not isinstance(provider, dict) or not isinstance(provider.get("config"), dict):
        return None
    token = provider["config"].get(_AUTH_PROVIDER_TOKEN_FIELDS.get(str(provider.get("name")), ""))
    return token.strip() if isinstance(token, str) and token.strip() else None


def _auth_provider_at_start(provider: Any) -> Any:
    """An auth-provider entry without what its refresh rewrites: what only a restart takes."""
    if not isinstance(provider, dict) or not isinstance(provider.get("config"), dict):
        return provider
    config = {name: value for name, value in provider["config"].items() if name not in _AUTH_PROVIDER_REFRESHED_FIELDS}
    return provider | {"config": config}


def _named(document: dict[str, Any], section: str, name: Any, *, inner: str) -> dict[str, Any]:
    """The ``inner`` mapping of the entry of ``section`` called ``name``."""
    for entry in document.get(section) or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            found = entry.get(inner)
            if not isinstance(found, dict):
                raise KubeconfigFieldError(f"{section}[{name}].{inner}", "missing or not a mapping")
            return found
    raise KubeconfigFieldError(f"{section}[{name}]", "no such entry")


def _base64_field(mapping: dict[str, Any], name: str, *, prefix: str) -> bytes | None:
    value = mapping.get(name)
    if value is None:
        return None
    try:
        decoded = base64.b64decode("".join(str(value).split()), validate=True)  # line breaks ignored, as Go's decoder does
    except (binascii.Error, ValueError) as error:
        raise KubeconfigFieldError(f"{prefix}.{name}", f"not base64: {error}") from None
    if b"-----BEGIN" not in decoded:
        raise KubeconfigFieldError(f"{prefix}.{name}", "no PEM inside")
    return decoded


def context_entry(merged: MergedKubeconfig, *, context: str) -> dict[str, Any] | None:
    """The ``context`` mapping of the context called ``context``; None when there is none."""
    entry = next((item.get("context") for item in merged.document.get("contexts") or ()
                  if isinstance(item, dict) and item.get("name") == context), None)
    return entry if isinstance(entry, dict) else None


def _context_user(merged: MergedKubeconfig, *, context: str) -> str:
    entry = context_entry(merged, context=context)
    return str(entry.get("user")) if entry is not None else ""


def loadable_without_exec(merged: MergedKubeconfig, *, context: str) -> Any:
    """The merged files for the Kubernetes client's loader, the exec plugin of ``context``'s user
    left out: run by :func:`run_exec_plugin` instead, or not at all beside credentials of the
    user's own (the loader's runner ran it in the cluster's file's folder, handed it a terminal
    whenever standard output was one, logged its failure and went on, and ran it beside a client
    certificate)."""
    user = _context_user(merged, context=context)
    loadable = copy.deepcopy(merged.loadable)
    for node in loadable.value["users"]:
        entry = node.value
        if isinstance(entry, dict) and isinstance(entry.get("user"), dict) and entry.get("name") == user:
            entry["user"].pop("exec", None)
    return loadable


def auth_provider_persister(merged: MergedKubeconfig, loadable: Any, *, context: str) -> AuthProviderWriteBack:
    """The Kubernetes client loader's ``config_persister`` for ``loadable`` (``merged``'s, as
    handed to the loader, before it loads) at ``context``: an auth-provider's config the loader
    refreshed (gcp's access-token and expiry, oidc's id-token and refresh-token) written back to
    the file that names the user, as kubectl writes it back (a refresh-token is used once: one
    not written back is spent, and the next run's refresh fails). Only the keys the loader
    changed are written, and none over a user entry another writer (kubectl, a login tool) has
    rewritten since: its tokens are newer (:class:`AuthProviderWriteBack`; its ``reread`` gives the
    loader that writer's tokens once the files are read again)."""
    user = _context_user(merged, context=context)
    file = merged.origins.get(("users", user))
    return AuthProviderWriteBack(loadable, user=user, file=file, loaded=_user_entry(merged.document.get("users"), user))


# kubectl's lock on a kubeconfig it writes (client-go's lockFile: ``<file>.lock``, created
# exclusively, removed after): waited for this long, polled, before the write is given up.
KUBECONFIG_LOCK_WAIT_SECONDS = 2.0
_LOCK_POLL_SECONDS = 0.05


def _user_entry(users: Any, user: str) -> dict[str, Any] | None:
    """The first entry of ``users`` (a kubeconfig's, or the merge's) called ``user`` (the one the
    merge takes); None when there is none."""
    return next((item for item in users or () if isinstance(item, dict) and item.get("name") == user), None)


def _auth_provider_config(entry: Any) -> dict[str, Any] | None:
    user = entry.get("user") if isinstance(entry, dict) else None
    provider = user.get("auth-provider") if isinstance(user, dict) else None
    config = provider.get("config") if isinstance(provider, dict) else None
    return config if isinstance(config, dict) else None


def _without_refreshed(entry: dict[str, Any]) -> dict[str, Any]:
    """A user ``entry`` without the fields of its auth-provider config a refresh rewrites."""
    entry = copy.deepcopy(entry)
    config = _auth_provider_config(entry)
    if config is not None:
        for name in _AUTH_PROVIDER_REFRESHED_FIELDS:
            config.pop(name, None)
    return entry


def _as_merged(entry: dict[str, Any], file: Path) -> dict[str, Any]:
    """A user ``entry`` of ``file`` as :func:`merged_kubeconfig` holds it (its client
    certificate's and key's paths made absolute against the file's folder)."""
    entry = copy.deepcopy(entry)
    user = entry.get("user")
    for field in ("client-certificate", "client-key"):
        if isinstance(user, dict) and isinstance(user.get(field), str) and user[field]:
            user[field] = str(file.absolute().parent / user[field])
    return entry


class AuthProviderWriteBack:
    """:func:`auth_provider_persister`'s persister: ``user``'s auth-provider config as the
    loader's ``loadable`` holds it, written into ``file``; raises KubeconfigFieldError naming the
    field when the file cannot take it (``<file>.lock`` held past KUBECONFIG_LOCK_WAIT_SECONDS
    among the reasons).

    It writes only the keys the loader changed since the config was loaded (or last written
    back), the rest of the file as it is there now; and nothing when the file's user entry is no
    longer the one loaded (or last written): another writer (kubectl, kubelogin) has rewritten
    it since, with tokens newer than the loader's (a spent refresh-token written back over the
    fresh one would fail the next refresh). The file is written under kubectl's lock, through a
    temporary file of its own, its permissions kept (:func:`_replace_keeping_mode`).

    Such a rewrite is taken once the files are read again (:meth:`reread`): the loader then
    refreshes from the rewriter's tokens, and writes back over them."""

    def __init__(self, loadable: Any, *, user: str, file: Path | None, loaded: dict[str, Any] | None) -> None:
        self._loadable = loadable
        self._user = user
        self._file = file
        self._entry = copy.deepcopy(loaded)  # the file's user entry as loaded or last written, as merged
        self._lock = threading.Lock()  # one write back at a time in this process

    def __call__(self) -> None:
        with self._lock:  # the loader refreshes from any thread
            self._write_back()

    def reread(self, merged: MergedKubeconfig) -> None:
        """The kubeconfig files as read again and merged (the credentials' follower reads them
        when one is rewritten): the tokens another writer (kubectl, a login tool) refreshed into
        the user's auth-provider config become the loader's, in the config it refreshes from
        (its next refresh uses the file's refresh-token, not one that writer spent, and a valid
        token there is not renewed), and the entry the next write back expects. Nothing is
        taken from a rewrite of another field (the follower logs it as a restart's): the
        loader keeps its config, and the write back stays refused."""
        with self._lock:
            entry = _user_entry(merged.document.get("users"), self._user)
            theirs = _auth_provider_config(entry)
            ours = self._loaded_config()
            if entry is None or theirs is None or ours is None or self._entry is None:
                return
            # The user's entry as the loader read or last wrote it: another user's rewrite, or a
            # re-read racing the loader's own refresh (before its write back, or after a write
            # back refused on a read-only file), holds tokens older than the loader's, already
            # spent for an oidc refresh-token.
            if entry == self._entry:
                return
            if _without_refreshed(entry) != _without_refreshed(self._entry):
                return
            for name in _AUTH_PROVIDER_REFRESHED_FIELDS:
                # In place: the loader's user node holds this very mapping.
                if name in theirs:
                    ours[name] = copy.deepcopy(theirs[name])
                else:
                    ours.pop(name, None)
            self._entry = copy.deepcopy(entry)

    def _loaded_config(self) -> dict[str, Any] | None:
        """The user's auth-provider config as the loader holds it (and refreshes it)."""
        return _auth_provider_config(_user_entry((node.value for node in self._loadable.value["users"]), self._user))

    def _write_back(self) -> None:
        field = f"users[{self._user}].user.auth-provider.config"
        file = self._file
        config = self._loaded_config()
        before = _auth_provider_config(self._entry)
        if file is None or config is None or before is None:
            return
        changed = {name: value for name, value in config.items() if before.get(name) != value}
        removed = [name for name in before if name not in config]
        if not changed and not removed:
            return
        try:
            with _kubeconfig_lock(file):
                document = _parsed_kubeconfig(file)
                entry = _user_entry(document.get("users"), self._user)
                if entry is None or _as_merged(entry, file) != self._entry:
                    log.info("the auth-provider's refreshed token is not written back to the kubeconfig: its user was "
                             "rewritten since it was read (by kubectl or a login tool), and its tokens are newer",
                             extra={"file": str(file), "field": field, "changed": sorted(changed)})
                    return
                written = _auth_provider_config(entry)
                assert written is not None  # as self._entry's
                written.update(copy.deepcopy(changed))
                for name in removed:
                    written.pop(name, None)
                _replace_keeping_mode(file, yaml.safe_dump(document, default_flow_style=False).encode())
                self._entry = _as_merged(entry, file)
        except (KubeconfigFieldError, OSError) as error:
            reason = error.reason if isinstance(error, KubeconfigFieldError) else str(error)
            raise KubeconfigFieldError(field, f"the refreshed token could not be written back: {reason}", file=file) from None


@contextlib.contextmanager
def _kubeconfig_lock(file: Path) -> Iterator[None]:
    """kubectl's lock on ``file`` held (client-go's lockFile: ``<file>.lock``, created
    exclusively, removed after), waited for up to KUBECONFIG_LOCK_WAIT_SECONDS; raises
    KubeconfigFieldError when it stays held."""
    lock = file.with_name(file.name + ".lock")
    deadline = time.monotonic() + KUBECONFIG_LOCK_WAIT_SECONDS
    while True:
        try:
            os.close(os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            break
        except FileExistsError:
            if time.monotonic() >= deadline:
                raise KubeconfigFieldError("(the file)", f"{lock} is held by another writer (kubectl?) past "
                                           f"{KUBECONFIG_LOCK_WAIT_SECONDS:g}s; remove it if none is running") from None
            time.sleep(_LOCK_POLL_SECONDS)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def persist_or_warn(persist: Callable[[], None]) -> None:
    """``persist`` (:func:`auth_provider_persister`'s), a failure warned of: the refreshed token is
    sent all the same (a kubeconfig mounted read-only from a Secret cannot take it)."""
    try:
        persist()
    except KubeconfigFieldError as error:
        log.warning("the auth-provider's refreshed token could not be written back to the kubeconfig; it is sent, but "
                    "the file keeps the old one (and a refresh-token already spent)",
                    extra={"file": str(error.file), "field": error.field, "reason": error.reason})


def _replace_keeping_mode(path: Path, content: bytes) -> None:
    """``content`` as ``path``, replaced whole (a reader sees the old file or the new one),
    through a temporary file of its own in the same folder (two writers never share one), its
    permissions kept; a symbolic link's target replaced, the link kept (~/.kube/config linked
    to a shared file)."""
    target = path.resolve()
    descriptor, fresh = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".cellfit-new")
    try:
        with os.fdopen(descriptor, "wb") as file:
            os.fchmod(file.fileno(), target.stat().st_mode & 0o777)
            file.write(content)
        os.replace(fresh, target)
    except BaseException:
        Path(fresh).unlink(missing_ok=True)
        raise


def check_pair(pair: bytes, *, folder: Path, field: str) -> None:
    """Raises :class:`KubeconfigFieldError` unless ``pair`` is a certificate with its own key
    (one file's content)."""
    trial = folder / "client.pem.check"
    write_private(trial, pair)
    try:
        ssl.create_default_context().load_cert_chain(str(trial))
    except (ssl.SSLError, OSError) as error:
        raise KubeconfigFieldError(field, f"the client certificate and key do not load together: {error}") from None
    finally:
        trial.unlink(missing_ok=True)


def check_ca(ca: bytes, *, field: str) -> None:
    try:
        ssl.create_default_context(cadata=ca.decode("ascii", errors="replace"))
    except (ssl.SSLError, ValueError) as error:
        raise KubeconfigFieldError(field, f"no CA certificate loads from it: {error}") from None


def write_private(path: Path, content: bytes) -> None:
    """``content`` as ``path``, replaced whole (a reader sees the old file or the new one),
    readable by this user alone."""
    fresh = path.with_name(path.name + ".new")
    descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)
    os.replace(fresh, path)
