"""Sampling pods read back (termination message, container times, failures) and built (the
Job's template in one configuration, a deterministic name, never counted by the Job)."""

import json

import pytest

from estimator.contract import parse_sample_report
from estimator.objects import JOB_DECODER, POD_DECODER, sample_pod
from estimator.planner import CreateSample, SampleKey
from estimator.sample_pod import build_sample_pod, configuration_digest, sample_pod_name
from placer.configuration import parse_configurations
from scheduler.config import EstimatorSettings
from scheduler.errors import InvalidAnnotation

PENDING_LIMIT = EstimatorSettings().pending_limit_seconds
NOTES = {
    "cellfit.io/sample-configuration": "gpu", "cellfit.io/sample-pilot": "0", "cellfit.io/sample-length": "long",
    "cellfit.io/sample-attempt": "1", "cellfit.io/sample-iterations": "20",
}


def pod(phase, *, terminated=None, waiting=None, start="2026-01-01T00:00:00Z", annotations=NOTES):
    state = {}
    if terminated is not None:
        state["terminated"] = terminated
    if waiting is not None:
        state["waiting"] = {"reason": waiting}
    body = {"metadata": {"name": "p", "annotations": annotations},
            "status": {"phase": phase, "startTime": start, "containerStatuses": [{"name": "c", "state": state}]}}
    return POD_DECODER.decode(json.dumps(body).encode())


