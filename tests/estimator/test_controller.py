"""The estimator's live driver, one reconcile pass at a time, over a recording API: the sampling
budget, the ratio a wide Job keeps, results turned into the estimate. (Against the real API
server: e2e/test_estimator.py.)"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from estimator.controller import Capacity, EstimatorController
from scheduler.cluster.feed import InterchangeableJobs
from estimator.objects import JOB_DECODER, POD_DECODER
from placer.configuration import parse_configurations
from scheduler.config import EstimatorSettings
from scheduler.errors import KubernetesApiError


class RecordingApi:
    source = "recording double"

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.annotations: list[tuple[str, dict[str, str]]] = []
        self.events: list[tuple[str, str]] = []
        self.conditions: list[dict[str, Any]] = []
        self.existing: set[str] = set()
        self.unsuspended: set[str] = set()  # Jobs their users have unsuspended since cellfit read them

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if name in self.existing:
            raise KubernetesApiError("already exists", status=409)
        self.existing.add(name)
        self.created.append(pod)

    def annotate_job(self, *, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.annotations.append((name, annotations))

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        """A JSON Patch of tests on ``spec.suspend`` (the Jobs in ``unsuspended`` fail them) and
        additions of annotations (recorded as ``annotate_job`` records them)."""
        if any(op["op"] == "test" and op["path"] == "/spec/suspend" and op["value"] != (name not in self.unsuspended) for op in operations):
            raise KubernetesApiError("the test on /spec/suspend failed", status=422)
        prefix = "/metadata/annotations/"
        added = {op["path"][len(prefix):].replace("~1", "/"): op["value"] for op in operations if op["op"] == "add" and op["path"].startswith(prefix)}
        self.annotations.append((name, added))

    def create_event(self, *, reason: str, message: str, **_: Any) -> None:
        self.events.append((reason, message))

    def set_job_condition(self, *, condition: dict[str, Any], **_: Any) -> None:
        self.conditions.append(condition)

    def delete_pod(self, **_: Any) -> None:
        pass


def controller(api: RecordingApi, *, cpus: int = 64, share: float = 0.1, gpus: int = 8, **extra: Any) -> EstimatorController:
    """``extra``: the controller's other arguments (its clock, the nodes it judges configurations by)."""
    return EstimatorController(
        api=api,  # type: ignore[arg-type]
        settings=EstimatorSettings(max_cluster_share=share),
        gpu_resource="nvidia.com/gpu",
        capacity=lambda: Capacity(cpu_millis=cpus * 1000, gpus=gpus),
        jobs=InterchangeableJobs(),
        **extra,
    )


