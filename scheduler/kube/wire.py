"""kube-scheduler's extender wire format, and the narrow slices of v1.Pod / v1.Node cellfit reads.

The extender types (k8s.io/kube-scheduler/extender/v1) carry no JSON tags, so their fields are
spelled as in Go (``Pod``, ``NodeNames``, ``FailedAndUnresolvableNodes``...). The Kubernetes
objects inside are lowerCamelCase as the API serialises them. Decoding is with msgspec into
structs holding only what a decision needs: unknown fields are skipped without being built,
which is what keeps a 5,000-node request sub-millisecond. Full Node objects are kept as raw
bytes so that filter can hand them back to kube-scheduler untouched.

The same structs decode objects from the Kubernetes API (list and watch), so a pod reaches the
engine through one translation whichever way it arrived.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Generic, TypeVar

import msgspec

from scheduler.constants import RESOURCE_NVIDIA_GPU
from scheduler.core.resources import DEVICE_COUNT_PATTERN, QUANTITY_LIMIT, QUANTITY_PATTERN
from scheduler.errors import InvalidRequest

T = TypeVar("T")

# A quantity is a string on the wire; YAML-born numbers occasionally arrive as JSON numbers. The
# OpenAPI document says what parse_quantity accepts in every field (a non-negative quantity's
# grammar, its magnitude bounded so that a CPU's millicores fit int64; at most 64 characters),
# and under the GPU resource a whole count. Decoding checks nothing more, so a bad one is
# refused naming its field. What the document allows never is (test_quantity_pattern_bounds).
Quantity = (
    Annotated[str, msgspec.Meta(extra_json_schema={"pattern": QUANTITY_PATTERN, "maxLength": 64})]
    | Annotated[int, msgspec.Meta(extra_json_schema={"minimum": 0, "maximum": QUANTITY_LIMIT})]
    | Annotated[float, msgspec.Meta(extra_json_schema={"minimum": 0, "maximum": QUANTITY_LIMIT})]
)
# The count of the default GPU resource (gpuResourceName: nvidia.com/gpu): whole devices, a
# fraction being refused (as Kubernetes refuses it for an extended resource).
_DEVICE_COUNT: Final = {
    "anyOf": [
        {"type": "string", "pattern": DEVICE_COUNT_PATTERN, "maxLength": 64},
        {"type": "integer", "minimum": 0, "maximum": QUANTITY_LIMIT},
    ]
}
ResourceList = Annotated[
    dict[str, Quantity], msgspec.Meta(extra_json_schema={"properties": {RESOURCE_NVIDIA_GPU: _DEVICE_COUNT}})
]


def device_count_named(schema: Any, *, gpu_resource: str) -> Any:
    """``schema`` (JSON schemas made from these structs) with the whole-device count documented
    under ``gpu_resource`` (policy.gpuResourceName) in place of the default name: cellfit refuses a
    fraction only of the resource it counts as GPUs, and reads any other as a quantity."""
    if gpu_resource == RESOURCE_NVIDIA_GPU:
        return schema
    if isinstance(schema, list):
        return [device_count_named(item, gpu_resource=gpu_resource) for item in schema]
    if not isinstance(schema, dict):
        return schema
    named = {key: device_count_named(value, gpu_resource=gpu_resource) for key, value in schema.items()}
    properties = named.get("properties")
    if isinstance(properties, dict) and properties.get(RESOURCE_NVIDIA_GPU) == _DEVICE_COUNT:
        named["properties"] = {gpu_resource if key == RESOURCE_NVIDIA_GPU else key: value for key, value in properties.items()}
    return named


class OwnerReference(msgspec.Struct, frozen=True, gc=False):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[OwnerReference] | None = None
    deletionTimestamp: str | None = None
    generateName: str | None = None


class ResourceRequirements(msgspec.Struct, frozen=True, gc=False):
    requests: ResourceList | None = None
    limits: ResourceList | None = None


class Container(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    resources: ResourceRequirements | None = None
    restartPolicy: str | None = None  # "Always" on an init container: a sidecar (KEP-753)


class PodSpec(msgspec.Struct, frozen=True, gc=False):
    containers: list[Container] = []
    initContainers: list[Container] | None = None
    overhead: ResourceList | None = None
    resources: ResourceRequirements | None = None  # pod-level resources (KEP-2837)
    priorityClassName: str | None = None  # read by the validating webhook only
    nodeName: str | None = None
    schedulerName: str | None = None
    priority: int | None = None
    preemptionPolicy: str | None = None  # Never: kube-scheduler preempts nobody for the pod
    terminationGracePeriodSeconds: int | None = None


class PodCondition(msgspec.Struct, frozen=True, gc=False):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None


class PodStatus(msgspec.Struct, frozen=True, gc=False):
    phase: str | None = None
    nominatedNodeName: str | None = None
    conditions: list[PodCondition] | None = None


class Pod(msgspec.Struct, frozen=True, gc=False):
    metadata: ObjectMeta = ObjectMeta()
    spec: PodSpec = PodSpec()
    status: PodStatus | None = None


class NodeCondition(msgspec.Struct, frozen=True, gc=False):
    type: str = ""
    status: str = ""


class NodeSpec(msgspec.Struct, frozen=True, gc=False):
    unschedulable: bool | None = None


class NodeStatus(msgspec.Struct, frozen=True, gc=False):
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    conditions: list[NodeCondition] | None = None


class Node(msgspec.Struct, frozen=True, gc=False):
    metadata: ObjectMeta = ObjectMeta()
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class JobWidth(msgspec.Struct, frozen=True, gc=False):
    """How many pods a Job runs at once (HiveD refuses a gang larger than that), and its
    podFailurePolicy (whether a pod FitGpp preempts resumes or counts as failed; its Preempted
    Event says which)."""

    parallelism: int | None = None
    completions: int | None = None
    podFailurePolicy: dict[str, Any] | None = None
    backoffLimit: int | None = None
    backoffLimitPerIndex: int | None = None


class JobStatus(msgspec.Struct, frozen=True, gc=False):
    """The failed pods the Job controller counted against the Job's backoffLimit, and the start of
    its present run (reset when it is started again after a suspension): the run an AlloX Job's
    pods-bound record names."""

    failed: int | None = None
    startTime: str | None = None


class Job(msgspec.Struct, frozen=True, gc=False):
    """A batch/v1 Job: cellfit reads its identity, annotations, width, podFailurePolicy and count
    of failed pods."""

    metadata: ObjectMeta = ObjectMeta()
    spec: JobWidth = JobWidth()
    status: JobStatus | None = None


class PriorityClass(msgspec.Struct, frozen=True, gc=False):
    """A scheduling.k8s.io/v1 PriorityClass: both fields are immutable once created."""

    metadata: ObjectMeta = ObjectMeta()
    value: int = 0
    preemptionPolicy: str | None = None


class NamedObjectMeta(ObjectMeta, frozen=True, kw_only=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]


class OfferedNode(msgspec.Struct, frozen=True, gc=False):
    """What the OpenAPI document says of each Node in a RawNodeList: cellfit reads it as
    :class:`Node` and refuses one without a name (HTTP 400), so the document requires it."""

    metadata: NamedObjectMeta
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class RawNodeList(msgspec.Struct, frozen=True, gc=False):
    """A v1.NodeList whose items stay raw JSON: decoded narrowly one by one, echoed verbatim.
    The OpenAPI document describes each item as an :class:`OfferedNode` (a component of it)."""

    items: list[Annotated[msgspec.Raw, msgspec.Meta(extra_json_schema={"$ref": "#/components/schemas/OfferedNode"})]] | None = None


class NodeList(msgspec.Struct, frozen=True, gc=False):
    """The NodeList the filter result carries back, built from the request's raw items."""

    apiVersion: str = "v1"
    kind: str = "NodeList"
    metadata: dict[str, Any] = {}
    items: list[msgspec.Raw] = []


