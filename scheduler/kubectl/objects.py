"""The facts ``why`` reasons over, and how each is read from the API's JSON. Pure: plain
values in, frozen values out; the reading itself is ``facts``'."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Final, Mapping

from scheduler.constants import (
    ANNOTATION_CONFIGURATIONS,
    ANNOTATION_ESTIMATE,
    ANNOTATION_GANG,
    ANNOTATION_GANG_SIZE,
    ANNOTATION_ITERATIONS,
    ANNOTATION_PLACEMENT,
    ANNOTATION_PREEMPTIONS,
    DEFAULT_VIRTUAL_CLUSTER,
    JOB_CLASS_BEST_EFFORT,
    LABEL_JOB_CLASS,
    LABEL_PRIORITY,
    LABEL_VIRTUAL_CLUSTER,
    PRIORITY_GUARANTEED,
    RESOURCE_NVIDIA_GPU,
)
from estimator.objects import LABEL_SAMPLE
from scheduler.wording import IGNORE, ExitCodeRule, backoff_limit, disruption_action, exit_code_rules_before_disruption

# Annotations cellfit reads from the Job itself, never from its pod template (as the validating
# webhook's JOB_LEVEL_ANNOTATIONS, scheduler/extender/validation.py, which this package may not import).
JOB_LEVEL_ANNOTATIONS = (ANNOTATION_CONFIGURATIONS, ANNOTATION_ESTIMATE, ANNOTATION_ITERATIONS)

# The Preempting event's message (scheduler/preemption/fitgpp.py PreemptionDecision):
# "preempting ns/pod on node X (score 0.63 = size 0.50 + 4.0 x grace 0.03: <the terms in words>)";
# the words hold no parentheses (tests/preemption/test_score_in_words.py reads both back).
# A gang FitGpp takes whole is one victim: "preempting the gang ns/job (2 pods, 16 GPUs) on node X
# and its pods on node Y, which cellfit deletes itself (score ...)" (preemption/fitgpp.py).
PREEMPTING = re.compile(r"^preempting (?P<victim>the gang \S+ \(\d+ pods?, \d+ GPUs?\)|\S+) on node (?P<node>\S+)"
                        r"(?: and its pods on nodes? .+?, which cellfit deletes itself)? \((?P<why>.*)\)$")
# cellfit's Preempted event: "preempted by ns/pod" and, since it says where and why itself,
# " on node X: ... (FitGpp score 0.63 = size 0.50 + 4.0 x grace 0.03: ...)" (the score only under the
# FitGpp rule, not its random fallback). A gang member on another node than the preemptor's,
# which cellfit deletes itself, is told "preempted with its gang ns/job: the trial pod ns/pod takes
# the gang's room on node X; this pod ran on node Y ..." (scheduler/preemption/gang_victims.py).
_PREEMPTED_HEAD = r"^preempted (?:by |with its gang(?: \S+)?: the trial pod )(?P<by>\S+)"
PREEMPTED_BY = re.compile(_PREEMPTED_HEAD)
PREEMPTED_WHERE = re.compile(_PREEMPTED_HEAD + r" (?:takes the gang's room )?on node (?P<node>[^\s;:]+)[:;]"
                             r"(?:.*\(FitGpp (?P<why>score [^()]*)\)$)?")
# cellfit's Preempted event on a pod HiveD's reclaim took (scheduler/preemption/reclaimed.py):
# "preempted by ns/pod on node X: HiveD reclaims the cells this pod ran on for ns/pod, a
# guaranteed pod of virtual cluster <vc>, ...": no score, its own Event says why.
RECLAIMED = re.compile(r"^preempted by \S+ on node \S+: HiveD reclaims the cells this pod ran on for \S+, a guaranteed pod of "
                       r"virtual cluster (?P<vc>\S+), ")
# cellfit's Preempted event on a pod the leader's reclaim deleted itself, kube-scheduler not
# preempting it for a guaranteed pod of no higher priority (scheduler/cluster/reclaim.py):
# "preempted for guaranteed pod ns/pod of virtual cluster <vc>, which waits for cell C on node X: ...", where C may
# hold spaces (a cell below node level is named <node>/<type>#<n>, and a cell type name may hold one).
RECLAIMED_FOR = re.compile(r"^preempted for guaranteed pod (?P<by>\S+) of virtual cluster (?P<vc>\S+), which waits for cell .+? "
                           r"on node (?P<node>\S+):")
# kube-scheduler's, on the same pod: "Preempted by pod <uid> on node <node>".
SCHEDULER_PREEMPTED = re.compile(r"^Preempted by pod (?P<uid>\S+) on node (?P<node>\S+)")


@dataclass(frozen=True, kw_only=True)
class Event:
    reason: str
    message: str
    warning: bool
    count: int = 1
    # RFC 3339 (lastTimestamp, else eventTime, else creationTimestamp): sorts as time does.
    last_seen: str = ""


@dataclass(frozen=True, kw_only=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    # lastTransitionTime, RFC 3339 as written: when an older cellfit's "expected start in ~12 min"
    # was said.
    since: str = ""


# kube-scheduler's own reason (NodeResourcesFit) for a node with too few GPUs for the pod.
INSUFFICIENT_GPU: Final = f"Insufficient {RESOURCE_NVIDIA_GPU}"
# The leader's Warning Event on a guaranteed pod that waits for its VC's cells opportunistic pods
# hold, which cellfit does not reclaim for it (scheduler/cluster/stranded.py NOT_RECLAIMED: that
# module pulls in the engines, too much for the plugin; a test keeps the two equal).
NOT_RECLAIMED: Final = "CellsNotReclaimed"


@dataclass(frozen=True, kw_only=True)
class PodFacts:
    namespace: str
    name: str
    phase: str
    node: str | None
    scheduler_name: str
    vc: str
    job_class: str
    priority: str = PRIORITY_GUARANTEED  # its cellfit.io/priority: only a guaranteed pod is held to its VC's quota
    gang: bool = False
    gang_size: int | None = None
    scheduling_gates: tuple[str, ...] = ()
    deleting: bool = False
    events: tuple[Event, ...] = ()
    # status.nominatedNodeName: kube-scheduler's preemption made room there for the pod.
    nominated_node: str | None = None
    # Its own preemption, when it was preempted (read only for a pod asked about, still leaving).
    preemption: Preemption | None = None
    # GPUs the pod asks (nvidia.com/gpu: its containers' together, or its largest init
    # container's): one no node holds is never placed, whatever kube-scheduler's message says.
    gpus: int = 0
    # kube-scheduler's PodScheduled=False condition: the whole of the message its FailedScheduling
    # Event cuts at 1024 bytes (" ..."), where a cellfit reason sorted last may be.
    unschedulable: Condition | None = None
    # A sampling pod of cellfit's estimator (label cellfit.io/sample): it asks kube-scheduler to
    # preempt nobody (preemptionPolicy Never), so nothing is reclaimed for it.
    sample: bool = False
    # When its last container ended (status.containerStatuses[].state.terminated.finishedAt, the
    # latest), RFC 3339; "" where none ended: a failed pod's finish, which the Job controller's
    # back-off before its next pod counts from.
    finished_at: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, kw_only=True)
class Preemption:
    """One pod of the Job preempted: by whom, where, and FitGpp's score breakdown (from the
    preemptor's Preempting event; None when that event is gone)."""

    victim: str
    by: str
    node: str | None = None
    breakdown: str | None = None
    when: str = ""
    # Why the breakdown is missing when the preemptor's events could not be read (another
    # tenant's namespace, which FitGpp preempts across): said, not left to look like no score.
    unread: str = ""


