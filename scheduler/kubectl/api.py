"""GETs to the API server as the user, and cellfit's inspect API through its service proxy.

The proxy (``/api/v1/namespaces/NS/services/http:NAME:inspect/proxy/...``) is the only way in:
the API server authenticates the user and RBAC decides (``get`` on ``services/proxy``, which
the chart's ClusterRole ``<release>-viewer`` grants), so nobody needs a port-forward, and
nobody without the grant reads cellfit's view of other tenants' pods. A cellfit no Service fronts
(``cellfit serve`` beside a kube-scheduler outside the cluster) is read at its own address
instead, ``--cellfit-url`` (:class:`DirectInspectApi`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote

import urllib3
from kubernetes.client.exceptions import ApiException

from scheduler.constants import INSPECT_URL_PREFIX
from scheduler.kubectl.errors import Forbidden, NotFound, NotInstalled, PluginError, Unreachable, ViewUnavailable
from scheduler.kubectl.kubeconfig import Session

# The chart's defaults (release "cellfit" in "cellfit-system"); CELLFIT_NAMESPACE and
# CELLFIT_SERVICE, or --cellfit-namespace and --cellfit-service, name another install.
DEFAULT_CELLFIT_NAMESPACE = "cellfit-system"
DEFAULT_CELLFIT_SERVICE = "cellfit"
# The chart's Service port serving the inspect listener (cellfit.inspect).
INSPECT_PORT_NAME = "inspect"
REQUEST_TIMEOUT_SECONDS = 15
# The service proxy sends each request to one of the Service's ready pods at random. A view only
# the controllers' leader holds (the estimator's, AlloX's) answered by a standby is asked again:
# with two replicas, 16 tries all land on the standby once in 65,536.
LEADER_TRIES = 16


@dataclass(frozen=True, kw_only=True)
class Reply:
    status: int
    body: Any  # parsed JSON, or the text when it is none


class KubeApi:
    """Read-only access as the session's user; every failure a :class:`PluginError`."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def raw(self, path: str, *, query: Mapping[str, str] | None = None) -> Reply:
        client = self.session.client
        try:
            method, url, headers, _, _ = client.param_serialize(
                method="GET", resource_path=path, query_params=list((query or {}).items()),
                header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
            )
            response = client.call_api(method, url, header_params=headers, _request_timeout=REQUEST_TIMEOUT_SECONDS)
            status, data = response.status, response.read()  # type: ignore[no-untyped-call]  # RESTResponse.read is unannotated
        except ApiException as error:
            status, data = error.status, error.body or b""
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise Unreachable(f"cannot reach the API server {self.session.server} ({self.session.source}): {error}") from None
        text = data.decode(errors="replace") if isinstance(data, bytes) else str(data or "")
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = text
        return Reply(status=status, body=body)

    def get(self, path: str, *, what: str, query: Mapping[str, str] | None = None) -> Any:
        """``what``: the object in words ("pod ml/train-0"), named in errors."""
        reply = self.raw(path, query=query)
        if reply.status == 200:
            return reply.body
        message = status_message(reply)
        if reply.status == 403:
            raise Forbidden(f"you may not read {what}: {message}")
        if reply.status == 404:
            raise NotFound(f"{what} not found")
        if reply.status == 401:
            raise Forbidden(f"the API server does not accept your credentials ({self.session.source}): {message}")
        raise Unreachable(f"reading {what}: HTTP {reply.status}: {message}")


def _from_standby(body: Any) -> bool:
    """A standby's answer for a leader's view (scheduler/extender/runtime.py, ``_term_view``)."""
    return isinstance(body, Mapping) and body.get("leading") is False


def status_message(reply: Reply) -> str:
    """The API server's Status message, cellfit's ``detail``, or the body's first line."""
    body = reply.body
    if isinstance(body, Mapping):
        for key in ("message", "detail", "Error"):
            if body.get(key):
                return str(body[key])
    return str(body or "").strip().splitlines()[0] if body else f"HTTP {reply.status}"


@dataclass(frozen=True, kw_only=True)
class Cellfit:
    """Where cellfit's Service is."""

    namespace: str = DEFAULT_CELLFIT_NAMESPACE
    service: str = DEFAULT_CELLFIT_SERVICE

    @property
    def proxy_name(self) -> str:
        return f"http:{self.service}:{INSPECT_PORT_NAME}"

    def proxy_path(self, view: str) -> str:
        # ":" stays as written: it is part of the proxy's resource name, which RBAC matches.
        return f"/api/v1/namespaces/{quote(self.namespace)}/services/{quote(self.proxy_name, safe=':')}/proxy{INSPECT_URL_PREFIX}/{view}"


