"""The chart registers the placed pods' webhook with ``reinvocationPolicy: IfNeeded``
(charts/cellfit/templates/webhook.yaml; helm from tests/test_chart_offline.py): the API server
calls cellfit again after a later mutating webhook (a sidecar injector) changed a placed Job's
pod, so the pod-level check sees the injected container (tests/unit/test_admission_reinvocation.py
is that call's answer). The resumed pods' webhook stays ``Never``: its priority patch does not
depend on what a later webhook changes."""

from __future__ import annotations

from typing import Any

from scheduler.constants import ADMISSION_PODS_PATH
from tests.test_chart_offline import NONDEFAULT_VALUES, one, render

PLACED = "placed-pods.admission.cellfit.io"
RESUMED = "resumed-pods.admission.cellfit.io"


def mutating_webhooks(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {hook["name"]: hook for hook in one(docs, "MutatingWebhookConfiguration")["webhooks"]}


def test_placed_pods_are_reviewed_again_after_a_later_webhook_changed_them() -> None:
    for docs in (render(), render("-f", str(NONDEFAULT_VALUES))):
        hooks = mutating_webhooks(docs)
        placed, resumed = hooks[PLACED], hooks[RESUMED]
        assert (placed["reinvocationPolicy"], placed["failurePolicy"]) == ("IfNeeded", "Fail")
        assert placed["clientConfig"]["service"]["path"] == ADMISSION_PODS_PATH
        assert resumed["reinvocationPolicy"] == "Never"
