"""The Kubernetes API calls cellfit makes, with raw JSON in and out.

The official client's generated models deserialise every field of every object through Python
classes; cellfit reads a handful, so it asks for the raw response (``_preload_content=False``)
and decodes with the same msgspec structs as kube-scheduler's payloads. The client still loads
the credentials (in-cluster token, a kubeconfig's cluster and user) and does TLS; cellfit
follows what rotates under a running process, which the client reads once: token files
(:class:`TokenFileRefresh`), a kubeconfig rewritten and an exec plugin's credentials as they
expire or are refused (:class:`KubeconfigCredentials`).
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import binascii
import copy
import functools
import json
import logging
import os
import queue
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator, Literal, Mapping, cast
from urllib.parse import quote

import msgspec
import urllib3
import yaml

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from scheduler.cluster import loop_http
from scheduler.cluster.file_stamps import FileStamp, file_stamps
from scheduler.cluster.reflector import VersionTooLarge, too_large
from scheduler.config import ClusterSettings
from scheduler.constants import SCHEDULER_NAME
from scheduler.errors import ConfigError, KubernetesApiError
from scheduler.kube import wire

log = logging.getLogger(__name__)

# "pods": the pods not finished; "all-pods": every pod, finished ones included (the watch cache's
# one pod watch with the estimator on, which reads its sampling pods' results from finished pods).
Kind = Literal["nodes", "pods", "all-pods", "jobs"]
# Finished pods hold nothing; leaving them out keeps the cache to what decisions need. A pod that
# finishes leaves the selector, which the watch reports as DELETED.
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
EVENT_SOURCE = SCHEDULER_NAME
CONNECTION_POOL_SIZE = 64
# The API server sends every watch a bookmark about once a minute (its watch cache's bookmark
# frequency), so a watch silent this long is a dead connection (a flow a NAT or load balancer
# dropped without a reset): it ends, and the reflector lists again. (A kind served without the
# watch cache gets no such bookmarks: a quiet one is then listed again this often.)
WATCH_SILENCE_SECONDS = 150.0
_IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class WatchExpired(Exception):
    """The resourceVersion being watched from is too old (HTTP 410 Gone): relist."""


class TermEnded(KubernetesApiError):
    """A controller's write refused before it was sent: the term of leadership its driver was
    built for has ended, and another replica may lead now."""


class KubernetesApi:
    def __init__(
        self, api_client: k8s.ApiClient, *, settings: ClusterSettings, source: str, follow: loop_http.Follow | None = None
    ) -> None:
        """``follow``: what follows the credentials as they rotate beyond the client's refresh
        hook (:class:`KubeconfigCredentials`), run with each refresh of them."""
        self._core = k8s.CoreV1Api(api_client)
        self._batch = k8s.BatchV1Api(api_client)
        self._scheduling = k8s.SchedulingV1Api(api_client)
        self._settings = settings
        self.source = source
        # kube-scheduler's path (bind, and a pod the watch has not shown yet) is served from the
        # event loop; None behind a proxy, where those requests take the client's own path on
        # a thread.
        self._credentials = loop_http.Credentials(api_client.configuration, follow=follow)
        self._loop_http = loop_http.for_configuration(
            api_client.configuration,
            headers=self._credentials,
            timeout_seconds=settings.request_timeout_seconds,
            max_connections=CONNECTION_POOL_SIZE,
        )
        self._acting: Callable[[], bool] | None = None  # None: no term to outlive (the verbs' writes)
        self._client_pool = _ClientPoolRotation(api_client)

    def fenced(self, acting: Callable[[], bool]) -> KubernetesApi:
        """This API for the drivers of one term of leadership (``acting``: whether that term
        lasts yet, ``Terms.in_term``): the same connections, and every write refused with
        :class:`TermEnded` from the moment the term ends. A driver's pass under way when the
        Lease is lost (a reclaim deleting pod after pod, the placer patching Jobs) then makes
        no more deletions or patches, even before its stop() returns; reads go on."""
        view = copy.copy(self)
        view._acting = acting
        return view

    def _require_acting(self, action: str) -> None:
        if self._acting is not None and not self._acting():
            raise TermEnded(f"{action}: not written: this replica's term of leadership has ended")

    @classmethod
    def connect(cls, settings: ClusterSettings) -> KubernetesApi | None:
        """Credentials as ``cluster.mode`` says; ``None`` in standalone mode."""
        mode = settings.mode
        configuration = k8s.Configuration()
        # kube-scheduler binds many pods at once; urllib3 would open and discard a connection
        # (a TLS handshake each) for every request beyond the pool.
        configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
        if mode == "standalone":
            return None
        if mode == "in-cluster" or (mode == "auto" and _in_cluster()):
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]  # unannotated
            except k8s_config.ConfigException as error:
                raise ConfigError(f"cluster.mode: in-cluster credentials unusable: {error}") from None
            # The loader reads the token file again at most once a minute: a token revoked as it
            # is replaced would be refused that long. Read again as it changes instead.
            in_cluster_token = Path(k8s_config.incluster_config.SERVICE_TOKEN_FILENAME)
            configuration.refresh_api_key_hook = TokenFileRefresh(in_cluster_token)  # type: ignore[assignment]  # typed None
            return cls(k8s.ApiClient(configuration), settings=settings, source="in-cluster service account")
        files = kubeconfig_files(settings.kubeconfig)
        present = [file for file in files if file.is_file()]
        if not present:
            if mode == "kubeconfig" or settings.kubeconfig:
                raise ConfigError(f"cluster.kubeconfig: no kubeconfig file at {os.pathsep.join(map(str, files))}")
            return None
        follow = KubeconfigCredentials.load(configuration, files=files, context=settings.context)
        source = f"kubeconfig {os.pathsep.join(map(str, present))}"
        return cls(k8s.ApiClient(configuration), settings=settings, source=source, follow=follow)

    # ------------------------------------------------------------------ list and watch

    def list_raw(self, kind: Kind, *, limit: int | None = None, continue_token: str | None = None) -> bytes:
        """One list response, raw: the whole list, or with ``limit`` one page of it (its
        ``metadata.continue`` asks for the next, passed back as ``continue_token``)."""
        paging: dict[str, Any] = {}
        if limit is not None:
            paging["limit"] = limit
        if continue_token:
            paging["_continue"] = continue_token
        response = self._call(self._lister(kind), _request_timeout=self._settings.request_timeout_seconds, **paging)
        return bytes(response.data)

    def watch(self, kind: Kind, *, resource_version: str) -> Iterator[bytes]:
        """Watch events as raw JSON lines until the server ends the watch."""
        timeout = self._settings.watch_timeout_seconds
        self._client_credentials()  # refreshed as they rotate: the client reads them
        try:
            response = self._lister(kind)(
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout,
                _preload_content=False,
                _request_timeout=(self._settings.request_timeout_seconds, self._watch_read_timeout()),
            )
        except ApiException as error:
            if error.status == 410:
                raise WatchExpired from None
            raise self._client_error(error, f"watch {kind}") from None
        try:
            yield from _lines(response)
        finally:
            response.release_conn()

    def _watch_read_timeout(self) -> float:
        """How long a watch may stay silent: past the server's own end of it, or past the
        bookmark interval, whichever comes first."""
        return min(self._settings.watch_timeout_seconds + 30, WATCH_SILENCE_SECONDS)

    # ------------------------------------------------------------------ any path (the cell exchange's kinds)

    def list_path(self, path: str) -> bytes:
        """GET a list (``/apis/cellfit.io/v1alpha1/celloffers``, a ConfigMap by field selector) raw."""
        status, data = self._send("GET", path, None, action=f"list {path}")
        if status >= 300:
            raise _status_error(status, data, f"list {path}")
        return bytes(data)

    def watch_path(self, path: str, *, resource_version: str) -> Iterator[bytes]:
        """Watch the list at ``path`` from ``resource_version``, as raw JSON lines, until the server
        ends the watch (kinds the generated client has no lister for: custom resources)."""
        timeout = self._settings.watch_timeout_seconds
        query = (f"watch=true&allowWatchBookmarks=true&timeoutSeconds={timeout}"
                 f"&resourceVersion={quote(resource_version, safe='')}")
        client = self._core.api_client
        headers = {"Accept": "application/json", **self._client_credentials()}
        try:
            response = client.rest_client.pool_manager.request(
                "GET", client.configuration.host + path + ("&" if "?" in path else "?") + query, headers=headers,
                preload_content=False,
                timeout=urllib3.Timeout(connect=self._settings.request_timeout_seconds, read=self._watch_read_timeout()),
            )
        except urllib3.exceptions.HTTPError as error:
            raise KubernetesApiError(f"watch {path}: Kubernetes API unreachable: {error}") from None
        try:
            if response.status == 410:
                raise WatchExpired
            if response.status >= 300:
                self._refused(response.status)
                raise _version_error(response.status, response.read(), f"watch {path}")
            yield from _lines(response)
        finally:
            response.release_conn()

    def get_path(self, path: str) -> bytes | None:
        """GET one object raw; ``None`` if it does not exist."""
        status, data = self._send("GET", path, None, action=f"get {path}")
        if status == 404:
            return None
        if status >= 300:
            raise _status_error(status, data, f"get {path}")
        return bytes(data)

    def write_path(
        self, method: Literal["POST", "PUT", "PATCH"], path: str, body: Any, *, content_type: str = "application/json"
    ) -> bytes:
        """Create (POST), replace (PUT, with ``metadata.resourceVersion``: HTTP 409 if another
        writer came first) or patch an object; what the server stored, raw."""
        action = f"{method.lower()} {path}"
        status, data = self._send(method, path, wire.ENCODER.encode(body), action=action, content_type=content_type)
        if status >= 300:
            raise _status_error(status, data, action)
        return bytes(data)

    # ------------------------------------------------------------------ pods

    def _get_pod_through_client(self, namespace: str, name: str) -> wire.Pod | None:
        try:
            response = self._core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=self._settings.request_timeout_seconds
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise self._client_error(error, f"get pod {namespace}/{name}") from None
        except Exception as error:  # urllib3's connection errors and timeouts: no answer
            raise _unreachable(error, f"get pod {namespace}/{name}") from None
        # _preload_content=False: the raw urllib3 response, not the V1Pod the client's annotations name
        return _decoded_pod(cast("urllib3.BaseHTTPResponse", response).data, f"get pod {namespace}/{name}")

    async def get_pod(self, namespace: str, name: str) -> wire.Pod | None:
        """The pod from the API server, from the event loop; ``None`` if it does not exist."""
        if self._loop_http is None:
            return await asyncio.to_thread(self._get_pod_through_client, namespace, name)
        action = f"get pod {namespace}/{name}"
        status, data = await self._on_loop("GET", _pod_path(namespace, name), None, action=action)
        if status == 404:
            return None
        if status >= 300:
            raise _status_error(status, data, action)
        return _decoded_pod(data, action)

    async def create_binding(
        self, *, namespace: str, name: str, uid: str, node_name: str, annotations: dict[str, str]
    ) -> None:
        """Bind the pod, from the event loop. The API server copies a Binding's annotations onto
        the pod in the same write, so the placement and cellfit's record of it cannot come
        apart. The UID guards against binding a pod that was deleted and recreated under the
        same name."""
        body = _BINDING_ENCODER.encode(
            _Binding(
                metadata=_BindingMeta(name=name, namespace=namespace, uid=uid, annotations=annotations),
                target=_BindingTarget(name=node_name),
            )
        )
        path = _pod_path(namespace, name) + "/binding"
        action = f"bind pod {namespace}/{name} to {node_name}"
        try:
            if self._loop_http is None:
                status, data = await asyncio.to_thread(self._post, path, body, action=action)
            else:
                status, data = await self._on_loop("POST", path, body, action=action)
        except loop_http.RequestNotSent:
            raise  # nothing reached the server: nothing to read back
        except KubernetesApiError as error:  # no answer: the binding may have been made
            if await self._bound_as_asked(namespace=namespace, name=name, uid=uid, node_name=node_name, failure=error):
                return
            raise
        if status < 300:
            return
        refused = _status_error(status, data, action)
        if _outcome_untold(status) and await self._bound_as_asked(
            namespace=namespace, name=name, uid=uid, node_name=node_name, failure=refused
        ):
            return
        raise refused

    async def _bound_as_asked(self, *, namespace: str, name: str, uid: str, node_name: str, failure: KubernetesApiError) -> bool:
        """Whether the API server holds the pod bound to ``node_name``, read back after a binding
        whose answer does not tell: none came (a reset after the write, the client's timeout), a
        5xx (etcd's leader changed after the commit), or a 409 (already assigned: a binding sent
        again after its connection dropped it unanswered, or kube-scheduler's retry of one). The
        bind verb hands the pod's reservation back when this says no, and the watch shows a made
        binding only later: meanwhile its GPUs would go to another pod. A read that fails says
        no (the verb fails as before)."""
        try:
            pod = await self.get_pod(namespace, name)
        except KubernetesApiError as error:
            log.warning("a binding's outcome is unknown and the pod could not be read back",
                        extra={"pod": f"{namespace}/{name}", "node": node_name, "reason": f"{failure}; {error}"})
            return False
        made = pod is not None and pod.metadata.uid == uid and pod.spec.nodeName == node_name
        if made:
            log.warning("binding answered as failed, but the API server holds the pod bound to its node; taken as made",
                        extra={"pod": f"{namespace}/{name}", "node": node_name, "reason": str(failure)})
        return made

    async def _on_loop(self, method: str, path: str, body: bytes | None, *, action: str) -> tuple[int, bytes]:
        """``method path`` on the event loop's pool; a failure names what was asked (the pool
        knows only the request)."""
        assert self._loop_http is not None
        try:
            status, data = await self._loop_http.request(method, path, body)
            if status == 401:
                # Refused unread: the credentials were revoked or rotated since they were last
                # read (at most CREDENTIALS_REFRESH_SECONDS ago). Read anew, sent once more; read
                # in a thread, not on the loop that answers kube-scheduler: an exec plugin may
                # run, for seconds.
                await asyncio.to_thread(self._credentials.refused)
                status, data = await self._loop_http.request(method, path, body)
        except KubernetesApiError as error:
            raise type(error)(f"{action}: {error}", status=error.status) from None
        return status, data

    def _post(self, path: str, body: bytes, *, action: str) -> tuple[int, bytes]:
        """POST pre-encoded JSON on the client's own pooled, authenticated connections: the
        generated client's request pipeline (validation, sanitising, model handling) costs
        ~4.7 ms of CPU per call against ~0.9 ms for the same request sent directly."""
        return self._send("POST", path, body, action=action)

    def _send(
        self, method: str, path: str, body: bytes | None, *, action: str, content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        if method != "GET":
            self._require_acting(action)
        status, data = self._send_once(method, path, body, action=action, content_type=content_type)
        if status == 401:
            # Refused unread, as on the event loop's path (_on_loop): read anew, sent once more,
            # a write only while the term lasts yet (the refresh may have run a plugin: seconds).
            self._credentials.refused()  # read anew now (a plugin's run waited for), the term checked after
            if method != "GET":
                self._require_acting(action)
            status, data = self._send_once(method, path, body, action=action, content_type=content_type)
        return status, data

    def _send_once(self, method: str, path: str, body: bytes | None, *, action: str, content_type: str) -> tuple[int, bytes]:
        client = self._core.api_client
        config = client.configuration
        headers = {"Content-Type": content_type, "Accept": "application/json", **self._client_credentials()}
        try:
            response = client.rest_client.pool_manager.request(
                method,
                config.host + path,
                body=body,
                headers=headers,
                timeout=urllib3.Timeout(total=self._settings.request_timeout_seconds),
            )
        except urllib3.exceptions.HTTPError as error:
            raise KubernetesApiError(f"{action}: Kubernetes API unreachable: {error}") from None
        return response.status, response.data

    # ------------------------------------------------------------------ the estimator's writes

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        """Create ``pod``; an existing pod of that name raises with status 409."""
        name = pod.get("metadata", {}).get("name", "")
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"
        status, data = self._post(path, wire.ENCODER.encode(pod), action=f"create pod {namespace}/{name}")
        if status >= 300:
            raise _status_error(status, data, f"create pod {namespace}/{name}")

    def delete_pod(
        self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        """Delete a pod (its grace period honoured, unless ``grace_period_seconds``); already
        gone is success. ``uid``: only that incarnation of the name."""
        options: dict[str, Any] = {}
        if uid:
            options["preconditions"] = {"uid": uid}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        body = wire.ENCODER.encode(options) if options else None
        path = _pod_path(namespace, name)
        status, data = self._send("DELETE", path, body, action=f"delete pod {namespace}/{name}")
        if status >= 300 and status not in (404, 409):
            raise _status_error(status, data, f"delete pod {namespace}/{name}")

    def get_job(self, *, namespace: str, name: str) -> wire.Job | None:
        """The Job as the API server holds it now (not as the watch last showed it); ``None`` if
        it does not exist."""
        raw = self.get_path(_job_path(namespace, name))
        return None if raw is None else wire.JOB_DECODER.decode(raw)

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        """Apply a JSON Patch to a Job; a refused patch (HTTP 422: a field that may not change,
        or a failed ``test``) raises with its status, so the caller can try a narrower one."""
        path = _job_path(namespace, name)
        status, data = self._send(
            "PATCH", path, wire.ENCODER.encode(operations), action=f"patch job {namespace}/{name}",
            content_type="application/json-patch+json",
        )
        if status >= 300:
            raise _status_error(status, data, f"patch job {namespace}/{name}")

    def set_job_condition(self, *, namespace: str, name: str, condition: dict[str, Any]) -> None:
        """Set one condition of a Job's status (merged by ``type``: the Job controller's own
        conditions stay)."""
        body = wire.ENCODER.encode({"status": {"conditions": [condition]}})
        path = f"{_job_path(namespace, name)}/status"
        status, data = self._send(
            "PATCH", path, body, action=f"condition on job {namespace}/{name}",
            content_type="application/strategic-merge-patch+json",
        )
        if status >= 300:
            raise _status_error(status, data, f"condition on job {namespace}/{name}")

    def get_priority_class(self, name: str) -> wire.PriorityClass | None:
        try:
            response = self._scheduling.read_priority_class(
                name, _preload_content=False, _request_timeout=self._settings.request_timeout_seconds
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise self._client_error(error, f"get priorityclass {name}") from None
        except Exception as error:  # urllib3's connection errors and timeouts: no answer
            raise _unreachable(error, f"get priorityclass {name}") from None
        # _preload_content=False: the raw urllib3 response, not the model the client's annotations name
        return wire.PRIORITY_CLASS_DECODER.decode(cast("urllib3.BaseHTTPResponse", response).data)

    # ------------------------------------------------------------------ jobs and events

    def annotate_job(self, *, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self._require_acting(f"annotate job {namespace}/{name}")
        try:
            self._batch.patch_namespaced_job(
                name, namespace, {"metadata": {"annotations": annotations}},
                _preload_content=False, _request_timeout=self._settings.request_timeout_seconds,
            )
        except ApiException as error:
            raise self._client_error(error, f"annotate job {namespace}/{name}") from None
        except Exception as error:  # urllib3's connection errors and timeouts: no answer
            raise _unreachable(error, f"annotate job {namespace}/{name}") from None

    def create_event(
        self,
        *,
        namespace: str,
        pod_name: str,
        pod_uid: str,
        reason: str,
        message: str,
        warning: bool = False,
        kind: str = "Pod",
        api_version: str | None = None,
    ) -> None:
        """A core/v1 Event on a pod (or a Job, a CellOffer...: ``kind`` and, beyond Pod and Job,
        its ``api_version``), as ``kubectl describe`` and ``kubectl get events`` show."""
        self._require_acting(f"event on {kind.lower()} {namespace}/{pod_name}")
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{pod_name}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": api_version or ("v1" if kind == "Pod" else "batch/v1"), "kind": kind, "name": pod_name,
                "namespace": namespace, "uid": pod_uid,
            },
            "reason": reason,
            "message": message[:1024],  # the API caps event messages
            "type": "Warning" if warning else "Normal",
            "source": {"component": EVENT_SOURCE},
            "reportingComponent": EVENT_SOURCE,
            "reportingInstance": socket.gethostname(),
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self._core.create_namespaced_event(  # the client sends a plain dict body as it is; it is annotated CoreV1Event
                namespace, cast("k8s.CoreV1Event", body), _preload_content=False, _request_timeout=self._settings.request_timeout_seconds
            )
        except ApiException as error:
            raise self._client_error(error, f"event on {kind.lower()} {namespace}/{pod_name}") from None
        except Exception as error:  # urllib3's connection errors and timeouts: no answer
            raise _unreachable(error, f"event on {kind.lower()} {namespace}/{pod_name}") from None

    # ------------------------------------------------------------------ leader election and the nudge

    def get_lease(self, *, namespace: str, name: str) -> bytes | None:
        """The coordination.k8s.io/v1 Lease as raw JSON; ``None`` if it does not exist."""
        status, data = self._send("GET", _lease_path(namespace, name), None, action=f"get lease {namespace}/{name}")
        if status == 404:
            return None
        if status >= 300:
            raise _status_error(status, data, f"get lease {namespace}/{name}")
        return bytes(data)

    def write_lease(self, *, namespace: str, lease: dict[str, Any]) -> bytes:
        """Create the Lease (no ``metadata.resourceVersion``) or replace it (with one: the write
        fails with status 409 if another replica wrote it since). Returns what the server stored."""
        name = lease["metadata"]["name"]
        replacing = bool(lease["metadata"].get("resourceVersion"))
        action = f"{'update' if replacing else 'create'} lease {namespace}/{name}"
        path = _lease_path(namespace, name) if replacing else _lease_path(namespace, "")
        status, data = self._send("PUT" if replacing else "POST", path, wire.ENCODER.encode(lease), action=action)
        if status >= 300:
            raise _status_error(status, data, action)
        return bytes(data)

    def list_pending_pods(self, scheduler_name: str, *, resource_version: str = "0") -> bytes:
        """The pods of one kube-scheduler profile not bound to a node yet, as a raw PodList, at
        ``resource_version`` as a reflector asks (:func:`list_query`): "0" by default, from the
        API server's watch cache (no etcd read). Raises :class:`WatchExpired` when the version
        is gone (HTTP 410) and ``VersionTooLarge`` when the API server does not hold it yet."""
        action = f"list pending pods of {scheduler_name}"
        status, data = self._send("GET", pending_pods_path(scheduler_name) + list_query(resource_version), None, action=action)
        if status == 410:
            raise WatchExpired
        if status >= 300:
            raise _version_error(status, data, action)
        return bytes(data)

    def watch_pending_pods(self, scheduler_name: str, *, resource_version: str) -> Iterator[bytes]:
        """The watch of :meth:`list_pending_pods`' pods from ``resource_version``, as raw JSON
        lines: an event for each of them that changes, DELETED for one that stops matching
        (bound, finished, deleted)."""
        return self.watch_path(pending_pods_path(scheduler_name), resource_version=resource_version)

    # ------------------------------------------------------------------ internals

    def _lister(self, kind: Kind) -> Any:
        if kind == "nodes":
            return self._core.list_node
        if kind == "jobs":
            return self._batch.list_job_for_all_namespaces
        core = self._core
        if kind == "all-pods":
            return core.list_pod_for_all_namespaces

        def list_active_pods(**kwargs: Any) -> Any:
            return core.list_pod_for_all_namespaces(field_selector=ACTIVE_PODS, **kwargs)

        return list_active_pods

    def _call(self, method: Any, **kwargs: Any) -> Any:
        self._client_credentials()  # refreshed as they rotate (at most every few seconds): the client reads them
        try:
            return method(_preload_content=False, **kwargs)
        except ApiException as error:
            raise self._client_error(error, getattr(method, "__name__", "API call")) from None
        except Exception as error:  # urllib3 connection errors and timeouts
            raise KubernetesApiError(f"Kubernetes API unreachable: {error}") from None

    def _client_credentials(self) -> Mapping[str, str]:
        """The credentials' headers for a request on the client's own connections, refreshed as
        they rotate; the connections kept from before a client certificate's rotation closed."""
        headers = self._credentials()
        self._client_pool()
        return headers

    def _client_error(self, error: ApiException, action: str) -> KubernetesApiError:
        """The generated client's refusal as the API error callers handle, the credentials
        read anew first if it was HTTP 401."""
        self._refused(error.status)
        return _api_error(error, action)

    def _refused(self, status: int | None) -> None:
        """After an answer ``status``: HTTP 401 has the credentials read anew (an exec plugin's
        obtained again) before the next request, which the caller's retry sends."""
        if status == 401:
            self._credentials.expire()


