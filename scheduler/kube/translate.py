"""Kubernetes objects (wire structs) -> core values.

The effective request of a pod follows kube-scheduler's own accounting (k8s.io/component-helpers
resource.PodRequests): the sum over app containers and sidecars (init containers with
``restartPolicy: Always``, KEP-753, which run beside them), raised to what any init container
needs while it runs (itself and the sidecars started before it); pod-level CPU and memory
requests (KEP-2837) replace the containers' sum of those; plus the pod overhead. A container's
missing request falls back to its limit, which is what the API server defaults for extended
resources. Errors name the JSON path of the offending field.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final, Mapping

import msgspec

from scheduler.core.model import Disruption, JobInfo, NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import ZERO, Resources, resources_from_quantities
from scheduler.kube import wire
from scheduler.wording import backoff_limit, disruption_action, exit_code_rules_before_disruption

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})
DEFAULT_GRACE_PERIOD_SECONDS: Final = 30
SIDECAR_RESTART_POLICY: Final = "Always"
DISRUPTION_TARGET: Final = "DisruptionTarget"
POD_LEVEL_RESOURCES: Final = ("cpu", "memory")  # what kube-scheduler reads of them (no extended resources)
# Distinct request shapes remembered (a Job's pods share one); past it the memo starts over.
REQUESTS_MEMO_SIZE: Final = 4096


def pod_info(pod: wire.Pod, *, gpu_resource: str, field: str = "Pod") -> PodInfo:
    meta = pod.metadata
    spec = pod.spec
    return PodInfo(
        uid=meta.uid,
        namespace=meta.namespace or "default",
        name=meta.name,
        requests=pod_requests(spec, gpu_resource=gpu_resource, field=f"{field}.spec"),
        labels=meta.labels or _EMPTY,
        annotations=meta.annotations or _EMPTY,
        priority=spec.priority or 0,
        node_name=spec.nodeName or None,
        phase=(pod.status.phase if pod.status and pod.status.phase else "Pending"),
        terminating=meta.deletionTimestamp is not None,
        grace_period_seconds=(
            spec.terminationGracePeriodSeconds
            if spec.terminationGracePeriodSeconds is not None
            else DEFAULT_GRACE_PERIOD_SECONDS
        ),
        owner=_controller(meta.ownerReferences),
        nominated_node_name=(pod.status.nominatedNodeName or None) if pod.status else None,
        scheduler_name=spec.schedulerName or None,
        disruption=_disruption(pod.status.conditions if pod.status else None),
        may_preempt=spec.preemptionPolicy != "Never",
    )


def _disruption(conditions: list[wire.PodCondition] | None) -> Disruption | None:
    """The pod's DisruptionTarget condition while it holds (status True); None otherwise."""
    for condition in conditions or ():
        if condition.type == DISRUPTION_TARGET and condition.status == "True":
            return Disruption(reason=condition.reason or "", message=condition.message or "")
    return None


class _RequestsMemo:
    """Pod requests by the parts of the spec they are read from, encoded. A pod is read three
    times on its way to running (kube-scheduler's filter request, then the watch's bound and
    Running events) and a Job's pods all ask alike, while reading the quantities again cost ~4x
    encoding those parts (the watch thread's largest step after decoding; issue 15). Two specs
    with the same encoding hold the same quantities, so they ask the same; a spec that does not
    read raises every time, naming its field, and is not remembered. Shared by the threads:
    each step is one dict operation under the GIL."""

    def __init__(self, *, size: int) -> None:
        self._size = size
        self._encoder = msgspec.json.Encoder()
        self._known: dict[tuple[str, bytes], Resources] = {}

    def requests(self, spec: wire.PodSpec, *, gpu_resource: str, field: str) -> Resources:
        key = (gpu_resource, self._encoder.encode((spec.containers, spec.initContainers, spec.overhead, spec.resources)))
        known = self._known.get(key)
        if known is not None:
            return known
        requests = _read_requests(spec, gpu_resource=gpu_resource, field=field)
        if len(self._known) >= self._size:
            self._known.clear()
        self._known[key] = requests
        return requests


_REQUESTS: Final = _RequestsMemo(size=REQUESTS_MEMO_SIZE)


def pod_requests(spec: wire.PodSpec, *, gpu_resource: str, field: str) -> Resources:
    return _REQUESTS.requests(spec, gpu_resource=gpu_resource, field=field)


