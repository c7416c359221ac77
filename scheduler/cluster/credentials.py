"""Credentials followed under a running ``cellfit serve``, which the Kubernetes client reads
once: token files (:class:`TokenFileRefresh`), a kubeconfig rewritten in place (token, client
certificate and key, CA, an ``auth-provider``'s token) and an ``exec`` plugin run again before
its credential expires and after a 401 (:class:`KubeconfigCredentials`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Literal


from kubernetes import client as k8s
from kubernetes import config as k8s_config

from scheduler.cluster import exec_plugin
from scheduler.cluster.exec_plugin import ExecCredential, ExecPlugin, present_exec_credential, run_exec_plugin
from scheduler.cluster.file_stamps import FileStamp, file_stamps
from scheduler.cluster.private_folder import private_folder, remove
from scheduler.cluster.kubeconfig import (
    AuthProviderWriteBack, KubeconfigFieldError, MergedKubeconfig, UserCredentials, auth_provider_persister, check_ca, check_pair, loadable_without_exec,
    merged_kubeconfig, persist_or_warn, user_credentials, write_private,
)
from scheduler.errors import ConfigError

log = logging.getLogger(__name__)


class TokenFileRefresh:
    """The refresh hook of a token read from a file (a kubeconfig user's ``tokenFile``, the
    service account's in a pod): the file read again whenever it changed (a rotated projected
    token, a replaced Secret), its content trimmed, as client-go does. The Kubernetes client
    reads a kubeconfig's once, at load, and the in-cluster one at most once a minute. A file
    that cannot be read keeps the last token (a rotation replacing it)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._seen: tuple[int, int, int] | None = None

    def __call__(self, configuration: k8s.Configuration) -> None:
        try:
            stat = self._path.stat()
            changed = (stat.st_ino, stat.st_mtime_ns, stat.st_size) != self._seen
            token = self._path.read_text().strip() if changed else None
        except OSError as error:
            log.warning("the kubeconfig's token file could not be read; the last token is sent", extra={"reason": str(error)})
            return
        if token:
            configuration.api_key["BearerToken"] = f"Bearer {token}"
            self._seen = (stat.st_ino, stat.st_mtime_ns, stat.st_size)


class _AuthProviderToken:
    """The refresh hook of an ``auth-provider`` user's token (oidc's id-token, gcp's
    access-token): the token the Kubernetes client's own hook gives (it renews an expired gcp
    token), and over it the token the kubeconfig was last rewritten with (kubectl, or the
    provider's login tool, writes a refreshed token back to the file), until the client's hook
    renews its own: the newer of the two is sent. The client loaded the file once: a token
    refreshed into it was never sent."""

    def __init__(self, client_hook: Callable[[Any], None] | None, *, loaded: str | None) -> None:
        """``loaded``: the header's value the client's loader set."""
        self._client_hook = client_hook
        self._client_gave = loaded  # the token the client's hook gave last
        self._sent = loaded  # the newer of the client's and the file's

    def __call__(self, configuration: Any) -> None:
        if self._client_hook is not None:
            # Only its token is taken: the hook sets every field it loaded (the server, the
            # certificate files...) back on what it is given, over the follower's own files.
            given = SimpleNamespace(api_key={})
            self._client_hook(given)
            if given.api_key.get("BearerToken") not in (None, self._client_gave):  # renewed: the newer
                self._client_gave = self._sent = given.api_key["BearerToken"]
        if self._sent is not None:
            configuration.api_key["BearerToken"] = self._sent

    def rewritten(self, configuration: Any, token: str) -> None:
        """The kubeconfig was rewritten with ``token`` (the header's value): sent from now on."""
        self._sent = token
        configuration.api_key["BearerToken"] = token


# ------------------------------------------------------------------ a kubeconfig's credentials, followed

# An exec plugin's credentials are obtained again this long before their expirationTimestamp
# (they are read at most every loop_http.CREDENTIALS_REFRESH_SECONDS: well inside it).
EXEC_REFRESH_AHEAD_SECONDS = 60.0
# A plugin run because the API server refused what the last run gave (HTTP 401) is not run for
# that again sooner than this: a server refusing every credential would have it run per request.
EXEC_REFUSED_RERUN_SECONDS = 10.0