def job(name: str, *, cpu: str = "2", parallelism: int | None = None, created: str = "2026-01-01T00:00:00Z") -> Any:
    configurations = {"cpu": {"resources": {"cpu": cpu}}, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
    body = {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "creationTimestamp": created,
                     "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/iterations": "1000"}},
        "spec": {"suspend": True, "parallelism": parallelism, "completions": parallelism,
                 "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


def finished(pod: dict[str, Any], seconds: float, *, splits: list[list[float]] | None = None) -> Any:
    iterations = int(pod["metadata"]["annotations"]["cellfit.io/sample-iterations"])
    message = json.dumps({"iterations": iterations, "seconds": seconds, **({"splits": splits} if splits else {})})
    body = {**pod, "status": {"phase": "Succeeded", "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 0, "message": message}}}]}}
    return POD_DECODER.decode(json.dumps(body).encode())


def pending(pod: dict[str, Any]) -> Any:
    return POD_DECODER.decode(json.dumps({**pod, "status": {"phase": "Pending"}}).encode())


def test_the_sampling_budget_goes_to_the_oldest_job_and_the_rest_waits():
    api = RecordingApi()
    estimator = controller(api, cpus=10, share=0.5)  # 5 CPUs for samples
    estimator._replace_jobs([job("old", cpu="4", created="2026-01-01T00:00:00Z"), job("new", cpu="4", created="2026-01-01T00:01:00Z")])
    estimator.reconcile()
    owners = [p["metadata"]["ownerReferences"][0]["name"] for p in api.created]
    # cpu runs take 4 CPUs, gpu runs 1: old's two long runs (5 CPUs) fill the budget exactly.
    assert owners == ["old"] * 2
    states = {j["name"]: j["state"] for j in estimator.inspect()["jobs"]}
    assert states == {"old": "sampling", "new": "waiting-for-capacity"}
    # Those pods now hold the budget: a second pass creates nothing more.
    estimator._replace_pods([pending(p) for p in api.created])
    estimator.reconcile()
    assert len(api.created) == 2


def test_one_sampling_pod_may_always_run():
    api = RecordingApi()
    estimator = controller(api, cpus=1, share=0.1)  # 100m of budget, runs of 2 CPUs
    estimator._replace_jobs([job("big")])
    estimator.reconcile()
    assert len(api.created) == 1


def test_a_wide_job_draws_its_ratio_once_even_before_the_watch_brings_it_back():
    api = RecordingApi()
    estimator = controller(api, share=1.0)
    estimator._replace_jobs([job("wide", parallelism=100)])
    estimator.reconcile()
    first = sorted(p["metadata"]["name"] for p in api.created)
    estimator.reconcile()  # the Job in the cache still lacks cellfit.io/sampling
    ratios = [json.loads(a["cellfit.io/sampling"])["ratio"] for _, a in api.annotations if "cellfit.io/sampling" in a]
    assert ratios == [0.03]
    assert len(first) == 2 * 3  # two configurations, 3% of 100 pods: the long runs first
    assert sorted(p["metadata"]["name"] for p in api.created) == first  # the repeat answered 409


def test_finished_samples_become_the_estimate_the_event_and_the_condition():
    api = RecordingApi()
    estimator = controller(api, share=1.0)
    estimator._replace_jobs([job("mlp")])
    estimator.reconcile()
    rates = {"cpu": (4.0, 2.0), "gpu": (8.0, 0.2)}

    def seconds(pod: dict[str, Any], key: str = "cellfit.io/sample-iterations") -> float:
        notes = pod["metadata"]["annotations"]
        startup, rate = rates[notes["cellfit.io/sample-configuration"]]
        return startup + rate * int(notes[key])

    def played(pod: dict[str, Any]) -> Any:
        # The gpu workload reports the split it was asked for, the cpu one does not.
        notes = pod["metadata"]["annotations"]
        split = notes.get("cellfit.io/sample-split-iterations")
        if split is None or notes["cellfit.io/sample-configuration"] == "cpu":
            return finished(pod, seconds(pod))
        return finished(pod, seconds(pod), splits=[[int(split), seconds(pod, "cellfit.io/sample-split-iterations")]])

    (cpu_long, gpu_long) = sorted(api.created, key=lambda p: p["metadata"]["annotations"]["cellfit.io/sample-configuration"])
    env = {e["name"]: e["value"] for e in gpu_long["spec"]["containers"][0]["env"]}
    assert (env["CELLFIT_SAMPLE_ITERATIONS"], env["CELLFIT_SAMPLE_SPLIT_ITERATIONS"]) == ("20", "10")
    estimator._replace_pods([played(p) for p in api.created])
    estimator.reconcile()
    # gpu's split stands for its short run; cpu reported none, so its short run follows.
    (cpu_short,) = api.created[2:]
    assert cpu_short["metadata"]["annotations"]["cellfit.io/sample-configuration"] == "cpu"
    assert cpu_short["metadata"]["annotations"]["cellfit.io/sample-iterations"] == "10"
    assert "CELLFIT_SAMPLE_SPLIT_ITERATIONS" not in {e["name"] for e in cpu_short["spec"]["containers"][0]["env"]}
    estimator._replace_pods([played(p) for p in api.created])
    estimator.reconcile()
    (written,) = [a["cellfit.io/estimate"] for _, a in api.annotations if "cellfit.io/estimate" in a]
    estimate = json.loads(written)
    assert estimate["cpu"]["seconds"] == pytest.approx(2004.0) and estimate["gpu"]["seconds"] == pytest.approx(208.0)
    assert estimate["gpu"]["samples"][0]["splits"] == [[10, 10.0]]
    assert [reason for reason, _ in api.events] == ["Estimated"]
    assert api.conditions[-1]["type"] == "Estimated" and api.conditions[-1]["status"] == "True"
    assert "from 3 samples" in api.events[0][1]
    # The sampling cost said as what it is: the samples' seconds summed, over the fastest
    # configuration's estimated run (not a runtime overhead of the Job).
    spent = sum(seconds(pod) for pod in api.created)
    assert api.events[0][1].endswith(f"from 3 samples, which ran {spent:.0f} s in all: {spent / 208:.1%} of its estimated 3 min on gpu")


def test_invalid_iterations_are_reported_once_and_nothing_is_created():
    api = RecordingApi()
    estimator = controller(api)
    bad = job("bad")
    body = json.loads(json.dumps({"metadata": {**{f: getattr(bad.metadata, f) for f in ("name", "namespace", "uid", "creationTimestamp")},
                                               "annotations": {**bad.annotations, "cellfit.io/iterations": "many"}},
                                  "spec": {"suspend": True, "template": {"spec": {}}}}))
    estimator._replace_jobs([JOB_DECODER.decode(json.dumps(body).encode())])
    estimator.reconcile()
    estimator.reconcile()
    assert api.created == []
    assert [reason for reason, _ in api.events] == ["InvalidInterchangeableJob"]
    assert "cellfit.io/iterations" in api.conditions[0]["message"] and api.conditions[0]["reason"] == "InvalidSpec"


def test_invalid_configurations_of_a_job_with_its_users_estimate_are_reported_once():
    # With cellfit.io/estimate given, nothing is sampled; the placer leaves a Job whose
    # configurations do not parse to the estimator to report, so it must not stay silent.
    api = RecordingApi()
    estimator = controller(api)
    bad = job("bad")
    configurations = {"cpu": {"resources": {"cpu": "4"}}, "tpu": {"resources": {"google.com/tpu": "1"}}}
    body = {"metadata": {**{f: getattr(bad.metadata, f) for f in ("name", "namespace", "uid", "creationTimestamp")},
                         "annotations": {"cellfit.io/configurations": json.dumps(configurations),
                                         "cellfit.io/estimate": json.dumps({"cpu": {"seconds": 60}})}},
            "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}
    estimator._replace_jobs([JOB_DECODER.decode(json.dumps(body).encode())])
    estimator.reconcile()
    estimator.reconcile()
    assert api.created == []
    assert [reason for reason, _ in api.events] == ["InvalidInterchangeableJob"]
    assert "'tpu'" in api.events[0][1] and "cellfit.io/configurations" in api.events[0][1]
    assert api.conditions[0]["reason"] == "InvalidSpec" and "nothing is sampled or started" in api.conditions[0]["message"]


def test_an_invalid_job_told_before_a_restart_gets_no_second_event():
    first_api, second_api = RecordingApi(), RecordingApi()
    bad = job("bad")
    body = {"metadata": {**{f: getattr(bad.metadata, f) for f in ("name", "namespace", "uid", "creationTimestamp")},
                         "annotations": {**bad.annotations, "cellfit.io/iterations": "many"}},
            "spec": {"suspend": True, "template": {"spec": {}}}}
    first = controller(first_api)
    first._replace_jobs([JOB_DECODER.decode(json.dumps(body).encode())])
    first.reconcile()
    (written,) = first_api.conditions
    # The Job as the next cellfit process's watch shows it: with the condition the first wrote.
    restarted = controller(second_api)
    restarted._replace_jobs([JOB_DECODER.decode(json.dumps({**body, "status": {"conditions": [written]}}).encode())])
    restarted.reconcile()
    assert [reason for reason, _ in first_api.events] == ["InvalidInterchangeableJob"]
    assert second_api.events == [] and second_api.conditions == []


def test_a_job_submitted_without_suspend_runs_as_written_and_is_told_once():
    api = RecordingApi()
    estimator = controller(api)
    unsuspended = json.loads(json.dumps({"metadata": {"name": "eager", "namespace": "ml", "uid": "u-eager",
        "annotations": {"cellfit.io/configurations": '{"cpu": {"resources": {"cpu": "1"}}}', "cellfit.io/iterations": "100"}},
        "spec": {"suspend": False, "template": {"spec": {}}}}))
    estimator._replace_jobs([JOB_DECODER.decode(json.dumps(unsuspended).encode())])
    estimator.reconcile()
    estimator.reconcile()
    assert api.created == []
    assert [reason for reason, _ in api.events] == ["NotEstimated"]
    assert estimator.inspect()["jobs"][0]["state"] == "unsuspended"


def test_the_sampling_share_is_what_pending_and_running_samples_request():
    api = RecordingApi()
    estimator = controller(api, cpus=100, share=1.0)
    estimator._replace_jobs([job("a", cpu="10")])
    estimator.reconcile()
    estimator._replace_pods([pending(p) for p in api.created])
    estimator.reconcile()
    # The long runs: a cpu run of 10 cores and a gpu run of 1 core and 1 GPU, of 100 cores and 8 GPUs.
    assert estimator.share == {"cpu": pytest.approx(0.11), "gpu": pytest.approx(0.125)}


def test_a_family_is_its_namespaces_another_tenants_jobs_of_that_label_do_not_feed_it():
    api = RecordingApi()
    estimator = controller(api)

    def finished_job(namespace: str, name: str) -> Any:
        body = {"metadata": {"name": name, "namespace": namespace, "uid": f"u-{namespace}-{name}", "labels": {"cellfit.io/job-family": "mlp"},
                             "creationTimestamp": "2026-01-01T00:00:00Z",
                             "annotations": {"cellfit.io/configurations": '{"gpu": {"resources": {"nvidia.com/gpu": "1"}}}',
                                             "cellfit.io/iterations": "1000", "cellfit.io/placement": "gpu",
                                             "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 1.0}})}},
                "spec": {"suspend": False, "template": {"spec": {}}},
                "status": {"startTime": "2026-01-01T00:01:00Z", "completionTime": "2026-01-01T00:01:01Z",
                           "conditions": [{"type": "Complete", "status": "True"}]}}
        return JOB_DECODER.decode(json.dumps(body).encode())

    # Three quick, steady runs in another team's namespace would make a steady family, whose
    # Jobs skip sampling, if families were keyed by the label alone.
    waiting = job("mine")
    waiting_body = json.loads(msgspec.json.encode(waiting))
    waiting_body["metadata"]["labels"] = {"cellfit.io/job-family": "mlp"}
    estimator._replace_jobs([finished_job("other-team", f"done-{i}") for i in range(3)] + [JOB_DECODER.decode(json.dumps(waiting_body).encode())])
    estimator.reconcile()
    assert estimator.inspect()["families"] == {"other-team/mlp/gpu": 3}
    assert estimator._priors(JOB_DECODER.decode(json.dumps(waiting_body).encode()), parse_configurations(waiting.annotations["cellfit.io/configurations"])) == {}
    assert api.created, "ml/mine is sampled: no history of its own"


def test_a_finished_job_records_its_real_runtime_and_error_and_feeds_its_family():
    api = RecordingApi()
    estimator = controller(api)
    estimate = json.dumps({"gpu": {"seconds": 110.0, "method": "samples", "taskCov": 0.3},
                           "cpu": {"seconds": 900.0, "method": "samples", "taskCov": 0.2}})
    body = {"metadata": {"name": "done", "namespace": "ml", "uid": "u-done", "labels": {"cellfit.io/job-family": "mlp"},
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": '{"cpu": {"resources": {"cpu": "1"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}}',
                                         "cellfit.io/iterations": "1000", "cellfit.io/estimate": estimate, "cellfit.io/placement": "gpu"}},
            "spec": {"suspend": False, "template": {"spec": {}}},
            "status": {"startTime": "2026-01-01T00:01:00Z", "completionTime": "2026-01-01T00:02:40Z",
                       "conditions": [{"type": "Complete", "status": "True"}]}}
    estimator._replace_jobs([JOB_DECODER.decode(json.dumps(body).encode())])
    estimator.reconcile()
    estimator.reconcile()  # once only
    written = [json.loads(a["cellfit.io/estimate"]) for _, a in api.annotations if "cellfit.io/estimate" in a]
    assert len(written) == 1
    assert written[0]["gpu"]["actualSeconds"] == 100.0 and written[0]["gpu"]["error"] == pytest.approx(0.1)
    assert "actualSeconds" not in written[0]["cpu"]  # it did not run there
    assert estimator.inspect()["families"] == {"ml/mlp/gpu": 1}
    assert estimator._history[("ml", "mlp", "gpu")][0] == pytest.approx(0.1)  # seconds per iteration
    # The pilots' spread of every configuration they ran in: the family's task spread.
    assert (list(estimator._task_spread[("ml", "mlp", "gpu")]), list(estimator._task_spread[("ml", "mlp", "cpu")])) == ([0.3], [0.2])
