"""cellfit's labels and annotations on a pod or a Job, checked where the user is (at creation, by
the validating webhook), not only when kube-scheduler gets around to asking cellfit: on a full
cluster its own resource check turns every node away before cellfit's filter runs, and a pod
with a gang-size of "abc" would wait behind "Insufficient nvidia.com/gpu" forever.

Every check is a parser the scheduler, the estimator or the placer runs on the same value
(:func:`~scheduler.cells.request.parse_request`, :func:`~scheduler.preemption.job_class_of`,
:func:`~placer.configuration.parse_configurations`, :func:`~estimator.contract.parse_iterations`,
:func:`~estimator.contract.parse_estimate`, and the running HiveD configuration's own lookups of
virtual clusters and cell types), so the webhook can neither accept what they refuse nor refuse
what they accept. Each :class:`Problem` is one sentence led by its field's path, as the API
server names fields in its own errors (``spec.template.metadata.annotations[cellfit.io/gang-size]:
'abc' is not an integer``): :func:`field_path` turns every name a parser gives
(``annotation cellfit.io/gang-size``, ``cellfit.io/estimate.cpu.seconds``) into that path.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Final, Mapping, Sequence

import msgspec
from msgspec import structs

import estimator.objects as sampling_objects
from estimator.contract import estimate_errors, parse_estimate, parse_iterations
from estimator.sample_pod import beyond_every_node, beyond_largest_node
from placer.configuration import Configuration, Configurations, configuration_errors, parse_configurations
from placer.rewrite import apply_configuration, pool_conflict
from scheduler import constants
from scheduler.cells.capabilities import RequestCheck
from scheduler.cells.planning import Unplaceable
from scheduler.cells.request import CellRequest, gang_size_problem, parse_request, read_request
from scheduler.constants import (
    JOB_CLASS_TRIAL,
    ANNOTATION_CELL_TYPE,
    ANNOTATION_CONFIGURATIONS,
    ANNOTATION_ESTIMATE,
    ANNOTATION_GANG,
    ANNOTATION_GANG_SIZE,
    ANNOTATION_ITERATIONS,
    DOMAIN,
    LABEL_JOB_CLASS,
    LABEL_PLACEMENT,
    LABEL_PRIORITY,
    LABEL_VIRTUAL_CLUSTER,
    PRIORITY_OPPORTUNISTIC,
)
from scheduler.core.model import OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.errors import InvalidAnnotation, InvalidRequest
from scheduler.kube import translate, wire
from scheduler.preemption import JobClass, job_class_of, preemption_count_of
from scheduler.preemption.model import job_class_or_best_effort
from scheduler.wording import (
    COUNT,
    DISRUPTION_TARGET,
    FAIL_JOB,
    FAILS_AT_ONCE,
    IGNORE,
    RESUME_RULE,
    SIGNAL_EXIT_CODES,
    backoff_limit,
    disruption_action,
    disruption_rule_at,
    exit_code_rules_before_disruption,
    exit_codes,
    failing_rule,
)


def _keys(kind: str) -> frozenset[str]:
    """Every cellfit.io/ key of ``kind`` (``LABEL``, ``ANNOTATION``) that cellfit reads or
    writes: the constants of scheduler/constants.py (the user's contract, what cellfit writes
    back) and of the estimator's sampling pods, so a key added there is never called unknown."""
    return frozenset(
        value
        for module in (constants, sampling_objects)
        for name, value in vars(module).items()
        if name.startswith(f"{kind}_") and isinstance(value, str) and value.startswith(f"{DOMAIN}/")
    )


LABEL_KEYS: Final = _keys("LABEL")
ANNOTATION_KEYS: Final = _keys("ANNOTATION")
# Read from a pod (so from a Job's pod template), never from the Job itself.
POD_LEVEL_KEYS: Final = (
    ("label", LABEL_VIRTUAL_CLUSTER), ("label", LABEL_PRIORITY), ("label", LABEL_JOB_CLASS),
    ("annotation", ANNOTATION_CELL_TYPE), ("annotation", ANNOTATION_GANG), ("annotation", ANNOTATION_GANG_SIZE),
)
# Read from the Job itself, never from its pod template (the placer copies the configurations
# there only beside the Job's own).
JOB_LEVEL_ANNOTATIONS: Final = (ANNOTATION_CONFIGURATIONS, ANNOTATION_ESTIMATE, ANNOTATION_ITERATIONS)
_PREFIX: Final = f"{DOMAIN}/"
# The longest sentence one problem is told in (the API server cuts each warning to 256 characters
# anyway; a refusal's message carries them whole).
MAX_PROBLEM_CHARS: Final = 512
TEMPLATE: Final = "spec.template"


@dataclass(frozen=True, slots=True)
class Problem:
    """One mistake: ``field``, the path of the field in the object reviewed
    (``spec.template.metadata.labels[cellfit.io/priority]``, ``metadata.annotations[cellfit.io/estimate].cpu.seconds``),
    and ``reason``, what is wrong with it; ``scope``, where it applies when that is narrower than
    the object (``in configuration gpu``). A ``blocking`` problem is one cellfit would act on
    wrongly or not at all (the pod never scheduled, the Job never estimated); the others (an
    unknown or misplaced key) are only ever warned about."""

    field: str
    reason: str
    blocking: bool = True
    scope: str = ""

    @property
    def text(self) -> str:
        """The sentence users see, the one shape every problem is told in: ``<field path>: <reason>``."""
        field = f"{self.field} ({self.scope})" if self.scope else self.field
        return f"{field}: {self.reason}" if field else self.reason

    def within(self, path: str) -> Problem:
        """This problem of the object at ``path`` inside the one reviewed (a Job's ``spec.template``,
        a CronJob's ``spec.jobTemplate``), its field named from there."""
        return replace(self, field=f"{path}.{self.field}" if self.field else path)