# --- extender verbs (k8s.io/kube-scheduler/extender/v1/types.go) ---


class ExtenderArgs(msgspec.Struct, frozen=True, gc=False):
    Pod: Pod
    Nodes: RawNodeList | None = None
    NodeNames: list[str] | None = None


class ExtenderFilterResult(msgspec.Struct, frozen=True, gc=False):
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = {}
    FailedAndUnresolvableNodes: dict[str, str] = {}
    Error: str = ""


class ExtenderFilterAnswer(msgspec.Struct, frozen=True, gc=False):
    """ExtenderFilterResult as the service writes it: the node names as JSON text
    (scheduler.kube.names copies them from the request). ExtenderFilterResult describes the wire
    format in the OpenAPI document; tests/unit/test_names.py keeps the two alike."""

    Nodes: NodeList | None = None
    NodeNames: msgspec.Raw | None = None
    FailedNodes: dict[str, str] = {}
    FailedAndUnresolvableNodes: dict[str, str] = {}
    Error: str = ""


class HostPriority(msgspec.Struct, frozen=True, gc=False):
    # gc=False: thousands are built per prioritize call and none can form a cycle.
    Host: str
    Score: int


class MetaPod(msgspec.Struct, frozen=True, gc=False):
    UID: str


# A candidate node's victims may be empty, written ``[]``, ``null`` (Go's nil slice) or left out:
# newer kube-schedulers (kubernetes#139270, PR #135486) offer preemption-capable extenders nodes
# whose dry run found no victim, because it cannot see the resources the extender manages. The
# node's entry itself may be ``null`` (a nil *Victims), and so may either map.


