"""cellfit's live extender as an engine the simulator can drive: every decision goes over HTTP
to the service ``cellfit serve`` builds (``build_runtime``), as the JSON kube-scheduler writes,
and every change of a pod reaches it as its watch cache brings it.

* **Verbs**: filter, prioritize and preempt are POSTed to a running server with the extender
  configured ``nodeCacheCapable: false`` (full Node objects in ``Nodes``, the victims kube-
  scheduler's dry run chose as full Pods in ``NodeNameToVictims``); the answers are read as
  kube-scheduler reads them.
* **Binding**: kube-scheduler's own (an extender without ``bindVerb``; a standalone cellfit has
  no API to create bindings with). The bound pod then reaches cellfit through the watch, as
  any pod change does. :class:`BindingLiveExtender` binds through cellfit's bind verb instead,
  as production does (``bindVerb: bind``).
* **The watch**: each pod's state is written as the Pod object the API server would send
  (``tests.support.kube_objects``), decoded and translated by the same code as the cluster
  cache (``wire.Pod``, ``translate.pod_info``) and applied under the service's engine lock.
"""

from __future__ import annotations

from msgspec import structs
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import httpx
import msgspec
import numpy as np

from scheduler.core.engine import FilterDecision, Placement, Scores, TracksJobs, Verdicts
from scheduler.core.model import JobInfo, NodeInfo, PodInfo
from scheduler.core.nodeindex import NodeIndex, Slots
from scheduler.extender.runtime import Runtime
from scheduler.kube import translate, wire
from tests.support import kube_objects as k

GPU = "nvidia.com/gpu"
DELETED_AT = "2026-11-26T10:00:00Z"


def pod_object(pod: PodInfo) -> dict[str, Any]:
    """The Pod object the API server holds for ``pod`` (its requests the only resources it
    names: a pod that asks for no CPU or memory sends none)."""
    assert pod.owner is not None, "simulated pods belong to Jobs"
    body = k.pod(
        pod.name,
        namespace=pod.namespace,
        uid=pod.uid,
        gpus=pod.requests.gpus,
        cpu=f"{pod.requests.cpu_millis}m",
        memory=str(pod.requests.memory_bytes),
        node_name=pod.node_name,
        phase=pod.phase,
        priority=pod.priority,
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
        grace_period_seconds=pod.grace_period_seconds,
        job_uid=pod.owner.uid,
    )
    for container in body["spec"]["containers"]:
        resources = container["resources"]
        for name, amount in (("cpu", pod.requests.cpu_millis), ("memory", pod.requests.memory_bytes)):
            if not amount:
                resources["requests"].pop(name)
                resources["limits"].pop(name, None)
    if pod.terminating:
        body["metadata"]["deletionTimestamp"] = DELETED_AT
        body["metadata"]["deletionGracePeriodSeconds"] = pod.grace_period_seconds
    return body


def job_object(job: JobInfo) -> dict[str, Any]:
    """The batch/v1 Job object the API server holds for ``job`` (what cellfit reads of it)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "uid": job.uid,
            "resourceVersion": "48200",
            "creationTimestamp": k.CREATED,
            "annotations": dict(job.annotations),
        },
        "spec": {
            "parallelism": job.parallelism,
            "completions": job.completions,
            "backoffLimit": 6,
            "template": {"spec": {"schedulerName": "cellfit", "restartPolicy": "Never", "containers": []}},
        },
        "status": {"active": 0},
    }


def node_object(node: NodeInfo) -> dict[str, Any]:
    allocatable = node.allocatable
    return k.node(node.name, gpus=allocatable.gpus, cpu=f"{allocatable.cpu_millis}m", memory=str(allocatable.memory_bytes))


def _verdicts(at: Mapping[str, int], reasons: Mapping[str, str]) -> Verdicts:
    """The answer's reasons by node name, as reasons with their positions."""
    grouped: dict[str, list[int]] = {}
    for name, reason in reasons.items():
        grouped.setdefault(reason, []).append(at[name])
    return {reason: np.array(positions, dtype=np.int64) for reason, positions in grouped.items()}


class SimulationClock:
    """The service's clock in a parity test: the simulation's virtual seconds once
    :meth:`follow` names it (0 before), so that what waits a few seconds in the engine (FitGpp's
    holds, HiveD's wait for cells freed just now) waits the same on both sides."""

    def __init__(self) -> None:
        self._now: Callable[[], float] = lambda: 0.0

    def follow(self, now: Callable[[], float]) -> None:
        self._now = now

    def __call__(self) -> float:
        return self._now()


