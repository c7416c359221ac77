"""The slices of batch/v1 Job and v1 Pod the estimator reads, and their translation into the
planner's values. Decoded with msgspec like the extender's payloads: fields nobody reads are
skipped, and a Job's pod template is kept as raw JSON for the sampling pods."""

from __future__ import annotations

import json
from typing import Collection, Final

import msgspec

from estimator.contract import SampleReport, parse_sample_report
from estimator.model import Sample
from estimator.planner import PodState, SampleKey, SamplePod
from scheduler.constants import ANNOTATION_CONFIGURATIONS, ANNOTATION_ESTIMATE, ANNOTATION_ITERATIONS, DOMAIN, LABEL_PLACEMENT
from scheduler.errors import InvalidAnnotation
from scheduler.kube.times import timestamp as timestamp  # re-exported: the estimator and the placer read it here

# cellfit's annotations it reads from the Job itself, never from its pod template (the webhook's
# JOB_LEVEL_ANNOTATIONS, scheduler/extender/validation.py, which this package may not import).
JOB_LEVEL_ANNOTATIONS: Final = (ANNOTATION_CONFIGURATIONS, ANNOTATION_ESTIMATE, ANNOTATION_ITERATIONS)

# --- what cellfit puts on sampling pods ---
LABEL_SAMPLE: Final = f"{DOMAIN}/sample"  # "true": lets the estimator watch only its pods
LABEL_SAMPLE_JOB: Final = f"{DOMAIN}/sample-job"  # the Job's UID
ANNOTATION_SAMPLE_CONFIGURATION: Final = f"{DOMAIN}/sample-configuration"
# What the configuration asked for when the pod was made (sample_pod.configuration_digest).
ANNOTATION_SAMPLE_DIGEST: Final = f"{DOMAIN}/sample-configuration-digest"
ANNOTATION_SAMPLE_PILOT: Final = f"{DOMAIN}/sample-pilot"
ANNOTATION_SAMPLE_LENGTH: Final = f"{DOMAIN}/sample-length"
ANNOTATION_SAMPLE_ATTEMPT: Final = f"{DOMAIN}/sample-attempt"
ANNOTATION_SAMPLE_ITERATIONS: Final = f"{DOMAIN}/sample-iterations"
ENV_SAMPLE_ITERATIONS: Final = "CELLFIT_SAMPLE_ITERATIONS"
# A long sampling run's short length: the workload reports the seconds it reached there (splits).
ENV_SAMPLE_SPLIT_ITERATIONS: Final = "CELLFIT_SAMPLE_SPLIT_ITERATIONS"
ANNOTATION_SAMPLE_SPLIT_ITERATIONS: Final = f"{DOMAIN}/sample-split-iterations"
# The Job's own sampling bookkeeping: the ratio its pilots were drawn with, samples stopped as long.
ANNOTATION_SAMPLING: Final = f"{DOMAIN}/sampling"
LABEL_JOB_FAMILY: Final = f"{DOMAIN}/job-family"
# Container waiting reasons that never resolve by waiting: the run failed.
STUCK_REASONS: Final = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError"}
)


class OwnerReference(msgspec.Struct, frozen=True):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""


class Metadata(msgspec.Struct, frozen=True):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[OwnerReference] | None = None


class JobCondition(msgspec.Struct, frozen=True):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    # RFC 3339, when it was last written: the placer tells by it whether a Job's NotBound was
    # written in its present spell of running (placer/controller.py _let_go_in_this_spell).
    lastTransitionTime: str | None = None


class JobSpec(msgspec.Struct, frozen=True):
    suspend: bool | None = None
    completions: int | None = None
    parallelism: int | None = None
    completionMode: str | None = None
    # msgspec.Raw takes no union: an absent template reads as JSON null.
    template: msgspec.Raw = msgspec.Raw(b"null")

    @property
    def has_template(self) -> bool:
        return bytes(self.template) not in (b"", b"null")


class JobStatus(msgspec.Struct, frozen=True):
    conditions: list[JobCondition] | None = None
    startTime: str | None = None
    completionTime: str | None = None


class Job(msgspec.Struct, frozen=True):
    metadata: Metadata = Metadata()
    spec: JobSpec = JobSpec()
    status: JobStatus | None = None

    @property
    def annotations(self) -> dict[str, str]:
        return self.metadata.annotations or {}

    @property
    def suspended(self) -> bool:
        return bool(self.spec.suspend)

    def condition(self, kind: str) -> JobCondition | None:
        for condition in (self.status.conditions if self.status else None) or []:
            if condition.type == kind:
                return condition
        return None

    @property
    def finished(self) -> str | None:
        """``Complete`` or ``Failed`` once the Job has ended, else None."""
        for kind in ("Complete", "Failed"):
            condition = self.condition(kind)
            if condition is not None and condition.status == "True":
                return kind
        return None


