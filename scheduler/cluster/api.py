"""The Kubernetes API calls cellfit makes, with raw JSON in and out.

The official client's generated models deserialise every field of every object through Python
classes; cellfit reads a handful, so it asks for the raw response (``_preload_content=False``)
and decodes with the same msgspec structs as kube-scheduler's payloads. The client still loads
the credentials (in-cluster token, a kubeconfig's cluster and user) and does TLS; cellfit
follows what rotates under a running process, which the client reads once
(``scheduler.cluster.credentials``: token files, a kubeconfig rewritten, an exec plugin's
credentials as they expire or are refused), reads the kubeconfig files as kubectl does
(``scheduler.cluster.kubeconfig``) and runs exec plugins as client-go does
(``scheduler.cluster.exec_plugin``).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import queue
import socket
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Literal, Mapping, TypeVar, cast
from urllib.parse import quote

import msgspec
import urllib3

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from scheduler.cluster import loop_http
from scheduler.cluster.credentials import KubeconfigCredentials, TokenFileRefresh
from scheduler.cluster.kubeconfig import kubeconfig_files
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
# The Kubernetes client's own pool (urllib3: lists, watches, the controllers' writes, on threads).
CONNECTION_POOL_SIZE = 64
# kube-scheduler's path (binds, a pod the watch has not shown yet): connect() sizes it to the
# extender listener's maxConnections, so no bind waits for a connection (see KubernetesApi).
LOOP_CONNECTIONS = 256
# The API server sends every watch a bookmark about once a minute (its watch cache's bookmark
# frequency), so a watch silent this long is a dead connection (a flow a NAT or load balancer
# dropped without a reset): it ends, and the reflector lists again. (A kind served without the
# watch cache gets no such bookmarks: a quiet one is then listed again this often.)
WATCH_SILENCE_SECONDS = 150.0
_T = TypeVar("_T")
_IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class WatchExpired(Exception):
    """The resourceVersion being watched from is too old (HTTP 410 Gone): relist."""


class TermEnded(KubernetesApiError):
    """A controller's write refused before it was sent: the term of leadership its driver was
    built for has ended, and another replica may lead now."""


class KubernetesApi:
    def __init__(
        self, api_client: k8s.ApiClient, *, settings: ClusterSettings, source: str, follow: loop_http.Follow | None = None,
        loop_connections: int = LOOP_CONNECTIONS,
    ) -> None:
        """``follow``: what follows the credentials as they rotate beyond the client's refresh
        hook (:class:`KubeconfigCredentials`), run with each refresh of them.

        ``loop_connections``: the connections kube-scheduler's path may hold at once (binds, a
        pod the watch has not shown yet), the extender listener's maxConnections. Each of
        kube-scheduler's calls holds one of its connections to cellfit and makes at most one
        request to the API server at a time, so a pool that size never makes a bind wait for a
        connection. A smaller one did: with 64 and the API server answering a binding in
        ~0.45 s under a burst, cellfit passed on at most ~140 bindings a second; a burst faster
        than that queued its binds in cellfit (bind p50 1.2 s, tests/benchmarks/
        bench_extender_burst.py --api-tls) until kube-scheduler's connections held for them
        passed the listener's limit and were refused. Behind a proxy (the client's own path,
        on threads) it sizes the threads and urllib3's pool for those requests alike."""
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
            max_connections=loop_connections,
        )
        self._loop_connections = loop_connections
        # Behind a proxy: the threads kube-scheduler's path runs its requests on (asyncio's
        # default executor has min(32, CPUs + 4) threads: a burst's binds would queue there).
        self._path_threads: ThreadPoolExecutor | None = None
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
    def connect(cls, settings: ClusterSettings, *, loop_connections: int = LOOP_CONNECTIONS) -> KubernetesApi | None:
        """Credentials as ``cluster.mode`` says; ``None`` in standalone mode. ``loop_connections``:
        the extender listener's maxConnections (see :class:`KubernetesApi`)."""
        mode = settings.mode
        configuration = k8s.Configuration()
        # kube-scheduler binds many pods at once; urllib3 would open and discard a connection
        # (a TLS handshake each) for every request beyond the pool (behind a proxy, the binds
        # go through it too: as many as the loop's pool).
        configuration.connection_pool_maxsize = max(CONNECTION_POOL_SIZE, loop_connections)
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
            return cls(k8s.ApiClient(configuration), settings=settings, source="in-cluster service account",
                       loop_connections=loop_connections)
        files = kubeconfig_files(settings.kubeconfig)
        present = [file for file in files if file.is_file()]
        if not present:
            if mode == "kubeconfig" or settings.kubeconfig:
                raise ConfigError(f"cluster.kubeconfig: no kubeconfig file at {os.pathsep.join(map(str, files))}")
            return None
        follow = KubeconfigCredentials.load(configuration, files=files, context=settings.context)
        source = f"kubeconfig {os.pathsep.join(map(str, present))}"
        return cls(k8s.ApiClient(configuration), settings=settings, source=source, follow=follow, loop_connections=loop_connections)

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
            return await self._on_path_thread(self._get_pod_through_client, namespace, name)
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
                status, data = await self._on_path_thread(self._post, path, body, action)
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

    async def _on_path_thread(self, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)`` on one of kube-scheduler's path's threads (behind a proxy): as many as
        the loop's pool would have connections, made as they are needed."""
        if self._path_threads is None:
            self._path_threads = ThreadPoolExecutor(max_workers=self._loop_connections, thread_name_prefix="api-path")
        return await asyncio.get_running_loop().run_in_executor(self._path_threads, call, *args)

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

    def _post(self, path: str, body: bytes, action: str) -> tuple[int, bytes]:
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
        name: str | None = None,
    ) -> None:
        """A core/v1 Event on a pod (or a Job, a CellOffer...: ``kind`` and, beyond Pod and Job,
        its ``api_version``), as ``kubectl describe`` and ``kubectl get events`` show. ``name``: the
        Event's own (a second create of it is refused, 409), else one the API server makes."""
        self._require_acting(f"event on {kind.lower()} {namespace}/{pod_name}")
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace} if name else {"generateName": f"{pod_name}.", "namespace": namespace},
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


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and _IN_CLUSTER_TOKEN.is_file()


def _status_error(status: int, body: bytes, action: str) -> KubernetesApiError:
    message = "error"
    try:
        message = wire.STATUS_DECODER.decode(body).text() or message
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
            message = wire.STATUS_DECODER.decode(error.body).text() or message
        except Exception:
            pass
    return KubernetesApiError(f"{action}: {message} (HTTP {error.status})", status=error.status)
