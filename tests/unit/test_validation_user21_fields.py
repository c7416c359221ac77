"""user21's items 12-14 (live session, /tmp/h/user21): the webhook named fields four ways, said
nothing of what cellfit does with a job class that is no class, and told only the first mistake
of a cellfit.io/estimate. Every warning is now led by its field's path, as the API server names
fields (``spec.template.metadata.annotations[cellfit.io/gang-size]: ...``); a bad job class says
how the pod is run meanwhile; every mistake of an estimate is told, within what the API server
keeps of warnings."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest

from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.validating import MAX_WARNING_CHARS, MAX_WARNINGS, ObjectValidation
from scheduler.extender.validation import LiveCells, field_path
from scheduler.preemption import JobClass
from scheduler.preemption.model import job_class_or_best_effort
from tests.extender.test_validating_cronjobs import answer as cronjob_answer
from tests.extender.test_validating_cronjobs import cronjob, cronjob_review
from tests.support.admission_reviews import job
from tests.unit.test_validation import CONFIGURATIONS, VISION, answer, hived, pod

# The API server's shape: a field path (metadata.… or spec.…), then ": ", then what is wrong.
PATH_FIRST = re.compile(r"^cellfit: (metadata|spec)\.[^ :]*(\]|[a-zA-Z])( \(in configuration (cpu|gpu)\))?: \S")


def service(*, reject: bool = False, preempts_best_effort: bool = True) -> ObjectValidation:
    return ObjectValidation(cells=LiveCells(hived(), lock=threading.RLock()), metrics=ExtenderMetrics(),
                            gpu_resource="nvidia.com/gpu", reject_invalid=reject, preempts_best_effort=preempts_best_effort)


def warnings(body: dict[str, Any], **kwargs: Any) -> list[str]:
    return list(answer(service(**kwargs), body).get("warnings") or [])


# ------------------------------------------------------------------ 12: one shape for every field


def test_the_sessions_four_shapes_are_one_a_field_path_first() -> None:
    # Before: "annotation cellfit.io/gang-size: ...", "label cellfit.io/virtual-cluster: ...",
    # "metadata.labels[cellfit.io/job-class]: ..." and "unknown cell type 'A100-NODE' in annotation
    # cellfit.io/cell-type (...)", each after "spec.template: ".
    told = {
        "gang-size": warnings(job("g", template_labels=VISION, parallelism=2,
                                  template_annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "abc"})),
        "vc": warnings(job("v", template_labels={"cellfit.io/virtual-cluster": "nlp"}, gpus=1)),
        "cell-type": warnings(job("c", template_labels=VISION, template_annotations={"cellfit.io/cell-type": "A100-RACK"}, gpus=1)),
        "job-class": warnings(job("j", template_labels={**VISION, "cellfit.io/job-class": "trail"}, gpus=1)),
    }
    assert told == {
        "gang-size": ["cellfit: spec.template.metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer"],
        "vc": ["cellfit: spec.template.metadata.labels[cellfit.io/virtual-cluster]: unknown virtual cluster 'nlp' (known: speech, vision)"],
        "cell-type": ["cellfit: spec.template.metadata.annotations[cellfit.io/cell-type]: unknown cell type 'A100-RACK' "
                      "(known: A100, A100-PAIR, A100-NODE)"],
        "job-class": ["cellfit: spec.template.metadata.labels[cellfit.io/job-class]: 'trail' is not a job class (use 'trial' or "
                      "'best-effort'); cellfit runs it as best-effort meanwhile: it never preempts, and a trial pod may preempt it"],
    }


def test_every_warning_of_every_check_is_led_by_a_field_path() -> None:
    # One object of each kind with every sort of mistake the checks find: unknown and misplaced
    # keys, the parsers' (scheduler, FitGpp, placer, estimator), the live cells', the Job's own.
    bad_pod = pod(gpus=16, labels={"cellfit.io/priority": "urgent", "cellfit.io/gang": "true", "cellfit.io/typo": "x"},
                  annotations={"cellfit.io/gang": "yes", "cellfit.io/virtual-cluster": "vision"})
    bad_job = job("train", labels={"cellfit.io/virtual-cluster": "vision", "cellfit.io/job-class": "trail"},
                  annotations={"cellfit.io/configurations": json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "16"},
                                                                                "annotations": {"cellfit.io/gang_size": "2"}}}),
                               "cellfit.io/estimate": '{"gpu": {"seconds": "fast"}}', "cellfit.io/preemptions": "once",
                               "cellfit.io/iterations": "many"},
                  template_labels={"cellfit.io/job-class": "trial"}, gpus=0, pod_failure_policy=None)
    unread = job("plain", annotations={"cellfit.io/estimate": "{}"}, template_labels=VISION,
                 template_annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "4"}, parallelism=2)
    told = warnings(bad_pod) + warnings(bad_job) + warnings(unread)
    told += cronjob_answer(service(), cronjob_review(cronjob(labels={"cellfit.io/job-class": "trial"},
                                                              template_labels={"cellfit.io/virtual-cluster": "nlp"})))["warnings"]
    assert len(told) >= 15, told
    for warning in told:
        assert PATH_FIRST.match(warning), warning
    # No other way of naming a field is left.
    assert not [w for w in told if re.search(r"(^cellfit: |: )(label|annotation) cellfit\.io/", w)], told
    assert not [w for w in told if "applied to spec.template" in w or "the containers' GPU requests" in w], told


def test_a_configurations_problem_is_named_where_the_configuration_writes_it() -> None:
    body = job("train", annotations={"cellfit.io/iterations": "1000", "cellfit.io/configurations": json.dumps(
        {"cpu": {"resources": {"cpu": "16"}}, "gpu": {"resources": {"nvidia.com/gpu": "16"}, "annotations": {"cellfit.io/gang_size": "2"}}})},
        template_labels=VISION, gpus=0, suspend=True)
    assert warnings(body) == [
        "cellfit: metadata.annotations[cellfit.io/configurations].gpu.annotations[cellfit.io/gang_size]: cellfit knows no such "
        "annotation: it is copied onto the pods of this configuration, where cellfit does not read it (a misspelling?)",
        "cellfit: metadata.annotations[cellfit.io/configurations].gpu.resources: the pod requests 16 GPUs, more than any "
        "node-level cell holds (largest: 'A100-NODE' with 8): it is never sampled nor started in gpu",
    ]


def test_a_cronjobs_fields_continue_the_path_from_the_cronjob() -> None:
    (told,) = cronjob_answer(service(), cronjob_review(cronjob(template_labels={**VISION, "cellfit.io/job-class": "trail"})))["warnings"]
    assert told.startswith("cellfit: spec.jobTemplate.spec.template.metadata.labels[cellfit.io/job-class]: 'trail' is not")
    assert told.endswith("a trial pod may preempt it") and len(told) <= MAX_WARNING_CHARS


@pytest.mark.parametrize(("named", "within", "path"), [
    ("label cellfit.io/priority", "", "metadata.labels[cellfit.io/priority]"),
    ("annotation cellfit.io/gang-size", "spec.template", "spec.template.metadata.annotations[cellfit.io/gang-size]"),
    ("cellfit.io/iterations", "", "metadata.annotations[cellfit.io/iterations]"),
    ("cellfit.io/estimate.cpu.seconds", "spec.jobTemplate", "spec.jobTemplate.metadata.annotations[cellfit.io/estimate].cpu.seconds"),
    ("cellfit.io/configurations.gpu.resources.nvidia.com/gpu", "",
     "metadata.annotations[cellfit.io/configurations].gpu.resources.nvidia.com/gpu"),
    ("cellfit.io/configurations.cpu.tolerations[0]", "", "metadata.annotations[cellfit.io/configurations].cpu.tolerations[0]"),
    ("metadata.labels[cellfit.io/job-class]", "spec.template", "spec.template.metadata.labels[cellfit.io/job-class]"),
    ("spec.containers[0].resources.requests.cpu", "spec.template", "spec.template.spec.containers[0].resources.requests.cpu"),
])
def test_field_path_names_what_each_parser_names_as_the_api_server_would(named: str, within: str, path: str) -> None:
    assert field_path(named, within=within) == path


# ------------------------------------------------------------------ 13: a job class that is none


def test_a_job_class_that_is_none_says_how_the_pod_runs_meanwhile() -> None:
    # What the warning says is what cellfit does: everything that reads the class of a running
    # pod reads best-effort (FitGpp's victims, the placer's count), and its own preemption is refused.
    assert job_class_or_best_effort({"cellfit.io/job-class": "trail"}) is JobClass.BEST_EFFORT
    (told,) = warnings(pod(labels={"cellfit.io/job-class": "trail"}))
    assert told == ("cellfit: metadata.labels[cellfit.io/job-class]: 'trail' is not a job class (use 'trial' or 'best-effort'); "
                    "cellfit runs it as best-effort meanwhile: it never preempts, and a trial pod may preempt it")
    # Without FitGpp (another preemption policy, or P = 0) no trial pod preempts it.
    (told,) = warnings(pod(labels={"cellfit.io/job-class": "trail"}), preempts_best_effort=False)
    assert told.endswith("'best-effort'); cellfit runs it as best-effort meanwhile: it never preempts")


def test_a_job_of_a_class_that_is_none_is_warned_a_preemption_fails_it_as_a_best_effort_one_is() -> None:
    # Run as best-effort, it may be preempted: without a podFailurePolicy that ignores it, the
    # preemption counts against its backoffLimit (it was silent before).
    told = warnings(job("ij", template_labels={**VISION, "cellfit.io/job-class": "trail"}, pod_failure_policy=None))
    assert told[0].startswith("cellfit: spec.podFailurePolicy: missing, so each pod a trial Job preempts counts as a failure")
    assert told[1].startswith("cellfit: spec.template.metadata.labels[cellfit.io/job-class]: 'trail' is not a job class")


# ------------------------------------------------------------------ 14: every mistake of an estimate


def estimated(estimate: str, **kwargs: Any) -> dict[str, Any]:
    return job("ij-badest", annotations={"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/estimate": estimate},
               template_labels=VISION, gpus=0, suspend=True, **kwargs)


def test_every_mistake_of_an_estimate_is_told_each_with_its_field() -> None:
    # ij-badest: only the first was told.
    response = answer(service(reject=True), estimated(json.dumps({"cpu": {"seconds": "fast"}, "gpu": {"minutes": 3}})))
    first = ("metadata.annotations[cellfit.io/estimate].cpu.seconds: must be a number of seconds above 0 and at most "
             "1,000,000,000, got 'fast'")
    second = ("metadata.annotations[cellfit.io/estimate].gpu.seconds: is missing: give the Job's whole run on gpu in seconds, "
              "such as {\"seconds\": 600} (it has minutes)")
    assert response["warnings"] == [f"cellfit: {first}", f"cellfit: {second}"]
    assert response["allowed"] is False and response["status"]["message"] == (
        f"cellfit refuses this job (admission.rejectInvalid): {first}; {second}")


def test_an_estimate_of_many_mistakes_stays_within_what_the_api_server_keeps() -> None:
    # kube-apiserver keeps 4 KiB of warnings and cuts each to 256 characters past that: at most
    # MAX_WARNINGS are sent, the last counting the rest; a refusal lists 20 and counts the rest.
    many = json.dumps({f"tpu{i}": {"seconds": 1} for i in range(40)} | {"gpu": {"seconds": "x" * 400}})
    response = answer(service(reject=True), estimated(many))
    told = response["warnings"]
    assert len(told) == MAX_WARNINGS and told[-1] == "cellfit: 30 more problems not shown"
    assert all(len(w) <= MAX_WARNING_CHARS for w in told) and len("".join(told)) < 4096
    assert told[0] == ("cellfit: metadata.annotations[cellfit.io/estimate]: unknown configuration kind 'tpu0'; "
                       "expected one of cpu, gpu")
    message = response["status"]["message"]
    assert message.endswith("; ... and 21 more problems") and len(message) < 8192, len(message)