class _ClientPoolRotation:
    """The Kubernetes client's own connections (urllib3's pools) after its client certificate,
    key or CA files changed (a kubeconfig's rewritten by KubeconfigCredentials, a rotated file),
    or the Configuration names others (an exec plugin's client certificate where it gave a token
    before): the idle ones, made with the old certificate (or none), are closed (each reconnects
    at its next use, reading the files anew), as client-go closes its connections on a rotation
    (an exec plugin's certificate changed: its connTracker.CloseAll). Kept, they went on
    presenting the old certificate, refused once it expired or was revoked (the API server
    checks the certificate of each request), the retry after the refresh too. Files named anew
    are handed to the pools' manager, which took the Configuration's once, when the client was
    made: without that a certificate the plugin gave later was never presented. Connections in
    use (a watch's) are left alone. Looked at, a stat per file, with each request on the
    client's path; shared by the API's fenced views."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self._configuration = api_client.configuration
        self._pool_manager = api_client.rest_client.pool_manager
        self._identity = loop_http.tls_identity(loop_http.tls_files(self._configuration))

    def __call__(self) -> None:
        identity = loop_http.tls_identity(loop_http.tls_files(self._configuration))
        if identity == self._identity:
            return
        named_anew = identity.files != self._identity.files
        self._identity = identity
        if named_anew:
            self._name_files()
        for key in list(self._pool_manager.pools.keys()):
            pool = self._pool_manager.pools.get(key)
            idle = getattr(pool, "pool", None)  # its queue of idle connections (None: free slots)
            if idle is None:
                continue
            taken = []
            while True:
                try:
                    taken.append(idle.get(block=False))
                except queue.Empty:
                    break
            for connection in taken:
                if connection is not None:
                    connection.close()
                try:
                    idle.put(connection, block=False)
                except queue.Full:  # a connection in use came back meanwhile: its slot is taken
                    pass

    def _name_files(self) -> None:
        """The pools' manager told the files the Configuration names now (as the Kubernetes
        client's RESTClientObject hands them over): the pools it makes from now on use them
        (a pool's key holds its files, so the old pools are no longer taken)."""
        configuration = self._configuration
        self._pool_manager.connection_pool_kw |= {
            "ca_certs": configuration.ssl_ca_cert, "cert_file": configuration.cert_file, "key_file": configuration.key_file,
        }


def _decoded_pod(data: bytes, action: str) -> wire.Pod:
    """A pod's JSON, decoded; a body that is none (a proxy's error page answered 200) fails as
    the API error every caller handles, not as a decoder's error none expects."""
    try:
        return wire.POD_DECODER.decode(data)
    except msgspec.DecodeError as error:
        raise KubernetesApiError(f"{action}: the answer is no pod: {error}") from None


def _outcome_untold(status: int) -> bool:
    """An answer to a write that does not say whether it was made."""
    return status == 409 or status >= 500


def pending_pods_path(scheduler_name: str) -> str:
    """The URL path of one kube-scheduler profile's pods not bound to a node yet: pending, on no
    node, of that ``spec.schedulerName`` (the field selector the API server's watch cache serves)."""
    selector = f"spec.schedulerName={scheduler_name},spec.nodeName=,status.phase=Pending"
    return f"/api/v1/pods?fieldSelector={quote(selector, safe='=,')}"


def list_query(resource_version: str) -> str:
    """The query parameters (after the path's own) of a list at ``resource_version`` as
    client-go's reflector asks for one: "0", any version the API server's watch cache holds
    (the cheap first list); "", the latest (a consistent read); any other, one no older than it
    (``resourceVersionMatch=NotOlderThan``: served from the watch cache once it has caught up,
    never older than what was seen)."""
    if resource_version == "":
        return ""
    if resource_version == "0":
        return "&resourceVersion=0"
    return f"&resourceVersion={quote(resource_version, safe='')}&resourceVersionMatch=NotOlderThan"


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


class _BindingMeta(msgspec.Struct, frozen=True):
    name: str
    namespace: str
    uid: str
    annotations: dict[str, str]


class _BindingTarget(msgspec.Struct, frozen=True):
    name: str
    apiVersion: str = "v1"
    kind: str = "Node"


class _Binding(msgspec.Struct, frozen=True):
    metadata: _BindingMeta
    target: _BindingTarget
    apiVersion: str = "v1"
    kind: str = "Binding"


_BINDING_ENCODER = msgspec.json.Encoder()


def _job_path(namespace: str, name: str) -> str:
    return f"/apis/batch/v1/namespaces/{quote(namespace, safe='')}/jobs/{quote(name, safe='')}"


def _lease_path(namespace: str, name: str) -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"
    return f"{base}/{quote(name, safe='')}" if name else base


def _lines(response: Any) -> Iterator[bytes]:
    """The non-empty lines of a streamed watch response."""
    pending = b""
    for chunk in response.stream(amt=65536, decode_content=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


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


def kubeconfig_files(explicit: str | None) -> tuple[Path, ...]:
    """The kubeconfig files to read, as kubectl picks them: ``explicit`` (``--kubeconfig``,
    ``cluster.kubeconfig``) is one file, never split; else the files ``KUBECONFIG`` lists
    (merged: :func:`merged_kubeconfig`); else ``~/.kube/config``."""
    if explicit:
        return (Path(explicit).expanduser(),)
    listed = [Path(name).expanduser() for name in os.environ.get("KUBECONFIG", "").split(os.pathsep) if name]
    return tuple(listed) or (Path.home() / ".kube" / "config",)


# ------------------------------------------------------------------ a kubeconfig's credentials, followed

# An exec plugin's credentials are obtained again this long before their expirationTimestamp
# (they are read at most every loop_http.CREDENTIALS_REFRESH_SECONDS: well inside it).
EXEC_REFRESH_AHEAD_SECONDS = 60.0
# A plugin that has not answered within this long is killed (with what it started) and its run is
# a failure: client-go waits for good, and the run holds the follower's lock, which every refresh
# of the credentials takes, the event loop's among them.
EXEC_PLUGIN_TIMEOUT_SECONDS = 30.0
# A plugin's standard error kept in the failure's reason (its last characters: the error).
_EXEC_STDERR_KEPT = 500
# A plugin run because the API server refused what the last run gave (HTTP 401) is not run for
# that again sooner than this: a server refusing every credential would have it run per request.
EXEC_REFUSED_RERUN_SECONDS = 10.0
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


class _UserCredentials(msgspec.Struct, frozen=True):
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


def _user_credentials(merged: MergedKubeconfig, *, context: str) -> _UserCredentials:
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
    exec_plugin = None if _static_credentials(user) else user.get("exec")
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
    return _UserCredentials(
        user=str(user_name), cluster_name=str(cluster_name), auth_provider="auth-provider" in user,
        provider_token=_auth_provider_token(user.get("auth-provider")),
        token=token.strip() if token else None,
        client_pair=certificate + b"\n" + key if certificate is not None and key is not None else None,
        ca=ca, exec_plugin=exec_plugin, cluster=cluster, at_start=at_start,
        user_file=str(user_file), cluster_file=str(merged.origins.get(("clusters", str(cluster_name)), context_file)),
        token_file=str(user_file.parent / token_file) if isinstance(token_file, str) and token_file else None,
    )


def _static_credentials(user: dict[str, Any]) -> bool:
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
      warned of).

    ``tokenFile`` is followed by :class:`TokenFileRefresh`, files named by path by their readers.

    A ``KUBECONFIG`` of several files is merged as kubectl merges it (:func:`merged_kubeconfig`),
    and every file it lists is watched: a rewrite of any of them (one absent at start written)
    is read as the merge of them all."""

    def __init__(self, *, files: tuple[Path, ...], context: str, read: _UserCredentials, folder: Path,
                 stamp: tuple[FileStamp, ...], context_is_current: bool = False, clock: Callable[[], float] = time.time) -> None:
        """``read``: the kubeconfig ``files`` as they were read when their stamp was ``stamp``;
        ``context_is_current``: ``context`` is the files' current-context (none was named)."""
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
            read = _user_credentials(merged, context=str(name))
        except KubeconfigFieldError as error:
            raise ConfigError(f"cluster.kubeconfig: {error.file or named_as}: {error}") from None
        folder = Path(tempfile.mkdtemp(prefix="cellfit-kubeconfig-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        loadable = loadable_without_exec(merged, context=str(name))
        persist = functools.partial(_persist_or_warn, auth_provider_persister(merged, loadable, context=str(name)))
        try:
            # No base path: each entry's relative paths against its own file's folder. An
            # auth-provider's token the loader refreshes is written back, as client-go writes it.
            k8s_config.kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]  # unannotated
                config_dict=loadable, active_context=str(name), config_base_path=None, temp_file_path=str(folder),
                config_persister=persist,
            ).load_and_set(configuration)
        except (k8s_config.ConfigException, OSError, ValueError) as error:
            raise ConfigError(f"cluster.kubeconfig: {named_as} is unusable: {error}") from None
        follower = cls(files=files, context=str(name), read=read, folder=folder, stamp=stamp, context_is_current=not context)
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
            _write_private(self.ca_file, read.ca)
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
            acquired = self._lock.acquire(timeout=EXEC_PLUGIN_TIMEOUT_SECONDS + 5.0)
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

    def _run_plugin_ahead(self, read: _UserCredentials) -> None:
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
            read = _user_credentials(merged, context=self._context)
            if read.client_pair is not None and read.client_pair != self._read.client_pair:
                _check_pair(read.client_pair, folder=self._folder, field=f"users[{read.user}].user.client-key-data")
            if read.ca is not None and read.ca != self._read.ca:
                _check_ca(read.ca, field=f"clusters[{read.cluster_name}].cluster.certificate-authority-data")
        except KubeconfigFieldError as error:
            log.warning("the kubeconfig was rewritten but does not load; the last good credentials are sent",
                        extra={"file": str(error.file or rewritten), "field": error.field, "reason": error.reason})
            return
        restart = sorted(name for name, value in read.at_start.items() if self._read.at_start.get(name) != value)
        if restart:
            log.warning("the kubeconfig was rewritten with fields cellfit takes at start only: they take effect at its restart",
                        extra={"file": rewritten, "field": ", ".join(restart)})
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

    def _install(self, read: _UserCredentials) -> list[str]:
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
            _write_private(self.pair_file, read.client_pair)
            changed.append(f"{prefix}.client-certificate-data")
        if read.ca is not None and previous.ca is not None and read.ca != previous.ca:
            _write_private(self.ca_file, read.ca)
            changed.append(f"clusters[{read.cluster_name}].cluster.certificate-authority-data")
        return changed

    def _run_plugin(self, read: _UserCredentials) -> KubeconfigFieldError | None:
        """Run the user's exec plugin and send what it gave; the failure, if it failed."""
        try:
            self._install_exec(self._plugin_status(read), field=_exec_field(read))
        except KubeconfigFieldError as failure:
            return failure
        return None

    def _plugin_status(self, read: _UserCredentials) -> ExecCredential:
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
        _check_pair(pair, folder=self._folder, field=field)
        _write_private(self.pair_file, pair)


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
    entry = _context_entry(merged, context=context)
    if entry is None:
        return None
    user_name, cluster_name = entry.get("user"), entry.get("cluster")
    users = [item.get("user") for item in document.get("users") or () if isinstance(item, dict) and item.get("name") == user_name]
    config = users[0].get("exec") if users and isinstance(users[0], dict) and not _static_credentials(users[0]) else None
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


def _context_entry(merged: MergedKubeconfig, *, context: str) -> dict[str, Any] | None:
    """The ``context`` mapping of the context called ``context``; None when there is none."""
    entry = next((item.get("context") for item in merged.document.get("contexts") or ()
                  if isinstance(item, dict) and item.get("name") == context), None)
    return entry if isinstance(entry, dict) else None


def _context_user(merged: MergedKubeconfig, *, context: str) -> str:
    entry = _context_entry(merged, context=context)
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


def auth_provider_persister(merged: MergedKubeconfig, loadable: Any, *, context: str) -> Callable[[], None]:
    """The Kubernetes client loader's ``config_persister`` for ``loadable`` (``merged``'s, as
    handed to the loader) at ``context``: an auth-provider's config the loader refreshed (gcp's
    access-token and expiry, oidc's id-token and refresh-token) written back to the file that
    names the user, as kubectl writes it back (a refresh-token is used once: one not written
    back is spent, and the next run's refresh fails)."""
    user = _context_user(merged, context=context)
    file = merged.origins.get(("users", user))
    return functools.partial(_write_auth_provider_config, loadable, user=user, file=file)


def _write_auth_provider_config(loadable: Any, *, user: str, file: Path | None) -> None:
    """``user``'s auth-provider config as ``loadable`` holds it, written into ``file`` (the rest
    of the file as it is there now); raises KubeconfigFieldError naming the field."""
    field = f"users[{user}].user.auth-provider.config"
    config = next((node.value["user"]["auth-provider"].get("config") for node in loadable.value["users"]
                   if node.value.get("name") == user and isinstance(node.value.get("user"), dict)
                   and isinstance(node.value["user"].get("auth-provider"), dict)), None)
    if file is None or not isinstance(config, dict):
        return
    try:
        document = _parsed_kubeconfig(file)
        for item in document.get("users") or ():
            if isinstance(item, dict) and item.get("name") == user and isinstance((item.get("user") or {}).get("auth-provider"), dict):
                item["user"]["auth-provider"]["config"] = copy.deepcopy(config)
        _replace_keeping_mode(file, yaml.safe_dump(document, default_flow_style=False).encode())
    except (KubeconfigFieldError, OSError) as error:
        reason = error.reason if isinstance(error, KubeconfigFieldError) else str(error)
        raise KubeconfigFieldError(field, f"the refreshed token could not be written back: {reason}", file=file) from None


def _persist_or_warn(persist: Callable[[], None]) -> None:
    """``persist`` (:func:`auth_provider_persister`'s), a failure warned of: the refreshed token is
    sent all the same (a kubeconfig mounted read-only from a Secret cannot take it)."""
    try:
        persist()
    except KubeconfigFieldError as error:
        log.warning("the auth-provider's refreshed token could not be written back to the kubeconfig; it is sent, but "
                    "the file keeps the old one (and a refresh-token already spent)",
                    extra={"file": str(error.file), "field": error.field, "reason": error.reason})


def _replace_keeping_mode(path: Path, content: bytes) -> None:
    """``content`` as ``path``, replaced whole (a reader sees the old file or the new one), its
    permissions kept; a symbolic link's target replaced, the link kept (~/.kube/config linked
    to a shared file)."""
    target = path.resolve()
    fresh = target.with_name(f".{target.name}.cellfit-new")
    descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, target.stat().st_mode & 0o777)
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)
    os.replace(fresh, target)


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
        _check_pair(credential.pair, folder=pair_file.parent, field=f"{field} (clientKeyData)")
        _write_private(pair_file, credential.pair)
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


