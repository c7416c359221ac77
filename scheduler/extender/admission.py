"""The pod-create admission webhook, independent of the web framework:

    AdmissionReview bytes -> the pod's Job -> FitGpp's preemption count -> JSON Patch -> bytes

Today it does one thing: the new pod of a best-effort Job that FitGpp preempted is given the
"resumed" PriorityClass, so kube-scheduler takes it before other best-effort pods
(scheduler/preemption/resume.py says why). The webhook never refuses a pod: every answer is
``allowed``, and the chart registers it with ``failurePolicy: Ignore``, so a cellfit outage costs
a resumed Job its place in the queue, never a pod its creation.
"""

from __future__ import annotations

import base64
import logging
import threading
from typing import Protocol

from scheduler.core.engine import SchedulingEngine
from scheduler.errors import InvalidRequest
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import Answer
from scheduler.kube import wire
from scheduler.preemption import ResumedPriorityClass, resumed_pod_patch
from scheduler.preemption.engine import FitGppEngine

log = logging.getLogger(__name__)

JSON_PATCH = "JSONPatch"


class ResumedClassSource(Protocol):
    name: str

    def get(self) -> ResumedPriorityClass | None: ...


class PodAdmission:
    def __init__(
        self,
        *,
        engine: SchedulingEngine,
        lock: threading.RLock,
        metrics: ExtenderMetrics,
        resumed_class: ResumedClassSource | None,
    ) -> None:
        self._engine = engine
        self._lock = lock
        self._metrics = metrics
        self._resumed_class = resumed_class

    def review(self, body: bytes) -> Answer:
        """Raises :class:`InvalidRequest` for a body that is not an AdmissionReview."""
        review = wire.decode(wire.ADMISSION_REVIEW_DECODER, body)
        request = review.request
        if not request.uid:
            raise InvalidRequest("an AdmissionReview request needs a uid", field="request.uid")
        patch = self._patch(request)
        response = wire.AdmissionResponse(uid=request.uid, allowed=True)
        if patch:
            encoded = base64.b64encode(wire.ENCODER.encode(patch)).decode("ascii")
            response = wire.AdmissionResponse(uid=request.uid, allowed=True, patchType=JSON_PATCH, patch=encoded)
        self._metrics.admission_reviews.labels(result="resumed" if patch else "unchanged").inc()
        return Answer(200, wire.ENCODER.encode(wire.AdmissionReviewResponse(response=response, apiVersion=review.apiVersion)))

    def _patch(self, request: wire.AdmissionRequest) -> list[dict[str, object]]:
        pod = request.object
        if request.kind.kind != "Pod" or request.operation != "CREATE" or pod is None:
            return []
        job = next(
            (o for o in pod.metadata.ownerReferences or () if o.kind == "Job" and o.controller and o.uid), None
        )
        engine = self._engine
        if job is None or not isinstance(engine, FitGppEngine) or self._resumed_class is None:
            return []
        with self._lock:
            preemptions = engine.preemptions_of_job(job.uid)
        if preemptions == 0:
            return []
        resumed = self._resumed_class.get()
        if resumed is None:
            return []  # logged by the lookup
        patch = resumed_pod_patch(
            labels=pod.metadata.labels or {},
            priority=pod.spec.priority,
            job_preemptions=preemptions,
            resumed=resumed,
        )
        if patch:
            log.info(
                "resumed pod goes to the head of the best-effort queue",
                extra={
                    "job": f"{request.namespace}/{job.name}",
                    "pod": pod.metadata.name or f"{pod.metadata.generateName}*",
                    "preemptions": preemptions,
                    "priorityClass": resumed.name,
                    "priority": resumed.value,
                },
            )
        return patch
