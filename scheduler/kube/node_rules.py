"""Whether a pending pod could go to a node were the node's GPUs free: the filters of
kube-scheduler that read only the pod's own spec and the node's labels, name and taints
(NodeName, NodeUnschedulable, NodeAffinity with ``nodeSelector``, TaintToleration).

HiveD's reclaim reads them (scheduler/cluster/reclaim.py) for a guaranteed pod that kube-scheduler
never brought to cellfit's filter, because every node it could go to is full of opportunistic
pods it may not preempt: cellfit then picks the node itself, and must pick one kube-scheduler
will accept once the opportunistic pods are gone. What these rules do not model (inter-pod
affinity, topology spread, volumes, resource claims, host ports, resources other than cores,
memory and GPUs) makes the pod :func:`unmodelled`, never a guess: deleting another tenant's pods
for a node the pod cannot use would be a loss for nothing. Host ports and those resources depend
on the pods that stay on the node (NodePorts, NodeResourcesFit), and the reclaim knows only
their cores, memory and GPUs.
"""

from __future__ import annotations

import re
from typing import Final, Mapping, Sequence, TypeVar

import msgspec

from scheduler.constants import RESOURCE_NVIDIA_GPU
from scheduler.errors import InvalidRequest
from scheduler.kube import wire
from scheduler.kube.lists import read_page

T = TypeVar("T")

# kube-scheduler's NodeUnschedulable filter lets a pod onto a cordoned node only if it
# tolerates this taint (the node lifecycle controller also writes it).
UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"
_FILTERING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})
_GO_INTEGER: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
# The resources the reclaim checks: cores and memory beside the pods that stay and those
# nominated to the node, and the node's pod limit (scheduler/cluster/stranded.py), GPUs by
# HiveD's cells.
_CHECKED_RESOURCES: Final = frozenset({"cpu", "memory"})
# Not checked, yet no reason to leave a pod to kube-scheduler: a namespace's LimitRange commonly
# gives every container an ephemeral-storage request, which would turn the reclaim off for the
# whole namespace, while a node short of ephemeral storage is rare (and the give-back after
# 330 s bounds that case).
_ASSUMED_TO_FIT: Final = frozenset({"ephemeral-storage"})


class NodeSelectorRequirement(msgspec.Struct, frozen=True, gc=False):
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class NodeSelectorTerm(msgspec.Struct, frozen=True, gc=False):
    matchExpressions: list[NodeSelectorRequirement] | None = None
    matchFields: list[NodeSelectorRequirement] | None = None


class NodeSelector(msgspec.Struct, frozen=True, gc=False):
    nodeSelectorTerms: list[NodeSelectorTerm] = []


class NodeAffinity(msgspec.Struct, frozen=True, gc=False):
    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector | None = None


class PodAffinityRules(msgspec.Struct, frozen=True, gc=False):
    # Only whether required terms exist matters: they are not modelled.
    requiredDuringSchedulingIgnoredDuringExecution: list[msgspec.Raw] | None = None


class Affinity(msgspec.Struct, frozen=True, gc=False):
    nodeAffinity: NodeAffinity | None = None
    podAffinity: PodAffinityRules | None = None
    podAntiAffinity: PodAffinityRules | None = None


class Toleration(msgspec.Struct, frozen=True, gc=False):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


class TopologySpreadConstraint(msgspec.Struct, frozen=True, gc=False):
    whenUnsatisfiable: str = ""


class PersistentVolumeClaimSource(msgspec.Struct, frozen=True, gc=False):
    claimName: str = ""


