"""Kubernetes objects (wire structs) -> core values.

The effective request of a pod follows kube-scheduler's own accounting: the sum over app
containers, raised to the largest init container (they run one at a time, before the app), plus
the pod overhead. A container's missing request falls back to its limit, which is what the API
server defaults for extended resources. Errors name the JSON path of the offending field.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final, Mapping

from scheduler.core.model import JobInfo, NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import ZERO, Resources, resources_from_quantities
from scheduler.kube import wire

_EMPTY: Final[Mapping[str, str]] = MappingProxyType({})
DEFAULT_GRACE_PERIOD_SECONDS: Final = 30


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
    )


def pod_requests(spec: wire.PodSpec, *, gpu_resource: str, field: str) -> Resources:
    total = ZERO
    for index, container in enumerate(spec.containers):
        total = total + _container_requests(
            container, gpu_resource=gpu_resource, field=f"{field}.containers[{index}].resources"
        )
    for index, container in enumerate(spec.initContainers or ()):
        total = total.elementwise_max(
            _container_requests(
                container, gpu_resource=gpu_resource, field=f"{field}.initContainers[{index}].resources"
            )
        )
    if spec.overhead:
        total = total + resources_from_quantities(
            spec.overhead, gpu_resource=gpu_resource, field=f"{field}.overhead"
        )
    return total


def _container_requests(container: wire.Container, *, gpu_resource: str, field: str) -> Resources:
    resources = container.resources
    if resources is None:
        return ZERO
    requests = resources.requests or {}
    limits = resources.limits or {}
    if not limits:
        return resources_from_quantities(requests, gpu_resource=gpu_resource, field=f"{field}.requests")
    merged: dict[str, wire.Quantity] = {}
    # Per resource, the request wins; a limit stands in only where no request was given.
    for name in ("cpu", "memory", gpu_resource):
        if name in requests:
            merged[name] = requests[name]
        elif name in limits:
            merged[name] = limits[name]
    return resources_from_quantities(merged, gpu_resource=gpu_resource, field=f"{field}.requests")


def _controller(refs: list[wire.OwnerReference] | None) -> OwnerRef | None:
    for ref in refs or ():
        if ref.controller:
            return OwnerRef(kind=ref.kind, name=ref.name, uid=ref.uid)
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
    )