def _on_event_loop() -> bool:
    """Whether this thread runs an event loop (the one serving kube-scheduler's verbs)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _exec_field(read: _UserCredentials) -> str:
    return f"users[{read.user}].user.exec"


def _warn_plugin_failed(file: str, failure: KubeconfigFieldError) -> None:
    log.warning("the kubeconfig's exec plugin failed; the last credentials are sent",
                extra={"file": file, "field": failure.field, "reason": failure.reason})


def _check_pair(pair: bytes, *, folder: Path, field: str) -> None:
    """Raises :class:`KubeconfigFieldError` unless ``pair`` is a certificate with its own key
    (one file's content)."""
    trial = folder / "client.pem.check"
    _write_private(trial, pair)
    try:
        ssl.create_default_context().load_cert_chain(str(trial))
    except (ssl.SSLError, OSError) as error:
        raise KubeconfigFieldError(field, f"the client certificate and key do not load together: {error}") from None
    finally:
        trial.unlink(missing_ok=True)


def _check_ca(ca: bytes, *, field: str) -> None:
    try:
        ssl.create_default_context(cadata=ca.decode("ascii", errors="replace"))
    except (ssl.SSLError, ValueError) as error:
        raise KubeconfigFieldError(field, f"no CA certificate loads from it: {error}") from None


def _write_private(path: Path, content: bytes) -> None:
    """``content`` as ``path``, replaced whole (a reader sees the old file or the new one),
    readable by this user alone."""
    fresh = path.with_name(path.name + ".new")
    descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)
    os.replace(fresh, path)


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and _IN_CLUSTER_TOKEN.is_file()


