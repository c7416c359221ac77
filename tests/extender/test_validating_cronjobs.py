"""CronJobs through the validating webhook (scheduler/extender/validating.py): a CronJob's
spec.jobTemplate is checked as the Jobs it will create, when the CronJob is written, each field
named from the CronJob, instead of every Job it creates being warned about (nobody reads it) or
refused when the schedule fires. The bodies are AdmissionReviews as kube-apiserver POSTs them for
batch/v1 cronjobs, the CronJob defaulted as the API server has it by then."""

from __future__ import annotations

import copy
import json
import threading
import uuid
from typing import Any, Literal

import pytest
from fastapi.testclient import TestClient

from scheduler.constants import ADMISSION_VALIDATE_JOBS_PATH
from scheduler.errors import InvalidRequest
from scheduler.extender.admission import PodAdmission
from scheduler.extender.app import create_admission_app
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.validating import ObjectValidation
from scheduler.extender.validation import CRONJOB_DECODER, JOB_DECODER, LiveCells, cronjob_problems, job_problems
from tests.support import kube_objects as k
from tests.support.admission_reviews import ADMIN, RESUMES, job
from tests.unit.test_validation import CONFIGURATIONS, VISION, hived

ABC = {"cellfit.io/gang": "true", "cellfit.io/gang-size": "abc"}
UNDER = "spec.jobTemplate"


def cronjob(
    name: str = "nightly",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    job_labels: dict[str, str] | None = None,
    job_annotations: dict[str, str] | None = None,
    template_labels: dict[str, str] | None = None,
    template_annotations: dict[str, str] | None = None,
    gpus: int = 1,
    parallelism: int | None = None,
    suspend: bool | None = None,
    scheduler_name: str = "cellfit",
    pod_failure_policy: dict[str, Any] | None = RESUMES,
) -> dict[str, Any]:
    """A batch/v1 CronJob as the API server holds it when a validating webhook is called: its own
    defaults (concurrencyPolicy, history limits, suspend), the pod template's (restartPolicy kept
    as written, dnsPolicy, schedulerName, container defaults); no selector or controller labels in
    the Job template (the Job gets those when the CronJob controller creates it)."""
    resources: dict[str, Any] = {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    job_spec: dict[str, Any] = {
        "template": {
            "metadata": {"creationTimestamp": None, "labels": dict(template_labels or {}),
                         "annotations": dict(template_annotations or {})},
            "spec": {
                "containers": [{
                    "name": "trainer", "image": "ghcr.io/example/trainer:1.4", "resources": resources,
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }],
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                "securityContext": {}, "schedulerName": scheduler_name,
            },
        },
    }
    if pod_failure_policy is not None:  # the README's for a best-effort Job, unless None
        job_spec["podFailurePolicy"] = copy.deepcopy(pod_failure_policy)
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    if suspend is not None:
        job_spec["suspend"] = suspend
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": name, "namespace": "ml", "uid": str(uuid.uuid4()), "generation": 1, "creationTimestamp": k.CREATED,
            "labels": dict(labels or {}),
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", **(annotations or {})},
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "batch/v1",
                               "time": k.CREATED, "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:jobTemplate": {}}}}],
        },
        "spec": {
            "schedule": "0 3 * * *",
            "concurrencyPolicy": "Allow",
            "suspend": False,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {
                "metadata": {"creationTimestamp": None, "labels": dict(job_labels or {}),
                             "annotations": dict(job_annotations or {})},
                "spec": job_spec,
            },
        },
        "status": {},
    }


def cronjob_review(body: dict[str, Any], *, operation: Literal["CREATE", "UPDATE"] = "CREATE",
                   old: dict[str, Any] | None = None) -> dict[str, Any]:
    gvk = {"group": "batch", "version": "v1", "kind": "CronJob"}
    gvr = {"group": "batch", "version": "v1", "resource": "cronjobs"}
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": str(uuid.uuid4()), "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": body["metadata"]["name"], "namespace": "ml", "operation": operation, "userInfo": ADMIN,
            "object": copy.deepcopy(body), "oldObject": copy.deepcopy(old),
            "dryRun": False, "options": {"kind": f"{operation.title()}Options", "apiVersion": "meta.k8s.io/v1"},
        },
    }


def job_review(body: dict[str, Any]) -> dict[str, Any]:
    document = cronjob_review({**body, "metadata": body["metadata"]})
    request = document["request"]
    for field in ("kind", "requestKind"):
        request[field] = {**request[field], "kind": "Job"}
    for field in ("resource", "requestResource"):
        request[field] = {**request[field], "resource": "jobs"}
    return document


def service(*, reject: bool = False) -> tuple[ObjectValidation, ExtenderMetrics]:
    metrics = ExtenderMetrics()
    cells = LiveCells(hived(), lock=threading.RLock())
    return ObjectValidation(cells=cells, metrics=metrics, gpu_resource="nvidia.com/gpu", reject_invalid=reject,
                            scheduler_name="cellfit"), metrics


