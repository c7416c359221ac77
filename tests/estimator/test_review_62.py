"""Adversarial review of the estimator (helper-62): what a cluster user does to sampling pods and
to the Jobs they sample, one reconcile pass at a time over a recording API."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from estimator.contract import encode_estimate, parse_estimate
from estimator.controller import Capacity, EstimatorController
from estimator.model import ConfigurationEstimate, ModelSettings, Sample, estimate_configuration
from estimator.objects import JOB_DECODER, POD_DECODER, sample_pod
from estimator.planner import CreateSample, SampleKey
from estimator.sample_pod import sample_pod_name
from scheduler.cluster.feed import InterchangeableJobs
from scheduler.config import EstimatorSettings
from scheduler.errors import KubernetesApiError
from tests.estimator.test_controller import RecordingApi, finished, job

CREATED = "2026-01-01T00:00:00Z"
CREATED_AT = 1767225600.0  # CREATED, in seconds
PENDING_LIMIT = EstimatorSettings().pending_limit_seconds


class DeletingApi(RecordingApi):
    """The recording API that also remembers which pods were deleted."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[str] = []

    def delete_pod(self, *, name: str, **_: Any) -> None:  # type: ignore[override]
        self.deleted.append(name)
        self.existing.discard(name)  # the name may be created again once the pod is gone


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def estimator_for(api: RecordingApi, clock: Clock, *, settings: EstimatorSettings | None = None) -> EstimatorController:
    return EstimatorController(
        api=api,  # type: ignore[arg-type]
        settings=settings or EstimatorSettings(max_cluster_share=1.0),
        gpu_resource="nvidia.com/gpu",
        capacity=lambda: Capacity(cpu_millis=64_000, gpus=8),
        jobs=InterchangeableJobs(),
        clock=clock,
    )


def started(name: str, clock: Clock, *, settings: EstimatorSettings | None = None) -> tuple[DeletingApi, EstimatorController]:
    """A Job sampled from its first pass: its first runs created."""
    api = DeletingApi()
    estimator = estimator_for(api, clock, settings=settings)
    estimator._replace_jobs([job(name)])
    estimator.reconcile()
    return api, estimator


def with_status(pod: dict[str, Any], status: dict[str, Any], **metadata: Any) -> Any:
    body = {**pod, "metadata": {**pod["metadata"], "creationTimestamp": CREATED, **metadata}, "status": status}
    return POD_DECODER.decode(json.dumps(body).encode())


def edited(original: Any, *, suspend: bool | None = None, annotations: dict[str, str] | None = None) -> Any:
    body = json.loads(msgspec.json.encode(original))
    if suspend is not None:
        body["spec"]["suspend"] = suspend
    body["metadata"]["annotations"].update(annotations or {})
    return JOB_DECODER.decode(json.dumps(body).encode())


def names(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods)


# ------------------------------------------------------------------ a pod that is never scheduled


def test_a_sampling_pod_never_scheduled_counts_as_failed_after_the_configured_pending_limit():
    """A GPU-starved cluster's admin gives sampling pods two hours: one unscheduled for an hour
    (past the 30-minute default) still waits, and counts as failed only past the two hours."""
    two_hours = 2 * 3600.0
    assert two_hours != PENDING_LIMIT  # the limit configured here is not the default
    clock = Clock(CREATED_AT + 10)
    api, estimator = started("starved", clock, settings=EstimatorSettings(max_cluster_share=1.0, pending_limit_seconds=two_hours))
    unschedulable = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/40 nodes are available: 40 Insufficient nvidia.com/gpu."}]}
    estimator._replace_pods([with_status(p, unschedulable) for p in api.created])
    estimator.reconcile()
    assert api.deleted == [] and len(api.created) == 2  # young: it waits for a node

    clock.now = CREATED_AT + 3600  # past the default limit, within the configured one
    estimator._replace_pods([with_status(p, unschedulable) for p in api.created])
    estimator.reconcile()
    assert api.deleted == [] and len(api.created) == 2

    clock.now = CREATED_AT + two_hours + 60  # still no node
    estimator._replace_pods([with_status(p, unschedulable) for p in api.created])
    estimator.reconcile()
    # Both deleted (they held their requests in the sampling budget) and retried as attempt 1.
    assert sorted(api.deleted) == names(api.created[:2])
    assert [p["metadata"]["annotations"]["cellfit.io/sample-attempt"] for p in api.created[2:]] == ["1", "1"]
    samples = estimator.inspect()["jobs"][0]["samples"]
    failures = [row["failure"] for row in samples if row["attempt"] == 0]
    assert all("not scheduled within 7200 s" in f and "Insufficient nvidia.com/gpu" in f for f in failures), failures


