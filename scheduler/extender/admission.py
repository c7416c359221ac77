"""The pod-create admission webhook, independent of the web framework:

    AdmissionReview bytes -> the pod's Job -> FitGpp's preemption count -> JSON Patch -> bytes

It does two things: the new pod of a best-effort Job that FitGpp preempted is given the
"resumed" PriorityClass, so kube-scheduler takes it before other best-effort pods
(scheduler/preemption/resume.py says why); and a pod of a Job AlloX placed is rewritten into the
chosen configuration (the placer's webhook mechanism, placer/controller.py): the containers its
Job's template has (``cellfit.io/configured-containers``), not one another mutating webhook
injected (placer/patch.py).

The chart registers the resumed pods with ``failurePolicy: Ignore``, so a cellfit outage costs a
resumed Job its place in the queue, never a pod its creation; the placed pods with ``Fail``, so
that none is created outside its configuration (the Job controller retries), and with
``reinvocationPolicy: IfNeeded``: the API server calls the webhook again when a webhook after it
(Istio's, Vault's, Linkerd's injector) changed the pod, and the call patches nothing twice and
checks the pod with the containers added since. The one pod it refuses is a placed pod the API
server would refuse for its pod-level resources (KEP-2837) right after: the refusal, which the
Job's ``FailedCreate`` events show, names the configuration's field, the pod-level field and each
container beside the configuration's (the injected sidecar) with what it asks. Every other
answer is ``allowed``.

A placed pod also gets AlloX's pool (``allox.nodeSelector``'s labels) in its node selector, as
the placement puts it in the Job's template: a Job placed by a cellfit that did not (before the
pool was carried) has each new pod created on AlloX's nodes, where its machine was booked. A pod
whose own selector, configuration or required node affinity excludes the pool (such a Job is
never placed now, but one placed before may be: its template ran outside the pool) keeps its
selector and is admitted in its configuration, not refused: the Job would never get a pod
again. A reinvocation finds the labels there and adds nothing.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from typing import Any, Mapping, Protocol

from estimator.objects import LABEL_SAMPLE
from placer.configuration import Configuration, parse_configurations
from placer.patch import PodsRefused, checked_placement_patch
from placer.rewrite import PoolConflict, pooled_selector
from scheduler.constants import ANNOTATION_CONFIGURATIONS, LABEL_PLACEMENT
from scheduler.core.model import is_batch_job
from scheduler.errors import InvalidAnnotation, InvalidRequest
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import Answer
from scheduler.kube import wire
from scheduler.preemption import ResumedPriorityClass, resumed_pod_patch
from scheduler.preemption.engine import ExplainedPreemption

log = logging.getLogger(__name__)

JSON_PATCH = "JSONPatch"


class ResumedClassSource(Protocol):
    name: str

    def get(self) -> ResumedPriorityClass | None: ...


class PodAdmission:
    def __init__(
        self,
        *,
        preemption: ExplainedPreemption | None,
        lock: threading.RLock,
        metrics: ExtenderMetrics,
        resumed_class: ResumedClassSource | None,
        pool: Mapping[str, str] | None = None,
    ) -> None:
        """``preemption``: FitGpp's, whose Job counts say which pods resume (None: the
        preemption policy is the placement engine's own, and no pod is patched). ``pool``:
        ``allox.nodeSelector``'s labels, which each placed pod's node selector gets."""
        self._pool = dict(pool or {})
        self._preemption = preemption
        self._lock = lock
        self._metrics = metrics
        self._resumed_class = resumed_class

    def review(self, body: bytes) -> Answer:
        """Raises :class:`InvalidRequest` for a body that is not an AdmissionReview."""
        review = wire.decode(wire.ADMISSION_REVIEW_DECODER, body)
        request = review.request
        if not request.uid:
            raise InvalidRequest("an AdmissionReview request needs a uid", field="request.uid")
        try:
            placement = self._placement_patch(request, body)
        except PodsRefused as refused:
            return self._refusal(review, refused)
        patch = placement + self._patch(request)
        response = wire.AdmissionResponse(uid=request.uid, allowed=True)
        if patch:
            encoded = base64.b64encode(wire.ENCODER.encode(patch)).decode("ascii")
            response = wire.AdmissionResponse(uid=request.uid, allowed=True, patchType=JSON_PATCH, patch=encoded)
        self._metrics.admission_reviews.labels(result=self._result(patch)).inc()
        return Answer(200, wire.ENCODER.encode(wire.AdmissionReviewResponse(response=response, apiVersion=review.apiVersion)))

    def _refusal(self, review: wire.AdmissionReview, refused: PodsRefused) -> Answer:
        """The pod refused, saying why: the API server's own refusal (after every webhook) would name
        neither the configuration nor the container that tipped the pod over."""
        request = review.request
        pod = request.object
        where = f"{request.namespace}/{pod.metadata.name or pod.metadata.generateName}" if pod is not None else request.namespace
        log.warning("placed pod refused for its pod-level resources", extra={"pod": where, "reason": str(refused)})
        message = f"cellfit refuses this pod in the configuration its Job was placed in: {refused}"
        response = wire.AdmissionResponse(uid=request.uid, allowed=False, status=wire.AdmissionStatus(message=message))
        self._metrics.admission_reviews.labels(result="refused").inc()
        return Answer(200, wire.ENCODER.encode(wire.AdmissionReviewResponse(response=response, apiVersion=review.apiVersion)))

    @staticmethod
    def _result(patch: list[dict[str, object]]) -> str:
        if not patch:
            return "unchanged"
        return "resumed" if any(op["path"] in ("/spec/priorityClassName", "/spec/priority") for op in patch) else "placed"

    def _placement_patch(self, request: wire.AdmissionRequest, body: bytes) -> list[dict[str, object]]:
        """A pod of a Job AlloX placed (label ``cellfit.io/placement``; never a sampling pod,
        label ``cellfit.io/sample``), its template's containers rewritten into that configuration
        from what the placer copied onto the Job's template (the configurations, the containers'
        names): the webhook mechanism of the placer (placer/patch.py). Raises :class:`PodsRefused`
        for a pod the API server refuses so for its pod-level resources."""
        pod = request.object
        if request.kind.kind != "Pod" or request.operation != "CREATE" or pod is None:
            return []
        labels = pod.metadata.labels or {}
        kind = labels.get(LABEL_PLACEMENT)
        if kind is None or LABEL_SAMPLE in labels:
            # A sampling pod runs the configuration it samples, whatever its Job was placed in.
            return []
        where = f"pod {request.namespace}/{pod.metadata.name or pod.metadata.generateName}"
        try:
            configurations = parse_configurations((pod.metadata.annotations or {}).get(ANNOTATION_CONFIGURATIONS))
            placed = next((known for known in configurations.kinds if known == kind), None)  # the label, as a kind
            if placed is None:
                raise InvalidAnnotation(f"names {kind!r}, which the configurations lack", field=LABEL_PLACEMENT)
            raw = json.loads(body)["request"]["object"]
            pooled = self._in_pool(raw, configurations[placed], where=where)
            patch = checked_placement_patch(pooled, configurations[placed])
            selector = pooled["spec"].get("nodeSelector") if pooled is not raw else None
            if selector is not None and not any(op["path"] == "/spec/nodeSelector" for op in patch):
                # The placement's own patch of the selector (a configuration's) carries the pool already.
                patch.insert(0, {"op": "add", "path": "/spec/nodeSelector", "value": selector})
            return patch
        except PodsRefused:
            raise
        except (InvalidAnnotation, ValueError, KeyError, TypeError, AttributeError) as error:
            # Admitted unchanged (the webhook never refuses a pod); the log says why. The patch
            # reads the raw object beyond what AdmittedPod checks (containers, env): an entry
            # that is no JSON object there fails as TypeError or AttributeError.
            log.warning("placed pod left as created", extra={"pod": where, "reason": str(error)})
            return []

    def _in_pool(self, pod: dict[str, Any], configuration: Configuration, *, where: str) -> dict[str, Any]:
        """``pod`` with the pool's labels in its node selector (a copy), or ``pod`` itself where
        it carries them already, or where it would select no node of the pool with them (left
        outside, logged: :func:`~placer.rewrite.pooled_selector`, the placer's own rule)."""
        spec = pod.get("spec") or {}
        selector = spec.get("nodeSelector") or {}
        if not self._pool or all(selector.get(key) == value for key, value in self._pool.items()):
            return pod
        try:
            pooled = pooled_selector(spec, configuration, self._pool, where="spec")
        except PoolConflict as conflict:
            log.warning("placed pod left outside AlloX's pool", extra={"pod": where, "reason": str(conflict)})
            return pod
        return {**pod, "spec": {**spec, "nodeSelector": pooled}}

    def _patch(self, request: wire.AdmissionRequest) -> list[dict[str, object]]:
        pod = request.object
        if request.kind.kind != "Pod" or request.operation != "CREATE" or pod is None:
            return []
        job = next(
            (o for o in pod.metadata.ownerReferences or ()
             if is_batch_job(kind=o.kind, api_version=o.apiVersion) and o.controller and o.uid), None
        )
        preemption = self._preemption
        if job is None or preemption is None or self._resumed_class is None:
            return []
        with self._lock:
            preemptions = preemption.preemptions_of_job(job.uid)
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