class MetaVictims(msgspec.Struct, frozen=True, gc=False):
    Pods: list[MetaPod] | None = []
    NumPDBViolations: int = 0


class Victims(msgspec.Struct, frozen=True, gc=False):
    Pods: list[Pod] | None = []
    NumPDBViolations: int = 0


class ExtenderPreemptionArgs(msgspec.Struct, frozen=True, gc=False):
    Pod: Pod
    NodeNameToVictims: dict[str, Victims | None] | None = None
    NodeNameToMetaVictims: dict[str, MetaVictims | None] | None = None


class ExtenderPreemptionResult(msgspec.Struct, frozen=True, gc=False):
    NodeNameToMetaVictims: dict[str, MetaVictims] | None = None


class ExtenderBindingArgs(msgspec.Struct, frozen=True, gc=False):
    PodName: str
    PodNamespace: str
    PodUID: str
    Node: str


class ExtenderBindingResult(msgspec.Struct, frozen=True, gc=False):
    Error: str = ""


class ErrorBody(msgspec.Struct, frozen=True, gc=False):
    """The body of every HTTP 4xx cellfit answers; ``Error`` as in the extender result types."""

    Error: str


# --- admission.k8s.io/v1 (the pod-create webhook) ---


class AdmittedPodSpec(msgspec.Struct, frozen=True, gc=False):
    priority: int | None = None
    priorityClassName: str | None = None
    schedulerName: str | None = None


class AdmittedPod(msgspec.Struct, frozen=True, gc=False):
    """The pod being created: no uid yet, maybe no name (``generateName``)."""

    metadata: ObjectMeta = ObjectMeta()
    spec: AdmittedPodSpec = AdmittedPodSpec()


class GroupVersionKind(msgspec.Struct, frozen=True, gc=False):
    group: str = ""
    version: str = ""
    kind: str = ""


class AdmissionRequest(msgspec.Struct, frozen=True, gc=False):
    uid: str
    kind: GroupVersionKind = GroupVersionKind()
    operation: str = ""
    namespace: str = ""
    object: AdmittedPod | None = None


class AdmissionReview(msgspec.Struct, frozen=True, gc=False):
    request: AdmissionRequest
    apiVersion: str = "admission.k8s.io/v1"
    kind: str = "AdmissionReview"


