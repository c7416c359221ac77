"""``why job/X`` of a suspended Job whose Job-level cellfit annotations are on its pod template:
it said "cellfit starts only Jobs with cellfit.io/configurations" to a user who had written it
(on the template, where cellfit never reads it). Now it says where it is and where it belongs."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl.objects import CellfitView, job_from
from scheduler.kubectl.why import explain_job

CONFIGURATIONS = '{"cpu":{"resources":{"cpu":"4"}},"gpu":{"resources":{"nvidia.com/gpu":"1"}}}'


def suspended_job(*, on_job: dict[str, str] | None = None, on_template: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "j", "namespace": "ns", "uid": "uid-j", "annotations": on_job or {}},
            "spec": {"suspend": True, "template": {"metadata": {"annotations": on_template or {}}, "spec": {}}},
            "status": {}}


def test_configurations_on_the_pod_template_is_said_to_belong_on_the_job() -> None:
    answer = explain_job(job_from(suspended_job(on_template={"cellfit.io/configurations": CONFIGURATIONS})), CellfitView())
    assert answer.reason == "suspended"
    assert answer.summary == (
        "suspended (spec.suspend: true): nothing runs until it is unsuspended; its cellfit.io/configurations is on its "
        "pod template (spec.template.metadata.annotations), where cellfit does not read it: move it to metadata.annotations")
    assert "cellfit starts only Jobs with" not in answer.summary


def test_several_keys_on_the_template_are_named_together() -> None:
    answer = explain_job(job_from(suspended_job(on_template={
        "cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "1000"})), CellfitView())
    assert ("its cellfit.io/configurations and cellfit.io/iterations are on its pod template "
            "(spec.template.metadata.annotations), where cellfit does not read them: move them to metadata.annotations"
            ) in answer.summary


def test_an_estimate_alone_on_the_template_keeps_the_missing_configurations_said() -> None:
    answer = explain_job(job_from(suspended_job(on_template={"cellfit.io/estimate": '{"cpu":{"seconds":60}}'})), CellfitView())
    assert answer.summary == (
        "suspended (spec.suspend: true): nothing runs until it is unsuspended; cellfit starts only Jobs with "
        "cellfit.io/configurations; its cellfit.io/estimate is on its pod template (spec.template.metadata.annotations), "
        "where cellfit does not read it: move it to metadata.annotations")


def test_the_placers_copy_beside_the_jobs_own_is_no_mistake() -> None:
    """The placer copies the configurations onto the template beside the Job's own: nothing to say."""
    job = job_from(suspended_job(on_job={"cellfit.io/iterations": "10"}, on_template={"cellfit.io/iterations": "10"}))
    assert job.template_job_keys == ()
    assert explain_job(job, CellfitView()).summary.endswith("cellfit starts only Jobs with cellfit.io/configurations")