class Terminated(msgspec.Struct, frozen=True):
    exitCode: int = 0
    reason: str | None = None
    message: str | None = None
    startedAt: str | None = None
    finishedAt: str | None = None


class Waiting(msgspec.Struct, frozen=True):
    reason: str | None = None
    message: str | None = None


class Running(msgspec.Struct, frozen=True):
    startedAt: str | None = None


class ContainerState(msgspec.Struct, frozen=True):
    terminated: Terminated | None = None
    waiting: Waiting | None = None
    running: Running | None = None


class ContainerStatus(msgspec.Struct, frozen=True):
    name: str = ""
    state: ContainerState | None = None


class PodCondition(msgspec.Struct, frozen=True):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    lastTransitionTime: str | None = None


class PodStatus(msgspec.Struct, frozen=True):
    phase: str | None = None
    reason: str | None = None
    startTime: str | None = None
    conditions: list[PodCondition] | None = None
    containerStatuses: list[ContainerStatus] | None = None


class PodSpec(msgspec.Struct, frozen=True):
    nodeName: str | None = None  # set once the scheduler bound the pod


class Pod(msgspec.Struct, frozen=True):
    metadata: Metadata = Metadata()
    spec: PodSpec | None = None
    status: PodStatus | None = None

    @property
    def placed(self) -> bool:
        """Bound to a node, or running: some node holds the pod as it is built."""
        return bool(self.spec is not None and self.spec.nodeName) or (self.status is not None and self.status.phase == "Running")

    @property
    def sample_job(self) -> str | None:
        """The UID of the Job this pod is a sampling pod of: the Job its ``cellfit.io/sample-job``
        label names, where the pod is owned by that Job too (sample_pod.build_sample_pod makes
        both); None for any other pod. A label alone is no proof: whoever may create pods can
        write it. Whether the pod is in its Job's namespace is for the caller, who knows the Job."""
        job_uid = (self.metadata.labels or {}).get(LABEL_SAMPLE_JOB, "")
        owners = self.metadata.ownerReferences or []
        owned = any(_is_job(owner) and owner.uid == job_uid for owner in owners)
        return job_uid if job_uid and owned else None


JOB_DECODER: Final = msgspec.json.Decoder(Job)
POD_DECODER: Final = msgspec.json.Decoder(Pod)


class _Template(msgspec.Struct, frozen=True):
    """A pod template's metadata alone."""

    metadata: Metadata = Metadata()


_TEMPLATE_DECODER: Final = msgspec.json.Decoder(_Template)


def misplaced_annotations(job: Job) -> tuple[str, ...]:
    """cellfit's Job-level annotations (JOB_LEVEL_ANNOTATIONS, in that order) its user wrote on
    the Job's pod template (spec.template.metadata.annotations) and not on the Job itself; the
    configurations a placement copied there are cellfit's, not the user's."""
    if not job.spec.has_template:
        return ()
    template = bytes(job.spec.template)
    if not any(key.encode() in template for key in JOB_LEVEL_ANNOTATIONS):  # most Jobs: no decode
        return ()
    try:
        metadata = _TEMPLATE_DECODER.decode(template).metadata
    except msgspec.ValidationError:  # a template that does not read: the sampling pods' build says so
        return ()
    on_template = metadata.annotations or {}
    # A template cellfit placed (its label cellfit.io/placement, written in the same patch) holds
    # cellfit's own copy of the configurations it was placed in, which the placer reads back: not
    # its user's, and not misplaced once its user takes them off the Job.
    ours = (ANNOTATION_CONFIGURATIONS,) if LABEL_PLACEMENT in (metadata.labels or {}) else ()
    return tuple(key for key in JOB_LEVEL_ANNOTATIONS if key in on_template and key not in job.annotations and key not in ours)


def _is_job(owner: OwnerReference) -> bool:
    return owner.kind == "Job" and owner.apiVersion.split("/")[0] == "batch"