def _read_requests(spec: wire.PodSpec, *, gpu_resource: str, field: str) -> Resources:
    total = ZERO
    for index, container in enumerate(spec.containers):
        total = total + _container_requests(
            container, gpu_resource=gpu_resource, field=f"{field}.containers[{index}].resources"
        )
    sidecars = ZERO  # the sidecars started so far: they keep running beside what follows
    init_peak = ZERO
    for index, container in enumerate(spec.initContainers or ()):
        requests = _container_requests(
            container, gpu_resource=gpu_resource, field=f"{field}.initContainers[{index}].resources"
        )
        if container.restartPolicy == SIDECAR_RESTART_POLICY:
            total = total + requests
            sidecars = sidecars + requests
            init_peak = init_peak.elementwise_max(sidecars)
        else:
            init_peak = init_peak.elementwise_max(requests + sidecars)
    total = total.elementwise_max(init_peak)
    if spec.resources is not None:
        total = _pod_level(total, spec.resources, gpu_resource=gpu_resource, field=f"{field}.resources")
    if spec.overhead:
        total = total + resources_from_quantities(
            spec.overhead, gpu_resource=gpu_resource, field=f"{field}.overhead"
        )
    return total


def _pod_level(total: Resources, resources: wire.ResourceRequirements, *, gpu_resource: str, field: str) -> Resources:
    """``total`` with the CPU and memory the pod-level resources request (a limit standing in for
    a missing request, as the API server defaults it) in place of the containers' sums."""
    given = _requested(resources, names=POD_LEVEL_RESOURCES, gpu_resource=gpu_resource, field=field)
    if given is None:
        return total
    names, pod_level = given
    return Resources(
        cpu_millis=pod_level.cpu_millis if "cpu" in names else total.cpu_millis,
        memory_bytes=pod_level.memory_bytes if "memory" in names else total.memory_bytes,
        gpus=total.gpus,
    )


def _container_requests(container: wire.Container, *, gpu_resource: str, field: str) -> Resources:
    resources = container.resources
    if resources is None:
        return ZERO
    if not resources.limits:  # the usual pod: requests alone (other keys are ignored)
        return resources_from_quantities(resources.requests or {}, gpu_resource=gpu_resource, field=f"{field}.requests")
    given = _requested(resources, names=("cpu", "memory", gpu_resource), gpu_resource=gpu_resource, field=field)
    return ZERO if given is None else given[1]


def _requested(
    resources: wire.ResourceRequirements, *, names: tuple[str, ...], gpu_resource: str, field: str
) -> tuple[frozenset[str], Resources] | None:
    """Of ``names``, those requested (or limited: the limit stands in) and their amounts; None
    when none is."""
    requests = resources.requests or {}
    limits = resources.limits or {}
    # Per resource, the request wins; a limit stands in only where no request was given. Each
    # is read under the field the pod wrote it in, so an error names that one.
    requested = {name: requests[name] for name in names if name in requests}
    limited = {name: limits[name] for name in names if name not in requests and name in limits}
    if not requested and not limited:
        return None
    amounts = resources_from_quantities(requested, gpu_resource=gpu_resource, field=f"{field}.requests") if requested else ZERO
    if limited:
        amounts = amounts + resources_from_quantities(limited, gpu_resource=gpu_resource, field=f"{field}.limits")
    return frozenset(requested) | frozenset(limited), amounts


def _controller(refs: list[wire.OwnerReference] | None) -> OwnerRef | None:
    for ref in refs or ():
        if ref.controller:
            return OwnerRef(kind=ref.kind, name=ref.name, uid=ref.uid, api_version=ref.apiVersion)
    return None


def node_info(node: wire.Node, *, gpu_resource: str, field: str = "Node") -> NodeInfo:
    status = node.status
    allocatable = (status.allocatable or status.capacity or {}) if status else {}
    return NodeInfo(
        name=node.metadata.name,
        allocatable=resources_from_quantities(
            allocatable, gpu_resource=gpu_resource, field=f"{field}.status.allocatable"
        ),
        labels=node.metadata.labels or _EMPTY,
        unschedulable=bool(node.spec and node.spec.unschedulable),
        ready=_is_ready(status.conditions if status else None),
    )


def _is_ready(conditions: list[wire.NodeCondition] | None) -> bool:
    # A node that reports no Ready condition (e.g. one just created) is given the benefit of
    # the doubt; kube-scheduler's own taints keep pods off nodes the node controller marks.
    for condition in conditions or ():
        if condition.type == "Ready":
            return condition.status == "True"
    return True


def job_info(job: wire.Job) -> JobInfo:
    meta = job.metadata
    return JobInfo(
        uid=meta.uid,
        namespace=meta.namespace,
        name=meta.name,
        annotations=meta.annotations or _EMPTY,
        parallelism=job.spec.parallelism,
        completions=job.spec.completions,
        disruption_action=disruption_action(job.spec.podFailurePolicy),
        disruption_exit_codes=exit_code_rules_before_disruption(job.spec.podFailurePolicy),
        backoff_limit=backoff_limit(limit=job.spec.backoffLimit, per_index=job.spec.backoffLimitPerIndex),
        failed=(job.status.failed if job.status is not None else None) or 0,
    )