def field_path(named: str, *, within: str = "") -> str:
    """The path of the field a parser names, as the API server names fields: ``label K`` and
    ``annotation K`` (:func:`parse_request`, the allocator) become ``metadata.labels[K]`` and
    ``metadata.annotations[K]``; a name inside a JSON annotation (``cellfit.io/estimate.cpu.seconds``)
    becomes ``metadata.annotations[cellfit.io/estimate].cpu.seconds``; a path
    (``metadata.labels[cellfit.io/job-class]``, ``spec.containers[0]...``) stays. ``within``: the
    path of the object it is in (``spec.template``)."""
    kind, _, key = named.partition(" ")
    if kind in _FIELD_KINDS and key.startswith(_PREFIX):
        path = key_path(kind, key)
    elif named.startswith(_PREFIX):
        name = named[len(_PREFIX):]
        end = min((i for i in (name.find("."), name.find("[")) if i >= 0), default=len(name))
        path = key_path("annotation", _PREFIX + name[:end]) + name[end:]
    else:
        path = named
    return f"{within}.{path}" if within and path else within or path


def key_path(kind: str, key: str) -> str:
    """``metadata.labels[K]`` or ``metadata.annotations[K]``: where a ``kind`` (``label``,
    ``annotation``) of key ``K`` is written."""
    return f"metadata.{_FIELD_KINDS[kind]}[{key}]"


def _reason(error: InvalidRequest) -> str:
    """A parser's sentence without the name of its field, which leads it (see InvalidRequest)."""
    sentence = str(error)
    return sentence.removeprefix(f"{error.field}: ") if error.field else sentence


def problem_of(error: InvalidRequest, *, where: str = "") -> Problem:
    """The mistake a parser raises, its field named by its path (``where``: the path of the
    object it is in)."""
    return Problem(field=field_path(error.field or "", within=where), reason=_bounded(_reason(error)))


def _bounded(sentence: str) -> str:
    """``sentence`` with the middle of a long one left out: a parser's sentence quotes the value,
    which may be most of the object's 256 KiB of annotations, and a refusal would send it all
    back. Its head and tail are kept, where the field is named."""
    if len(sentence) <= MAX_PROBLEM_CHARS:
        return sentence
    kept = (MAX_PROBLEM_CHARS - 1) // 2
    return f"{sentence[:kept]}…{sentence[-kept:]}"


# ---------------------------------------------------------------------------------- HiveD


class LiveCells:
    """What the running HiveD configuration says of a request: whether its virtual cluster
    exists, and whether a cell of its type (or any cell) can ever hold its GPUs. The
    allocator's own lookups, the ones filter makes, under the engine's lock (a live reload
    may change the virtual clusters at any moment)."""

    def __init__(self, engine: RequestCheck, *, lock: threading.RLock) -> None:
        self._engine = engine
        self._lock = lock

    def unplaceable(self, request: CellRequest) -> tuple[str, Unplaceable] | None:
        """The allocator's reason it could never place ``request``: ``(what, error)``, ``what``
        being ``virtual-cluster`` or ``cells``; ``None`` when it could."""
        with self._lock:
            return self._engine.request_problem(request)

    def problems(self, request: CellRequest, *, where: str) -> list[Problem]:
        found = self.unplaceable(request)
        if found is None:
            return []
        what, error = found
        if what == "virtual-cluster":
            return [_unplaceable(error, key_path("label", LABEL_VIRTUAL_CLUSTER), key=LABEL_VIRTUAL_CLUSTER, where=where)]
        if request.cell_type:
            return [_unplaceable(error, key_path("annotation", ANNOTATION_CELL_TYPE), key=ANNOTATION_CELL_TYPE, where=where)]
        return [_unplaceable(error, GPU_REQUESTS, key=None, where=where)]


# Where a pod asks for its GPUs: the sum over its containers is what the allocator holds it to.
GPU_REQUESTS: Final = "spec.containers[*].resources"


def _unplaceable(error: Unplaceable, field: str, *, key: str | None, where: str) -> Problem:
    """The allocator's reason, led by the path of the field: its own mention of the key is left
    out (the path names it), and the label it finds missing is said to be missing."""
    reason = error.reason
    if key is not None:
        reason = reason.replace(f" in annotation {key}", "").replace(f"the pod has no {key} label: ", "is missing: ")
    return Problem(field=field_path(field, within=where), reason=_bounded(reason))


def _scheduler_reason(found: tuple[str, Unplaceable], request: CellRequest) -> str:
    """The allocator's reason as the preempt verb gives it, led by the field unless it names
    the key itself already (the words of the filter's own refusal)."""
    what, error = found
    if what == "virtual-cluster":
        key, field = LABEL_VIRTUAL_CLUSTER, f"label {LABEL_VIRTUAL_CLUSTER}"
    elif request.cell_type:
        key, field = ANNOTATION_CELL_TYPE, f"annotation {ANNOTATION_CELL_TYPE}"
    else:
        return _bounded(f"the containers' GPU requests: {error.reason}")
    return _bounded(error.reason if key in error.reason else f"{field}: {error.reason}")