class KubeconfigCredentials:
    """The credentials of a kubeconfig's user, followed while cellfit runs (``follow`` of
    loop_http.Credentials: looked at every ``CREDENTIALS_REFRESH_SECONDS``, and at once after an
    HTTP 401):

    - embedded ones (``token``, ``client-certificate-data`` and ``client-key-data``, the
      cluster's ``certificate-authority-data``), read again when the file is rewritten
      (credential rotation): the token is sent from then on, the certificate, its key (one
      file: they change together) and the CA are written to files of cellfit's own, which new
      connections read (urllib3's for each, the event loop's as loop_http.TlsContext follows
      them). A rewrite that does not read (half-written, a field that does not decode, a key not
      the certificate's) keeps the last good ones, with a warning naming the file and the field;
      a field only a restart takes (the server, a file's path...) is logged as such, and so is a
      ``current-context`` that names another context than the one followed (warned once per
      change; cellfit never moves to another cluster or user while it runs);
    - an ``exec`` plugin's (a token, or a client certificate and key), obtained again when they
      expire (``expirationTimestamp``) and when the API server refused them (HTTP 401), as
      client-go does, and in a thread of its own from EXEC_REFRESH_AHEAD_SECONDS before they
      expire (a plugin may take a second: the requests, the event loop's among them, go on with
      the current ones meanwhile); never on the event loop (expired ones found there are
      obtained in that thread too, and a 401's refresh is run off the loop); killed after
      EXEC_PLUGIN_TIMEOUT_SECONDS; a run that fails keeps the last ones, with a warning;
    - an ``auth-provider``'s token (oidc's ``config.id-token``, gcp's ``config.access-token``),
      which kubectl or a login tool refreshes into the file, followed as an embedded token is,
      beside the client's own renewal of an expired gcp token (:class:`_AuthProviderToken`);
      a token the client's loader refreshes is written back to the file that names the user, as
      client-go writes it back (:func:`auth_provider_persister`; a file that cannot take it is
      warned of), and the tokens another writer refreshed into the file are the loader's once
      read (it refreshes from them, and writes back over them).

    ``tokenFile`` is followed by :class:`TokenFileRefresh`, files named by path by their readers.

    A ``KUBECONFIG`` of several files is merged as kubectl merges it (:func:`merged_kubeconfig`),
    and every file it lists is watched: a rewrite of any of them (one absent at start written)
    is read as the merge of them all."""

    def __init__(self, *, files: tuple[Path, ...], context: str, read: UserCredentials, folder: Path,
                 stamp: tuple[FileStamp, ...], context_is_current: bool = False, clock: Callable[[], float] = time.time,
                 write_back: AuthProviderWriteBack | None = None) -> None:
        """``read``: the kubeconfig ``files`` as they were read when their stamp was ``stamp``;
        ``context_is_current``: ``context`` is the files' current-context (none was named);
        ``write_back``: the client's loader's persister, told of each rewrite read."""
        self._write_back = write_back
        self._files = files
        self._context = context
        # The current-context the files name, last seen; None: a context was named (cluster.context).
        self._current_context: str | None = context if context_is_current else None
        self._folder = folder
        self._clock = clock
        self._read = read  # the last good read
        self._stamp = stamp
        self._expires_at: float | None = None  # the exec plugin's credentials'
        self._exec_ran_at: float | None = None
        self._refused_run = False  # the last plugin run was for a refusal
        self._ahead: threading.Thread | None = None  # the plugin's run before its credentials expire
        self.pair_file = folder / "client.pem"
        self.ca_file = folder / "ca.crt"
        self._configuration: Any = None
        self._provider_token: _AuthProviderToken | None = None  # an auth-provider user's
        self._lock = threading.Lock()

    @classmethod
    def load(cls, configuration: Any, *, files: tuple[Path, ...], context: str | None) -> KubeconfigCredentials | None:
        """Load the kubeconfig's cluster and user into ``configuration`` (the Kubernetes client's
        loader; an exec plugin run here), its embedded credentials pointed at files of cellfit's
        own; the follower of them. ``files``: one, or a ``KUBECONFIG`` list, merged. Raises ConfigError naming a
        field that does not load."""
        named_as = os.pathsep.join(map(str, files))
        stamp = file_stamps(list(map(str, files)))  # before the read: a rewrite meanwhile is read again
        try:
            merged = merged_kubeconfig(files)
            name = context or merged.document.get("current-context")
            if not name:
                raise KubeconfigFieldError("current-context", "none, and no cluster.context names one")
            read = user_credentials(merged, context=str(name))
        except KubeconfigFieldError as error:
            raise ConfigError(f"cluster.kubeconfig: {error.file or named_as}: {error}") from None
        folder = private_folder()
        try:
            return cls._load_into(configuration, files=files, context=context, name=str(name), merged=merged, read=read,
                                  stamp=stamp, folder=folder)
        except BaseException:
            remove(folder)  # a refused kubeconfig leaves none of its credentials behind
            raise

    @classmethod
    def _load_into(
        cls, configuration: Any, *, files: tuple[Path, ...], context: str | None, name: str, merged: MergedKubeconfig,
        read: UserCredentials, stamp: tuple[FileStamp, ...], folder: Path,
    ) -> KubeconfigCredentials:
        named_as = os.pathsep.join(map(str, files))
        loadable = loadable_without_exec(merged, context=name)
        write_back = auth_provider_persister(merged, loadable, context=name)
        persist = functools.partial(persist_or_warn, write_back)
        try:
            # No base path: each entry's relative paths against its own file's folder. An
            # auth-provider's token the loader refreshes is written back, as client-go writes it.
            k8s_config.kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]  # unannotated
                config_dict=loadable, active_context=name, config_base_path=None, temp_file_path=str(folder),
                config_persister=persist,
            ).load_and_set(configuration)
        except (k8s_config.ConfigException, OSError, ValueError) as error:
            raise ConfigError(f"cluster.kubeconfig: {named_as} is unusable: {error}") from None
        follower = cls(files=files, context=name, read=read, folder=folder, stamp=stamp, context_is_current=not context,
                       write_back=write_back)
        try:
            follower._adopt(configuration)
        except KubeconfigFieldError as error:
            raise ConfigError(f"cluster.kubeconfig: {error.file or named_as}: {error}") from None
        return follower

    def _adopt(self, configuration: Any) -> None:
        """Serve ``configuration``: its embedded credentials from this follower's files, its
        exec plugin's obtained now, and the client's own refresh hook (which would set the
        credentials it loaded back on every request) replaced. Raises KubeconfigFieldError."""
        self._configuration = configuration
        read = self._read
        if read.client_pair is not None:
            self._write_pair(read.client_pair, field=f"users[{read.user}].user.client-certificate-data")
            configuration.cert_file, configuration.key_file = str(self.pair_file), None
        if read.ca is not None:
            write_private(self.ca_file, read.ca)
            configuration.ssl_ca_cert = str(self.ca_file)
        token_file = read.token_file
        if read.auth_provider:
            # The client's hook renews an expired gcp token (its cmd-path, or Google's default
            # credentials); a token the file is rewritten with is sent over it.
            self._provider_token = _AuthProviderToken(configuration.refresh_api_key_hook,
                                                      loaded=configuration.api_key.get("BearerToken"))
            configuration.refresh_api_key_hook = self._provider_token
        else:
            configuration.refresh_api_key_hook = TokenFileRefresh(Path(token_file)) if token_file is not None else None
        if read.exec_plugin is not None:
            failure = self._run_plugin(read)
            if failure is not None:
                raise failure

    def __call__(self, *, refused: bool) -> None:
        """Look at the file and the plugin's credentials; ``refused``: the API server answered
        401 to the credentials sent."""
        # Refreshed from the event loop and from the watches' threads: one at a time (a plugin
        # run once, its files written by one writer). A refusal off the event loop waits for a
        # refresh under way in another thread (bounded by the plugin's timeout): its request is
        # sent again with what that one obtains, as client-go's refresh after a 401 waits on
        # its mutex. Other refreshes do not wait (a plugin may take seconds, and the caller may
        # be the event loop): the current credentials are sent meanwhile.
        if refused and not _on_event_loop():
            acquired = self._lock.acquire(timeout=exec_plugin.EXEC_PLUGIN_TIMEOUT_SECONDS + 5.0)
        else:
            acquired = self._lock.acquire(blocking=False)
        if not acquired:
            return
        try:
            self._follow(refused=refused)
        finally:
            self._lock.release()

    def _follow(self, *, refused: bool) -> None:
        """:meth:`__call__`, the lock held."""
        stamp = file_stamps(list(map(str, self._files)))
        if stamp != self._stamp:
            rewritten = [str(file) for file, old, new in zip(self._files, self._stamp, stamp) if old != new]
            self._stamp = stamp  # a broken rewrite is warned of once; the next rewrite is read
            self._reread(", ".join(rewritten))
        due = self._plugin_due(refused=refused)
        if due == "now" and _on_event_loop():
            due = "soon"  # not on the loop that answers kube-scheduler: a thread of its own, as ahead of expiry
        if due == "now":
            self._refused_run = refused
            failure = self._run_plugin(self._read)
            if failure is not None:
                _warn_plugin_failed(self._read.user_file, failure)
        elif due == "soon" and not (self._ahead is not None and self._ahead.is_alive()):
            # Still valid, or the caller is the event loop: obtained beside the requests (a
            # plugin may take a second), which send the current ones meanwhile.
            self._ahead = threading.Thread(target=self._run_plugin_ahead, args=(self._read,), name="kubeconfig-exec", daemon=True)
            self._ahead.start()

    def _plugin_due(self, *, refused: bool) -> Literal["now", "soon", "no"]:
        """When the exec plugin is to run: now (refused, or expired), soon (expiring within
        EXEC_REFRESH_AHEAD_SECONDS), or not yet."""
        if self._read.exec_plugin is None:
            return "no"
        now = self._clock()
        if refused:
            just_ran = self._exec_ran_at is not None and now - self._exec_ran_at < EXEC_REFUSED_RERUN_SECONDS
            return "no" if self._refused_run and just_ran else "now"
        if self._expires_at is None or now < self._expires_at - EXEC_REFRESH_AHEAD_SECONDS:
            return "no"
        return "now" if now >= self._expires_at else "soon"

    def _run_plugin_ahead(self, read: UserCredentials) -> None:
        """:meth:`_run_plugin` in a thread of its own, the lock held only to install."""
        try:
            status = self._plugin_status(read)
            with self._lock:
                if self._read.exec_plugin != read.exec_plugin:
                    return  # the kubeconfig was rewritten with another plugin meanwhile, run since: its credentials stay
                self._refused_run = False
                self._install_exec(status, field=_exec_field(read))
        except KubeconfigFieldError as failure:
            _warn_plugin_failed(read.user_file, failure)

    def _reread(self, rewritten: str) -> None:
        """The files read again, merged; ``rewritten``: those that changed, for messages."""
        try:
            merged = merged_kubeconfig(self._files)
            self._current_context_seen(merged, rewritten=rewritten)
            read = user_credentials(merged, context=self._context)
            if read.client_pair is not None and read.client_pair != self._read.client_pair:
                check_pair(read.client_pair, folder=self._folder, field=f"users[{read.user}].user.client-key-data")
            if read.ca is not None and read.ca != self._read.ca:
                check_ca(read.ca, field=f"clusters[{read.cluster_name}].cluster.certificate-authority-data")
        except KubeconfigFieldError as error:
            log.warning("the kubeconfig was rewritten but does not load; the last good credentials are sent",
                        extra={"file": str(error.file or rewritten), "field": error.field, "reason": error.reason})
            return
        restart = sorted(name for name, value in read.at_start.items() if self._read.at_start.get(name) != value)
        if restart:
            log.warning("the kubeconfig was rewritten with fields cellfit takes at start only: they take effect at its restart",
                        extra={"file": rewritten, "field": ", ".join(restart)})
        if self._write_back is not None:
            # The client's loader takes the tokens another writer refreshed into the file: it
            # refreshes from them, and writes back over them (kubeconfig.AuthProviderWriteBack).
            self._write_back.reread(merged)
        changed = self._install(read)
        if read.exec_plugin != self._read.exec_plugin:
            changed.append(f"users[{read.user}].user.exec")
            self._expires_at = self._clock()  # run the new plugin at once
        self._read = read
        if changed:
            log.info("the kubeconfig was rewritten: its credentials are sent on new connections",
                     extra={"file": rewritten, "field": ", ".join(changed)})

    def _current_context_seen(self, merged: MergedKubeconfig, *, rewritten: str) -> None:
        """Warn, once per change, of a rewrite whose ``current-context`` names another context
        than the one cellfit follows (``kubectl config use-context``, a tool's login into
        another cluster): cellfit goes on with the context it started with, as client-go's
        long-running clients (kube-scheduler's among them) do. Following it would move a running
        scheduler to another cluster or identity under its caches, bindings and Lease."""
        if self._current_context is None:
            return  # a context was named: the file's current-context is not what cellfit follows
        now = str(merged.document.get("current-context") or "")
        if now == self._current_context:
            return
        self._current_context = now
        if now != self._context:
            named = repr(now) if now else "none"
            log.warning(f"the kubeconfig was rewritten with current-context {named}: cellfit goes on with the context it "
                        f"started with, {self._context!r} (its cluster and user); restart cellfit to switch",
                        extra={"file": rewritten, "field": "current-context", "was": self._context, "now": now})

    def _install(self, read: UserCredentials) -> list[str]:
        """Send ``read``'s credentials from now on, where they can be (as at start: a token's
        header, the certificate's and the CA's files); the fields that changed."""
        configuration, previous, changed = self._configuration, self._read, []
        prefix = f"users[{read.user}].user"
        if read.token is not None and previous.token is not None and read.token != previous.token:
            configuration.api_key["BearerToken"] = f"Bearer {read.token}"
            changed.append(f"{prefix}.token")
        if self._provider_token is not None and read.provider_token is not None and read.provider_token != previous.provider_token:
            self._provider_token.rewritten(configuration, f"Bearer {read.provider_token}")
            changed.append(f"{prefix}.auth-provider.config")
        if read.client_pair is not None and previous.client_pair is not None and read.client_pair != previous.client_pair:
            write_private(self.pair_file, read.client_pair)
            changed.append(f"{prefix}.client-certificate-data")
        if read.ca is not None and previous.ca is not None and read.ca != previous.ca:
            write_private(self.ca_file, read.ca)
            changed.append(f"clusters[{read.cluster_name}].cluster.certificate-authority-data")
        return changed

    def _run_plugin(self, read: UserCredentials) -> KubeconfigFieldError | None:
        """Run the user's exec plugin and send what it gave; the failure, if it failed."""
        try:
            self._install_exec(self._plugin_status(read), field=_exec_field(read))
        except KubeconfigFieldError as failure:
            return failure
        return None

    def _plugin_status(self, read: UserCredentials) -> ExecCredential:
        """What the user's plugin gives; raises KubeconfigFieldError."""
        self._exec_ran_at = self._clock()
        assert read.exec_plugin is not None
        return run_exec_plugin(ExecPlugin(config=read.exec_plugin, field=_exec_field(read),
                                          user_folder=Path(read.user_file).parent, cluster=read.cluster,
                                          cluster_folder=Path(read.cluster_file).parent), terminal=False)

    def _install_exec(self, credential: ExecCredential, *, field: str) -> None:
        """Send what the plugin gave, and nothing an earlier run gave instead."""
        read = self._read
        present_exec_credential(self._configuration, credential, pair_file=self.pair_file, field=field,
                                own_token=read.token is not None or read.token_file is not None,
                                own_certificate=read.client_pair is not None)
        self._expires_at = credential.expires_at
        log.info("credentials obtained from the kubeconfig's exec plugin",
                 extra={"file": read.user_file, "field": field, "expires": credential.expires or "never"})

    def _write_pair(self, pair: bytes, *, field: str) -> None:
        check_pair(pair, folder=self._folder, field=field)
        write_private(self.pair_file, pair)


def _on_event_loop() -> bool:
    """Whether this thread runs an event loop (the one serving kube-scheduler's verbs)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _exec_field(read: UserCredentials) -> str:
    return f"users[{read.user}].user.exec"


def _warn_plugin_failed(file: str, failure: KubeconfigFieldError) -> None:
    log.warning("the kubeconfig's exec plugin failed; the last credentials are sent",
                extra={"file": file, "field": failure.field, "reason": failure.reason})
