"""The chart sends CronJobs to cellfit's validating webhook (charts/cellfit/templates/webhook.yaml;
helm from tests/test_chart_offline.py): a CronJob's Job template is checked when the CronJob is
written, on the batch path that reviews Jobs, only for cellfit's CronJobs, never blocking one."""

from __future__ import annotations

from typing import Any

from scheduler.constants import ADMISSION_VALIDATE_JOBS_PATH
from tests.test_chart_offline import RENDER_NAMESPACE, one, render, scheduler_config

CRONJOBS = "validated-cronjobs.admission.cellfit.io"
JOBS = "validated-jobs.admission.cellfit.io"


def webhooks(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {hook["name"]: hook for hook in one(docs, "ValidatingWebhookConfiguration")["webhooks"]}


def test_cronjobs_are_sent_to_the_batch_path_on_create_and_update_and_never_blocked() -> None:
    hooks = webhooks(render())
    cronjobs, jobs = hooks[CRONJOBS], hooks[JOBS]
    assert cronjobs["rules"] == [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                  "resources": ["cronjobs"], "scope": "Namespaced"}]
    assert cronjobs["clientConfig"] == jobs["clientConfig"]
    assert cronjobs["clientConfig"]["service"]["path"] == ADMISSION_VALIDATE_JOBS_PATH
    assert (cronjobs["failurePolicy"], cronjobs["sideEffects"]) == ("Ignore", "None")
    assert cronjobs["admissionReviewVersions"] == ["v1"]


def test_only_cellfits_cronjobs_are_sent_and_an_absent_template_metadata_is_no_error() -> None:
    docs = render()
    itself, ours = webhooks(docs)[CRONJOBS]["matchConditions"]
    assert itself == webhooks(docs)[JOBS]["matchConditions"][0]
    assert RENDER_NAMESPACE in itself["expression"]
    expression = ours["expression"]
    profile = scheduler_config(docs)["profiles"][0]["schedulerName"]
    assert f"object.spec.jobTemplate.spec.template.spec.schedulerName == '{profile}'" in expression
    # Keys on the CronJob (told they are never passed on), its Job template and its pod template.
    for meta in ("object.metadata", "object.spec.jobTemplate.metadata", "object.spec.jobTemplate.spec.template.metadata"):
        for part in ("labels", "annotations"):
            assert f"{meta}.{part}.exists(k, k.startsWith('cellfit.io/'))" in expression
    # Nothing defaults a Job template's metadata: each is looked into only once has() found it (an
    # error in a matchCondition would skip the call under Ignore, and refuse the CronJob under Fail).
    for meta in ("object.spec.jobTemplate.metadata", "object.spec.jobTemplate.spec.template.metadata"):
        assert f"(has({meta}) && ((has({meta}.labels) && " in expression
        assert expression.count(f"{meta}.labels.exists") == 1
