"""A pod preempted by cellfit itself (the cell exchange's returned cells, HiveD's reclaim of
cells kube-scheduler will not preempt for, a gang's members on other nodes than FitGpp's):
marked as kube-scheduler marks its own victims, then deleted with its own grace period.

:func:`preempt_pod` says what it did (:class:`Preempted`): a caller that counts a reclaim
(reclaim.py, the exchange) takes a pod already gone or replaced as not reclaimed, as it freed
nothing and must not be told preempted; the gang path (cache.py) takes it as done."""

from __future__ import annotations

import enum
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


class Preempted(enum.Enum):
    """What a preemption of one incarnation of a pod did."""

    DELETED = "deleted"
    GONE = "already gone"  # 404: nothing was there to delete
    REPLACED = "replaced"  # 409: another pod took its name (the UID guard), which is not the victim


_NOT_THERE = {404: Preempted.GONE, 409: Preempted.REPLACED}


def preempt_pod(api: PodDeletion, *, namespace: str, name: str, uid: str, message: str, now: float) -> Preempted:
    """Mark the pod (:func:`mark_disrupted`), then delete that incarnation of it with its own
    grace period (:func:`delete_preempted`). Already gone or replaced is said, not raised (the
    deletion is skipped when the mark found it so). Raises :class:`~scheduler.errors.CellfitError`
    when the deletion fails."""
    not_there = mark_disrupted(api, namespace=namespace, name=name, uid=uid, message=message, now=now)
    if not_there is not None:
        return not_there
    return delete_preempted(api, namespace=namespace, name=name, uid=uid)


def delete_preempted(api: PodDeletion, *, namespace: str, name: str, uid: str) -> Preempted:
    """That incarnation of the pod deleted with its own grace period; 404 and 409 said, not
    raised. Raises :class:`~scheduler.errors.KubernetesApiError` for any other failure."""
    try:
        api.delete_pod(namespace=namespace, name=name, uid=uid)
    except KubernetesApiError as error:
        if error.status in _NOT_THERE:
            return _NOT_THERE[error.status]
        raise
    return Preempted.DELETED


def write_disruption_target(api: PodDeletion, *, namespace: str, name: str, uid: str, message: str, now: float) -> Preempted | None:
    """The pod's DisruptionTarget condition, guarded by its UID; ``now``: wall-clock seconds.
    None when written; GONE or REPLACED when that incarnation is not there (404, 409). Raises
    :class:`~scheduler.errors.KubernetesApiError` for any other failure (a caller may try again)."""
    condition = {
        "type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER, "message": f"cellfit: {message}",
        "lastTransitionTime": rfc3339(now),
    }
    try:
        api.write_path("PATCH", pod_status_path(namespace, name), {"metadata": {"uid": uid}, "status": {"conditions": [condition]}},
                       content_type="application/strategic-merge-patch+json")
    except KubernetesApiError as error:
        if error.status in _NOT_THERE:
            return _NOT_THERE[error.status]
        raise
    return None


def warn_not_marked(*, namespace: str, name: str, error: Exception) -> None:
    log.warning("the preempted pod's DisruptionTarget condition was not written: a podFailurePolicy that ignores "
                "disruptions will count this preemption as a failure", extra={"pod": f"{namespace}/{name}", "reason": str(error)})


def mark_disrupted(api: PodDeletion, *, namespace: str, name: str, uid: str, message: str, now: float) -> Preempted | None:
    """The pod's DisruptionTarget condition (:func:`write_disruption_target`), written before its
    deletion as kube-scheduler writes it on the victims of its own preemption: a Job whose
    podFailurePolicy ignores disruptions then resumes instead of counting a failure. Not
    written, the deletion goes on all the same (the cells must come back), and the log says
    what the Job may count. GONE or REPLACED when that incarnation of the pod is not there:
    nothing left to delete."""
    try:
        return write_disruption_target(api, namespace=namespace, name=name, uid=uid, message=message, now=now)
    except KubernetesApiError as error:
        warn_not_marked(namespace=namespace, name=name, error=error)
    return None