@dataclass(frozen=True, kw_only=True)
class JobFacts:
    namespace: str
    name: str
    suspended: bool
    interchangeable: bool
    placement: str | None = None
    estimate: Mapping[str, Any] | None = None
    preemption_count: int = 0
    conditions: tuple[Condition, ...] = ()
    events: tuple[Event, ...] = ()
    pods: tuple[PodFacts, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    # The limit the Job controller fails the Job at, as spec names it: ("backoffLimit", 6), or
    # ("backoffLimitPerIndex", n) for an Indexed Job with one; and the action of its
    # podFailurePolicy's rule on a preempted pod (DisruptionTarget; wording.disruption_action):
    # Ignore (a preemption is not counted against it), Count, FailJob, FailIndex, None (no rule).
    backoff_limit: tuple[str, int] = ("backoffLimit", 6)
    disruption_action: str | None = None
    # Its podFailurePolicy's rules on exit codes before its rule on DisruptionTarget that take a
    # preempted pod exiting as a stopped process usually does (137, 143): the first rule that
    # matches applies (wording.exit_code_rules_before_disruption), as the victims' Events say.
    disruption_exit_codes: tuple[ExitCodeRule, ...] = ()
    # status.failed: the failed pods the Job controller counted (the Job fails once they exceed
    # its backoffLimit), preempted ones among them unless its podFailurePolicy ignores them.
    failed: int = 0
    # status.succeeded: a success resets the Job controller's back-off count.
    succeeded: int = 0
    # Job-level cellfit annotations (JOB_LEVEL_ANNOTATIONS) written on its pod template
    # (spec.template.metadata.annotations) and not on the Job itself: there cellfit never reads them.
    template_job_keys: tuple[str, ...] = ()
    # An interchangeable Job's sampling pods still pending (cellfit's estimator creates them,
    # owned by the Job but not its controller's: not among ``pods``), their Events read.
    sampling_pods: tuple[PodFacts, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def ignores_disruption(self) -> bool:
        return self.disruption_action == IGNORE

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)


@dataclass(frozen=True, kw_only=True)
class CellfitView:
    """What cellfit's inspect API says about the object: its VC (``/virtual-clusters/{vc}``),
    the resume holds, the Job's estimator entry and AlloX queue entry; ``unavailable``: views
    cellfit does not serve here, with its sentence (resource-fit has no VCs, AlloX is off).
    ``resume_holds``: None when not read; read, the holds that stand now, which a pod's last
    FailedScheduling may no longer match (a hold given up or ended since). Holds live in each
    replica's memory, and only the replica beside the active kube-scheduler keeps pods off;
    the service proxy reaches any ready replica. ``replicas``: the cellfit pods behind the
    Service (its EndpointSlices), 1 by default; None where not known (the user may not list
    them): then the view read may be a standby's, whose holds are not the ones that count."""

    virtual_cluster: Mapping[str, Any] | None = None
    resume_holds: tuple[Mapping[str, Any], ...] | None = None
    replicas: int | None = 1
    estimator_entry: Mapping[str, Any] | None = None
    allox_entry: Mapping[str, Any] | None = None
    unavailable: Mapping[str, str] = field(default_factory=dict)
    # The physical tree without GPU cells (``/v1/inspect/cells?gpus=false``), read where the VC
    # has quota not bound: whether a free healthy cell is left to bind it.
    cell_tree: Mapping[str, Any] | None = None
    # Why nodes of the VC's cells are bad, by node, from the Node objects: "cordoned", "not
    # ready", "deleted"; a node not read (the user may not get Nodes) is absent.
    node_states: Mapping[str, str] = field(default_factory=dict)
    # The node-level cell type holding the most GPUs and how many (HiveD's cell tree), read
    # where kube-scheduler found too few GPUs on every node: a pod asking more never fits.
    largest_node_cell: tuple[str, int] | None = None


@dataclass(frozen=True, kw_only=True)
class GoneFacts:
    """A pod or Job asked about that no longer exists, and what its events still say (the API
    server keeps them an hour): a pod FitGpp preempted is deleted, its name in its user's logs.
    ``preemption``: its own, when an event says it was preempted."""

    kind: str
    namespace: str
    name: str
    events: tuple[Event, ...]
    preemption: Preemption | None = None


@dataclass(frozen=True, kw_only=True)
class Facts:
    """``pod`` for ``why pod/NAME``; ``job`` for ``why job/NAME`` (its pods inside it), and also
    for a pod of a Job, so the Job's preemptions and estimates explain the pod too; ``gone`` for
    either once deleted. ``notes``: what could not be read, said after the answer's facts.
    ``now``: when they were read (seconds since the epoch), for the waits said from now."""

    pod: PodFacts | None = None
    job: JobFacts | None = None
    gone: GoneFacts | None = None
    cellfit: CellfitView = field(default_factory=CellfitView)
    notes: tuple[str, ...] = ()
    now: float | None = None


# ------------------------------------------------------------------------------ reading


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def event_from(obj: Mapping[str, Any]) -> Event:
    # kube-scheduler writes events.k8s.io Events: read as core/v1, a repeated one has its latest
    # occurrence in series.lastObservedTime, its first in eventTime, and no lastTimestamp.
    series = obj.get("series") or {}
    stamp = (series.get("lastObservedTime") or obj.get("lastTimestamp") or obj.get("eventTime")
             or _meta(obj).get("creationTimestamp") or "")
    return Event(
        reason=str(obj.get("reason") or ""),
        message=str(obj.get("message") or "").strip(),
        warning=obj.get("type") == "Warning",
        count=int(series.get("count") or obj.get("count") or 1),
        last_seen=str(stamp),
    )


def events_from(items: list[Mapping[str, Any]]) -> tuple[Event, ...]:
    """Oldest first."""
    return tuple(sorted((event_from(item) for item in items), key=lambda e: moment(e.last_seen)))


def moment(stamp: str) -> datetime:
    """An RFC 3339 time, seconds (lastTimestamp) or microseconds (eventTime) alike, comparable as
    time (as text, 10:00:00.5Z sorts before 10:00:00Z); one that does not read sorts first."""
    try:
        parsed = datetime.fromisoformat(stamp)
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def pod_from(obj: Mapping[str, Any], *, events: tuple[Event, ...] = ()) -> PodFacts:
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    size = annotations.get(ANNOTATION_GANG_SIZE)
    return PodFacts(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        phase=str(status.get("phase") or "Pending"),
        node=spec.get("nodeName") or None,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        vc=str(labels.get(LABEL_VIRTUAL_CLUSTER) or DEFAULT_VIRTUAL_CLUSTER),
        job_class=str(labels.get(LABEL_JOB_CLASS) or JOB_CLASS_BEST_EFFORT),
        priority=str(labels.get(LABEL_PRIORITY) or PRIORITY_GUARANTEED),
        gang=str(annotations.get(ANNOTATION_GANG, "")).lower() == "true",
        gang_size=int(size) if isinstance(size, str) and size.isdigit() else None,
        scheduling_gates=tuple(str(g.get("name")) for g in spec.get("schedulingGates") or []),
        deleting=meta.get("deletionTimestamp") is not None,
        events=events,
        nominated_node=status.get("nominatedNodeName") or None,
        unschedulable=next((c for c in conditions_from(status) if c.type == "PodScheduled" and c.status == "False"), None),
        gpus=pod_gpus(spec),
        sample=str(labels.get(LABEL_SAMPLE, "")).lower() == "true",
        finished_at=max((str(((c.get("state") or {}).get("terminated") or {}).get("finishedAt") or "")
                         for c in status.get("containerStatuses") or []), default=""),
    )


def pod_gpus(spec: Mapping[str, Any]) -> int:
    """The GPUs a pod spec asks: its containers' requests (their limits where no request is
    written, as the API server defaults them) together, or its largest init container's."""
    def asked(container: Mapping[str, Any]) -> int:
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get(RESOURCE_NVIDIA_GPU, (resources.get("limits") or {}).get(RESOURCE_NVIDIA_GPU))
        return int(value) if isinstance(value, (int, str)) and str(value).isdigit() else 0

    together = sum(asked(c) for c in spec.get("containers") or [])
    return max([together, *(asked(c) for c in spec.get("initContainers") or [])])


def conditions_from(status: Mapping[str, Any]) -> tuple[Condition, ...]:
    return tuple(
        Condition(type=str(c.get("type")), status=str(c.get("status")), reason=str(c.get("reason") or ""),
                  message=str(c.get("message") or ""), since=str(c.get("lastTransitionTime") or ""))
        for c in status.get("conditions") or []
    )


def job_from(
    obj: Mapping[str, Any],
    *,
    events: tuple[Event, ...] = (),
    pods: tuple[PodFacts, ...] = (),
    preemptions: tuple[Preemption, ...] = (),
    sampling_pods: tuple[PodFacts, ...] = (),
) -> JobFacts:
    meta, spec = _meta(obj), obj.get("spec") or {}
    annotations = meta.get("annotations") or {}
    on_template = _meta(spec.get("template") or {}).get("annotations") or {}
    count = str(annotations.get(ANNOTATION_PREEMPTIONS, "0"))
    estimate: Mapping[str, Any] | None = None
    try:
        parsed = json.loads(annotations[ANNOTATION_ESTIMATE]) if ANNOTATION_ESTIMATE in annotations else None
        estimate = parsed if isinstance(parsed, dict) else None
    except ValueError:
        estimate = None  # the validating webhook warns about it; here it only explains less
    return JobFacts(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        suspended=bool(spec.get("suspend")),
        interchangeable=ANNOTATION_CONFIGURATIONS in annotations,
        placement=annotations.get(ANNOTATION_PLACEMENT),
        estimate=estimate,
        preemption_count=int(count) if count.isdigit() else 0,
        conditions=conditions_from(obj.get("status") or {}),
        events=events,
        pods=pods,
        preemptions=preemptions,
        backoff_limit=_backoff_limit(spec),
        disruption_action=disruption_action(spec.get("podFailurePolicy")),
        disruption_exit_codes=exit_code_rules_before_disruption(spec.get("podFailurePolicy")),
        failed=_count((obj.get("status") or {}).get("failed")),
        succeeded=_count((obj.get("status") or {}).get("succeeded")),
        template_job_keys=tuple(k for k in JOB_LEVEL_ANNOTATIONS if k in on_template and k not in annotations),
        sampling_pods=sampling_pods,
    )


def _count(value: object) -> int:
    """A count of the API's status (``status.failed``), 0 where absent or not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _backoff_limit(spec: Mapping[str, Any]) -> tuple[str, int]:
    return backoff_limit(limit=spec.get("backoffLimit"), per_index=spec.get("backoffLimitPerIndex"))


def preemption_from(*, victim: str, preempted: Event, preemptor_events: tuple[Event, ...], unread: str = "",
                    preemptor: str | None = None) -> Preemption:
    """The victim's ``Preempted`` event, completed by the preemptor's ``Preempting`` event that
    names this victim (node and score breakdown). ``unread``: why the preemptor's events are
    missing, if they could not be read. ``preemptor``: ``ns/name`` of the pod whose UID alone
    kube-scheduler's own event names, when found (else ``unread`` says why not)."""
    deleted = RECLAIMED_FOR.match(preempted.message)
    if deleted is not None:  # its own Event says who and why: nothing to read in the preemptor's
        return Preemption(victim=victim, by=deleted["by"], node=None if deleted["node"] == "None" else deleted["node"],
                          when=preempted.last_seen, breakdown=f"HiveD reclaimed cells of virtual cluster {deleted['vc']} for it")
    found = PREEMPTED_BY.match(preempted.message)
    by = found.group("by") if found else "?"
    for event in reversed(preemptor_events):
        match = PREEMPTING.match(event.message) if event.reason == "Preempting" else None
        if match and match.group("victim") == victim:
            return Preemption(victim=victim, by=by, node=match.group("node"), breakdown=match.group("why"),
                              when=preempted.last_seen)
    told = PREEMPTED_WHERE.match(preempted.message)
    reclaimed = RECLAIMED.match(preempted.message)
    if told is not None and reclaimed is not None:  # HiveD's reclaim: no score to miss in the preemptor's events
        return Preemption(victim=victim, by=by, node=told.group("node"), when=preempted.last_seen,
                          breakdown=f"HiveD reclaimed cells of virtual cluster {reclaimed['vc']} for it")
    if told is not None:  # the victim's own event says where, and the score when FitGpp's rule chose it
        return Preemption(victim=victim, by=by, node=told.group("node"), breakdown=told.group("why"), when=preempted.last_seen,
                          unread=unread if told.group("why") is None else "")
    scheduler = SCHEDULER_PREEMPTED.match(preempted.message)
    if scheduler is not None:  # only kube-scheduler's event: the preemptor by UID, its name when found
        return Preemption(victim=victim, by=preemptor or f"pod {scheduler.group('uid')}", node=scheduler.group("node"),
                          when=preempted.last_seen, unread="" if preemptor else unread)
    return Preemption(victim=victim, by=by, when=preempted.last_seen, unread=unread)


def preempted_event(events: tuple[Event, ...]) -> Event | None:
    """The last ``Preempted`` event of a pod: cellfit's ("preempted by ns/pod", or the reclaim's
    "preempted for guaranteed pod ns/pod", which name the preemptor) over kube-scheduler's own."""
    found = [e for e in events if e.reason == "Preempted"]
    ours = [e for e in found if PREEMPTED_BY.match(e.message) or RECLAIMED_FOR.match(e.message)]
    return (ours or found)[-1] if found else None


def job_pod_name(job: str, pod: str) -> bool:
    """Whether ``pod`` is named as the Job controller names ``job``'s pods (``job-xxxxx``, or
    ``job-<index>-xxxxx`` for Indexed Jobs): preempted pods are gone, so only their names and
    events remain to tell whose they were."""
    return re.fullmatch(rf"{re.escape(job)}-(\d+-)?[a-z0-9]{{5}}", pod) is not None