# ---------------------------------------------------------------------------------- keys


# A cellfit.io/ key cellfit does not know; one a configuration's annotations give is copied onto
# the pods made in it (placer/rewrite.py), not dropped (user26 #7).
UNKNOWN_KEY: Final = "cellfit knows no such {kind}; it is ignored (a misspelling?)"
UNKNOWN_KEY_COPIED: Final = ("cellfit knows no such annotation: it is copied onto the pods of this configuration, where cellfit "
                             "does not read it (a misspelling?)")


def key_problems(labels: Mapping[str, str], annotations: Mapping[str, str], *, where: str) -> list[Problem]:
    """Keys under cellfit.io/ that cellfit never reads: a misspelling (``gang_size``), or a
    label written as an annotation or the reverse. Warnings only: another tool, or a newer
    cellfit, may own the key."""
    problems = []
    for kind, keys, known, other, other_kind in (
        ("label", labels, LABEL_KEYS, ANNOTATION_KEYS, "annotation"),
        ("annotation", annotations, ANNOTATION_KEYS, LABEL_KEYS, "label"),
    ):
        for key in sorted(k for k in keys if k.startswith(_PREFIX) and k not in known):
            if key in other:
                reason = f"cellfit reads this key as {_article(other_kind)}, not as {_article(kind)}"
            else:
                reason = UNKNOWN_KEY.format(kind=kind)
            problems.append(Problem(field=field_path(key_path(kind, key), within=where), reason=reason, blocking=False))
    return problems