def test_a_termination_message_gives_the_precise_sample():
    message = json.dumps({"iterations": 20, "seconds": 12.25, "peakMemoryBytes": 1 << 30})
    view = sample_pod(pod("Succeeded", terminated={"exitCode": 0, "message": message}), now=0, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert view.state == "succeeded" and view.attempt == 1
    assert view.key == SampleKey(configuration="gpu", pilot=0, length="long")
    assert (view.sample.seconds, view.sample.peak_memory_bytes, view.sample.resolution_seconds) == (12.25, 1 << 30, 0.0)


def test_a_reported_startup_reaches_the_sample_and_a_wrong_one_is_named():
    message = json.dumps({"iterations": 20, "seconds": 12.25, "startupSeconds": 2.5})
    view = sample_pod(pod("Succeeded", terminated={"exitCode": 0, "message": message}), now=0, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert view.sample.startup_seconds == 2.5 and view.sample.peak_memory_bytes is None
    for wrong in (-1, 13.0, "2", True, float("nan")):
        with pytest.raises(InvalidAnnotation) as error:
            parse_sample_report(json.dumps({"iterations": 20, "seconds": 12.25, "startupSeconds": wrong}))
        assert error.value.field == "terminationMessage.startupSeconds"


def test_splits_reach_the_sample_and_a_wrong_one_is_named():
    message = json.dumps({"iterations": 20, "seconds": 12.25, "startupSeconds": 2.5, "splits": [[10, 7.4]]})
    view = sample_pod(pod("Succeeded", terminated={"exitCode": 0, "message": message}), now=0, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert view.sample.splits == ((10, 7.4),)
    wrong_cases = {
        "terminationMessage.splits": ("10,7.4", [[1, 3.0]] * 17),
        "terminationMessage.splits[0]": ([10, 7.4], [[10]], [[0, 3.0]], [[20, 12.0]], [[10, 1.0]], [[10, 13.0]], [[True, 3.0]],
                                         [[10, "7"]], [[10, float("nan")]]),
        "terminationMessage.splits[1]": ([[10, 7.4], [10, 8.0]], [[10, 7.4], [12, 7.0]]),  # not rising
    }
    for field, values in wrong_cases.items():
        for wrong in values:
            with pytest.raises(InvalidAnnotation) as error:
                parse_sample_report(json.dumps({"iterations": 20, "seconds": 12.25, "startupSeconds": 2.5, "splits": wrong}))
            assert error.value.field == field, wrong


def test_without_a_message_the_container_times_with_one_second_resolution():
    times = {"exitCode": 0, "startedAt": "2026-01-01T00:00:03Z", "finishedAt": "2026-01-01T00:00:15Z", "message": "epoch 3 done"}
    view = sample_pod(pod("Succeeded", terminated=times), now=0, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert view.sample.seconds == 12.0 and view.sample.resolution_seconds == 1.0 and view.sample.iterations == 20
    nothing = sample_pod(pod("Succeeded"), now=0, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert nothing.state == "succeeded" and nothing.sample is None and "no termination message" in nothing.failure


def test_failures_running_and_stuck_pods():
    oom = sample_pod(pod("Failed", terminated={"exitCode": 137, "reason": "OOMKilled"}), now=0, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert oom.state == "failed" and oom.failure == "OOMKilled (exit code 137)"
    running = sample_pod(pod("Running"), now=1767225610.0, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert running.state == "running" and running.running_seconds == pytest.approx(10.0)
    stuck = sample_pod(pod("Pending", waiting="ImagePullBackOff"), now=0, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert stuck.state == "failed" and stuck.failure == "ImagePullBackOff"
    stopped = sample_pod(pod("Running"), now=0, stopped_seconds=300.0, pending_limit_seconds=PENDING_LIMIT)
    assert stopped.state == "stopped" and not stopped.sample.complete and stopped.sample.seconds == 300.0
    assert sample_pod(pod("Running", annotations={}), now=0, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT) is None


def test_a_sampling_pod_is_the_template_in_one_configuration():
    job = JOB_DECODER.decode(json.dumps({"spec": {"template": {
        "metadata": {"labels": {"app": "x", "batch.kubernetes.io/controller-uid": "u", "job-name": "train"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}], "priority": 5,
                 "restartPolicy": "OnFailure"}}}}).encode())
    configuration = parse_configurations('{"cpu": {"resources": {"cpu": "8"}}}')["cpu"]
    run = CreateSample(key=SampleKey(configuration="cpu", pilot=3, length="short"), attempt=0, iterations=10)
    body = build_sample_pod(
        job_name="train", job_namespace="ml", job_uid="0123456789", template=json.loads(bytes(job.spec.template)),
        configuration=configuration, run=run, indexed=True, scheduler_name="cellfit", priority_class_name="cellfit-sampling",
    )
    assert body["metadata"]["name"] == f"train-0123456789-cpu-{configuration_digest(configuration)}-s3-0"
    assert body["metadata"]["labels"] == {"app": "x", "cellfit.io/sample": "true", "cellfit.io/sample-job": "0123456789"}
    assert body["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "0123456789"}]
    spec = body["spec"]
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "8"}}
    assert {"name": "CELLFIT_SAMPLE_ITERATIONS", "value": "10"} in spec["containers"][0]["env"]
    assert {"name": "JOB_COMPLETION_INDEX", "value": "3"} in spec["containers"][0]["env"]
    assert (spec["restartPolicy"], spec["schedulerName"], spec["priorityClassName"]) == ("Never", "cellfit", "cellfit-sampling")
    assert "priority" not in spec
    # Read back, it is the same run.
    back = sample_pod(POD_DECODER.decode(json.dumps(body).encode()), now=0, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert (back.key, back.attempt, back.state) == (run.key, 0, "pending")


def test_names_are_valid_and_bounded_for_long_job_names():
    run = CreateSample(key=SampleKey(configuration="gpu", pilot=12, length="long"), attempt=2, iterations=10)
    name = sample_pod_name(job_name="a" * 60 + ".b-c", job_uid="fffff-uid", digest="0a1b2", run=run)
    assert len(name) <= 63 and name.endswith("-fffffuid-gpu-0a1b2-l12-2") and name[0].isalnum()
    assert sample_pod_name(job_name="x" * 40 + ".", job_uid="abcde", digest="0a1b2", run=run).count(".-") == 0