def template_kind(job: Job, gpu_resource: str, *, kinds: Collection[str] = ("cpu", "gpu")) -> str:
    """The configuration a Job's pods run in when its annotations do not say: the placement label
    on its template (one of ``kinds``), else ``gpu`` when a container asks for ``gpu_resource``."""
    if not job.spec.has_template:
        return "cpu"
    template = json.loads(bytes(job.spec.template))
    labels = (template.get("metadata") or {}).get("labels") or {}
    if labels.get(LABEL_PLACEMENT) in kinds:
        return str(labels[LABEL_PLACEMENT])
    for container in (template.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        if gpu_resource in (resources.get("limits") or {}) or gpu_resource in (resources.get("requests") or {}):
            return "gpu"
    return "cpu"


def sample_pod(pod: Pod, *, now: float, stopped_seconds: float | None, pending_limit_seconds: float) -> SamplePod | None:
    """A sampling pod as the planner sees it; None for a pod without cellfit's sample annotations
    (not one of ours, or edited by hand). ``stopped_seconds``: the Job records this pod as
    stopped for being long, after that many seconds. A pod deleted before it ended (preempted,
    evicted, its node lost) and one still Pending ``pending_limit_seconds`` after its creation
    (``estimator.pendingLimitSeconds``: unschedulable, a schedulerName nobody serves, a volume
    that never attaches; bounded, so its Job is never held forever) are failed runs: retried
    under a new name, then counted against the configuration."""
    annotations = pod.metadata.annotations or {}
    try:
        kind = annotations[ANNOTATION_SAMPLE_CONFIGURATION]
        length = annotations[ANNOTATION_SAMPLE_LENGTH]
        key = SampleKey(configuration=kind, pilot=int(annotations[ANNOTATION_SAMPLE_PILOT]), length=length)  # type: ignore[arg-type]
        attempt = int(annotations[ANNOTATION_SAMPLE_ATTEMPT])
        iterations = int(annotations[ANNOTATION_SAMPLE_ITERATIONS])
    except (KeyError, ValueError):
        return None
    if length not in ("short", "long"):
        return None
    name = pod.metadata.name
    if stopped_seconds is not None:
        bound = Sample(kind, iterations, stopped_seconds, complete=False, pilot=key.pilot)
        return SamplePod(name=name, key=key, attempt=attempt, state="stopped", sample=bound)
    status = pod.status or PodStatus()
    phase = status.phase or "Pending"
    ended = _terminated(status)
    # The workload is the container that writes the report: once it has exited 0 with one, the
    # run has ended, though a sidecar in spec.containers (istio-proxy) keeps the pod Running.
    if phase == "Succeeded" or _workload_report(ended) is not None:
        report, report_error = _report(ended)
        sample = report.sample(configuration=kind, pilot=key.pilot) if report is not None else _timed(kind, key.pilot, iterations, ended)
        return SamplePod(
            name=name, key=key, attempt=attempt, state="succeeded", sample=sample, report_error=report_error,
            failure=None if sample is not None else "finished without a readable time (no termination message or container times)",
        )
    if phase == "Failed":
        # The container that failed, not a sidecar listed before it (the kubelet lists by name).
        terminated = next((t for t in ended if t.exitCode), ended[0] if ended else None)
        reason = (terminated.reason if terminated else None) or status.reason or "Failed"
        exit_code = f" (exit code {terminated.exitCode})" if terminated and terminated.exitCode else ""
        return SamplePod(name=name, key=key, attempt=attempt, state="failed", failure=f"{reason}{exit_code}")
    if pod.metadata.deletionTimestamp is not None:
        # Not by cellfit (a stopped sample is recorded first): the run is lost, and a pod on a
        # lost node may stay terminating for as long as the node is away.
        return SamplePod(name=name, key=key, attempt=attempt, state="failed", failure=_deleted_because(status))
    for container in status.containerStatuses or []:
        waiting = container.state.waiting if container.state else None
        if waiting is not None and waiting.reason in STUCK_REASONS:
            return SamplePod(name=name, key=key, attempt=attempt, state="failed", failure=waiting.reason)
    not_started = _not_started(pod, now=now, limit_seconds=pending_limit_seconds)
    if not_started is not None:
        return SamplePod(name=name, key=key, attempt=attempt, state="failed", failure=not_started)
    state: PodState = "running" if phase == "Running" else "pending"
    started = _running_since(status)
    running = max(0.0, now - started) if state == "running" and started is not None else None
    unplaced = _not_scheduled_why(status) if state == "pending" else None
    return SamplePod(name=name, key=key, attempt=attempt, state=state, running_seconds=running, pending_reason=unplaced)


def _not_scheduled_why(status: PodStatus) -> str | None:
    """Why a pending sample is not on a node yet, in the scheduler's words (its PodScheduled
    condition: kube-scheduler's "0/4 nodes are available: 4 Insufficient cpu.", an extender's
    refusal), for whoever asks why its Job is still estimating; None before an attempt."""
    condition = _unscheduled(status)
    if condition is None:
        return None
    return ": ".join(filter(None, (condition.reason, condition.message))) or None


def _unscheduled(status: PodStatus) -> PodCondition | None:
    return next((c for c in status.conditions or [] if c.type == "PodScheduled" and c.status == "False"), None)


def unschedulable_since(pod: Pod) -> float | None:
    """Since when the scheduler has found no node for a pending sample (its PodScheduled
    condition False with reason ``Unschedulable``; the pod's creation where the condition carries
    no time); None for a pod scheduled, not yet tried, or ended."""
    status = pod.status or PodStatus()
    if (status.phase or "Pending") != "Pending" or status.startTime is not None or pod.metadata.deletionTimestamp is not None:
        return None
    condition = _unscheduled(status)
    if condition is None or condition.reason != "Unschedulable":
        return None
    return timestamp(condition.lastTransitionTime) or timestamp(pod.metadata.creationTimestamp)


def _running_since(status: PodStatus) -> float | None:
    """When a running sample's workload started: the latest start of the pod's running
    containers. Not the pod's ``startTime``, which the kubelet sets before pulling the image
    (minutes for a CUDA image), a pull that would count as the run's and, multiplied by N/k, as
    its lower bound. None has reported yet, so the workload is not told apart from a sidecar: the
    latest start never counts another container's pull as the workload's run, and a run counted
    short keeps its lower bound a bound. The pod's ``startTime`` where the kubelet reports no
    running container's start."""
    starts = [
        timestamp(c.state.running.startedAt) for c in status.containerStatuses or [] if c.state and c.state.running
    ]
    known = [start for start in starts if start is not None]
    return max(known) if known else timestamp(status.startTime)


def _deleted_because(status: PodStatus) -> str:
    """Why a pod was deleted under its run: Kubernetes' own DisruptionTarget condition where it
    set one (PreemptionByScheduler, EvictionByEvictionAPI, DeletionByTaintManager, ...)."""
    disruption = next((c for c in status.conditions or [] if c.type == "DisruptionTarget" and c.status == "True"), None)
    if disruption is None or not disruption.reason:
        return "deleted before it finished (preempted, evicted or its node lost)"
    return f"deleted before it finished: {': '.join(filter(None, (disruption.reason, disruption.message)))}"


def _not_started(pod: Pod, *, now: float, limit_seconds: float) -> str | None:
    """Why a pod still Pending past the limit since its creation counts as failed: not scheduled
    (with the scheduler's reason), or scheduled and never started (a volume that does not
    attach, a mount that fails: with the container's waiting reason); None while it may wait."""
    status = pod.status or PodStatus()
    created = timestamp(pod.metadata.creationTimestamp)
    if (status.phase or "Pending") != "Pending" or created is None or now - created <= limit_seconds:
        return None
    if status.startTime is None:
        why = next((c.message or c.reason for c in status.conditions or [] if c.type == "PodScheduled" and c.status == "False"), None)
        return f"not scheduled within {limit_seconds:.0f} s" + (f": {why}" if why else "")
    waiting = [c.state.waiting for c in status.containerStatuses or [] if c.state and c.state.waiting]
    why = next((": ".join(filter(None, (w.reason, w.message))) for w in waiting), None)
    return f"not started within {limit_seconds:.0f} s" + (f": {why}" if why else "")


def _terminated(status: PodStatus) -> list[Terminated]:
    return [c.state.terminated for c in status.containerStatuses or [] if c.state and c.state.terminated]


def _report(ended: list[Terminated]) -> tuple[SampleReport | None, str | None]:
    """The report of the container that wrote one (any of the pod's: the kubelet lists them by
    name, a sidecar may come first); without one, why a message meant as one (a JSON object; a
    log tail is not) does not read."""
    errors = []
    for terminated in ended:
        text = (terminated.message or "").strip()
        if not text:
            continue
        try:
            return parse_sample_report(text), None
        except InvalidAnnotation as error:
            if text.startswith("{"):
                errors.append(str(error))
    return None, errors[0] if errors else None


def _workload_report(ended: list[Terminated]) -> SampleReport | None:
    """The report of a container that exited 0 with one (the workload's), else None."""
    report, _ = _report([terminated for terminated in ended if terminated.exitCode == 0])
    return report


def _timed(kind: str, pilot: int, iterations: int, ended: list[Terminated]) -> Sample | None:
    """Without a report: the start and finish times of the pod's longest-running container (1 s
    resolution)."""
    spans = [span for span in map(_span, ended) if span is not None]
    if not spans:
        return None
    return Sample(kind, iterations, max(spans), resolution_seconds=1.0, pilot=pilot)


def _span(terminated: Terminated) -> float | None:
    started, finished = timestamp(terminated.startedAt), timestamp(terminated.finishedAt)
    if started is None or finished is None or finished < started:
        return None
    return finished - started