def _article(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


# ---------------------------------------------------------------------------------- pods


def pod_problems(
    pod: PodInfo, *, cells: LiveCells | None, where: str = "", preempts_best_effort: bool = True
) -> list[Problem]:
    """Everything wrong with a pod's cellfit labels and annotations (``where`` prefixes each
    field: a Job's pod template is checked as the pods it will make)."""
    problems = key_problems(pod.labels, pod.annotations, where=where) + placement_problems(pod, cells=cells, where=where)
    try:
        job_class_of(pod.labels)
    except InvalidAnnotation as error:
        told = problem_of(error, where=where)
        problems.append(replace(told, reason=f"{told.reason}; {_read_as_best_effort(preempts_best_effort)}"))
    return problems


def _read_as_best_effort(preempts_best_effort: bool) -> str:
    """What cellfit does meanwhile with a pod whose job class is no class: the pod is scheduled
    all the same, and everything that reads its class while it runs reads best-effort
    (:func:`~scheduler.preemption.job_class_or_best_effort`: FitGpp's victims, the placer's
    count of best-effort GPUs), while its own preemption is refused (the preempt verb reads
    :func:`~scheduler.preemption.job_class_of`)."""
    if preempts_best_effort:
        return "cellfit runs it as best-effort meanwhile: it never preempts, and a trial pod may preempt it"
    return "cellfit runs it as best-effort meanwhile: it never preempts"


def trial_priority_problems(labels: Mapping[str, str], spec: wire.PodSpec, *, where: str = "") -> list[Problem]:
    """A trial pod without a PriorityClass: kube-scheduler asks for a preemption only among pods
    of lower priority, so beside best-effort pods of the cluster's default priority it waits for
    them to end instead of FitGpp preempting one. A warning: a cluster's global default class is
    written into the pod's priorityClassName by the API server before this check, and a Job's
    template cannot be judged against it."""
    try:
        trial = job_class_of(labels).value == JOB_CLASS_TRIAL
    except InvalidAnnotation:  # reported by pod_problems
        return []
    if not trial or spec.priorityClassName:
        return []
    return [Problem(
        field=field_path("spec.priorityClassName", within=where),
        reason="a trial pod without a PriorityClass never preempts (kube-scheduler preempts only lower "
               "priorities); give it one above best-effort's, cellfit-trial with the chart",
        blocking=False,
    )]


def placement_problems(pod: PodInfo, *, cells: LiveCells | None, where: str = "") -> list[Problem]:
    """What keeps HiveD from ever placing the pod: its request's syntax, and (``cells``) the
    virtual cluster and cell type it names against the running configuration."""
    request, errors = read_request(pod)
    problems = [problem_of(error, where=where) for error in errors]
    if cells is not None and request.gpus:
        problems += cells.problems(request, where=where)
    return problems


def unplaceable_reason(pod: PodInfo, *, cells: LiveCells) -> str | None:
    """Why HiveD can never place ``pod`` as written (one sentence per problem, in the filter's
    words), or ``None``. The preempt verb refuses such a pod: preempting anyone for it would
    free GPUs its filter then refuses it. (A bad job class is FitGpp's to refuse: a reclaim of
    the pod's own VC cells does not depend on it.)"""
    request, errors = read_request(pod)
    reasons = [_bounded(str(error)) for error in errors]
    if request.gpus:
        found = cells.unplaceable(request)
        if found is not None:
            reasons.append(_scheduler_reason(found, request))
    return "; ".join(reasons) if reasons else None


# parse_request names its fields "label <key>" and "annotation <key>".
_FIELD_KINDS: Final = {"label": "labels", "annotation": "annotations"}


# ---------------------------------------------------------------------------------- Jobs


class TemplateSpec(wire.PodSpec, frozen=True, gc=False):
    """A pod template's spec as the checks read it: the scheduler's slice, and where its pods
    may run (AlloX's pool, :func:`_outside_pool`)."""

    nodeSelector: dict[str, str] | None = None
    affinity: dict[str, Any] | None = None


class PodTemplate(msgspec.Struct, frozen=True):
    metadata: wire.ObjectMeta = wire.ObjectMeta()
    spec: TemplateSpec = TemplateSpec()


class JobSpec(msgspec.Struct, frozen=True):
    parallelism: int | None = None
    completions: int | None = None
    suspend: bool | None = None
    template: PodTemplate | None = None
    backoffLimit: int | None = None
    backoffLimitPerIndex: int | None = None
    podFailurePolicy: dict[str, Any] | None = None


class AdmittedJob(msgspec.Struct, frozen=True):
    """The slice of a batch/v1 Job the checks read (the estimator keeps its own, narrower)."""

    metadata: wire.ObjectMeta = wire.ObjectMeta()
    spec: JobSpec = JobSpec()


def job_problems(
    job: AdmittedJob, *, cells: LiveCells | None, gpu_resource: str, creating: bool, preempts_best_effort: bool = True,
    nodes: NodeSizes | None = None, pool: Mapping[str, str] | None = None,
) -> list[Problem]:
    """Everything wrong with a Job's cellfit labels and annotations and with its pod template's.
    ``creating``: checks of what a Job must carry when it is submitted (an interchangeable Job's
    iterations and ``suspend``, a podFailurePolicy that lets it resume), which a later update
    (cellfit's own unsuspend) must not fail. ``preempts_best_effort``: FitGpp preempts
    best-effort pods for trial ones (``preemption.policy: fitgpp``, P above 0). ``nodes``: the
    nodes interchangeable Jobs run on, against which a configuration no node holds is warned of.
    ``pool``: ``allox.nodeSelector``'s labels, outside which a suspended Job's pods never start."""
    labels = job.metadata.labels or {}
    annotations = job.metadata.annotations or {}
    problems = key_problems(labels, annotations, where="")
    checks = [_raised(lambda: job_class_of(labels)), _raised(lambda: preemption_count_of(annotations))]
    interchangeable = ANNOTATION_CONFIGURATIONS in annotations
    if interchangeable:
        # Every mistake of every configuration, not only the first the parser stops at (user26 #6).
        checks.append(lambda: configuration_errors(annotations[ANNOTATION_CONFIGURATIONS]))
        if ANNOTATION_ESTIMATE in annotations:
            # Every mistake of the estimate, not only the first the estimator would stop at.
            checks.append(lambda: estimate_errors(annotations[ANNOTATION_ESTIMATE]))
        # The estimator extrapolates its samples to this many iterations: needed unless the user
        # gave the estimate (an absent one says "is missing").
        if ANNOTATION_ITERATIONS in annotations or (creating and ANNOTATION_ESTIMATE not in annotations):
            checks.append(_raised(lambda: parse_iterations(annotations.get(ANNOTATION_ITERATIONS))))
    else:
        problems += _unread_without_configurations(annotations)
    for check in checks:
        problems += [problem_of(error, where="") for error in check()]
    problems += _estimate_without_configuration(annotations)
    if creating and interchangeable and not job.spec.suspend:
        problems.append(Problem(
            field=key_path("annotation", ANNOTATION_CONFIGURATIONS),
            reason="the Job is not created with spec.suspend: true, so it starts as its template says, "
                   "never estimated nor placed by AlloX",
            blocking=False,
        ))
    template = job.spec.template
    if template is None:
        return problems
    template_labels = template.metadata.labels or {}
    template_annotations = template.metadata.annotations or {}
    if creating:
        problems += preempted_failure_problems(job.spec, template_labels, fitgpp=preempts_best_effort, hived=cells is not None)
    for kind, key in POD_LEVEL_KEYS:
        on_job, on_template = (labels, template_labels) if kind == "label" else (annotations, template_annotations)
        if key in on_job and key not in on_template:
            problems.append(Problem(
                field=key_path(kind, key),
                reason=f"set on the Job, but cellfit reads it from the pods (put it in {TEMPLATE}.{key_path(kind, key)})",
                blocking=False,
            ))
    # Created unsuspended, the Job starts as written before anything is moved: it is created again.
    suspend = " and create the Job with spec.suspend: true" if creating and not job.spec.suspend else ""
    for key in JOB_LEVEL_ANNOTATIONS:
        if key in template_annotations and key not in annotations:
            problems.append(Problem(
                field=f"{TEMPLATE}.{key_path('annotation', key)}",
                reason="a Job-level annotation, which cellfit reads from the Job itself, never from its pod template; "
                       f"move it to {key_path('annotation', key).partition('[')[0]}{suspend}",
                blocking=False,
            ))
    try:
        pod = template_pod(job, gpu_resource=gpu_resource)
        configurations = _configurations_run(job, annotations)
        configured = _configured_pods(job, configurations, gpu_resource=gpu_resource)
    except InvalidRequest as error:  # a quantity cellfit cannot read
        return problems + [problem_of(error, where="")]
    return (problems + _template_problems(pod, configured, configurations, cells=cells, gpu_resource=gpu_resource,
                                          preempts_best_effort=preempts_best_effort)
            + _beyond_every_node(configured, nodes, hived=cells is not None)
            + _outside_pool(template, configurations if job.spec.suspend else None, pool or {})
            + _gang_shape_problems(pod, job.spec) + trial_priority_problems(template_labels, template.spec, where=TEMPLATE))


def _raised(check: Callable[[], object]) -> Callable[[], list[InvalidAnnotation]]:
    """``check`` as a list of the mistakes it finds: the one it raises, or none."""
    def errors() -> list[InvalidAnnotation]:
        try:
            check()
        except InvalidAnnotation as error:
            return [error]
        return []

    return errors


def preempted_failure_problems(spec: JobSpec, labels: Mapping[str, str], *, fitgpp: bool, hived: bool) -> list[Problem]:
    """A Job cellfit may preempt whose podFailurePolicy does not ignore a preempted pod: the Job
    controller counts each preempted pod as failed against its backoffLimit, so with a small one
    the preemption fails the Job (BackoffLimitExceeded) where its Preempted Event promised it
    would resume; a rule on DisruptionTarget of action FailJob or FailIndex fails the Job, or the
    index, at the first preemption, whatever the limit. Who may preempt it: trial Jobs, of a best-effort one (FitGpp; the class of a
    pod without the label); HiveD's reclaim, of an opportunistic one, whatever its class. A
    warning: the Job runs, and may never meet a trial Job. Told at creation only: Kubernetes
    refuses a change of a Job's podFailurePolicy."""
    action = disruption_action(spec.podFailurePolicy)
    # A class that is none is run as best-effort (reported with the template's problems).
    best_effort = job_class_or_best_effort(labels) is JobClass.BEST_EFFORT
    if fitgpp and best_effort:
        by = "a trial Job preempts"
    elif hived and labels.get(LABEL_PRIORITY) == PRIORITY_OPPORTUNISTIC:
        by = "its cells' VC reclaims"
    else:
        return []
    exits = _exit_codes_first(spec, action)  # rules on exit codes that take a preempted pod first
    if action == IGNORE:
        return exits
    limit, count = backoff_limit(limit=spec.backoffLimit, per_index=spec.backoffLimitPerIndex)
    field = "spec.podFailurePolicy"
    if action in FAILS_AT_ONCE:  # FailJob, FailIndex: at once, whatever the limit
        failed = "fails the Job" if action == FAIL_JOB else "fails its index"
        first = "the first pod" if action == FAIL_JOB else "each pod"
        return [Problem(field=field, reason=f"{failing_rule(action)} ({action}), so {first} {by} {failed} instead of "
                        f"resuming; make that rule {RESUME_RULE}", blocking=False)] + exits
    if count == 0:
        outcome = f"with {limit} 0 the first pod {by} fails the Job instead of resuming"
    else:
        outcome = f"each pod {by} counts as a failure against {limit} {count}"
    if action == COUNT:
        # The Job controller applies the first rule that matches: an Ignore rule added after this
        # one would never be reached.
        return [Problem(field=field, reason=f"its first rule on {DISRUPTION_TARGET} counts it (Count), so {outcome}; "
                        f"make that rule {RESUME_RULE}", blocking=False)] + exits
    missing = "missing" if spec.podFailurePolicy is None else f"no rule ignores {DISRUPTION_TARGET}"
    return [Problem(field=field, reason=f"{missing}, so {outcome}; add the rule {RESUME_RULE}", blocking=False)] + exits


def _exit_codes_first(spec: JobSpec, action: str | None) -> list[Problem]:
    """A Job cellfit may preempt whose podFailurePolicy has a rule on exit codes, before its rule
    on DisruptionTarget (of ``action``; None: none), that counts 143 or 137 (what a process
    stopped by SIGTERM, by SIGKILL, usually exits with) where that rule would ignore the pod, or
    fails the Job or index on them: the Job controller applies the first rule that matches, so a
    preempted pod exiting so is taken by it. cellfit cannot know the exit code before the pod
    exits (a workload that exits 0 once it has checkpointed matches no rule), so a warning names
    the rule, the codes, what it does, and the fix: the Ignore rule first. Within the API
    server's 256 characters for a warning."""
    ignore = disruption_rule_at(spec.podFailurePolicy)
    same = None if action == IGNORE else COUNT if action in (None, COUNT) else action
    problems = []
    for at, does, codes in exit_code_rules_before_disruption(spec.podFailurePolicy):
        if does == same:
            continue
        then = "counts as failed" if does == COUNT else "fails the Job" if does == FAIL_JOB else "fails its index"
        usual = ", ".join(f"{SIGNAL_EXIT_CODES[code]}'s" for code in codes)
        if action == IGNORE:
            reason = (f"{does} on exit code {exit_codes(codes)} ({usual} usual) precedes rules[{ignore}], the Ignore on "
                      f"{DISRUPTION_TARGET}, and the first match applies: a preempted pod exiting so {then}; move rules[{ignore}] first")
        else:
            reason = (f"{does} on exit code {exit_codes(codes)} ({usual} usual) comes first, and the first match applies: a "
                      f"preempted pod exiting so {then}; put the Ignore rule on {DISRUPTION_TARGET} before it")
        problems.append(Problem(field=f"spec.podFailurePolicy.rules[{at}]", reason=reason, blocking=False))
    return problems


def _unread_without_configurations(annotations: Mapping[str, str]) -> list[Problem]:
    """The estimator's annotations on a Job it does not follow (it follows only interchangeable
    Jobs, scheduler/cluster/feed.py): never read, so a mistake in them blocks nothing."""
    problems = []
    for key in (ANNOTATION_ESTIMATE, ANNOTATION_ITERATIONS):
        if key in annotations:
            problems.append(Problem(
                field=key_path("annotation", key),
                reason=f"read only on an interchangeable Job (one with {ANNOTATION_CONFIGURATIONS}); ignored here",
                blocking=False,
            ))
    return problems


def _estimate_without_configuration(annotations: Mapping[str, str]) -> list[Problem]:
    """A user's estimate that gives no kind the Job has a configuration for: AlloX chooses only a
    kind with both, and nothing samples over a user's estimate, so the Job waits suspended
    forever (the placer's own words for it, placer/controller.py). cellfit's own estimate of
    other configurations is withdrawn and made anew by the estimator."""
    if ANNOTATION_ESTIMATE not in annotations or ANNOTATION_CONFIGURATIONS not in annotations:
        return []
    try:
        recorded = parse_estimate(annotations[ANNOTATION_ESTIMATE])
        configured = parse_configurations(annotations[ANNOTATION_CONFIGURATIONS]).kinds
    except InvalidAnnotation:  # reported by job_problems' own checks
        return []
    estimated = sorted(recorded.seconds)
    if recorded.by_cellfit or set(estimated) & set(configured):
        return []
    return [Problem(
        field=key_path("annotation", ANNOTATION_ESTIMATE),
        reason=f"gives {', '.join(estimated)} and {ANNOTATION_CONFIGURATIONS} {', '.join(configured)}: no kind has "
             "both, and AlloX chooses only a kind with an estimate, so the Job is never started",
    )]


def _configurations_run(job: AdmittedJob, annotations: Mapping[str, str]) -> Configurations | None:
    """The configurations an interchangeable Job's pods will be made in, or ``None`` when they are
    its template as written: the placer replaces every container's resources by the chosen
    configuration's (and adds its annotations), so a suspended Job's pods are made in any of its
    configurations (whatever placement it carries: the placer starts it anew), a running one's
    in the configuration its template is labelled with; an unsuspended Job never placed runs as
    written."""
    try:
        configurations = parse_configurations(annotations.get(ANNOTATION_CONFIGURATIONS))
    except InvalidAnnotation:  # reported as the Job's own problem; nothing to rewrite with
        return None
    if job.spec.suspend:
        return configurations
    assert job.spec.template is not None
    placed = (job.spec.template.metadata.labels or {}).get(LABEL_PLACEMENT)
    if placed in configurations:
        return Configurations(by_kind={kind: configurations[kind] for kind in configurations.kinds if kind == placed})
    return None


def _configured_pods(
    job: AdmittedJob, configurations: Configurations | None, *, gpu_resource: str
) -> dict[str, PodInfo] | None:
    """The pods ``job`` will make in each of ``configurations``, rewritten as the placer rewrites
    them (placer/rewrite.py); ``None`` for none."""
    if configurations is None:
        return None
    assert job.spec.template is not None
    written = wire.ENCODER.encode(job.spec.template)
    pods: dict[str, PodInfo] = {}
    for kind in configurations.kinds:
        rewritten = _TEMPLATE_DECODER.decode(wire.ENCODER.encode(apply_configuration(written, configurations[kind])))
        pods[kind] = template_pod(structs.replace(job, spec=structs.replace(job.spec, template=rewritten)), gpu_resource=gpu_resource)
    return pods


def _template_problems(
    pod: PodInfo, configured: Mapping[str, PodInfo] | None, configurations: Configurations | None, *,
    cells: LiveCells | None, gpu_resource: str, preempts_best_effort: bool,
) -> list[Problem]:
    """The problems of the pods a Job makes: its template's as written (``configured`` None), or
    the template's own mistakes once and what each configuration's pods add (HiveD's cells are
    held against the GPUs the configuration asks for, not the template's), each named where the
    configuration writes it when it does."""
    if configured is None:
        return pod_problems(pod, cells=cells, where=TEMPLATE, preempts_best_effort=preempts_best_effort)
    assert configurations is not None
    as_written = pod_problems(pod, cells=None, preempts_best_effort=preempts_best_effort)
    told = {problem.text for problem in as_written}
    problems = [problem.within(TEMPLATE) for problem in as_written]
    for kind in configurations.kinds:
        problems += [
            _never_run_in(_in_configuration(problem, configurations[kind], gpu_resource=gpu_resource), kind)
            for problem in pod_problems(configured[kind], cells=cells, preempts_best_effort=preempts_best_effort)
            if problem.text not in told
        ]
    return problems


def _never_run_in(problem: Problem, kind: str) -> Problem:
    """A configuration's own blocking problem (its GPUs no cell holds, an annotation it adds that
    does not read) with what it means, in the words of a configuration no node holds
    (:func:`_beyond_every_node`): the estimator never samples it (``configured_pod_problems``)
    nor AlloX starts the Job in it."""
    if not problem.blocking:
        return problem
    return replace(problem, reason=f"{problem.reason}: it is never sampled nor started in {kind}")


def _in_configuration(problem: Problem, configuration: Configuration, *, gpu_resource: str) -> Problem:
    """A problem of the pods made in ``configuration``: named in the configuration when it comes
    from what the configuration writes (its GPUs, an annotation it adds), else in the template,
    scoped to the configuration."""
    inside = f"{key_path('annotation', ANNOTATION_CONFIGURATIONS)}.{configuration.kind}"
    if problem.field == GPU_REQUESTS and gpu_resource in configuration.resource_names:
        return replace(problem, field=f"{inside}.resources")
    for key in configuration.annotations:
        if problem.field == key_path("annotation", key):
            reason = UNKNOWN_KEY_COPIED if problem.reason == UNKNOWN_KEY.format(kind="annotation") else problem.reason
            return replace(problem, field=f"{inside}.annotations[{key}]", reason=reason)
    return replace(problem.within(TEMPLATE), scope=f"in configuration {configuration.kind}")


@dataclass(frozen=True)
class NodeSizes:
    """Each node's allocatable among those interchangeable Jobs run on (``allox.nodeSelector``'s
    pool, ``pooled``; else every node the watch holds), read when a Job is reviewed."""

    allocatable: Callable[[], Sequence[Resources]]
    pooled: bool = False
    # allox.reservedCpuPerGpu where AlloX runs (0: off, or none kept): the cores it keeps beside
    # each GPU of a node, which it never cuts a CPU slot from.
    reserved_cpu_per_gpu: float = 0.0


def _beyond_every_node(configured: Mapping[str, PodInfo] | None, nodes: NodeSizes | None, *, hived: bool) -> list[Problem]:
    """A configuration whose pod asks more cores, memory or GPUs than any node has: never
    sampled nor started (the estimator's words, estimator/sample_pod.py). A warning, since nodes
    come and go. Under HiveD its GPUs are the cells' to judge (``LiveCells``), said once there."""
    if configured is None or nodes is None:
        return []
    problems = []
    sizes: Sequence[Resources] | None = None
    for kind, pod in configured.items():
        asks = structs.replace(pod.requests, gpus=0) if hived else pod.requests
        if sizes is None:
            sizes = nodes.allocatable()
        beyond = beyond_every_node(asks, sizes, pooled=nodes.pooled)
        kept = _beyond_cores_kept(asks, sizes, nodes, kind=kind, anywhere=beyond is None) if pod.requests.gpus == 0 else None
        if kept is not None or beyond is not None:
            problems.append(Problem(
                field=f"{key_path('annotation', ANNOTATION_CONFIGURATIONS)}.{kind}.resources",
                reason=kept or f"{beyond}: it is never sampled nor started in {kind}", blocking=False,
            ))
    return problems


def _beyond_cores_kept(asks: Resources, sizes: Sequence[Resources], nodes: NodeSizes, *, kind: str, anywhere: bool) -> str | None:
    """A GPU-less configuration's pod asking more cores than any node has beside those AlloX
    keeps for its GPUs (``allox.reservedCpuPerGpu``), in the words of AlloX's NoMachine
    condition (placer/controller.py), which judges it so (user26 #5: the webhook said "64 cores
    at most", the condition "62 ... beside the cores kept for its GPUs"). ``anywhere``: some
    node holds it whole, so it is sampled, but AlloX never starts it in ``kind``. None where
    nothing is kept or the kept cores are not what it lacks."""
    reserved = round(nodes.reserved_cpu_per_gpu * 1000)
    if reserved <= 0 or asks.cpu_millis <= 0:
        return None
    left = [structs.replace(size, cpu_millis=max(size.cpu_millis - reserved * max(size.gpus, 0), 0)) for size in sizes]
    if not left or asks.cpu_millis <= max(size.cpu_millis for size in left) or all(a == b for a, b in zip(left, sizes)):
        return None
    beyond = beyond_largest_node([asks.cpu_millis, asks.memory_bytes], [[size.cpu_millis, size.memory_bytes] for size in left],
                                 read=[lambda millis: f"{millis / 1000:g} cores", lambda size: f"{round(size / 2**30, 1):g} GiB"])
    if beyond is None:
        return None
    where = "any node of allox.nodeSelector's pool" if nodes.pooled else "any node"
    head = f"{beyond[0]} a pod, more than {where} has ({beyond[1]}, beside the cores kept for its GPUs)"
    if not anywhere:
        return f"{head}: no node could ever run it: it is never sampled nor started in {kind}"
    cores = reserved / 1000
    return (f"{head}: AlloX never starts it in {kind} (allox.reservedCpuPerGpu: "
            f"{cores:g} core{'' if cores == 1 else 's'} kept beside each GPU)")


def _outside_pool(template: PodTemplate, configurations: Configurations | None, pool: Mapping[str, str]) -> list[Problem]:
    """A suspended Job whose pods would select nodes outside AlloX's pool (``allox.nodeSelector``):
    the placer refuses to start it in that kind (``PlacementRefused``, when AlloX first chooses
    it) and the estimator does not sample it there, so it is told at submission, by the same
    rule (:func:`~placer.rewrite.pool_conflict`), one problem per field, naming the kinds it
    holds in: a conflict of the template's own is every kind's. Blocking where every kind
    conflicts (the Job never starts), a warning where another kind may run. Each within the API
    server's 256 characters for a warning (the conflict's ``brief``)."""
    if configurations is None or not pool:
        return []
    spec = {"nodeSelector": template.spec.nodeSelector, "affinity": template.spec.affinity}
    found: dict[str, tuple[str, list[str]]] = {}
    for kind in configurations.kinds:
        conflict = pool_conflict(spec, configurations[kind], pool, where=f"{TEMPLATE}.spec")
        if conflict is not None and conflict.field is not None:
            found.setdefault(conflict.field, (conflict.brief, []))[1].append(kind)
    every = {kind for _, kinds in found.values() for kind in kinds} == set(configurations.kinds)
    return [Problem(field=field_path(field), reason=f"{brief}: never sampled nor started in {' or '.join(kinds)}",
                    blocking=every)
            for field, (brief, kinds) in found.items()]


def configured_pod_problems(
    pod: Mapping[str, Any], configuration: Configuration, *, cells: LiveCells, gpu_resource: str
) -> list[str]:
    """Why HiveD could never place ``pod``, a pod an interchangeable Job makes in
    ``configuration`` (a sampling pod, as the estimator builds it), each problem led by its field
    as the Job writes it (the configuration's GPUs, the template's virtual-cluster label): the
    estimator does not sample a GPU configuration the extender would refuse for ever."""
    try:
        info = translate.pod_info(wire.POD_DECODER.decode(wire.ENCODER.encode(pod)), gpu_resource=gpu_resource, field="spec")
    except (InvalidRequest, msgspec.ValidationError):  # a quantity cellfit cannot read: the scheduler says which
        return []
    return [_in_configuration(problem, configuration, gpu_resource=gpu_resource).text
            for problem in placement_problems(info, cells=cells)]


def _gang_shape_problems(pod: PodInfo, spec: JobSpec) -> list[Problem]:
    """A gang larger than the pods the Job ever runs at once: its booking would wait for pods
    that never come."""
    try:
        gang = parse_request(pod).gang
    except InvalidAnnotation:  # reported with the template's other problems
        return []
    if gang is None:
        return []
    problem = gang_size_problem(gang.size, parallelism=spec.parallelism, completions=spec.completions)
    if problem is None:
        return []
    # The sentence names the annotation, which the path names.
    reason = problem.removeprefix(f"annotation {ANNOTATION_GANG_SIZE} ")
    return [Problem(field=field_path(key_path("annotation", ANNOTATION_GANG_SIZE), within=TEMPLATE), reason=reason)]


def template_pod(job: AdmittedJob, *, gpu_resource: str) -> PodInfo:
    """The pods ``job`` will make, as the scheduler will see them (owned by the Job)."""
    assert job.spec.template is not None
    template = job.spec.template
    meta = job.metadata
    return PodInfo(
        uid="",
        namespace=meta.namespace or "default",
        name=meta.name or (meta.generateName or ""),
        requests=translate.pod_requests(template.spec, gpu_resource=gpu_resource, field=f"{TEMPLATE}.spec"),
        labels=template.metadata.labels or {},
        annotations=template.metadata.annotations or {},
        owner=OwnerRef(kind="Job", name=meta.name, uid=meta.uid),
    )


# ---------------------------------------------------------------------------------- CronJobs


class JobTemplate(msgspec.Struct, frozen=True):
    metadata: wire.ObjectMeta = wire.ObjectMeta()
    spec: JobSpec = JobSpec()


class CronJobSpec(msgspec.Struct, frozen=True):
    jobTemplate: JobTemplate = JobTemplate()


class AdmittedCronJob(msgspec.Struct, frozen=True):
    """The slice of a batch/v1 CronJob the checks read: its Job template."""

    metadata: wire.ObjectMeta = wire.ObjectMeta()
    spec: CronJobSpec = CronJobSpec()


JOB_TEMPLATE: Final = "spec.jobTemplate"


def cronjob_problems(
    cronjob: AdmittedCronJob, *, cells: LiveCells | None, gpu_resource: str, preempts_best_effort: bool = True,
    nodes: NodeSizes | None = None, pool: Mapping[str, str] | None = None,
) -> list[Problem]:
    """Everything wrong with the Jobs a CronJob will create, told when the CronJob is written
    rather than when its schedule fires: its ``spec.jobTemplate`` checked as a Job being created
    (each of its Jobs is a creation, whether the CronJob itself is created or updated; cellfit
    never edits the template), every field named from the CronJob; and the cellfit.io/ keys on
    the CronJob itself, which the CronJob controller never passes on to its Jobs."""
    meta = cronjob.metadata
    template = cronjob.spec.jobTemplate
    # The CronJob controller names its Jobs after the CronJob, in its namespace.
    job_meta = structs.replace(template.metadata, name=meta.name, namespace=meta.namespace, uid="")
    job = AdmittedJob(metadata=job_meta, spec=template.spec)
    problems = job_problems(job, cells=cells, gpu_resource=gpu_resource, creating=True, preempts_best_effort=preempts_best_effort,
                            nodes=nodes, pool=pool)
    return _not_passed_on(meta.labels or {}, meta.annotations or {}) + [problem.within(JOB_TEMPLATE) for problem in problems]


def _not_passed_on(labels: Mapping[str, str], annotations: Mapping[str, str]) -> list[Problem]:
    """cellfit.io/ keys on a CronJob's own metadata: its Jobs get only the template's."""
    problems = []
    for kind, keys in (("label", labels), ("annotation", annotations)):
        for key in sorted(k for k in keys if k.startswith(_PREFIX)):
            problems.append(Problem(
                field=key_path(kind, key),
                reason=f"set on the CronJob, whose Jobs get only {JOB_TEMPLATE}'s labels and annotations: never read "
                     f"(put it in {JOB_TEMPLATE}.metadata, or a pod's in {JOB_TEMPLATE}.spec.template.metadata)",
                blocking=False,
            ))
    return problems


def introduced(now: Sequence[Problem], before: Sequence[Problem]) -> list[Problem]:
    """The blocking problems an update brings: a mistake the object already had is not the
    updater's to answer for (cellfit's own annotation writes, a label someone else set)."""
    old = {problem.text for problem in before}
    return [problem for problem in now if problem.blocking and problem.text not in old]


JOB_DECODER: Final = msgspec.json.Decoder(AdmittedJob)
CRONJOB_DECODER: Final = msgspec.json.Decoder(AdmittedCronJob)
_TEMPLATE_DECODER: Final = msgspec.json.Decoder(PodTemplate)
