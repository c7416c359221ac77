"""The validating webhook's checks of cellfit's labels and annotations on Pods and Jobs: one
warning per mistake, naming the field; a denial with admission.rejectInvalid; the same verdict
as the scheduler's own filter, because it is the same parsers and the same live cells."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest

from placer.configuration import parse_configurations
from placer.rewrite import apply_configuration
from scheduler.cells import HivedEngine
from scheduler.config import parse_settings
from scheduler.errors import InvalidRequest
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.validating import MAX_WARNING_CHARS, MAX_WARNINGS, ObjectValidation
from scheduler.extender.validation import ANNOTATION_KEYS, LABEL_KEYS, LiveCells
from scheduler.kube import translate, wire
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.support import kube_objects as k
from tests.support.admission_reviews import job, validating_review
from tests.support.hived import CONFIG
from scheduler.kube.names import filter_offered

VISION = {"cellfit.io/virtual-cluster": "vision"}
CONFIGURATIONS = json.dumps({"cpu": {"resources": {"cpu": "16", "memory": "32Gi"}},
                             "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "2", "memory": "16Gi"}}})


def hived() -> HivedEngine:
    return HivedEngine.from_config(parse_settings(CONFIG).cells)


def validation(*, reject: bool = False, engine: HivedEngine | None = None, cells: bool = True) -> tuple[ObjectValidation, ExtenderMetrics]:
    metrics = ExtenderMetrics()
    live = LiveCells(engine or hived(), lock=threading.RLock()) if cells else None
    return ObjectValidation(cells=live, metrics=metrics, gpu_resource="nvidia.com/gpu", reject_invalid=reject), metrics


def answer(service: ObjectValidation, body: dict[str, Any], **review: Any) -> dict[str, Any]:
    document = validating_review(body, **review)
    reviewed = service.review_job if body.get("kind") == "Job" else service.review_pod
    result = reviewed(k.dumps(document))
    assert result.status == 200
    decoded = json.loads(result.body)
    assert decoded["apiVersion"] == "admission.k8s.io/v1" and decoded["kind"] == "AdmissionReview"
    assert decoded["response"]["uid"] == document["request"]["uid"]
    return dict(decoded["response"])


def pod(gpus: int = 2, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return k.pod("train-x7k2q", gpus=gpus, labels={**VISION, **(labels or {})}, annotations=annotations)


def test_a_pod_cellfit_can_schedule_is_admitted_without_a_word():
    service, metrics = validation()
    gang = {"cellfit.io/gang": "true", "cellfit.io/gang-size": "2", "cellfit.io/cell-type": "A100-PAIR"}
    for labels in ({"cellfit.io/job-class": "trial"}, {"cellfit.io/job-class": "best-effort", "cellfit.io/priority": "opportunistic"}):
        body = pod(labels=labels, annotations=gang)
        body["spec"]["priorityClassName"] = "cellfit-trial" if labels["cellfit.io/job-class"] == "trial" else "cellfit-opportunistic"
        response = answer(service, body)
        assert response.keys() == {"uid", "allowed"} and response["allowed"] is True
    assert metrics.admission_validations.labels(kind="pod", result="valid")._value.get() == 2


# One mistake each: what the user wrote, and the field the warning must name.
MISTAKES = [
    ("gang-size", {}, {"cellfit.io/gang": "true", "cellfit.io/gang-size": "abc"},
     "metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer"),
    ("priority", {"cellfit.io/priority": "urgent"}, {}, "metadata.labels[cellfit.io/priority]: 'urgent' is not 'guaranteed' or 'opportunistic'"),
    ("unknown VC", {"cellfit.io/virtual-cluster": "nlp"}, {},
     "metadata.labels[cellfit.io/virtual-cluster]: unknown virtual cluster 'nlp' (known: speech, vision)"),
    ("unknown cell type", {}, {"cellfit.io/cell-type": "A100-RACK"},
     "metadata.annotations[cellfit.io/cell-type]: unknown cell type 'A100-RACK' (known: A100, A100-PAIR, A100-NODE)"),
    ("cell type the VC lacks", {"cellfit.io/virtual-cluster": "speech"}, {"cellfit.io/cell-type": "A100-NODE"},
     "metadata.annotations[cellfit.io/cell-type]: virtual cluster 'speech' owns no cell of type 'A100-NODE' or larger"),
    ("job class", {"cellfit.io/job-class": "trail"}, {},
     "metadata.labels[cellfit.io/job-class]: 'trail' is not a job class (use 'trial' or 'best-effort'); cellfit runs it as "
     "best-effort meanwhile: it never preempts, and a trial pod may preempt it"),
    ("gang flag", {}, {"cellfit.io/gang": "yes"}, "metadata.annotations[cellfit.io/gang]: 'yes' is not 'true' or 'false'"),
    ("gang without size", {}, {"cellfit.io/gang": "true"},
     "metadata.annotations[cellfit.io/gang-size]: is required on a gang pod (the number of pods of the Job)"),
    ("gang too large", {}, {"cellfit.io/gang": "true", "cellfit.io/gang-size": "100000"},
     "metadata.annotations[cellfit.io/gang-size]: must be between 1 and 4096, got 100000"),
]


@pytest.mark.parametrize(("labels", "annotations", "warning"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_each_mistake_is_one_warning_naming_its_field_and_the_filter_says_the_same(labels, annotations, warning):
    service, metrics = validation()
    body = pod(labels=labels, annotations=annotations)
    response = answer(service, body)
    assert response["allowed"] is True
    assert response["warnings"] == [f"cellfit: {warning}"]
    assert metrics.admission_validations.labels(kind="pod", result="warned")._value.get() == 1
    # The scheduler refuses the pod for the very reason the webhook gave (the same parsers, the
    # same live cells): what kubectl apply printed is what the FailedScheduling event would say,
    # or, for the job class, the reason FitGpp gives for preempting nothing.
    engine = FitGppEngine(hived(), settings=FitGppSettings())
    info = translate.pod_info(wire.POD_DECODER.decode(k.dumps(body)), gpu_resource="nvidia.com/gpu")
    decision = filter_offered(engine, info, ["gpu-a", "gpu-b"])
    if decision.feasible:
        choice = engine.decide_preemption(info, {"gpu-a": []}, {})
        assert choice.victims == {}
        reason = choice.decision.reason
    else:
        (reason,) = set(decision.unresolvable.values()) | set(decision.failed.values())
    assert as_path(reason) in warning, (reason, warning)


def as_path(reason: str) -> str:
    """The filter's reason with its field named as the webhook names every field, by its path
    (``label K: ...`` is ``metadata.labels[K]: ...``), its mention of a key the path names left out."""
    reason = re.sub(r"^(label|annotation) (cellfit\.io/[\w-]+): ", lambda m: f"metadata.{m[1]}s[{m[2]}]: ", reason)
    return reason.replace(" in annotation cellfit.io/cell-type", "")


def test_more_than_one_pod_level_mistake_is_reported_at_once():
    service, _ = validation()
    body = pod(labels={"cellfit.io/priority": "urgent", "cellfit.io/virtual-cluster": "nlp"},
               annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "abc"})
    assert answer(service, body)["warnings"] == [
        "cellfit: metadata.labels[cellfit.io/priority]: 'urgent' is not 'guaranteed' or 'opportunistic'",
        "cellfit: metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer",
        "cellfit: metadata.labels[cellfit.io/virtual-cluster]: unknown virtual cluster 'nlp' (known: speech, vision)",
    ]


def test_a_gpu_pod_without_a_vc_and_one_larger_than_any_node_are_told_so():
    service, _ = validation()
    no_vc = k.pod("train-x7k2q", gpus=1)
    assert answer(service, no_vc)["warnings"] == ["cellfit: metadata.labels[cellfit.io/virtual-cluster]: is missing: set it to one of speech, vision"]
    assert answer(service, pod(gpus=16))["warnings"] == [
        "cellfit: spec.containers[*].resources: the pod requests 16 GPUs, more than any node-level cell holds "
        "(largest: 'A100-NODE' with 8)"
    ]


def test_a_gang_pod_of_no_job_is_told_it_needs_one():
    service, _ = validation()
    bare = pod(annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"})
    del bare["metadata"]["ownerReferences"]
    assert answer(service, bare)["warnings"] == ["cellfit: metadata.annotations[cellfit.io/gang]: a gang pod must be owned by a Job (it has no owner)"]


def test_misspelt_and_misplaced_keys_are_warned_about_and_never_refused():
    service, metrics = validation(reject=True)
    body = pod(labels={"cellfit.io/gang-size": "2", "cellfit.io/virtual-cluster-name": "vision"},
               annotations={"cellfit.io/gang_size": "2", "cellfit.io/priority": "guaranteed"})
    response = answer(service, body)
    assert response["allowed"] is True and "status" not in response
    assert response["warnings"] == [
        "cellfit: metadata.labels[cellfit.io/gang-size]: cellfit reads this key as an annotation, not as a label",
        "cellfit: metadata.labels[cellfit.io/virtual-cluster-name]: cellfit knows no such label; it is ignored (a misspelling?)",
        "cellfit: metadata.annotations[cellfit.io/gang_size]: cellfit knows no such annotation; it is ignored (a misspelling?)",
        "cellfit: metadata.annotations[cellfit.io/priority]: cellfit reads this key as a label, not as an annotation",
    ]
    assert metrics.admission_validations.labels(kind="pod", result="warned")._value.get() == 1


def test_every_key_of_the_users_contract_is_read_where_it_is_written():
    """DESIGN.md's contract (and what cellfit writes back) never draws an unknown-key warning,
    so that a warning about a key always means a mistake."""
    service, _ = validation()
    template_labels = {**VISION, "cellfit.io/job-class": "trial", "cellfit.io/priority": "opportunistic", "cellfit.io/placement": "gpu"}
    template_annotations = {"cellfit.io/cell-type": "A100-PAIR", "cellfit.io/gang": "true", "cellfit.io/gang-size": "2",
                            "cellfit.io/configurations": CONFIGURATIONS}
    labels = {"cellfit.io/job-family": "resnet", "cellfit.io/job-class": "trial"}
    annotations = {"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "5000",
                   "cellfit.io/estimate": '{"cpu": {"seconds": 5400}, "gpu": {"seconds": 600}}',
                   "cellfit.io/placement": "gpu", "cellfit.io/preemptions": "1", "cellfit.io/sampling": "{}"}
    body = job("train", labels=labels, annotations=annotations, template_labels=template_labels,
               template_annotations=template_annotations, gpus=2, parallelism=2, suspend=True)
    body["spec"]["template"]["spec"]["priorityClassName"] = "cellfit-trial"
    assert answer(service, body).keys() == {"uid", "allowed"}
    bound = pod(annotations={"cellfit.io/bind-info": "{}", "cellfit.io/gpu-indices": "0,1"},
                labels={"cellfit.io/sample": "true", "cellfit.io/sample-job": k.JOB_UID})
    assert answer(service, bound).keys() == {"uid", "allowed"}
    assert {"cellfit.io/job-family", "cellfit.io/sample"} <= LABEL_KEYS and "cellfit.io/sample-pilot" in ANNOTATION_KEYS


def test_reject_invalid_refuses_a_pod_naming_every_field_with_the_warnings_kept():
    service, metrics = validation(reject=True)
    body = pod(labels={"cellfit.io/priority": "urgent"}, annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "abc"})
    response = answer(service, body)
    assert response["allowed"] is False
    assert response["status"] == {"message": (
        "cellfit refuses this pod (admission.rejectInvalid): metadata.labels[cellfit.io/priority]: 'urgent' is not 'guaranteed' or "
        "'opportunistic'; metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer"
    )}
    assert len(response["warnings"]) == 2
    assert metrics.admission_validations.labels(kind="pod", result="rejected")._value.get() == 1
    assert answer(service, pod())["allowed"] is True


def test_resource_fit_has_no_virtual_clusters_to_check_against():
    service, _ = validation(cells=False)
    assert "warnings" not in answer(service, pod(labels={"cellfit.io/virtual-cluster": "nlp"}))
    assert answer(service, pod(labels={"cellfit.io/priority": "urgent"}))["warnings"] == [
        "cellfit: metadata.labels[cellfit.io/priority]: 'urgent' is not 'guaranteed' or 'opportunistic'"
    ]


def test_the_virtual_clusters_checked_are_the_running_ones_after_a_live_reload():
    engine = hived()
    service, _ = validation(engine=engine)
    nlp = pod(labels={"cellfit.io/virtual-cluster": "nlp"})
    assert answer(service, nlp)["warnings"] == ["cellfit: metadata.labels[cellfit.io/virtual-cluster]: unknown virtual cluster 'nlp' (known: speech, vision)"]
    cells = parse_settings(CONFIG).cells.model_dump(by_alias=True, exclude_none=True)
    cells["virtualClusters"]["nlp"] = cells["virtualClusters"].pop("speech")
    engine.reconfigure(cells)
    assert "warnings" not in answer(service, nlp)


def test_a_cpu_pod_is_not_held_against_the_cells():
    service, _ = validation()
    assert "warnings" not in answer(service, k.pod("prep-x7k2q", labels={"cellfit.io/virtual-cluster": "nlp"}))


# ---------------------------------------------------------------------------------- Jobs


def test_a_jobs_template_is_checked_as_the_pods_it_will_make():
    service, metrics = validation()
    body = job("train", template_labels={**VISION, "cellfit.io/priority": "urgent"},
               template_annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "abc"}, gpus=2, parallelism=2)
    assert answer(service, body)["warnings"] == [
        "cellfit: spec.template.metadata.labels[cellfit.io/priority]: 'urgent' is not 'guaranteed' or 'opportunistic'",
        "cellfit: spec.template.metadata.annotations[cellfit.io/gang-size]: 'abc' is not an integer",
    ]
    good = job("train", template_labels=VISION, template_annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"},
               gpus=2, parallelism=2)
    assert answer(service, good).keys() == {"uid", "allowed"}
    assert metrics.admission_validations.labels(kind="job", result="warned")._value.get() == 1
    assert metrics.admission_validations.labels(kind="job", result="valid")._value.get() == 1


def test_a_gang_larger_than_the_pods_a_job_runs_at_once_is_refused_with_rejectinvalid():
    service, _ = validation(reject=True)
    gang = {"cellfit.io/gang": "true", "cellfit.io/gang-size": "4"}
    response = answer(service, job("train", template_labels=VISION, template_annotations=gang, parallelism=2))
    expected = ("spec.template.metadata.annotations[cellfit.io/gang-size]: is 4 but the Job runs at most 2 pods at once "
                "(spec.parallelism 2): the gang could never be complete (set it to 2)")
    assert response["warnings"] == [f"cellfit: {expected}"]
    assert response["allowed"] is False and expected in response["status"]["message"]
    fits = job("train", template_labels=VISION, template_annotations=gang, parallelism=4, completions=8)
    assert answer(service, fits).keys() == {"uid", "allowed"}


def test_an_unknown_vc_in_a_jobs_template_names_the_template():
    service, _ = validation()
    assert answer(service, job("train", template_labels={"cellfit.io/virtual-cluster": "nlp"}))["warnings"] == [
        "cellfit: spec.template.metadata.labels[cellfit.io/virtual-cluster]: unknown virtual cluster 'nlp' (known: speech, vision)"
    ]


@pytest.mark.parametrize(("annotations", "warning"), [
    ({"cellfit.io/configurations": '{"gpu": {"resources": {"nvidia.com/gpu": "one"}}}', "cellfit.io/iterations": "1000"},
     "metadata.annotations[cellfit.io/configurations].gpu.resources.nvidia.com/gpu: 'one' is not a Kubernetes quantity"),
    ({"cellfit.io/configurations": "{cpu: 16}", "cellfit.io/iterations": "1000"}, "metadata.annotations[cellfit.io/configurations]: is not valid JSON"),
    ({"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "many"}, "metadata.annotations[cellfit.io/iterations]: 'many' is not an integer"),
    ({"cellfit.io/configurations": CONFIGURATIONS},
     "metadata.annotations[cellfit.io/iterations]: is missing; the estimator extrapolates samples to this many iterations"),
    ({"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/estimate": '{"gpu": {"seconds": -5}}'},
     "metadata.annotations[cellfit.io/estimate].gpu.seconds: must be a number of seconds above 0 and at most 1,000,000,000, got -5"),
    ({"cellfit.io/preemptions": "once"}, "metadata.annotations[cellfit.io/preemptions]: 'once' is not a non-negative integer"),
], ids=["configuration quantity", "configurations JSON", "iterations", "iterations missing", "estimate", "preemptions"])
def test_the_estimators_and_placers_annotations_on_a_job(annotations, warning):
    service, _ = validation(reject=True)
    response = answer(service, job("train", annotations=annotations, template_labels=VISION, suspend=True))
    assert response["allowed"] is False
    (given,) = response["warnings"]
    assert given.startswith(f"cellfit: {warning}"), given
    assert warning in response["status"]["message"]


def test_an_interchangeable_job_must_be_suspended_to_be_estimated_a_warning_only():
    service, _ = validation(reject=True)
    body = job("train", annotations={"cellfit.io/configurations": CONFIGURATIONS, "cellfit.io/iterations": "1000"}, template_labels=VISION)
    response = answer(service, body)
    assert response["allowed"] is True
    assert response["warnings"] == [
        "cellfit: metadata.annotations[cellfit.io/configurations]: the Job is not created with spec.suspend: true, so it starts as its "
        "template says, never estimated nor placed by AlloX"
    ]
    # cellfit itself unsuspends it once placed, and writes its estimate instead of iterations:
    # neither is held against an update.
    placed = json.loads(json.dumps(body))
    del placed["metadata"]["annotations"]["cellfit.io/iterations"]
    assert answer(service, placed, operation="UPDATE", old=body).keys() == {"uid", "allowed"}


def test_a_trial_pod_or_job_without_a_priority_class_is_warned_it_will_not_preempt():
    # kube-scheduler asks for a preemption only among pods of lower priority: a trial pod at the
    # default priority waits behind best-effort pods. A warning only, even with rejectInvalid.
    service, _ = validation(reject=True)
    warning = ("spec.priorityClassName: a trial pod without a PriorityClass never preempts (kube-scheduler preempts only "
               "lower priorities); give it one above best-effort's, cellfit-trial with the chart")
    response = answer(service, pod(labels={"cellfit.io/job-class": "trial"}))
    assert response["allowed"] is True and response["warnings"] == [f"cellfit: {warning}"]
    trial_job = job("train", template_labels={**VISION, "cellfit.io/job-class": "trial"}, gpus=2)
    response = answer(service, trial_job)
    assert response["allowed"] is True and response["warnings"] == [f"cellfit: spec.template.{warning}"]
    # With a class (the pod's own, or a cluster default the API server wrote in), or not trial: no word.
    trial_job["spec"]["template"]["spec"]["priorityClassName"] = "cellfit-trial"
    assert answer(service, trial_job).keys() == {"uid", "allowed"}
    assert answer(service, pod(labels={"cellfit.io/job-class": "best-effort"})).keys() == {"uid", "allowed"}


def test_pod_keys_on_the_job_instead_of_its_template_are_pointed_at_the_template():
    service, _ = validation(reject=True)
    body = job("train", labels={"cellfit.io/virtual-cluster": "vision", "cellfit.io/job-class": "trial"},
               annotations={"cellfit.io/gang": "true"}, template_labels={"cellfit.io/job-class": "trial"})
    body["spec"]["template"]["spec"]["priorityClassName"] = "cellfit-trial"
    response = answer(service, body)
    assert response["warnings"][:2] == [
        "cellfit: metadata.labels[cellfit.io/virtual-cluster]: set on the Job, but cellfit reads it from the pods (put it in "
        "spec.template.metadata.labels[cellfit.io/virtual-cluster])",
        "cellfit: metadata.annotations[cellfit.io/gang]: set on the Job, but cellfit reads it from the pods (put it in "
        "spec.template.metadata.annotations[cellfit.io/gang])",
    ]
    # And so the pods have no VC: that one blocks.
    missing = "spec.template.metadata.labels[cellfit.io/virtual-cluster]: is missing: set it to one of speech, vision"
    assert response["warnings"][2:] == [f"cellfit: {missing}"]
    assert response["allowed"] is False and missing in response["status"]["message"]


def test_an_update_is_refused_only_for_a_mistake_it_brings():
    service, metrics = validation(reject=True)
    bad = job("train", template_labels={**VISION, "cellfit.io/priority": "urgent"}, suspend=True)
    relabelled = json.loads(json.dumps(bad))
    relabelled["metadata"]["labels"]["team"] = "vision"
    response = answer(service, relabelled, operation="UPDATE", old=bad)
    assert response["allowed"] is True  # the mistake was there before: the update may go on
    assert response["warnings"] == ["cellfit: spec.template.metadata.labels[cellfit.io/priority]: 'urgent' is not 'guaranteed' or 'opportunistic'"]
    worse = json.loads(json.dumps(relabelled))
    worse["metadata"]["annotations"]["cellfit.io/preemptions"] = "-1"
    response = answer(service, worse, operation="UPDATE", old=relabelled)
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "cellfit refuses this job (admission.rejectInvalid): "
        "metadata.annotations[cellfit.io/preemptions]: '-1' is not a non-negative integer"
    )
    assert metrics.admission_validations.labels(kind="job", result="rejected")._value.get() == 1


def test_deletes_and_connects_are_never_looked_at():
    service, _ = validation(reject=True)
    bad = pod(labels={"cellfit.io/priority": "urgent"})
    assert answer(service, {**bad, "kind": "Pod"}, operation="DELETE", old=bad).keys() == {"uid", "allowed"}


def test_warnings_stay_within_what_the_api_server_keeps():
    service, _ = validation()
    many = {f"cellfit.io/typo-{i}": "x" for i in range(30)}
    long_vc = {"cellfit.io/virtual-cluster": "v" * 63}
    warnings = answer(service, pod(labels=long_vc, annotations=many))["warnings"]
    assert len(warnings) == MAX_WARNINGS and warnings[-1] == "cellfit: 20 more problems not shown"
    assert all(len(w) <= MAX_WARNING_CHARS for w in warnings)


def test_what_is_not_a_review_of_the_paths_kind_is_a_400():
    service, _ = validation()
    with pytest.raises(InvalidRequest, match="request.uid"):
        service.review_pod(b'{"request": {"uid": ""}}')
    with pytest.raises(InvalidRequest, match="request.kind.kind: this path reviews a Job, not a Pod"):
        service.review_job(k.dumps(validating_review(pod())))
    with pytest.raises(InvalidRequest, match="request.object"):
        document = validating_review(pod())
        document["request"]["object"]["metadata"]["labels"] = ["not", "a", "map"]
        service.review_pod(k.dumps(document))


# ------------------------------------------------------------------ interchangeable Jobs' pods


def interchangeable(configurations: dict[str, Any], *, gpus: int, suspend: bool = True, **template: Any) -> dict[str, Any]:
    annotations = {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/iterations": "1000"}
    return job("train", annotations=annotations, gpus=gpus, suspend=suspend, **template)


def configured_pod_reason(body: dict[str, Any], kind: str) -> str:
    """The filter's reason for the pod the placer makes of ``body`` in configuration ``kind``."""
    configuration = parse_configurations(body["metadata"]["annotations"]["cellfit.io/configurations"])[kind]  # type: ignore[index]
    placed = apply_configuration(body["spec"]["template"], configuration)
    made = k.pod("train-x7k2q", labels=placed["metadata"].get("labels"), annotations=placed["metadata"].get("annotations"))
    made["spec"]["containers"] = placed["spec"]["containers"]
    info = translate.pod_info(wire.POD_DECODER.decode(k.dumps(made)), gpu_resource="nvidia.com/gpu")
    decision = filter_offered(FitGppEngine(hived(), settings=FitGppSettings()), info, ["gpu-a", "gpu-b"])
    assert not decision.feasible
    (reason,) = set(decision.unresolvable.values()) | set(decision.failed.values())
    return str(reason)