class LiveService(NamedTuple):
    """``cellfit serve`` over HTTP: the client, the runtime and the clock it was built with."""

    client: httpx.Client
    runtime: Runtime
    clock: SimulationClock | None = None


class LiveExtender:
    """An engine whose decisions are the live service's. It has no preemption capability of
    its own: FitGpp's explanation stays in the service (events, metrics), and the victims come
    back as the preempt verb answers them. ``calls`` counts the HTTP requests by verb.

    ``node_cache_capable``: kube-scheduler's requests as the chart configures it (node names
    and victims' UIDs; the service knows the nodes from its watch, which :meth:`apply_node`
    plays), else with the full Node and victim objects in every request. ``clock``: the one the
    service was built with, made to follow the simulation by :meth:`follow`."""

    def __init__(
        self, client: httpx.Client, runtime: Runtime, clock: SimulationClock | None = None, *, node_cache_capable: bool = False
    ) -> None:
        self._client = client
        self._clock = clock
        self._runtime = runtime
        self._node_cache_capable = node_cache_capable
        self._nodes: dict[str, dict[str, Any]] = {}
        # The slots the simulator's driver resolves names into: every node the watch showed.
        self.node_index = NodeIndex()
        self._pods: dict[str, dict[str, Any]] = {}  # the latest object of each pod the watch showed
        self.calls: dict[str, int] = {}

    def follow(self, now: Callable[[], float]) -> None:
        """The service's time from now on: the simulation's (nothing when built on the wall clock)."""
        if self._clock is not None:
            self._clock.follow(now)

    # ------------------------------------------------------------------ verbs over HTTP

    def filter(self, pod: PodInfo, offered: Slots) -> FilterDecision:
        node_names = self._names(offered)
        answer = self._post("filter", k.extender_args(self._pod_body(pod), self._offered(node_names), node_cache_capable=self._node_cache_capable))
        assert answer["Error"] == "", answer["Error"]
        if self._node_cache_capable:
            assert answer["Nodes"] is None
            feasible = list(answer["NodeNames"] or ())
        else:
            assert answer["NodeNames"] is None
            feasible = [item["metadata"]["name"] for item in (answer["Nodes"] or {}).get("items") or ()]
        at = {name: position for position, name in enumerate(node_names)}
        return FilterDecision(
            feasible=np.array([at[name] for name in feasible], dtype=np.int64),
            failed=_verdicts(at, answer["FailedNodes"] or {}),
            unresolvable=_verdicts(at, answer["FailedAndUnresolvableNodes"] or {}),
        )

    def prioritize(self, pod: PodInfo, offered: Slots) -> Scores:
        node_names = self._names(offered)
        answer = self._post("prioritize", k.extender_args(self._pod_body(pod), self._offered(node_names), node_cache_capable=self._node_cache_capable))
        scores = {entry["Host"]: entry["Score"] for entry in answer}
        return np.array([scores[name] for name in node_names], dtype=np.int64)

    def select_victims(
        self, pod: PodInfo, candidates: Mapping[str, Sequence[str]], victim_pods: Mapping[str, PodInfo]
    ) -> dict[str, list[str]]:
        victims = {node: [self._pods[uid] for uid in uids] for node, uids in candidates.items()}
        answer = self._post("preempt", k.preemption_args(self._pod_body(pod), victims, node_cache_capable=self._node_cache_capable))
        chosen = answer["NodeNameToMetaVictims"] or {}
        return {node: [victim["UID"] for victim in (entry["Pods"] or ())] for node, entry in chosen.items()}

    # ------------------------------------------------------------------ binding and the watch

    def reserve(self, pod: PodInfo, node_name: str) -> Placement:
        """kube-scheduler binds; cellfit hears of it from the watch."""
        self.apply_pod(structs.replace(pod, node_name=node_name, phase="Running"))
        return Placement(pod_uid=pod.uid, node_name=node_name)

    def unreserve(self, pod_uid: str) -> None:
        raise AssertionError("kube-scheduler's own binding is never taken back")

    def apply_node(self, node: NodeInfo) -> None:
        body = node_object(node)
        self.node_index.add(node.name)
        self._nodes[node.name] = body  # sent with every verb unless nodeCacheCapable
        if self._node_cache_capable:  # the service's Node watch
            info = translate.node_info(msgspec.convert(body, wire.Node), gpu_resource=GPU)
            with self._runtime.lock:
                self._runtime.engine.apply_node(info)

    def delete_node(self, node_name: str) -> None:
        del self._nodes[node_name]
        self.node_index.remove(node_name)

    def apply_pod(self, pod: PodInfo) -> None:
        body = pod_object(pod)
        self._pods[pod.uid] = body
        info = translate.pod_info(msgspec.convert(body, wire.Pod), gpu_resource=GPU)
        with self._runtime.lock:
            self._runtime.engine.apply_pod(info)

    def delete_pod(self, pod_uid: str) -> None:
        self._pods.pop(pod_uid, None)
        with self._runtime.lock:
            self._runtime.engine.delete_pod(pod_uid)

    def apply_job(self, job: JobInfo) -> None:
        """A Job as the cache's Job watch applies it (HiveD reads a gang's width from it)."""
        info = translate.job_info(msgspec.convert(job_object(job), wire.Job))
        engine = self._runtime.engine
        assert isinstance(engine, TracksJobs)
        with self._runtime.lock:
            engine.apply_job(info)

    def delete_job(self, job_uid: str) -> None:
        engine = self._runtime.engine
        assert isinstance(engine, TracksJobs)
        with self._runtime.lock:
            engine.delete_job(job_uid)

    def knows_node(self, node_name: str) -> bool:
        return node_name in self._nodes

    def stats(self) -> Mapping[str, int]:
        with self._runtime.lock:
            return self._runtime.engine.stats()

    # ------------------------------------------------------------------ internals

    def _pod_body(self, pod: PodInfo) -> dict[str, Any]:
        return self._pods.get(pod.uid) or pod_object(pod)

    def _names(self, offered: Slots) -> list[str]:
        names = self.node_index.names
        assert (offered >= 0).all(), "the simulator offers only nodes the watch showed"
        return [name for name in map(names.__getitem__, offered.tolist()) if name is not None]

    def _offered(self, node_names: Sequence[str]) -> list[dict[str, Any]]:
        return [self._nodes[name] for name in node_names]

    def _post(self, verb: str, body: dict[str, Any]) -> Any:
        self.calls[verb] = self.calls.get(verb, 0) + 1
        response = self._client.post(f"/v1/extender/{verb}", content=k.dumps(body), headers={"Content-Type": "application/json"})
        assert response.status_code == 200, (verb, response.status_code, response.text)
        return response.json()