class Volume(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    persistentVolumeClaim: PersistentVolumeClaimSource | None = None
    ephemeral: msgspec.Raw | None = None


class ContainerPort(msgspec.Struct, frozen=True, gc=False):
    containerPort: int = 0
    hostPort: int | None = None  # the API server fills it in from containerPort for hostNetwork pods


class PortedContainer(wire.Container, frozen=True, kw_only=True):
    ports: list[ContainerPort] | None = None


class ConstrainedPodSpec(msgspec.Struct, frozen=True, gc=False):
    """What the reclaim reads of a pod's spec: where it may go, and what it asks of the node."""

    containers: list[PortedContainer] = []
    initContainers: list[PortedContainer] | None = None
    overhead: wire.ResourceList | None = None
    resources: wire.ResourceRequirements | None = None  # pod-level resources (KEP-2837)
    nodeName: str | None = None
    preemptionPolicy: str | None = None  # Never: kube-scheduler preempts nobody for the pod
    nodeSelector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    topologySpreadConstraints: list[TopologySpreadConstraint] | None = None
    volumes: list[Volume] | None = None
    resourceClaims: list[msgspec.Raw] | None = None  # only whether there are any matters: not modelled


class ConstrainedPod(msgspec.Struct, frozen=True, gc=False):
    metadata: wire.ObjectMeta = wire.ObjectMeta()
    spec: ConstrainedPodSpec = ConstrainedPodSpec()
    status: wire.PodStatus | None = None




class Taint(msgspec.Struct, frozen=True, gc=False):
    key: str = ""
    value: str = ""
    effect: str = ""


class TaintedNodeSpec(wire.NodeSpec, frozen=True, kw_only=True):
    taints: list[Taint] | None = None


class TaintedNode(msgspec.Struct, frozen=True, gc=False):
    metadata: wire.ObjectMeta = wire.ObjectMeta()
    spec: TaintedNodeSpec | None = None
    status: wire.NodeStatus | None = None


_POD_DECODER: Final = msgspec.json.Decoder(ConstrainedPod)
_NODE_DECODER: Final = msgspec.json.Decoder(TaintedNode)


def pods_of(raw_list: bytes) -> list[ConstrainedPod]:
    """The pods of a PodList; one whose fields do not read as Kubernetes writes them is left out
    (it cannot be placed by these rules), not the list."""
    return _items(raw_list, _POD_DECODER)


def nodes_of(raw_list: bytes) -> list[TaintedNode]:
    """The nodes of a NodeList, as :func:`pods_of`."""
    return _items(raw_list, _NODE_DECODER)


def _items(raw_list: bytes, decoder: msgspec.json.Decoder[T]) -> list[T]:
    """Raises :class:`~scheduler.errors.InvalidRequest` when the list itself does not read."""
    try:
        items = read_page(raw_list).items  # split with the GIL released, as the watch cache's pages
    except msgspec.MsgspecError as error:
        raise InvalidRequest(f"the API server's list did not read: {error}") from error
    decoded = []
    for item in items:
        try:
            decoded.append(decoder.decode(item))
        except msgspec.MsgspecError:
            continue
    return decoded


def unmodelled(spec: ConstrainedPodSpec, *, gpu_resource: str = RESOURCE_NVIDIA_GPU) -> str | None:
    """What in the pod's spec these rules cannot check (None: nothing): required inter-pod
    affinity or anti-affinity, a topology spread that refuses nodes, a volume claim (a claim
    may bind the pod to a zone), a resource claim (its devices are on some nodes only), a host
    port (the pods that stay may use it), a resource other than cores, memory and
    ``gpu_resource`` (an extended resource such as ``rdma/hca``, hugepages: the pods that stay
    may use it, or the node not have it). Ephemeral storage is assumed to fit."""
    affinity = spec.affinity
    if affinity is not None:
        for name, rules in (("podAffinity", affinity.podAffinity), ("podAntiAffinity", affinity.podAntiAffinity)):
            if rules is not None and rules.requiredDuringSchedulingIgnoredDuringExecution:
                return f"spec.affinity.{name} (required terms)"
    if any(c.whenUnsatisfiable == "DoNotSchedule" for c in spec.topologySpreadConstraints or ()):
        return "spec.topologySpreadConstraints (whenUnsatisfiable: DoNotSchedule)"
    for volume in spec.volumes or ():
        if volume.persistentVolumeClaim is not None or volume.ephemeral is not None:
            return f"spec.volumes[{volume.name!r}] (a volume claim)"
    if spec.resourceClaims:
        return "spec.resourceClaims (dynamic resource allocation)"
    return _host_port(spec) or _unchecked_resource(spec, gpu_resource=gpu_resource)


def _containers(spec: ConstrainedPodSpec) -> list[tuple[str, PortedContainer]]:
    """Each container with the path of its field, init containers after the others."""
    return ([(f"spec.containers[{i}]", c) for i, c in enumerate(spec.containers)]
            + [(f"spec.initContainers[{i}]", c) for i, c in enumerate(spec.initContainers or ())])


def _host_port(spec: ConstrainedPodSpec) -> str | None:
    """The first host port the pod asks for, named with its field (kube-scheduler's NodePorts
    refuses a node where a pod that stays holds it)."""
    for path, container in _containers(spec):
        for index, port in enumerate(container.ports or ()):
            if port.hostPort:
                return f"{path}.ports[{index}].hostPort ({port.hostPort}, a host port)"
    return None


def _unchecked_resource(spec: ConstrainedPodSpec, *, gpu_resource: str) -> str | None:
    """The first resource the pod requests (or limits, which the requests default to) that the
    reclaim does not check, named with its field."""
    checked = _CHECKED_RESOURCES | _ASSUMED_TO_FIT | {gpu_resource}
    lists: list[tuple[str, wire.ResourceList | None]] = [("spec.overhead", spec.overhead)]
    requirements = [(path, container.resources) for path, container in _containers(spec)]
    requirements.append(("spec", spec.resources))
    for path, resources in requirements:
        if resources is not None:
            lists += [(f"{path}.resources.requests", resources.requests), (f"{path}.resources.limits", resources.limits)]
    for path, quantities in lists:
        for name in quantities or {}:
            if name not in checked:
                return f"{path}[{name!r}] (a resource the reclaim does not check: cellfit checks cpu, memory and {gpu_resource})"
    return None


_PLACEMENT_ENCODER: Final = msgspec.json.Encoder()


def placement_key(spec: ConstrainedPodSpec) -> bytes:
    """What :func:`why_not` reads of the pod, as bytes: pods with equal keys are refused by the
    same nodes (a Job's pods share one)."""
    return _PLACEMENT_ENCODER.encode((spec.nodeName, spec.nodeSelector, spec.affinity.nodeAffinity if spec.affinity else None,
                                      spec.tolerations))


def why_not(spec: ConstrainedPodSpec, node: TaintedNode) -> str | None:
    """Why kube-scheduler would refuse ``node`` to the pod whatever the node's free resources
    (None: it would not), in kube-scheduler's words where it has them."""
    name, labels = node.metadata.name, node.metadata.labels or {}
    if spec.nodeName and spec.nodeName != name:
        return "node(s) didn't match the requested node name"
    taints = list(node.spec.taints or ()) if node.spec is not None else []
    tolerations = spec.tolerations or ()
    if node.spec is not None and node.spec.unschedulable and not _tolerated(Taint(key=UNSCHEDULABLE_TAINT, effect="NoSchedule"), tolerations):
        return "node(s) were unschedulable"
    if any(labels.get(key) != value for key, value in (spec.nodeSelector or {}).items()):
        return "node(s) didn't match Pod's node affinity/selector"
    required = spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution if (
        spec.affinity is not None and spec.affinity.nodeAffinity is not None) else None
    if required is not None and not any(term_matches(term, name=name, labels=labels) for term in required.nodeSelectorTerms):
        return "node(s) didn't match Pod's node affinity/selector"
    for taint in taints:
        if taint.effect in _FILTERING_EFFECTS and not _tolerated(taint, tolerations):
            return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    return None


def _tolerated(taint: Taint, tolerations: Sequence[Toleration]) -> bool:
    return any(_tolerates(toleration, taint) for toleration in tolerations)


def _tolerates(toleration: Toleration, taint: Taint) -> bool:
    """k8s.io/api/core/v1 Toleration.ToleratesTaint: an empty effect matches every effect, an
    empty key with Exists matches every key."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        return bool(toleration.key) and toleration.value == taint.value
    return False


def term_matches(term: NodeSelectorTerm, *, name: str, labels: Mapping[str, str]) -> bool:
    """A term matches when all its requirements do; a term with none matches no node (the
    estimator's never-runs judgement asks it of a node's labels too)."""
    expressions, fields = term.matchExpressions or [], term.matchFields or []
    if not expressions and not fields:
        return False
    return (all(requirement_matches(r, labels.get(r.key)) for r in expressions)
            and all(requirement_matches(r, name if r.key == "metadata.name" else None) for r in fields))


def requirement_matches(requirement: NodeSelectorRequirement, value: str | None) -> bool:
    """Whether a node whose label (or field) the requirement names has ``value`` (None: none)
    meets it, as kube-scheduler decides; placer/rewrite.py judges AlloX's pool by it too."""
    values = requirement.values or []
    operator = requirement.operator
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        return value is not None and len(values) == 1 and _compare(value, values[0], greater=operator == "Gt")
    return False  # an operator the API server would have refused


def _compare(value: str, bound: str, *, greater: bool) -> bool:
    number, limit = _go_int64(value), _go_int64(bound)
    if number is None or limit is None:
        return False
    return number > limit if greater else number < limit


def _go_int64(text: str) -> int | None:
    """The integer Go's ``strconv.ParseInt(text, 10, 64)`` reads (kube-scheduler's Gt and Lt);
    None where it refuses: Python's ``int`` would also take spaces, underscores and non-ASCII
    digits, and numbers beyond 64 bits, and admit nodes kube-scheduler refuses."""
    if _GO_INTEGER.fullmatch(text) is None:
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None