class InspectApi:
    """cellfit's ``/v1/inspect/...`` through the service proxy. Errors say which of these it is:
    RBAC refuses the proxy (naming the grant), no cellfit Service, no inspect port on it, no
    ready cellfit pod behind it, or cellfit does not serve that view here."""

    def __init__(self, api: KubeApi, cellfit: Cellfit) -> None:
        self.api = api
        self.cellfit = cellfit

    def view(self, view: str, *, query: Mapping[str, str] | None = None) -> Any:
        """The view's document; one only the leader holds is read from the leader."""
        for _ in range(LEADER_TRIES):
            reply = self.api.raw(self.cellfit.proxy_path(view), query=query)
            if reply.status != 200:
                raise self._error(reply, view)
            if not _from_standby(reply.body):
                return reply.body
        raise Unreachable(
            f"{LEADER_TRIES} tries of /v1/inspect/{view} through Service {self.cellfit.service} all reached a standby "
            f"replica; only the leader of cellfit's controllers ({reply.body.get('leader') or 'none now'}) holds this "
            "view: try again"
        )

    def _error(self, reply: Reply, view: str) -> PluginError:
        where = f"Service {self.cellfit.service} in namespace {self.cellfit.namespace}"
        message = status_message(reply)
        from_apiserver = isinstance(reply.body, Mapping) and reply.body.get("kind") == "Status"
        if reply.status == 403 and from_apiserver:
            return Forbidden(
                f"you may not read cellfit's inspect API: RBAC does not grant you get on services/proxy "
                f"{self.cellfit.proxy_name!r} in namespace {self.cellfit.namespace} ({message}). Ask for the "
                f"ClusterRole {self.cellfit.service}-viewer, bound in {self.cellfit.namespace}: kubectl -n "
                f"{self.cellfit.namespace} create rolebinding <name> --clusterrole={self.cellfit.service}-viewer --user=<you>"
            )
        if reply.status == 401:
            return Forbidden(f"the API server does not accept your credentials ({self.api.session.source}): {message}")
        if reply.status == 404 and from_apiserver:
            return self._not_installed(where, message)
        if reply.status == 404:
            return ViewUnavailable(f"cellfit does not serve /v1/inspect/{view} here: {message}")
        if reply.status in (502, 503, 500) and from_apiserver:
            return self._no_endpoint(where, message)
        return Unreachable(f"cellfit's {where} answered HTTP {reply.status} for /v1/inspect/{view}: {message}")

    def _not_installed(self, where: str, message: str) -> NotInstalled:
        return NotInstalled(
            f"cellfit is not installed here: no {where} ({message}). Install the chart, or name where it is: "
            "--cellfit-namespace and --cellfit-service (or CELLFIT_NAMESPACE and CELLFIT_SERVICE), or, for a cellfit you "
            "reach directly (`cellfit serve`, a port-forward), --cellfit-url (CELLFIT_URL), e.g. http://127.0.0.1:8888"
        )

    def _no_endpoint(self, where: str, message: str) -> PluginError:
        """The proxy found no endpoint (it looks for endpoints before the Service): tell "no such
        Service" and "the Service has no inspect port" (chart value off) from "no ready cellfit
        pod", as far as the user may read the Service."""
        service = self.api.raw(f"/api/v1/namespaces/{quote(self.cellfit.namespace)}/services/{quote(self.cellfit.service)}")
        if service.status == 404:
            return self._not_installed(where, status_message(service))
        if service.status == 200 and isinstance(service.body, Mapping):
            ports = [str(p.get("name")) for p in (service.body.get("spec") or {}).get("ports") or []]
            if INSPECT_PORT_NAME not in ports:
                return Unreachable(f"cellfit's {where} has no port named {INSPECT_PORT_NAME!r} (it has: {', '.join(ports) or 'none'}): "
                                   "its inspect listener is off; install the chart with cellfit.inspect.enabled=true")
        return Unreachable(f"cellfit is not reachable through {where}: {message} (is a cellfit pod ready? kubectl -n "
                           f"{self.cellfit.namespace} get pods)")


class DirectInspectApi(InspectApi):
    """cellfit's ``/v1/inspect/...`` at a URL the user reaches directly (``--cellfit-url``): a
    ``cellfit serve`` outside the cluster, which no Service fronts, or a port-forward. No service
    proxy, so no RBAC either: whoever reaches the listener reads it."""

    def __init__(self, api: KubeApi, cellfit: Cellfit, *, url: str) -> None:
        super().__init__(api, cellfit)
        self.url = url.rstrip("/")
        self._http = urllib3.PoolManager(timeout=urllib3.Timeout(total=REQUEST_TIMEOUT_SECONDS), retries=False)

    def view(self, view: str, *, query: Mapping[str, str] | None = None) -> Any:
        url = f"{self.url}{INSPECT_URL_PREFIX}/{view}"
        try:
            response = self._http.request("GET", url, fields=dict(query or {}), headers={"Accept": "application/json"})
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise Unreachable(f"cannot reach cellfit at --cellfit-url {self.url}: {error}") from None
        text = response.data.decode(errors="replace")
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = text
        reply = Reply(status=response.status, body=body)
        if reply.status == 404:
            raise ViewUnavailable(f"cellfit does not serve /v1/inspect/{view} here: {status_message(reply)}")
        if reply.status != 200:
            raise Unreachable(f"cellfit at --cellfit-url {self.url} answered HTTP {reply.status} for /v1/inspect/{view}: "
                              f"{status_message(reply)}")
        if _from_standby(reply.body):
            raise Unreachable(f"cellfit at --cellfit-url {self.url} is a standby replica; only the leader of cellfit's "
                              f"controllers ({reply.body.get('leader') or 'none now'}) holds /v1/inspect/{view}")
        return reply.body