def answer(validation: ObjectValidation, document: dict[str, Any]) -> dict[str, Any]:
    result = validation.review_job(k.dumps(document))
    assert result.status == 200
    decoded = json.loads(result.body)
    assert decoded["response"]["uid"] == document["request"]["uid"]
    return dict(decoded["response"])


def test_a_cronjob_whose_jobs_cellfit_can_schedule_is_admitted_without_a_word() -> None:
    validation, metrics = service(reject=True)
    good = cronjob(template_labels=VISION, template_annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"},
                   parallelism=2)
    assert answer(validation, cronjob_review(good)).keys() == {"uid", "allowed"}
    assert metrics.admission_validations.labels(kind="cronjob", result="valid")._value.get() == 1


def test_a_mistake_in_the_job_template_is_told_at_the_cronjob_naming_the_field() -> None:
    # Before, the CronJob was admitted without a word and each Job it created at 3 a.m. was
    # warned about (nobody there to read it) or, with rejectInvalid, refused.
    validation, metrics = service()
    response = answer(validation, cronjob_review(cronjob(template_labels=VISION, template_annotations=ABC)))
    assert response["allowed"] is True
    assert response["warnings"] == [
        "cellfit: spec.jobTemplate.spec.template.metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer"]
    assert metrics.admission_validations.labels(kind="cronjob", result="warned")._value.get() == 1


def test_with_reject_invalid_such_a_cronjob_is_refused_naming_the_field() -> None:
    validation, metrics = service(reject=True)
    response = answer(validation, cronjob_review(cronjob(template_labels={"cellfit.io/virtual-cluster": "nlp"})))
    expected = ("spec.jobTemplate.spec.template.metadata.labels[cellfit.io/virtual-cluster]: unknown virtual cluster 'nlp' "
                "(known: speech, vision)")
    assert response["allowed"] is False
    assert response["status"]["message"] == f"cellfit refuses this cronjob (admission.rejectInvalid): {expected}"
    assert response["warnings"] == [f"cellfit: {expected}"]
    assert metrics.admission_validations.labels(kind="cronjob", result="rejected")._value.get() == 1


# Jobs with a mistake; their CronJob (the same Job as its jobTemplate) gets the same verdict, each
# field named under spec.jobTemplate.
JOBS_WITH_MISTAKES = {
    "template keys": dict(template_labels={**VISION, "cellfit.io/priority": "urgent"}, template_annotations=ABC),
    "gang larger than parallelism": dict(template_labels=VISION, parallelism=2,
                                         template_annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "4"}),
    "job-level count": dict(template_labels=VISION, job_annotations={"cellfit.io/preemptions": "once"}),
    "pod key on the job": dict(job_labels={"cellfit.io/virtual-cluster": "vision"}),
    "interchangeable, bad configuration": dict(
        template_labels=VISION, suspend=True,
        job_annotations={"cellfit.io/configurations": '{"gpu": {"resources": {"nvidia.com/gpu": "one"}}}',
                         "cellfit.io/iterations": "1000"}),
    "interchangeable, estimate for no kind": dict(
        template_labels=VISION, suspend=True,
        job_annotations={"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/estimate": '{"tpu": {"seconds": 60}}'}),
    "interchangeable, not suspended": dict(
        template_labels=VISION, job_annotations={"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "1000"}),
    "misspelt key": dict(template_labels=VISION, job_annotations={"cellfit.io/gang_size": "2"}),
}


def as_job(case: dict[str, Any]) -> dict[str, Any]:
    """The Job the CronJob controller creates from ``cronjob(**case)``'s template."""
    body = job("nightly", labels=case.get("job_labels"), annotations=case.get("job_annotations"),
               template_labels=case.get("template_labels"), template_annotations=case.get("template_annotations"),
               gpus=case.get("gpus", 1), parallelism=case.get("parallelism", 1), suspend=bool(case.get("suspend")))
    body["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
                                            "uid": str(uuid.uuid4()), "controller": True, "blockOwnerDeletion": True}]
    return body


def named_under_the_template(problem: str) -> str:
    return f"{UNDER}.{problem}" if problem.startswith(("spec.", "metadata.")) else f"{UNDER}: {problem}"


