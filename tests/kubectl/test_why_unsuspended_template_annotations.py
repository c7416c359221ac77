"""``why job/X`` of a Job created unsuspended with cellfit's Job-level annotations on its pod
template only: its user meant an interchangeable Job, cellfit never read the annotations (it
reads them from the Job) and ran it as written, and ``why`` said nothing of it (only the
suspended Job got a word). Now the answer says so after what the pods do, with what to write."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl.objects import CellfitView, job_from, pod_from
from scheduler.kubectl.why import explain_job
from tests.kubectl.test_why import job_json, pod_json

CONFIGURATIONS = '{"cpu":{"resources":{"cpu":"4"}},"gpu":{"resources":{"nvidia.com/gpu":"1"}}}'
COMPLETE = {"type": "Complete", "status": "True", "reason": "Completed", "message": "Reached expected number of succeeded pods"}


def unsuspended_job(*, on_template: dict[str, str], on_job: dict[str, str] | None = None, conditions: list[dict[str, str]] | None = None) -> dict[str, Any]:
    body = job_json("j", annotations=on_job, conditions=conditions)
    body["spec"]["template"] = {"metadata": {"annotations": on_template}, "spec": {}}
    return body


def running(body: dict[str, Any]) -> Any:
    pod = pod_from(pod_json("j-7xk2p", node="gpu-0", phase="Running", job="j"))
    return job_from(body, pods=(pod,))


def test_configurations_on_the_template_of_a_running_job_are_said_to_be_ignored() -> None:
    answer = explain_job(running(unsuspended_job(on_template={"cellfit.io/configurations": CONFIGURATIONS})), CellfitView())
    assert answer.reason == "running"  # the tag scripts read is still what its pods do
    assert answer.summary == (
        "running: 1 pod on gpu-0; not an interchangeable Job: its cellfit.io/configurations is on its pod template "
        "(spec.template.metadata.annotations), where cellfit does not read it, so cellfit treats it as an ordinary Job, "
        "run as its template says, never estimated nor placed by AlloX; for cellfit to choose its configuration, create "
        "it again with it in metadata.annotations and spec.suspend: true"
    )


def test_an_estimate_alone_on_the_template_names_the_missing_configurations_too() -> None:
    body = unsuspended_job(on_template={"cellfit.io/estimate": '{"cpu":{"seconds":60}}', "cellfit.io/iterations": "100"})
    summary = explain_job(running(body), CellfitView()).summary
    assert (
        "its cellfit.io/estimate and cellfit.io/iterations are on its pod template (spec.template.metadata.annotations), "
        "where cellfit does not read them, and it has no cellfit.io/configurations, so cellfit treats it"
    ) in summary
    assert summary.endswith("create it again with cellfit.io/configurations and them in metadata.annotations and spec.suspend: true")


def test_a_finished_job_is_told_too() -> None:
    body = unsuspended_job(on_template={"cellfit.io/configurations": CONFIGURATIONS}, conditions=[COMPLETE])
    answer = explain_job(job_from(body), CellfitView())
    assert answer.reason == "complete"
    assert answer.summary.startswith("completed: Reached expected number of succeeded pods; not an interchangeable Job: ")


def test_a_job_with_its_own_configurations_or_none_anywhere_gets_no_note() -> None:
    """The placer copies the configurations onto a placed Job's template beside the Job's own."""
    placed = unsuspended_job(on_job={"cellfit.io/configurations": CONFIGURATIONS}, on_template={"cellfit.io/configurations": CONFIGURATIONS})
    plain = unsuspended_job(on_template={})
    for body in (placed, plain):
        assert explain_job(running(body), CellfitView()).summary == "running: 1 pod on gpu-0"
