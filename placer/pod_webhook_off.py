"""Running Jobs whose pods only cellfit's pod-create webhook configures, while that webhook is off.

A Job AlloX started through the webhook mechanism keeps its template's containers as stored: each
of its pods takes the configuration from the webhook as it is created (placer/patch.py). When
cellfit runs again with ``admission.enabled: false``, the pods the Job controller makes later (a
retry, a replacement after a preemption) run as the template says, in no configuration, and
nothing said so. The leader's placer tells each such Job once a term (a Warning Event on it) and
the operator in one log line for all of them, at most once per :data:`LOG_EVERY_SECONDS`.

A Job is judged from what the watch holds (no read): its template labelled ``cellfit.io/placement``
(a start writes it), the configuration of that kind the start copied onto the template, and
whether a pod made of the template is in it already (the template mechanism's) or the webhook
would rewrite it (:func:`~placer.patch.placement_patch`). Judged once per version of the Job.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final, Iterable, Mapping

from estimator.objects import Job
from estimator.sample_pod import recorded_configuration
from placer.patch import placement_patch
from scheduler.constants import LABEL_PLACEMENT

log = logging.getLogger(__name__)

REASON_POD_WEBHOOK_OFF: Final = "PodWebhookOff"
# The operator's log line: at most one per this long, naming every Job told since the last.
LOG_EVERY_SECONDS: Final = 600.0
# Jobs named in that line; the rest counted.
LOG_NAMES: Final = 20
_PLACEMENT_QUOTED: Final = f'"{LABEL_PLACEMENT}"'.encode()


def pod_webhook_off_message(kind: str) -> str:
    return (f"its new pods get no configuration: cellfit's pod-create webhook, which gave this Job's pods their {kind} "
            "configuration, is off (admission.enabled: false)")


def configured_by_webhook(template: Mapping[str, Any]) -> str | None:
    """The kind a placed Job's pod ``template`` gets its configuration in only from the pod-create
    webhook: labelled ``cellfit.io/placement`` with that kind, recording that configuration, and
    not in it itself. None: not placed, no configuration recorded, or in it (the template
    mechanism's)."""
    kind = ((template.get("metadata") or {}).get("labels") or {}).get(LABEL_PLACEMENT)
    configuration = recorded_configuration(template, kind)
    if kind is None or configuration is None:
        return None
    return kind if placement_patch(template, configuration) else None


class PodWebhookOff:
    """One leader term's judgement of the running Jobs, with the pod-create webhook off: which
    need it, and which were told."""

    def __init__(self) -> None:
        # Per running Job UID: the resourceVersion judged at, the kind only the webhook
        # configures (None: none) and the Job's key.
        self._judged: dict[str, tuple[str, str | None, str]] = {}
        self._told: set[str] = set()
        self._unlogged: list[str] = []  # keys of the Jobs told since the last log line
        self._logged_at: float | None = None

    def to_tell(self, jobs: Iterable[Job]) -> list[tuple[Job, str]]:
        """Of ``jobs`` (the interchangeable ones the watch holds), the running ones only the
        webhook configures not told yet this term, with their kind; those are told now."""
        judged: dict[str, tuple[str, str | None, str]] = {}
        tell: list[tuple[Job, str]] = []
        for job in jobs:
            if job.suspended or job.finished or job.metadata.deletionTimestamp or not job.spec.has_template:
                continue
            uid, version = job.metadata.uid, job.metadata.resourceVersion
            kept = self._judged.get(uid)
            kind = kept[1] if kept is not None and version and kept[0] == version else _judge(job)
            key = f"{job.metadata.namespace}/{job.metadata.name}"
            judged[uid] = (version, kind, key)
            if kind is not None and uid not in self._told:
                self._told.add(uid)
                self._unlogged.append(key)
                tell.append((job, kind))
        self._judged = judged
        return tell

    def log_due(self, now: float) -> None:
        """One warning for the Jobs told since the last, unless one was logged within
        :data:`LOG_EVERY_SECONDS` (then with the next that is due)."""
        if not self._unlogged or (self._logged_at is not None and now - self._logged_at < LOG_EVERY_SECONDS):
            return
        named, self._unlogged = self._unlogged, []
        self._logged_at = now
        log.warning("running Jobs placed through cellfit's pod-create webhook get no configuration on their new pods: the "
                    "webhook is off (admission.enabled: false); each Job is told by a PodWebhookOff Event",
                    extra={"jobs": named[:LOG_NAMES], "count": len(named)})

    def running_unconfigured(self) -> list[str]:
        """The keys of the running Jobs, as last judged, whose new pods get no configuration."""
        return sorted(key for _, kind, key in self._judged.values() if kind is not None)


def _judge(job: Job) -> str | None:
    raw = bytes(job.spec.template)
    if _PLACEMENT_QUOTED not in raw:  # never placed (unsuspended by hand): no decode
        return None
    try:
        template = json.loads(raw)
    except ValueError:
        return None
    return configured_by_webhook(template) if isinstance(template, dict) else None