class AdmissionStatus(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    message: str = ""


class AdmissionResponse(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    uid: str
    allowed: bool
    patchType: str | None = None
    patch: str | None = None  # base64 of the JSON Patch document
    warnings: list[str] | None = None
    status: AdmissionStatus | None = None


class AdmissionReviewResponse(msgspec.Struct, frozen=True, gc=False):
    response: AdmissionResponse
    apiVersion: str = "admission.k8s.io/v1"
    kind: str = "AdmissionReview"


# --- Kubernetes API list responses (watch cache) ---


class ListMeta(msgspec.Struct, frozen=True, gc=False):
    resourceVersion: str = ""
    # A paged list's next page (``?limit=N&continue=...``); empty on the last page.
    continue_token: str = msgspec.field(default="", name="continue")


class RawList(msgspec.Struct, frozen=True, gc=False):
    """Any list response with its items left undecoded: a relist decodes them one by one (see
    scheduler.cluster.cache.LazilyDecoded), never the whole list in one call holding the GIL."""

    metadata: ListMeta = ListMeta()
    items: list[msgspec.Raw] | None = None


class DecodedNodeList(msgspec.Struct, frozen=True, gc=False):
    metadata: ListMeta = ListMeta()
    items: list[Node] = []


class StatusCause(msgspec.Struct, frozen=True, gc=False):
    message: str = ""
    field: str = ""


class StatusDetails(msgspec.Struct, frozen=True, gc=False):
    causes: list[StatusCause] | None = None


class Status(msgspec.Struct, frozen=True, gc=False):
    """metav1.Status: an API error's answer, and a watch ERROR event's object."""

    code: int = 0
    reason: str = ""
    message: str = ""
    details: StatusDetails | None = None

    def text(self) -> str:
        """The message, and each cause's where the message does not hold it already: the API
        server's answer to a JSON Patch whose operation failed (a ``test`` among them) says only
        "the server rejected our request due to an error in our request" and names the failed
        operation's path in its one cause ("testing value /spec/suspend failed: test failed")."""
        causes = self.details.causes if self.details is not None and self.details.causes else ()
        told = [cause.message for cause in causes if cause.message and cause.message not in self.message]
        return "; ".join([self.message, *told]) if self.message and told else self.message or "; ".join(told)


class WatchEvent(msgspec.Struct, frozen=True, gc=False):
    type: str
    object: msgspec.Raw


class ObjectEvent(msgspec.Struct, Generic[T], frozen=True, gc=False):
    """A watch event decoded with its object in one pass (ADDED, MODIFIED, DELETED): the line is
    read once, not once for the event and again for the object."""

    type: str
    object: T


class Bookmark(msgspec.Struct, frozen=True, gc=False):
    """A BOOKMARK event's object: only ``metadata.resourceVersion`` is meaningful (the rest of
    the object is empty, e.g. a pod with ``spec.containers: null``)."""

    metadata: ListMeta = ListMeta()


# Decoders are built once: msgspec compiles a decoder per type.
EXTENDER_ARGS_DECODER = msgspec.json.Decoder(ExtenderArgs)
PREEMPTION_ARGS_DECODER = msgspec.json.Decoder(ExtenderPreemptionArgs)
BINDING_ARGS_DECODER = msgspec.json.Decoder(ExtenderBindingArgs)
ADMISSION_REVIEW_DECODER = msgspec.json.Decoder(AdmissionReview)
NODE_DECODER = msgspec.json.Decoder(Node)
POD_DECODER = msgspec.json.Decoder(Pod)
NODE_LIST_DECODER = msgspec.json.Decoder(DecodedNodeList)
JOB_DECODER = msgspec.json.Decoder(Job)
PRIORITY_CLASS_DECODER = msgspec.json.Decoder(PriorityClass)
RAW_LIST_DECODER = msgspec.json.Decoder(RawList)
WATCH_EVENT_DECODER = msgspec.json.Decoder(WatchEvent)
STATUS_DECODER = msgspec.json.Decoder(Status)
BOOKMARK_DECODER = msgspec.json.Decoder(Bookmark)
ENCODER = msgspec.json.Encoder()


def decode(decoder: msgspec.json.Decoder[T], body: bytes | msgspec.Raw, *, field: str | None = None) -> T:
    """``decoder.decode(body)``, with every failure an :class:`InvalidRequest` naming the field."""
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as error:
        # msgspec says "Expected `str`, got `int` - at `$.Pod.metadata.name`"; keep that path.
        raise InvalidRequest(str(error).replace("$.", "", 1), field=field) from None
    except msgspec.DecodeError as error:
        raise InvalidRequest(f"malformed JSON: {error}", field=field) from None
    except UnicodeDecodeError as error:
        raise InvalidRequest(f"malformed JSON: not UTF-8 ({error.reason} at byte {error.start})", field=field) from None
    except RecursionError:
        raise InvalidRequest("malformed JSON: nested too deeply", field=field) from None


def annotation_pointer(key: str) -> str:
    """The JSON Pointer (RFC 6901) of the annotation ``key``, for a JSON Patch of the object."""
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