def test_an_unscheduled_pod_is_read_as_failed_only_past_the_limit():
    notes = {"cellfit.io/sample-configuration": "gpu", "cellfit.io/sample-pilot": "0", "cellfit.io/sample-length": "long",
             "cellfit.io/sample-attempt": "0", "cellfit.io/sample-iterations": "20"}
    pod = {"metadata": {"name": "p", "annotations": notes}}
    pending = with_status(pod, {"phase": "Pending"})
    young = sample_pod(pending, now=CREATED_AT + 60, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert young is not None and young.state == "pending"
    old = sample_pod(pending, now=CREATED_AT + 3 * 3600, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert old is not None and old.state == "failed" and old.failure is not None and "not scheduled" in old.failure
    # The limit given decides: the same pod at the same time waits under a longer one.
    patient = sample_pod(pending, now=CREATED_AT + 3 * 3600, stopped_seconds=None, pending_limit_seconds=4 * 3600)
    assert patient is not None and patient.state == "pending"
    # Scheduled (the kubelet took it: pulling a large image) and young: it waits.
    scheduled = with_status(pod, {"phase": "Pending", "startTime": CREATED})
    pulling = sample_pod(scheduled, now=CREATED_AT + 60, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert pulling is not None and pulling.state == "pending"


def test_a_sampling_pod_that_never_starts_on_its_node_counts_as_failed_after_the_limit():
    """The cpu and the gpu run of a Job mounting a ReadWriteOnce volume run at once on two nodes:
    the second waits in ContainerCreating (Multi-Attach error) for as long as the first runs, or
    forever where the volume never comes free."""
    notes = {"cellfit.io/sample-configuration": "gpu", "cellfit.io/sample-pilot": "0", "cellfit.io/sample-length": "long",
             "cellfit.io/sample-attempt": "0", "cellfit.io/sample-iterations": "20"}
    creating = {"phase": "Pending", "startTime": CREATED, "containerStatuses": [{"name": "c", "state": {"waiting": {
        "reason": "ContainerCreating", "message": "Multi-Attach error for volume \"data\""}}}]}
    pod = with_status({"metadata": {"name": "p", "annotations": notes}}, creating)
    young = sample_pod(pod, now=CREATED_AT + 600, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert young is not None and young.state == "pending"
    old = sample_pod(pod, now=CREATED_AT + 3 * 3600, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert old is not None and old.state == "failed"
    assert old.failure is not None and "not started within" in old.failure and "Multi-Attach" in old.failure


# ------------------------------------------------------------------ a pod deleted under the run


def test_a_sampling_pod_deleted_by_someone_else_is_a_failed_attempt_retried_under_a_new_name():
    api, estimator = started("evicted", Clock(CREATED_AT + 60))
    # Preempted, drained or its node lost: terminating, and it may stay so while the node is away.
    terminating = [with_status(p, {"phase": "Running", "startTime": CREATED}, deletionTimestamp=CREATED) for p in api.created]
    estimator._replace_pods(terminating)
    estimator.reconcile()
    retries = api.created[2:]
    assert [p["metadata"]["annotations"]["cellfit.io/sample-attempt"] for p in retries] == ["1", "1"]
    assert not set(names(retries)) & set(names(api.created[:2]))
    rows = estimator.inspect()["jobs"][0]["samples"]
    assert all(row["state"] == "failed" and "deleted" in row["failure"] for row in rows if row["attempt"] == 0)


# ------------------------------------------------------------------ a Job that stops sampling midway


def sampling_job() -> tuple[DeletingApi, EstimatorController, Any]:
    api, estimator = started("mid", Clock(CREATED_AT + 30))
    estimator._replace_pods([with_status(p, {"phase": "Running", "startTime": CREATED}) for p in api.created])
    estimator.reconcile()
    assert api.deleted == []
    return api, estimator, job("mid")


def test_a_job_unsuspended_by_its_user_midway_has_its_running_samples_stopped():
    api, estimator, sampled = sampling_job()
    estimator._apply_job(edited(sampled, suspend=False))
    estimator.reconcile(everything=False)
    assert sorted(api.deleted) == names(api.created)


def test_a_job_given_a_user_estimate_midway_has_its_running_samples_stopped():
    api, estimator, sampled = sampling_job()
    estimator._apply_job(edited(sampled, annotations={"cellfit.io/estimate": '{"gpu": {"seconds": 600}}'}))
    estimator.reconcile(everything=False)
    assert sorted(api.deleted) == names(api.created)


# ------------------------------------------------------------------ an estimate too small to write


def test_an_estimate_below_a_millisecond_is_written_as_one_cellfit_can_read_back():
    estimate = ConfigurationEstimate(configuration="gpu", seconds=0.0002, uncertainty_seconds=0.0, pod_seconds=0.0002,
                                     memory_bytes=None, samples=1, method="proportional")
    text = encode_estimate({"gpu": estimate}, samples={"gpu": [("p", Sample("gpu", 20, 0.0))]}, overhead_fraction=None)
    assert parse_estimate(text).seconds["gpu"] > 0


def test_samples_reporting_zero_seconds_do_not_make_the_job_invalid():
    api, estimator = started("instant", Clock(CREATED_AT + 60))
    instant = job("instant")
    estimator._replace_pods([finished(p, 0.0, splits=[[10, 0.0]]) for p in api.created])
    estimator.reconcile()
    (written,) = [a["cellfit.io/estimate"] for _, a in api.annotations if "cellfit.io/estimate" in a]
    estimator._apply_job(edited(instant, annotations={"cellfit.io/estimate": written}))
    estimator.reconcile(everything=False)
    assert estimator.inspect()["jobs"][0]["state"] == "estimated"


# ------------------------------------------------------------------ failed attempts whose pods are gone


def test_a_run_whose_pods_are_deleted_as_stuck_is_tried_max_attempts_times_not_forever():
    api = DeletingApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60))
    bad_image = job("typo")
    estimator._replace_jobs([bad_image])
    for _ in range(8):
        estimator.reconcile()
        # What the cluster holds: the pods not deleted yet, none of which pulls its image; the
        # Job as cellfit last annotated it.
        alive = [p for p in api.created if p["metadata"]["name"] not in api.deleted]
        estimator._replace_pods([with_status(p, {"phase": "Pending", "startTime": CREATED, "containerStatuses": [
            {"name": "c", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}) for p in alive])
        written = {k: v for _, notes in api.annotations for k, v in notes.items()}
        estimator._apply_job(edited(bad_image, annotations=written))
    # Each configuration's long run, then (the long one failed) its short run: 3 attempts each, once.
    created = names(api.created)
    assert len(created) == 2 * 2 * 3 and len(set(created)) == len(created)
    view = estimator.inspect()["jobs"][0]
    assert view["state"] == "failed" and "ImagePullBackOff" in view["message"]


def test_a_restarted_estimator_remembers_attempts_whose_pods_are_gone():
    api = DeletingApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60))
    bad_image = job("typo")
    estimator._replace_jobs([bad_image])
    estimator.reconcile()
    estimator._replace_pods([with_status(p, {"phase": "Pending", "startTime": CREATED, "containerStatuses": [
        {"name": "c", "state": {"waiting": {"reason": "ErrImagePull"}}}]}) for p in api.created])
    estimator.reconcile()
    assert len(api.deleted) == 2
    written = {k: v for _, notes in api.annotations for k, v in notes.items()}
    # A new process: the stuck pods are gone, their retries are pending.
    restarted = estimator_for(api, Clock(CREATED_AT + 120))
    restarted._replace_jobs([edited(bad_image, annotations=written)])
    restarted._replace_pods([with_status(p, {"phase": "Pending"}) for p in api.created[2:]])
    created = len(api.created)
    restarted.reconcile()
    assert len(api.created) == created  # attempt 0 is not run again
    rows = restarted.inspect()["jobs"][0]["samples"]
    assert sorted((row["attempt"], row["state"]) for row in rows) == [(0, "failed"), (0, "failed"), (1, "pending"), (1, "pending")]
    assert all(row["failure"] == "ErrImagePull" for row in rows if row["attempt"] == 0)


# ------------------------------------------------------------------ configurations edited midway


def reconfigured(original: Any, *, cpu: str) -> Any:
    configurations = json.loads(original.annotations["cellfit.io/configurations"])
    configurations["cpu"]["resources"]["cpu"] = cpu
    return edited(original, annotations={"cellfit.io/configurations": json.dumps(configurations)})


def kind_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["annotations"]["cellfit.io/sample-configuration"])


def test_samples_of_a_configuration_edited_midway_are_not_its_estimate():
    api, estimator = started("edit", Clock(CREATED_AT + 60))
    first = list(api.created)
    estimator._replace_pods([with_status(p, {"phase": "Running", "startTime": CREATED}) for p in first])
    estimator.reconcile()
    # The user finds 2 CPUs too few and asks for 8 while the samples run.
    estimator._apply_job(reconfigured(job("edit"), cpu="8"))
    estimator.reconcile(everything=False)
    (old_cpu,) = [p for p in first if kind_of(p) == "cpu"]
    assert api.deleted == [old_cpu["metadata"]["name"]]  # the gpu run goes on
    (new_cpu,) = api.created[len(first):]
    assert kind_of(new_cpu) == "cpu" and new_cpu["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "8"
    assert new_cpu["metadata"]["name"] != old_cpu["metadata"]["name"]
    # Every run ends (the old one had finished before its deletion went through): the estimate
    # rests on the 8-CPU run alone.
    ended = [finished(p, 40.0, splits=[[10, 20.0]]) for p in first] + [finished(new_cpu, 10.0, splits=[[10, 5.0]])]
    estimator._replace_pods(ended)
    estimator.reconcile()
    (written,) = [a["cellfit.io/estimate"] for _, a in api.annotations if "cellfit.io/estimate" in a]
    assert [s["pod"] for s in json.loads(written)["cpu"]["samples"]] == [new_cpu["metadata"]["name"]]


# ------------------------------------------------------------------ cellfit.io/sampling edited by hand


def test_a_sampling_record_of_the_wrong_shape_is_read_as_empty_not_as_a_stuck_job():
    api = DeletingApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60))
    for index, record in enumerate(('{"ratio": NaN}', '{"ratio": 40}', '{"stopped": []}', '{"failed": "x", "runs": 3}', '{"stopped": {"p": "9"}, "runs": {"p": 1}}')):
        wide = job(f"hand-edited-{index}", parallelism=100)
        estimator._replace_jobs([edited(wide, annotations={"cellfit.io/sampling": record})])
        created = len(api.created)
        estimator.reconcile()
        assert len(api.created) > created, record
        assert estimator.inspect()["jobs"][0]["state"] == "sampling", record


# ------------------------------------------------------------------ pods of several containers


def two_containers(phase: str, *, sidecar: dict[str, Any], trainer: dict[str, Any]) -> Any:
    notes = {"cellfit.io/sample-configuration": "cpu", "cellfit.io/sample-pilot": "0", "cellfit.io/sample-length": "long",
             "cellfit.io/sample-attempt": "0", "cellfit.io/sample-iterations": "20"}
    # The kubelet lists container statuses by name: the sidecar comes first.
    statuses = [{"name": "fluentbit", "state": {"terminated": sidecar}}, {"name": "trainer", "state": {"terminated": trainer}}]
    return with_status({"metadata": {"name": "p", "annotations": notes}}, {"phase": phase, "containerStatuses": statuses})


def test_the_report_of_any_container_is_the_sample_not_the_first_containers_times():
    report = json.dumps({"iterations": 20, "seconds": 30.5})
    sidecar = {"exitCode": 0, "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:02Z"}
    trainer = {"exitCode": 0, "message": report, "startedAt": "2026-01-01T00:00:01Z", "finishedAt": "2026-01-01T00:00:32Z"}
    view = sample_pod(two_containers("Succeeded", sidecar=sidecar, trainer=trainer), now=CREATED_AT + 60, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert view is not None and view.sample is not None and view.sample.seconds == 30.5
    # Without a report, the longest container's times (the work, not a sidecar's few seconds).
    silent = {**trainer, "message": "epoch 3 done"}
    view = sample_pod(two_containers("Succeeded", sidecar=sidecar, trainer=silent), now=CREATED_AT + 60, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert view is not None and view.sample is not None and view.sample.seconds == 31.0


def test_a_failed_pod_gives_the_failing_containers_reason():
    sidecar = {"exitCode": 0, "reason": "Completed"}
    trainer = {"exitCode": 137, "reason": "OOMKilled"}
    view = sample_pod(two_containers("Failed", sidecar=sidecar, trainer=trainer), now=CREATED_AT + 60, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert view is not None and view.failure == "OOMKilled (exit code 137)"


# ------------------------------------------------------------------ the estimate and a user's unsuspend


def test_no_estimate_is_written_on_a_job_its_user_unsuspended_since_it_was_read():
    api, estimator = started("eager", Clock(CREATED_AT + 60))
    estimator._replace_pods([finished(p, 40.0, splits=[[10, 20.0]]) for p in api.created])
    api.unsuspended.add("eager")  # the watch has not brought the change yet
    estimator.reconcile()
    assert [notes for _, notes in api.annotations if "cellfit.io/estimate" in notes] == []
    assert "Estimated" not in [reason for reason, _ in api.events]


# ------------------------------------------------------------------ a run the API server refuses


class RefusingApi(DeletingApi):
    """A namespace whose LimitRange refuses pods of more than 16 CPUs, and whose ResourceQuota is
    full for ``quota_full`` creations."""

    def __init__(self) -> None:
        super().__init__()
        self.quota_full = 0

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        requests = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
        if requests.get("cpu") == "64":
            raise KubernetesApiError(f'pods "{pod["metadata"]["name"]}" is forbidden: maximum cpu usage per Container is 16, but limit is 64', status=403)
        if self.quota_full:
            self.quota_full -= 1
            raise KubernetesApiError(f'pods "{pod["metadata"]["name"]}" is forbidden: exceeded quota: compute, requested: cpu=1', status=403)
        super().create_pod(namespace=namespace, pod=pod)


def play(estimator: EstimatorController, api: RecordingApi, original: Any, *, passes: int) -> None:
    """Passes of the estimator over a cluster where every run finishes as soon as its pod exists,
    and the Job carries what cellfit last wrote on it."""
    for _ in range(passes):
        estimator.reconcile()
        estimator._replace_pods([finished(p, 40.0, splits=[[10, 20.0]]) for p in api.created])
        written = {k: v for _, notes in api.annotations for k, v in notes.items()}
        estimator._apply_job(edited(original, annotations=written))


def test_a_run_the_api_server_refuses_for_good_is_a_failed_attempt_and_the_job_is_estimated_without_it():
    api = RefusingApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60))
    wide_cpu = job("limited", cpu="64")
    estimator._replace_jobs([wide_cpu])
    play(estimator, api, wide_cpu, passes=10)  # the refused runs take the budget first: gpu samples after them
    (written,) = [notes["cellfit.io/estimate"] for _, notes in api.annotations if "cellfit.io/estimate" in notes]
    assert list(json.loads(written)) == ["gpu"]
    assert ("SamplingFailed", ) == tuple(reason for reason, _ in api.events if reason == "SamplingFailed")
    failed = next(message for reason, message in api.events if reason == "SamplingFailed")
    assert "maximum cpu usage per Container is 16" in failed


def test_a_run_refused_by_a_full_quota_is_tried_again_not_counted():
    api = RefusingApi()
    api.quota_full = 2 * 3  # both long runs refused for three passes: more than maxAttempts
    estimator = estimator_for(api, Clock(CREATED_AT + 60))
    quota = job("quota")
    estimator._replace_jobs([quota])
    play(estimator, api, quota, passes=5)
    (written,) = [notes["cellfit.io/estimate"] for _, notes in api.annotations if "cellfit.io/estimate" in notes]
    assert sorted(json.loads(written)) == ["cpu", "gpu"]


# ------------------------------------------------------------------ configurations edited after the estimate


class PatchingApi(DeletingApi):
    """The recording API that also records JSON Patches removing an annotation."""

    def __init__(self) -> None:
        super().__init__()
        self.removed: list[str] = []

    def patch_job(self, *, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
        super().patch_job(namespace=namespace, name=name, operations=operations)
        self.removed += [op["path"] for op in operations if op["op"] == "remove"]


def estimated_job(name: str) -> tuple[PatchingApi, Any, Any]:
    """A Job sampled and estimated, still suspended: the API, the estimator, and the Job as the
    watch shows it with what the estimator wrote."""
    api = PatchingApi()
    estimator = estimator_for(api, Clock(CREATED_AT + 60))
    original = job(name)
    estimator._replace_jobs([original])
    play(estimator, api, original, passes=2)
    return api, estimator, edited(original, annotations={k: v for _, notes in api.annotations for k, v in notes.items()})


def test_an_estimate_of_configurations_edited_since_is_withdrawn_and_the_edit_sampled():
    api, estimator, estimated = estimated_job("late-edit")
    (written,) = [notes["cellfit.io/estimate"] for _, notes in api.annotations if "cellfit.io/estimate" in notes]
    # Still suspended (waiting for admission), the user gives the cpu configuration 8 CPUs.
    estimator._apply_job(reconfigured(estimated, cpu="8"))
    estimator.reconcile(everything=False)
    assert api.removed == ["/metadata/annotations/cellfit.io~1estimate"]
    assert "EstimateWithdrawn" in [reason for reason, _ in api.events]
    # The Job's condition no longer says it is estimated.
    assert (api.conditions[-1]["status"], api.conditions[-1]["reason"]) == ("False", "ConfigurationsChanged")
    # Once the watch brings the Job without it, the edited configuration is sampled anew.
    without = json.loads(msgspec.json.encode(reconfigured(estimated, cpu="8")))
    del without["metadata"]["annotations"]["cellfit.io/estimate"]
    created = len(api.created)
    estimator._apply_job(JOB_DECODER.decode(json.dumps(without).encode()))
    estimator.reconcile(everything=False)
    (fresh,) = api.created[created:]
    assert kind_of(fresh) == "cpu" and fresh["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "8"
    # Its run ends: the new estimate is written and said, as the first one was.
    estimator._replace_pods([finished(p, 40.0, splits=[[10, 20.0]]) for p in api.created])
    estimator.reconcile()
    estimates = [notes["cellfit.io/estimate"] for _, notes in api.annotations if "cellfit.io/estimate" in notes]
    assert len(estimates) == 2 and estimates[0] == written
    assert [reason for reason, _ in api.events].count("Estimated") == 2
    # The same summary as the first estimate's (the same timings): the condition still says so.
    assert (api.conditions[-1]["status"], api.conditions[-1]["reason"]) == ("True", "Sampled")


# ------------------------------------------------------------------ a report that does not read


def test_a_report_that_does_not_read_is_named_to_the_user_and_the_times_stand():
    api, estimator = started("sloppy", Clock(CREATED_AT + 60))
    times = {"startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:30Z"}
    # The workload reports iterations as a float: the report is meant, and does not read.
    message = json.dumps({"iterations": 20.0, "seconds": 29.6})
    ended = [with_status(p, {"phase": "Succeeded", "containerStatuses": [
        {"name": "c", "state": {"terminated": {"exitCode": 0, "message": message, **times}}}]}) for p in api.created]
    estimator._replace_pods(ended)
    estimator.reconcile()
    warnings = [message for reason, message in api.events if reason == "SampleReportInvalid"]
    assert len(warnings) == 2 and all("terminationMessage.iterations" in w for w in warnings), api.events
    rows = estimator.inspect()["jobs"][0]["samples"]
    assert [row["seconds"] for row in rows if row["attempt"] == 0] == [30.0, 30.0]  # the container times


def test_a_pod_deleted_under_its_run_says_who_deleted_it_when_kubernetes_does():
    notes = {"cellfit.io/sample-configuration": "gpu", "cellfit.io/sample-pilot": "0", "cellfit.io/sample-length": "long",
             "cellfit.io/sample-attempt": "0", "cellfit.io/sample-iterations": "20"}
    preempted = {"phase": "Running", "startTime": CREATED, "conditions": [{"type": "DisruptionTarget", "status": "True",
                 "reason": "PreemptionByScheduler", "message": "cellfit: preempting to accommodate a higher priority pod"}]}
    view = sample_pod(with_status({"metadata": {"name": "p", "annotations": notes}}, preempted, deletionTimestamp=CREATED),
                      now=CREATED_AT + 60, stopped_seconds=None, pending_limit_seconds=PENDING_LIMIT)
    assert view is not None and view.state == "failed"
    assert view.failure == "deleted before it finished: PreemptionByScheduler: cellfit: preempting to accommodate a higher priority pod"


def test_an_estimate_is_not_said_withdrawn_when_the_job_was_unsuspended_first():
    api, estimator, estimated = estimated_job("raced")
    api.unsuspended.add("raced")  # the user started it before the watch told cellfit of the edit
    estimator._apply_job(reconfigured(estimated, cpu="8"))
    estimator.reconcile(everything=False)
    assert api.removed == [] and "EstimateWithdrawn" not in [reason for reason, _ in api.events]


# ------------------------------------------------------------------ long names of a sweep's Jobs


def test_the_sampling_pods_of_a_sweeps_long_named_jobs_do_not_share_names():
    """A sweep's Jobs share the start of their names (the trial number comes last, past what a
    pod name keeps of it) and their configurations; UIDs that agree in their first hex digits are
    then all that tells their sampling pods apart (a birthday collision among a few hundred Jobs
    at 5 digits), and a collision left one Job's run refused (409) forever."""
    run = CreateSample(key=SampleKey(configuration="gpu", pilot=0, length="long"), attempt=0, iterations=20)
    prefix = "hyperparameter-sweep-resnet50-imagenet-lr-0001-bs-256-trial-"
    first = sample_pod_name(job_name=prefix + "17", job_uid="3f9a2c41-0b6e-4d0a-9e57-1c2d3e4f5a6b", digest="0a1b2", run=run)
    second = sample_pod_name(job_name=prefix + "18", job_uid="3f9a2d77-5c1f-4b8e-8a90-6f5e4d3c2b1a", digest="0a1b2", run=run)
    assert first != second and len(first) <= 63 and len(second) <= 63


# ------------------------------------------------------------------ a workload that ignores its sample length


def test_a_workload_that_runs_other_than_the_iterations_it_was_asked_is_told():
    api, estimator = started("ignores", Clock(CREATED_AT + 60))
    # Asked for 20 iterations, it ran the Job's 1,000: its sample cost a whole run.
    full = [with_status(p, {"phase": "Succeeded", "containerStatuses": [{"name": "c", "state": {"terminated": {
        "exitCode": 0, "message": json.dumps({"iterations": 1000, "seconds": 2000.0})}}}]}) for p in api.created]
    estimator._replace_pods(full)
    estimator.reconcile()
    warnings = [message for reason, message in api.events if reason == "SampleLengthIgnored"]
    assert len(warnings) == 2 and all("ran 1000 iterations" in w and "CELLFIT_SAMPLE_ITERATIONS=20" in w for w in warnings), api.events


# ------------------------------------------------------------------ reports at the contract's limits


def test_an_estimate_beyond_the_contracts_seconds_is_written_as_one_cellfit_can_read_back():
    """cellfit.io/iterations may be 10^12: at 1 ms an iteration the Job's estimate is 10^9 s and
    more, which cellfit.io/estimate does not take: cellfit's own annotation made the Job invalid."""
    estimate = ConfigurationEstimate(configuration="cpu", seconds=7e9, uncertainty_seconds=1e8, pod_seconds=7e9,
                                     memory_bytes=None, samples=1, method="samples")
    text = encode_estimate({"cpu": estimate}, samples={"cpu": [("p", Sample("cpu", 20_000_000_000, 2e7))]}, overhead_fraction=None)
    assert parse_estimate(text).seconds["cpu"] == 10**9


def test_samples_of_wildly_different_weights_are_fitted_without_dividing_by_zero():
    # A report of 0 s (weight 10^6) beside one of 5·10^8 s (weight ~10^-13): the line's
    # determinant cancels to 0.
    samples = [Sample("cpu", 10, 5e8), Sample("cpu", 1, 0.0)]
    estimate = estimate_configuration("cpu", samples, iterations=1000, waves=1, prior=None, settings=ModelSettings())
    assert estimate.seconds >= 5e8
    # The same with start-ups reported: the warm-up's line cancels the same way.
    reported = [Sample("cpu", 10, 3.3, startup_seconds=3.3), Sample("cpu", 2, 1e9, startup_seconds=0.0, splits=((1, 8.9e8),))]
    assert estimate_configuration("cpu", reported, iterations=1000, waves=1, prior=None, settings=ModelSettings()).seconds > 0


# ------------------------------------------------------------------ a sample that runs with nothing to compare


def test_a_sample_running_an_hour_with_no_finished_peer_is_told_to_the_user():
    """A pod of a distributed Job that waits for its peers hangs as a sample: with no sample
    finished, no long deadline exists, and the Job waits for as long as it runs."""
    clock = Clock(CREATED_AT + 60)
    api, estimator = started("ddp", clock)
    running = [with_status(p, {"phase": "Running", "startTime": CREATED}) for p in api.created]
    estimator._replace_pods(running)
    estimator.reconcile()
    assert "SampleRunningAlone" not in [reason for reason, _ in api.events]
    clock.now = CREATED_AT + 2 * 3600
    estimator.reconcile()
    alone = [message for reason, message in api.events if reason == "SampleRunningAlone"]
    assert len(alone) == 2 and all("2.0 h" in m or "120 min" in m for m in alone), alone


def test_the_running_alone_warning_comes_after_the_configured_time():
    """An admin whose Jobs sample for hours sets the warning at six: three hours alone is not told."""
    six_hours = 6 * 3600.0
    clock = Clock(CREATED_AT + 60)
    settings = EstimatorSettings(max_cluster_share=1.0, running_alone_warning_seconds=six_hours)
    api, estimator = started("slow", clock, settings=settings)
    estimator._replace_pods([with_status(p, {"phase": "Running", "startTime": CREATED}) for p in api.created])
    clock.now = CREATED_AT + 3 * 3600  # past the default hour, within the configured six
    estimator.reconcile()
    assert "SampleRunningAlone" not in [reason for reason, _ in api.events]
    clock.now = CREATED_AT + six_hours + 60
    estimator.reconcile()
    assert len([reason for reason, _ in api.events if reason == "SampleRunningAlone"]) == 2
