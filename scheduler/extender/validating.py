"""The validating admission webhook, independent of the web framework:

    AdmissionReview bytes -> the Pod, Job or CronJob -> cellfit's checks (validation.py) -> warnings or a denial

The API server asks it when a Pod, a Job or a CronJob that carries cellfit's labels or
annotations (or names cellfit's scheduler) is created, and when a Job or a CronJob is updated. A
CronJob is checked as the Jobs it will create (its ``spec.jobTemplate``, each field named under
it), so a mistake is told to whoever writes the CronJob, not found when the schedule fires and
every Job it creates is warned about, or refused, with nobody to read it. Its answer is ``allowed`` with
one warning per problem, which ``kubectl apply`` prints; with ``admission.rejectInvalid`` a
problem that cellfit would act on wrongly (the blocking ones) denies the request instead, the
message naming each field. An update is denied only for a problem it brings: an object that was
already wrong (created while cellfit was away, or before the setting) can still be fixed,
labelled or deleted. The chart registers it with ``failurePolicy: Ignore``, so a cellfit outage
never blocks a Pod or a Job.
"""

from __future__ import annotations

import logging
from typing import Final, Literal, Mapping

import msgspec

from scheduler.constants import KUBE_DEFAULT_SCHEDULER
from scheduler.errors import InvalidRequest
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import Answer
from scheduler.extender.validation import (
    CRONJOB_DECODER,
    JOB_DECODER,
    JOB_TEMPLATE,
    LiveCells,
    NodeSizes,
    PodTemplate,
    Problem,
    cronjob_problems,
    introduced,
    job_problems,
    pod_problems,
    problem_of,
    trial_priority_problems,
)
from scheduler.kube import translate, wire
from scheduler.messages import first_problems

log = logging.getLogger(__name__)

# kube-apiserver keeps at most 4 KiB of warnings per request and cuts each to 256 characters
# once over that (k8s.io/apiserver/pkg/endpoints/filters/warning.go): stay within both.
MAX_WARNINGS: Final = 12
MAX_WARNING_CHARS: Final = 256
WARNING_PREFIX: Final = "cellfit: "

Kind = Literal["Pod", "Job", "CronJob"]


class ValidationRequest(msgspec.Struct, frozen=True):
    """admission.k8s.io/v1 AdmissionRequest: the objects are decoded by kind, afterwards."""

    uid: str
    kind: wire.GroupVersionKind = wire.GroupVersionKind()
    operation: str = ""
    namespace: str = ""
    name: str = ""
    object: msgspec.Raw = msgspec.Raw(b"null")
    oldObject: msgspec.Raw = msgspec.Raw(b"null")


class ValidationReview(msgspec.Struct, frozen=True):
    request: ValidationRequest
    apiVersion: str = "admission.k8s.io/v1"


_REVIEW_DECODER: Final = msgspec.json.Decoder(ValidationReview)


