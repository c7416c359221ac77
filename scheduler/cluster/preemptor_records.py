"""FitGpp's decision written on its preemptor (annotation ``cellfit.io/preemptor-hold``,
scheduler/preemption/records.py), so that a restarted replica keeps the room for it.

Written by the replica whose preempt verb decided, whether it leads or not (every replica
answers its own kube-scheduler), on the cache's writer thread after the answer: the verb never
waits for the API server. Like HiveD's reclaim record (stranded.py's ``ReclaimRecords``), the
write goes through the pod's status subresource, which takes a pod's annotations too (the one
power over pods' objects cellfit's ClusterRole holds beyond deleting them), and is guarded by
the pod's UID, so a pod re-created under the name is left alone.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, Protocol

from scheduler.cluster.exchange.objects import pod_status_path
from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.model import PodInfo
from scheduler.errors import KubernetesApiError

log = logging.getLogger(__name__)


class PodPatch(Protocol):
    """A pod's annotation written (scheduler.cluster.api.KubernetesApi)."""

    def write_path(self, method: Literal["POST", "PUT", "PATCH"], path: str, body: Any, *, content_type: str = "application/json") -> bytes: ...


def write_preemptor_record(api: PodPatch, *, pod: PodInfo, record: str) -> None:
    """Make ``pod`` carry ``record``. Nothing for a pod gone (404) or re-created under its name
    (409: the UID differs); any other failure is raised (:class:`KubernetesApiError`)."""
    body = {"metadata": {"uid": pod.uid, "annotations": {ANNOTATION_PREEMPTOR_HOLD: record}}}
    try:
        api.write_path("PATCH", pod_status_path(pod.namespace, pod.name), body, content_type="application/merge-patch+json")
    except KubernetesApiError as error:
        if error.status not in (404, 409):
            raise
        log.info(
            "preemption not recorded on its preemptor: the pod is gone, or another by its name took its place",
            extra={"pod": pod.key, "annotation": ANNOTATION_PREEMPTOR_HOLD, "reason": str(error)},
        )