class BindingLiveExtender(LiveExtender):
    """:class:`LiveExtender` connected to a cluster as production runs it: the service built
    with an API (the double in ``tests/support/api_double.py``, which records the bindings),
    every pod change applied through the watch cache's own handlers (its pod record first, then
    the engine), and each decision bound through cellfit's bind verb (``bindVerb: bind``): the
    verb finds the pod in the cache, reserves the node in the engine and creates the binding
    with its annotations, which the watch then shows on the bound pod. kube-scheduler's requests
    are the chart's (``nodeCacheCapable: true``), the nodes known from the cache's Node watch."""

    def __init__(self, client: httpx.Client, runtime: Runtime, api: Any, clock: SimulationClock | None = None) -> None:
        super().__init__(client, runtime, clock, node_cache_capable=True)
        assert runtime.cache is not None, "a connected runtime"
        self._cache = runtime.cache
        self._api = api

    def apply_node(self, node: NodeInfo) -> None:
        body = node_object(node)
        self.node_index.add(node.name)
        self._nodes[node.name] = body
        self._cache._apply_node(msgspec.convert(body, wire.Node))

    def reserve(self, pod: PodInfo, node_name: str) -> Placement:
        if pod.uid not in self._pods:  # kube-scheduler binds only a pod its watch showed it, as the cache's did
            self.apply_pod(pod)
        body = {"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node_name}
        answer = self._post("bind", body)
        assert not answer.get("Error"), answer["Error"]
        return Placement(pod_uid=pod.uid, node_name=node_name, annotations=self._api.binding_annotations.get(pod.uid, {}))

    def unreserve(self, pod_uid: str) -> None:
        raise AssertionError("the simulated bindings never fail")

    def apply_pod(self, pod: PodInfo) -> None:
        written = self._api.binding_annotations.get(pod.uid) if pod.node_name is not None else None
        if written:  # the watch shows what the binding wrote onto the pod
            pod = structs.replace(pod, annotations={**pod.annotations, **written})
        body = pod_object(pod)
        self._pods[pod.uid] = body
        self._cache._apply_pod(msgspec.convert(body, wire.Pod))

    def delete_pod(self, pod_uid: str) -> None:
        body = self._pods.pop(pod_uid, None)
        if body is not None:
            self._cache._delete_pod(msgspec.convert(body, wire.Pod))
