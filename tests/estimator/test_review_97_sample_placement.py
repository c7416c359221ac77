"""A sampling pod of a Job AlloX placed before (suspended again with an edited configuration, or
copied from a placed Job) runs the configuration it samples: it carries no placement label, and
the pod-create webhook leaves every sampling pod as it is."""

from __future__ import annotations

import json

from estimator.planner import CreateSample, SampleKey
from estimator.sample_pod import build_sample_pod
from placer.configuration import parse_configurations
from placer.rewrite import apply_configuration
from tests.support import kube_objects as k
from tests.unit.test_admission import admission, placed_pod, review

CONFIGURATIONS = {"cpu": {"resources": {"cpu": "8"}}, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}


def test_a_sampling_pod_never_carries_the_placement_label_of_its_jobs_template() -> None:
    parsed = parse_configurations(json.dumps(CONFIGURATIONS))
    placed = apply_configuration({"metadata": {"labels": {"app": "bert"}}, "spec": {"containers": [{"name": "c", "image": "train:1"}]}},
                                 parsed["gpu"], extra_labels={"cellfit.io/placement": "gpu"},
                                 extra_annotations={"cellfit.io/configurations": json.dumps(CONFIGURATIONS)})
    sample = build_sample_pod(job_name="j", job_namespace="alice", job_uid="0123456789abcdef", template=placed,
                              configuration=parsed["cpu"],
                              run=CreateSample(key=SampleKey(configuration="cpu", pilot=0, length="short"), attempt=0, iterations=10),
                              indexed=False, scheduler_name="cellfit", priority_class_name=None)
    assert sample["metadata"]["labels"] == {"app": "bert", "cellfit.io/sample": "true", "cellfit.io/sample-job": "0123456789abcdef"}
    assert sample["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "8"}}


def test_the_pod_create_webhook_leaves_a_sampling_pod_labelled_with_a_placement_unchanged() -> None:
    # A sampling pod made by an older cellfit, or registered without the chart's objectSelector.
    service, _, metrics = admission()
    pod = placed_pod("cpu")
    pod["metadata"]["labels"] |= {"cellfit.io/sample": "true", "cellfit.io/sample-job": k.JOB_UID}
    response = review(service, k.admission_review(pod))["response"]
    assert response["allowed"] is True and "patch" not in response
    assert metrics.admission_reviews.labels(result="unchanged")._value.get() == 1


PLACED_IN = {"cpu": {"resources": {"cpu": "8"}},
             "gpu": {"resources": {"nvidia.com/gpu": "1"}, "env": {"CUDA_MODULE_LOADING": "LAZY"},
                     "nodeSelector": {"accelerator": "a100"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}}


def sample_of(kind: str, *, sampled: str) -> dict:
    """A sampling pod in ``sampled`` of a Job placed in ``kind`` before (its template rewritten
    so, as both mechanisms record it), suspended again."""
    parsed = parse_configurations(json.dumps(PLACED_IN))
    own = {"spec": {"nodeSelector": {"zone": "a"}, "containers": [{"name": "c", "image": "train:1", "env": [{"name": "SEED", "value": "7"}]}]}}
    placed = apply_configuration(own, parsed[kind], extra_labels={"cellfit.io/placement": kind},
                                 extra_annotations={"cellfit.io/configurations": json.dumps(PLACED_IN)})
    return build_sample_pod(job_name="j", job_namespace="alice", job_uid="0123456789abcdef", template=placed,
                            configuration=parsed[sampled],
                            run=CreateSample(key=SampleKey(configuration=sampled, pilot=0, length="short"), attempt=0, iterations=10),
                            indexed=False, scheduler_name="cellfit", priority_class_name=None)


def test_a_cpu_sample_of_a_job_placed_on_gpu_before_sheds_the_gpu_configuration() -> None:
    spec = sample_of("gpu", sampled="cpu")["spec"]
    assert spec["nodeSelector"] == {"zone": "a"}  # its user's, not the GPU configuration's
    assert not spec.get("tolerations")
    assert spec["containers"][0]["env"] == [{"name": "SEED", "value": "7"}, {"name": "CELLFIT_SAMPLE_ITERATIONS", "value": "10"}]
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "8"}}


def test_a_sample_in_the_configuration_the_job_was_placed_in_keeps_it() -> None:
    spec = sample_of("gpu", sampled="gpu")["spec"]
    assert spec["nodeSelector"] == {"zone": "a", "accelerator": "a100"}
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert {"name": "CUDA_MODULE_LOADING", "value": "LAZY"} in spec["containers"][0]["env"]