def test_a_suspended_interchangeable_jobs_pods_are_checked_as_its_configurations_make_them():
    # The placer replaces every container's resources by the chosen configuration's: a GPU
    # request the template carries never reaches the scheduler, and is not held against the Job.
    service, _ = validation(reject=True)
    written_for_more = interchangeable({"cpu": {"resources": {"cpu": "16"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}},
                                       gpus=16, template_labels=VISION)
    assert answer(service, written_for_more).keys() == {"uid", "allowed"}
    # What a configuration asks for is: the filter would refuse every pod made in it.
    too_large = interchangeable({"cpu": {"resources": {"cpu": "16"}}, "gpu": {"resources": {"nvidia.com/gpu": "16"}}},
                                gpus=0, template_labels=VISION)
    response = answer(service, too_large)
    expected = ("metadata.annotations[cellfit.io/configurations].gpu.resources: the pod requests 16 "
                "GPUs, more than any node-level cell holds (largest: 'A100-NODE' with 8): it is never sampled nor started in gpu")
    assert response["warnings"] == [f"cellfit: {expected}"]
    assert response["allowed"] is False and expected in response["status"]["message"]
    assert configured_pod_reason(too_large, "gpu") in expected


def test_a_configurations_own_annotations_are_checked_on_the_pods_they_go_to():
    service, _ = validation()
    body = interchangeable({"gpu": {"resources": {"nvidia.com/gpu": "2"}, "annotations": {"cellfit.io/cell-type": "A100-RACK"}}},
                           gpus=0, template_labels=VISION)
    expected = ("metadata.annotations[cellfit.io/configurations].gpu.annotations[cellfit.io/cell-type]: unknown cell type "
                "'A100-RACK' (known: A100, A100-PAIR, A100-NODE): it is never sampled nor started in gpu")
    assert answer(service, body)["warnings"] == [f"cellfit: {expected}"]
    assert configured_pod_reason(body, "gpu").replace(" in annotation cellfit.io/cell-type", "") in expected


def test_a_gpu_configuration_needs_the_vc_label_a_cpu_one_does_not():
    service, _ = validation()
    body = interchangeable({"cpu": {"resources": {"cpu": "16"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}}, gpus=0)
    assert answer(service, body)["warnings"] == [
        "cellfit: spec.template.metadata.labels[cellfit.io/virtual-cluster] (in configuration gpu): is missing: set it to one of "
        "speech, vision: it is never sampled nor started in gpu"
    ]


def test_the_templates_own_mistakes_are_told_once_not_per_configuration():
    service, _ = validation()
    body = interchangeable({"cpu": {"resources": {"cpu": "16"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}},
                           gpus=0, template_labels={**VISION, "cellfit.io/priority": "urgent"})
    assert answer(service, body)["warnings"] == [
        "cellfit: spec.template.metadata.labels[cellfit.io/priority]: 'urgent' is not 'guaranteed' or 'opportunistic'"
    ]


def test_an_interchangeable_job_that_runs_as_written_or_was_placed_is_checked_as_its_pods_are():
    service, _ = validation()
    configurations = {"cpu": {"resources": {"cpu": "16"}}, "gpu": {"resources": {"nvidia.com/gpu": "16"}}}
    # Not suspended: it starts as its template says (the warning about suspend says so too).
    unsuspended = interchangeable(configurations, gpus=16, suspend=False, template_labels=VISION)
    assert "cellfit: spec.template.spec.containers[*].resources: the pod requests 16 GPUs, more than any node-level " \
           "cell holds (largest: 'A100-NODE' with 8)" in answer(service, unsuspended)["warnings"]
    # Placed on CPUs (the placer labels the template; with the webhook mechanism the template
    # keeps its resources and the pods are rewritten): its 16-GPU configuration is not run.
    placed = interchangeable(configurations, gpus=16, suspend=False, template_labels={**VISION, "cellfit.io/placement": "cpu"})
    assert answer(service, placed, operation="UPDATE", old=placed).keys() == {"uid", "allowed"}
    # Suspended again (or copied from a placed Job): the placer may start it in either kind.
    again = interchangeable(configurations, gpus=0, suspend=True, template_labels={**VISION, "cellfit.io/placement": "cpu"})
    assert answer(service, again)["warnings"] == [
        "cellfit: metadata.annotations[cellfit.io/configurations].gpu.resources: the pod requests 16 "
        "GPUs, more than any node-level cell holds (largest: 'A100-NODE' with 8): it is never sampled nor started in gpu"
    ]


def test_an_estimate_for_no_configured_kind_is_told_the_job_never_starts():
    # AlloX chooses only a kind with both an estimate and a configuration, and a user's estimate
    # is never sampled over: such a Job would wait suspended forever.
    service, _ = validation(reject=True)
    annotations = {"cellfit.io/configurations": json.dumps({"gpu": {"resources": {"nvidia.com/gpu": "1"}}}),
                   "cellfit.io/estimate": '{"cpu": {"seconds": 5400}}'}
    response = answer(service, job("train", annotations=annotations, template_labels=VISION, gpus=0, suspend=True))
    expected = ("metadata.annotations[cellfit.io/estimate]: gives cpu and cellfit.io/configurations gpu: no kind has both, and AlloX "
                "chooses only a kind with an estimate, so the Job is never started")
    assert response["warnings"] == [f"cellfit: {expected}"]
    assert response["allowed"] is False and expected in response["status"]["message"]
    for fine in ('{"cpu": {"seconds": 5400}, "gpu": {"seconds": 600}}',
                 '{"cpu": {"seconds": 5400, "method": "samples"}}'):  # cellfit's, of an earlier configuration: made anew
        annotations["cellfit.io/estimate"] = fine
        assert answer(service, job("train", annotations=annotations, template_labels=VISION, gpus=0, suspend=True)).keys() == {"uid", "allowed"}


def test_the_estimators_annotations_on_a_job_that_is_not_interchangeable_are_only_warned_ignored():
    # The estimator follows only Jobs with cellfit.io/configurations: on any other Job these
    # values are never read, so a mistake in them blocks nothing.
    service, _ = validation(reject=True)
    body = job("train", annotations={"cellfit.io/iterations": "many", "cellfit.io/estimate": "{}"}, template_labels=VISION)
    response = answer(service, body)
    assert response["allowed"] is True
    assert response["warnings"] == [
        f"cellfit: metadata.annotations[{key}]: read only on an interchangeable Job (one with cellfit.io/configurations); ignored here"
        for key in ("cellfit.io/estimate", "cellfit.io/iterations")
    ]


def test_a_huge_value_is_not_echoed_whole_in_a_refusal():
    # The API server caps annotations at 256 KiB together, not one value: a refusal quoting it
    # whole sent it back to kubectl (and into the API server's audit log) in full.
    service, _ = validation(reject=True)
    huge = "9" * 200_000
    for body in (pod(annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": huge}),
                 pod(annotations={"cellfit.io/cell-type": huge})):
        response = answer(service, body)
        message = response["status"]["message"]
        assert response["allowed"] is False and "metadata.annotations[cellfit.io/" in message and len(message) < 2048, len(message)