@pytest.mark.parametrize("reject", [False, True])
@pytest.mark.parametrize("case", JOBS_WITH_MISTAKES.values(), ids=list(JOBS_WITH_MISTAKES))
def test_a_cronjob_gets_the_verdict_each_of_its_jobs_would_get(case: dict[str, Any], reject: bool) -> None:
    validation, _ = service(reject=reject)
    for_job = answer(validation, job_review(as_job(case)))
    for_cronjob = answer(validation, cronjob_review(cronjob(**case)))
    prefix = "cellfit: "
    assert for_job["warnings"], "each case has a mistake"
    assert for_cronjob["warnings"] == [prefix + named_under_the_template(w.removeprefix(prefix)) for w in for_job["warnings"]]
    assert for_cronjob["allowed"] == for_job["allowed"]
    # Problem by problem, whether each blocks included (what a refusal is made of).
    job_found = job_problems(JOB_DECODER.decode(k.dumps(as_job(case))), cells=None, gpu_resource="nvidia.com/gpu", creating=True)
    cronjob_found = cronjob_problems(CRONJOB_DECODER.decode(k.dumps(cronjob(**case))), cells=None, gpu_resource="nvidia.com/gpu")
    assert [(p.field, p.text, p.blocking) for p in cronjob_found] == [
        (named_under_the_template(p.field), named_under_the_template(p.text), p.blocking) for p in job_found]


def test_an_interchangeable_template_not_suspended_is_told_even_on_an_update_of_the_cronjob() -> None:
    # Each Job the CronJob creates is a creation: an interchangeable one must be created
    # suspended to be estimated and placed, whether the CronJob was just created or edited.
    validation, _ = service()
    annotations = {"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "1000"}
    running = cronjob(job_annotations=annotations, template_labels=VISION, gpus=0)
    expected = ("cellfit: spec.jobTemplate.metadata.annotations[cellfit.io/configurations]: the Job is not created with "
                "spec.suspend: true, so it starts as its template says, never estimated nor placed by AlloX")
    for document in (cronjob_review(running), cronjob_review(running, operation="UPDATE", old=running)):
        assert expected in answer(validation, document)["warnings"]
    suspended = cronjob(job_annotations=annotations, template_labels=VISION, gpus=0, suspend=True)
    assert "warnings" not in answer(validation, cronjob_review(suspended, operation="UPDATE", old=running))


def test_an_update_is_refused_only_for_a_mistake_it_brings() -> None:
    validation, _ = service(reject=True)
    wrong = cronjob(template_labels={**VISION, "cellfit.io/priority": "urgent"})
    # Created while cellfit was away (failurePolicy Ignore): it can still be relabelled, suspended, fixed.
    relabelled = copy.deepcopy(wrong)
    relabelled["metadata"]["labels"]["team"] = "vision"
    assert answer(validation, cronjob_review(relabelled, operation="UPDATE", old=wrong))["allowed"] is True
    worse = copy.deepcopy(relabelled)
    worse["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"].update(ABC)
    refused = answer(validation, cronjob_review(worse, operation="UPDATE", old=relabelled))
    assert refused["allowed"] is False
    assert refused["status"]["message"] == ("cellfit refuses this cronjob (admission.rejectInvalid): "
                                            "spec.jobTemplate.spec.template.metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer")


def test_cellfit_keys_on_the_cronjob_itself_are_told_they_never_reach_its_jobs() -> None:
    validation, _ = service(reject=True)
    response = answer(validation, cronjob_review(cronjob(labels={"cellfit.io/virtual-cluster": "vision"}, template_labels=VISION)))
    assert response["allowed"] is True  # a warning: nothing reads it, so nothing goes wrong
    assert response["warnings"] == [
        "cellfit: metadata.labels[cellfit.io/virtual-cluster]: set on the CronJob, whose Jobs get only spec.jobTemplate's labels and "
        "annotations: never read (put it in spec.jobTemplate.metadata, or a pod's in spec.jobTemplate.spec.template.metadata)"
    ]


def test_a_cronjob_another_scheduler_places_is_only_told_its_keys_are_unread() -> None:
    validation, _ = service(reject=True)
    theirs = cronjob(template_labels={**VISION, "cellfit.io/priority": "urgent"}, template_annotations=ABC, scheduler_name="volcano")
    response = answer(validation, cronjob_review(theirs))
    assert response["allowed"] is True
    assert response["warnings"] == [
        "cellfit: spec.jobTemplate.spec.template.spec.schedulerName: 'volcano' schedules this pod, not cellfit ('cellfit'): "
        "its cellfit.io/ labels and annotations are not read"
    ]


def test_the_jobs_path_takes_cronjob_reviews_and_still_refuses_other_kinds() -> None:
    """The chart sends CronJobs to the batch path, beside Jobs (charts/cellfit/templates/webhook.yaml)."""
    validation, _ = service(reject=True)
    admission = PodAdmission(preemption=None, lock=threading.RLock(), metrics=ExtenderMetrics(), resumed_class=None)
    client = TestClient(create_admission_app(admission=admission, validation=validation, max_request_bytes=1 << 20))
    posted = client.post(ADMISSION_VALIDATE_JOBS_PATH, content=k.dumps(cronjob_review(cronjob(template_annotations=ABC))))
    assert posted.status_code == 200
    assert posted.json()["response"]["allowed"] is False
    with pytest.raises(InvalidRequest, match=r"request.kind.kind: this path reviews a Job, not a Pod \(or a CronJob\)"):
        document = cronjob_review(cronjob())
        document["request"]["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
        validation.review_job(k.dumps(document))