class ObjectValidation:
    """``cells``: the running HiveD configuration, to check virtual clusters and cell types
    against (``None`` under resource-fit, which has neither). ``scheduler_name``: the
    kube-scheduler profile cellfit serves; a pod (or a Job's pod template) of another scheduler is
    not cellfit's, so its cellfit.io/ keys are not checked, only warned about as unread (None:
    every object is checked as cellfit's). ``preempts_best_effort``: FitGpp preempts best-effort
    pods for trial ones, so a best-effort Job is told when a preemption would fail it. ``pool``:
    ``allox.nodeSelector``'s labels, so an interchangeable Job whose pods would select other nodes
    is told so at submission, not when AlloX first chooses it (``PlacementRefused``)."""

    def __init__(
        self, *, cells: LiveCells | None, metrics: ExtenderMetrics, gpu_resource: str, reject_invalid: bool,
        scheduler_name: str | None = None, preempts_best_effort: bool = True, nodes: NodeSizes | None = None,
        pool: Mapping[str, str] | None = None,
    ) -> None:
        self._cells = cells
        self._pool = dict(pool or {})
        self._nodes = nodes  # the nodes interchangeable Jobs run on, sizes read at each review
        self._metrics = metrics
        self._gpu_resource = gpu_resource
        self._reject_invalid = reject_invalid
        self._scheduler_name = scheduler_name
        self._preempts_best_effort = preempts_best_effort

    def review_pod(self, body: bytes) -> Answer:
        """Raises :class:`InvalidRequest` for a body that is not an AdmissionReview of a Pod."""
        return self._review(body, "Pod")

    def review_job(self, body: bytes) -> Answer:
        """A Job's review, or a CronJob's (the batch path: the chart sends both). Raises
        :class:`InvalidRequest` for a body that is not an AdmissionReview of either."""
        return self._review(body, "Job", "CronJob")

    def _review(self, body: bytes, *kinds: Kind) -> Answer:
        """``kinds``: those this path reviews, the first when the request names none."""
        review = wire.decode(_REVIEW_DECODER, body)
        request = review.request
        if not request.uid:
            raise InvalidRequest("an AdmissionReview request needs a uid", field="request.uid")
        kind = _reviewed_kind(request.kind.kind, kinds)
        problems, denied = self._problems(request, kind)
        warnings = [_cut(WARNING_PREFIX + problem.text) for problem in problems[:MAX_WARNINGS]]
        if len(problems) > MAX_WARNINGS:
            warnings[-1] = _cut(f"{WARNING_PREFIX}{len(problems) - MAX_WARNINGS + 1} more problems not shown")
        response = wire.AdmissionResponse(uid=request.uid, allowed=not denied, warnings=warnings or None)
        if denied:
            what = kind.lower()
            # Each problem is bounded (validation.MAX_PROBLEM_CHARS), and so is how many are told.
            told = first_problems([p.text for p in denied], separator="; ")
            message = f"cellfit refuses this {what} (admission.rejectInvalid): {told}"
            response = wire.AdmissionResponse(
                uid=request.uid, allowed=False, warnings=warnings or None, status=wire.AdmissionStatus(message=message)
            )
        result = "rejected" if denied else ("warned" if problems else "valid")
        self._metrics.admission_validations.labels(kind=kind.lower(), result=result).inc()
        if problems:
            # A refusal is news to the operator; a warning reached its user (and is counted).
            log.log(
                logging.INFO if denied else logging.DEBUG,
                "admission found problems",
                extra={
                    "kind": kind,
                    "object": f"{request.namespace}/{request.name or '(generated name)'}",
                    "operation": request.operation,
                    "result": result,
                    "problems": [problem.field for problem in problems],
                },
            )
        return Answer(200, wire.ENCODER.encode(wire.AdmissionReviewResponse(response=response, apiVersion=review.apiVersion)))

    def _problems(self, request: ValidationRequest, kind: Kind) -> tuple[list[Problem], list[Problem]]:
        """(every problem of the object, the ones that deny it)."""
        if request.operation not in ("CREATE", "UPDATE"):
            return [], []
        now = self._object_problems(request.object, kind, creating=request.operation == "CREATE", field="request.object")
        if not self._reject_invalid:
            return now, []
        if request.operation == "CREATE":
            return now, [problem for problem in now if problem.blocking]
        before = self._object_problems(request.oldObject, kind, creating=False, field="request.oldObject")
        return now, introduced(now, before)

    def _object_problems(self, raw: msgspec.Raw, kind: Kind, *, creating: bool, field: str) -> list[Problem]:
        """``field``: where ``raw`` is in the review, named by a decoding error."""
        if bytes(raw) in (b"", b"null"):
            return []
        if kind == "Job":
            return self._job_problems(raw, creating=creating, field=field)
        if kind == "CronJob":
            return self._cronjob_problems(raw, field=field)
        return self._pod_problems(raw, field=field)

    def _job_problems(self, raw: msgspec.Raw, *, creating: bool, field: str) -> list[Problem]:
        job = wire.decode(JOB_DECODER, raw, field=field)
        elsewhere = self._another_scheduler(_template_spec(job.spec.template), where="spec.template.spec")
        if elsewhere is not None:
            return [elsewhere]
        return job_problems(job, cells=self._cells, gpu_resource=self._gpu_resource, creating=creating,
                            preempts_best_effort=self._preempts_best_effort, nodes=self._nodes, pool=self._pool)

    def _cronjob_problems(self, raw: msgspec.Raw, *, field: str) -> list[Problem]:
        cronjob = wire.decode(CRONJOB_DECODER, raw, field=field)
        template = cronjob.spec.jobTemplate.spec.template
        elsewhere = self._another_scheduler(_template_spec(template), where=f"{JOB_TEMPLATE}.spec.template.spec")
        if elsewhere is not None:
            return [elsewhere]
        return cronjob_problems(cronjob, cells=self._cells, gpu_resource=self._gpu_resource,
                                preempts_best_effort=self._preempts_best_effort, nodes=self._nodes, pool=self._pool)

    def _pod_problems(self, raw: msgspec.Raw, *, field: str) -> list[Problem]:
        pod = wire.decode(wire.POD_DECODER, raw, field=field)
        elsewhere = self._another_scheduler(pod.spec, where="spec")
        if elsewhere is not None:
            return [elsewhere]
        try:
            info = translate.pod_info(pod, gpu_resource=self._gpu_resource, field="spec")
        except InvalidRequest as error:  # a quantity cellfit cannot read: the scheduler would refuse it too
            return [problem_of(error)]
        return (pod_problems(info, cells=self._cells, preempts_best_effort=self._preempts_best_effort)
                + trial_priority_problems(info.labels, pod.spec))

    def _another_scheduler(self, spec: wire.PodSpec, *, where: str) -> Problem | None:
        """The one warning for a pod another scheduler places (the API server calls the webhook
        for any object with a cellfit.io/ key): cellfit reads none of its keys, and a check as if
        it did would warn, or refuse, about what never applies."""
        ours, theirs = self._scheduler_name, spec.schedulerName or KUBE_DEFAULT_SCHEDULER
        if ours is None or theirs == ours:
            return None
        return Problem(
            field=f"{where}.schedulerName",
            reason=f"{theirs!r} schedules this pod, not cellfit ({ours!r}): its cellfit.io/ labels and annotations are not read",
            blocking=False,
        )


def _reviewed_kind(named: str, kinds: tuple[Kind, ...]) -> Kind:
    """The kind of object a request reviews: the one it names, if the path reviews it."""
    for kind in kinds:
        if named in ("", kind):
            return kind
    others = "".join(f" (or a {kind})" for kind in kinds[1:])
    raise InvalidRequest(f"this path reviews a {kinds[0]}, not a {named}{others}", field="request.kind.kind")


def _template_spec(template: PodTemplate | None) -> wire.PodSpec:
    return template.spec if template is not None else wire.PodSpec()


def _cut(text: str) -> str:
    return text if len(text) <= MAX_WARNING_CHARS else text[: MAX_WARNING_CHARS - 1] + "…"
