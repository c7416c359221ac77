"""A pod preempted by cellfit itself (the cell exchange's returned cells, HiveD's reclaim of
cells kube-scheduler will not preempt for): marked as kube-scheduler marks its own victims,
then deleted with its own grace period."""

from __future__ import annotations

import logging
from typing import Any, Literal, Protocol

from scheduler.core.model import PREEMPTION_BY_SCHEDULER
from scheduler.cells.exchange.resource import rfc3339
from scheduler.cluster.exchange.objects import pod_status_path
from scheduler.errors import KubernetesApiError

log = logging.getLogger(__name__)

# The condition kube-scheduler sets on its own preemption's victims, and its reason.
DISRUPTION_TARGET = "DisruptionTarget"


class PodDeletion(Protocol):
    """What preempting a pod writes (scheduler.cluster.api.KubernetesApi)."""

    def write_path(
        self, method: Literal["POST", "PUT", "PATCH"], path: str, body: Any, *, content_type: str = "application/json"
    ) -> bytes: ...

    def delete_pod(self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None) -> None: ...


# Answers that end a preemption of one incarnation of a pod as done: 404, the pod is gone; 409,
# another pod took its name (the UID guard failed), which is not the victim.
_NOT_THERE = (404, 409)


def preempt_pod(api: PodDeletion, *, namespace: str, name: str, uid: str, message: str, now: float) -> None:
    """Mark the pod (:func:`mark_disrupted`), then delete that incarnation of it with its own
    grace period; already gone, or re-created under its name, is success (the deletion is
    skipped when the mark found it so). Raises :class:`~scheduler.errors.CellfitError` when the
    deletion fails."""
    if not mark_disrupted(api, namespace=namespace, name=name, uid=uid, message=message, now=now):
        return
    try:
        api.delete_pod(namespace=namespace, name=name, uid=uid)
    except KubernetesApiError as error:
        if error.status not in _NOT_THERE:
            raise


def mark_disrupted(api: PodDeletion, *, namespace: str, name: str, uid: str, message: str, now: float) -> bool:
    """The pod's DisruptionTarget condition, written before its deletion as kube-scheduler
    writes it on the victims of its own preemption: a Job whose podFailurePolicy ignores
    disruptions then resumes instead of counting a failure. Guarded by the pod's UID (a pod
    re-created under the name is left alone); not written, the deletion goes on all the same
    (the cells must come back), and the log says what the Job may count. ``now``: wall-clock
    seconds. False when that incarnation of the pod is gone (404) or another took its name
    (409): nothing left to delete."""
    condition = {
        "type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER, "message": f"cellfit: {message}",
        "lastTransitionTime": rfc3339(now),
    }
    try:
        api.write_path("PATCH", pod_status_path(namespace, name), {"metadata": {"uid": uid}, "status": {"conditions": [condition]}},
                       content_type="application/strategic-merge-patch+json")
    except KubernetesApiError as error:
        if error.status in _NOT_THERE:
            return False
        log.warning("the preempted pod's DisruptionTarget condition was not written: a podFailurePolicy that ignores "
                    "disruptions will count this preemption as a failure", extra={"pod": f"{namespace}/{name}", "reason": str(error)})
    return True