def _status_error(status: int, body: bytes, action: str) -> KubernetesApiError:
    message = "error"
    try:
        message = wire.STATUS_DECODER.decode(body).message or message
    except Exception:
        pass
    return KubernetesApiError(f"{action}: {message} (HTTP {status})", status=status)


def _version_error(status: int, body: bytes, action: str) -> Exception:
    """The error of a list or watch answered ``status``: :class:`VersionTooLarge` when the API
    server does not hold the resourceVersion asked for yet (its watch cache is behind), else
    the API error."""
    try:
        answer = wire.STATUS_DECODER.decode(body)
    except msgspec.MsgspecError:
        answer = wire.Status()
    if too_large(wire.Status(code=status, reason=answer.reason, message=answer.message)):
        return VersionTooLarge(f"{action}: {answer.message}")
    return _status_error(status, body, action)


def _unreachable(error: Exception, action: str) -> KubernetesApiError:
    """A call the generated client could not complete (no answer), as the API error callers
    handle: urllib3's errors are no ApiException."""
    return KubernetesApiError(f"{action}: Kubernetes API unreachable: {error}")


def _api_error(error: ApiException, action: str) -> KubernetesApiError:
    message = error.reason or "error"
    if error.body:
        try:
            message = wire.STATUS_DECODER.decode(error.body).message or message
        except Exception:
            pass
    return KubernetesApiError(f"{action}: {message} (HTTP {error.status})", status=error.status)
