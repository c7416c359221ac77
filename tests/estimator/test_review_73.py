"""Adversarial review of the estimator's pure core (helper-73): what real training programs'
reports, and the Jobs that run them, do to the fit, the estimate AlloX trusts, the plan and the
sampling pod."""

from __future__ import annotations

import json

import pytest

from estimator.contract import encode_estimate, parse_estimate, parse_sample_report
from estimator.model import Prior, Sample, estimate_configuration, prior_from_history
from estimator.objects import JOB_DECODER, POD_DECODER, sample_pod
from estimator.planner import CreateSample, SampleKey, SamplePod, decide
from estimator.sample_pod import build_sample_pod
from estimator.sampling import plan
from placer.configuration import parse_configurations
from scheduler.config import EstimatorSettings
from scheduler.errors import InvalidAnnotation
from tests.estimator.test_controller import RecordingApi, controller, finished
from tests.estimator.test_review_62 import CREATED_AT, Clock, started

# ------------------------------------------------------------------ runs timed at 0 s


def test_a_report_of_zero_seconds_does_not_make_a_zero_estimate():
    """A run of 200 iterations took time: ``"seconds": 0`` says the workload's clock did not
    tick over it (an integer clock). Read as is, the Job was estimated at 0 s, written as
    0.001 s, and AlloX ran it as the shortest Job of all."""
    reports = [parse_sample_report(f'{{"iterations": {k}, "seconds": 0}}') for k in (200, 400)]
    estimate = estimate_configuration("gpu", [r.sample(configuration="gpu", pilot=0) for r in reports], iterations=20_000)
    assert estimate.seconds >= 10.0
    # A clock that ticks keeps its reading to the last digit.
    assert parse_sample_report('{"iterations": 200, "seconds": 0.0004}').sample(configuration="gpu", pilot=0).resolution_seconds == 0


def test_runs_timed_by_their_containers_at_zero_seconds_do_not_make_a_zero_estimate():
    """Container start and finish times are whole seconds: two sub-second runs of 200 and 400
    iterations both read 0 s. The Job is 100 times the long run, whose true time is anywhere in
    [0, 1) s; the estimate was 0 s (written 0.001 s)."""
    timed = [Sample("gpu", 200, 0.0, resolution_seconds=1.0), Sample("gpu", 400, 0.0, resolution_seconds=1.0)]
    estimate = estimate_configuration("gpu", timed, iterations=20_000)
    samples = {"gpu": [("short", timed[0]), ("long", timed[1])]}
    written = parse_estimate(encode_estimate({"gpu": estimate}, samples=samples, overhead_fraction=None)).seconds["gpu"]
    # Half a second each (the middle of what the clock allows), extrapolated: tens of seconds.
    assert written >= 10.0
    assert estimate.uncertainty_seconds > 0
    assert json.loads(encode_estimate({"gpu": estimate}, samples=samples, overhead_fraction=None))["gpu"]["samples"][0]["seconds"] == 0.0


# ------------------------------------------------------------------ a pilot stopped as long


def test_a_pilot_stopped_as_long_counts_beside_one_that_finished():
    """A wide Job's two CPU pilots: pilot 0 ran 100 and 200 iterations in 10 s and 20 s; pilot 3
    (a slow node, a skewed shard) was still running its 200 iterations after 300 s and was
    stopped as long. Pilot 3's pod needs at least 300 s · 10,000 / 200 = 15,000 s; the estimate
    was pilot 0's 1,000 s alone, ± 44 s, as if the straggler had not been seen."""
    samples = [
        Sample("cpu", 100, 10.0, pilot=0), Sample("cpu", 200, 20.0, pilot=0),
        Sample("cpu", 200, 300.0, pilot=3, complete=False),
    ]
    estimate = estimate_configuration("cpu", samples, iterations=10_000)
    assert estimate.pod_seconds >= (1_000 + 15_000) / 2
    assert estimate.method == "lower-bound"


def test_a_long_run_stopped_beside_its_finished_short_run_bounds_the_pilot():
    """Both lengths at once (``shortAfterLong: false``): the short run finished in 10 s, the long
    one was stopped after 400 s at 200 iterations (it slowed down: swapping, a throttled GPU).
    The pilot's run was the short one's extrapolation, 1,000 s, under the 20,000 s the long run
    proved."""
    samples = [Sample("cpu", 100, 10.0), Sample("cpu", 200, 400.0, complete=False)]
    estimate = estimate_configuration("cpu", samples, iterations=10_000)
    assert estimate.pod_seconds >= 20_000
    assert estimate.method == "lower-bound"


def test_a_run_stopped_as_long_is_not_made_shorter_by_its_family_history():
    """Nothing of the configuration finished: its one run was stopped after 300 s at 200 of
    10,000 iterations (≥ 15,000 s). The family's history (0.01 s an iteration: 100 s) stood
    for the estimate instead of what the run proved."""
    stopped = [Sample("cpu", 200, 300.0, complete=False)]
    prior = Prior(mean_per_iteration=0.01, std_per_iteration=0.001, count=5)
    estimate = estimate_configuration("cpu", stopped, iterations=10_000, prior=prior)
    assert (estimate.pod_seconds, estimate.method) == (15_000, "lower-bound")
    # A history slower than the bound still stands: it says more than "at least".
    slower = Prior(mean_per_iteration=2.0, std_per_iteration=0.1, count=5)
    assert estimate_configuration("cpu", stopped, iterations=10_000, prior=slower).method == "history"


# ------------------------------------------------------------------ the proportional fit's certainty


def test_a_proportional_estimate_does_not_claim_the_certainty_of_its_clock():
    """One length only (the long run finished without a split and its short run failed three
    times): 200 iterations in 32 s, of which the start-up is any part, so the 10,000 iterations
    take anywhere from 32 s (all start-up) to 1,600 s (none). The estimate said 1,600 ± 32 s:
    the 2% timing noise, as if the start-up were known to be 0. A GPU Job with 30 s of CUDA
    start-up and 10 ms an iteration runs 130 s, 46 of those σ away."""
    estimate = estimate_configuration("gpu", [Sample("gpu", 200, 32.0)], iterations=10_000)
    assert estimate.method == "proportional"
    truth = 30.0 + 0.01 * 10_000
    assert estimate.seconds - truth <= 2 * estimate.uncertainty_seconds
    # At the sample's own length the start-up's share is no error: the clock's noise alone.
    assert estimate_configuration("gpu", [Sample("gpu", 200, 32.0)], iterations=200).uncertainty_seconds < 1.0


def test_a_negative_slope_across_two_start_ups_is_as_uncertain_as_it_is():
    """Two runs of a GPU Job that does not report its start-up: 30 s of start-up, 10 ms an
    iteration, 0.6 s of start-up jitter between the runs, so the longer run came out faster.
    Through the origin: 1,861 s for a Job of 130 s; the uncertainty must say so."""
    runs = [Sample("gpu", 100, 31.2), Sample("gpu", 200, 31.0)]
    estimate = estimate_configuration("gpu", runs, iterations=10_000)
    assert estimate.method == "proportional"
    assert estimate.seconds - 130.0 <= 2 * estimate.uncertainty_seconds


# ------------------------------------------------------------------ the sampling pod


def test_an_indexed_jobs_sampling_pod_carries_its_completion_index_where_the_downward_api_reads_it():
    """Kubernetes' own Indexed Job example reads the index through the downward API, from the pod
    annotation ``batch.kubernetes.io/job-completion-index``. The sampling pod carried only the
    JOB_COMPLETION_INDEX variable: the workload read an empty index, and each attempt failed."""
    template = {"spec": {"containers": [{
        "name": "worker", "image": "train",
        "env": [{"name": "SHARD", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}],
    }]}}
    configuration = parse_configurations('{"gpu": {"resources": {"nvidia.com/gpu": "1"}}}')["gpu"]
    run = CreateSample(key=SampleKey(configuration="gpu", pilot=7, length="long"), attempt=0, iterations=200)
    body = build_sample_pod(
        job_name="shards", job_namespace="ml", job_uid="0123456789ab", template=template, configuration=configuration,
        run=run, indexed=True, scheduler_name="cellfit", priority_class_name=None,
    )
    assert body["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "7"
    # A Job that is not Indexed has no index to give.
    plain = build_sample_pod(
        job_name="shards", job_namespace="ml", job_uid="0123456789ab", template=template, configuration=configuration,
        run=run, indexed=False, scheduler_name="cellfit", priority_class_name=None,
    )
    assert "batch.kubernetes.io/job-completion-index" not in plain["metadata"]["annotations"]


# ------------------------------------------------------------------ reports beyond any machine


def test_a_peak_memory_beyond_any_machine_is_refused_naming_the_field():
    """``peakMemoryBytes`` took any integer: 10^400 (4 KiB of termination message hold it) read,
    and the estimate then raised OverflowError on every pass, the Job never estimated."""
    with pytest.raises(InvalidAnnotation, match=r"terminationMessage\.peakMemoryBytes"):
        parse_sample_report('{"iterations": 200, "seconds": 2.0, "peakMemoryBytes": 1' + "0" * 400 + "}")
    # The largest a machine has, and then some, still reads.
    assert parse_sample_report('{"iterations": 200, "seconds": 2.0, "peakMemoryBytes": 1099511627776}').peak_memory_bytes == 2**40


# ------------------------------------------------------------------ left to the controller and objects.py


def test_pods_of_another_namespace_labelled_with_a_jobs_uid_are_not_its_samples():
    """Anyone who can read a Job's UID and create pods anywhere can finish its sampling: pods in
    another namespace, owned by nobody, labelled with the Job's UID and carrying the sample
    annotations, each reporting 1 ms. The Job was estimated from them: 0.05 s a configuration."""
    api, estimator = started("victim", Clock(CREATED_AT + 60))
    spoofs = []
    for body in api.created:
        fake = json.loads(json.dumps(body))
        fake["metadata"]["namespace"] = "elsewhere"
        del fake["metadata"]["ownerReferences"]
        spoofs.append(finished(fake, 0.001, splits=[[10, 0.0005]]))
    estimator._replace_pods(spoofs)
    estimator.reconcile()
    assert not [a for _, a in api.annotations if "cellfit.io/estimate" in a]


def test_a_users_own_estimate_does_not_set_its_familys_task_spread():
    """A user-set estimate (no ``method``) with ``taskCov: 1000`` on a finished Job of family
    ``mlp``: the family's task spread became 1000, which floors σ1 of every later Job of the
    family at 1000 times its mean, so their own samples no longer count beside the history."""
    api = RecordingApi()
    estimator = controller(api)
    body = {"metadata": {"name": "done", "namespace": "ml", "uid": "u-done", "labels": {"cellfit.io/job-family": "mlp"},
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": '{"cpu": {"resources": {"cpu": "1"}}, "gpu": {"resources": {"nvidia.com/gpu": "1"}}}',
                                         "cellfit.io/iterations": "1000", "cellfit.io/placement": "gpu",
                                         "cellfit.io/estimate": json.dumps({"gpu": {"seconds": 110.0, "taskCov": 1000.0}})}},
            "spec": {"suspend": False, "template": {"spec": {}}},
            "status": {"startTime": "2026-01-01T00:01:00Z", "completionTime": "2026-01-01T00:02:40Z",
                       "conditions": [{"type": "Complete", "status": "True"}]}}
    estimator._replace_jobs([JOB_DECODER.decode(json.dumps(body).encode())])
    estimator.reconcile()
    assert estimator.inspect()["families"] == {"ml/mlp/gpu": 1}  # its real runtime counts
    assert not list(estimator._task_spread.get(("ml", "mlp", "gpu"), ()))


# A long sample's annotations, as cellfit writes them on the sampling pod it creates.
LONG_SAMPLE_NOTES = {
    "cellfit.io/sample-configuration": "gpu", "cellfit.io/sample-pilot": "0", "cellfit.io/sample-length": "long",
    "cellfit.io/sample-attempt": "0", "cellfit.io/sample-iterations": "20",
}


def test_a_sample_whose_workload_reported_while_its_sidecar_runs_has_ended():
    """A mesh or log sidecar injected as an ordinary container (istio-proxy) never exits: the
    pod stays Running after the trainer wrote its report and exited 0. The sample counted as
    running until stopped as long, or for ever while no other sample had finished."""
    report = json.dumps({"iterations": 20, "seconds": 12.25})
    body = {"metadata": {"name": "p", "annotations": LONG_SAMPLE_NOTES},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z", "containerStatuses": [
                {"name": "istio-proxy", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
                {"name": "trainer", "state": {"terminated": {"exitCode": 0, "message": report}}},
            ]}}
    view = sample_pod(POD_DECODER.decode(json.dumps(body).encode()), now=100.0, stopped_seconds=None,
                      pending_limit_seconds=EstimatorSettings().pending_limit_seconds)
    assert view is not None and view.state == "succeeded" and view.sample is not None and view.sample.seconds == 12.25


# ------------------------------------------------------------------ a posterior shorter than its samples


def test_the_family_history_does_not_make_a_job_shorter_than_its_own_sample_ran():
    """This Job's sample ran 200 of its 10,000 iterations in 32 s (30 s of start-up); its
    family's two past Jobs ran 1.0 and 1.1 ms an iteration (their images cached, their start-up
    short). The posterior said 31.4 s for the whole run: less than its first 2% took."""
    run = [Sample("gpu", 200, 32.0, startup_seconds=30.0, splits=((100, 31.0),))]
    history = prior_from_history([0.001, 0.0011])
    assert history is not None
    estimate = estimate_configuration("gpu", run, iterations=10_000, prior=history)
    assert estimate.method == "posterior"
    assert estimate.pod_seconds >= 32.0


# ------------------------------------------------------------------ a configuration that failed


def test_a_configuration_whose_every_run_failed_is_not_estimated_from_its_familys_history():
    """The GPU runs, long and short, were OOMKilled three times each (this Job's batch does not fit the GPU its family
    used to fit); the family's history said 0.1 s an iteration on GPU. The GPU configuration
    was estimated from that history, 100 s, faster than the CPU: AlloX started the Job on the
    GPU, where it fails."""
    lengths = plan(job_uid="uid-oom", iterations=1000, pods=1, ratio=0.03).iterations
    pods = [
        SamplePod(name=f"gpu-{length}-{a}", key=SampleKey(configuration="gpu", pilot=0, length=length), attempt=a, state="failed",
                  failure="OOMKilled (exit code 137)")
        for length in ("long", "short") for a in range(3)
    ] + [
        SamplePod(name="cpu-long-0", key=SampleKey(configuration="cpu", pilot=0, length="long"), attempt=0, state="succeeded",
                  sample=Sample("cpu", lengths["long"], 4.0 + 2.0 * lengths["long"], splits=((lengths["short"], 4.0 + 2.0 * lengths["short"]),)))
    ]
    history = {"gpu": Prior(mean_per_iteration=0.1, std_per_iteration=0.02, count=2)}
    decision = decide(
        configurations=("cpu", "gpu"), plan=plan(job_uid="uid-oom", iterations=1000, pods=1, ratio=0.03), job_iterations=1000,
        waves=1, pods=pods, priors=history,
    )
    assert decision.done and decision.estimates is not None
    assert set(decision.estimates) == {"cpu"}
    assert "OOMKilled" in decision.failed["gpu"]


def test_a_running_samples_time_does_not_count_its_image_pull():
    """A node without the image cached pulls it for 3 minutes (a CUDA image of several GB); the
    trainer then starts. The pod's ``startTime`` is when the kubelet took the pod, before the
    pull: the run counted as 190 s old 10 s after it started, past the 120 s a long-sample
    deadline allows at least, so it was stopped as long and its "lower bound" (190 s · N/k)
    held the pull, multiplied by N/k."""
    body = {"metadata": {"name": "p", "annotations": LONG_SAMPLE_NOTES},
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z", "containerStatuses": [
                {"name": "trainer", "state": {"running": {"startedAt": "2026-01-01T00:03:00Z"}}},
            ]}}
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    view = sample_pod(POD_DECODER.decode(json.dumps(body).encode()), now=start + 190.0, stopped_seconds=None,
                      pending_limit_seconds=EstimatorSettings().pending_limit_seconds)
    assert view is not None and view.running_seconds is not None and view.running_seconds <= 10.0


def test_a_template_preemption_policy_does_not_get_the_sampling_pod_refused():
    """A template that names its own ``preemptionPolicy`` (PreemptLowerPriority, with the user's
    PriorityClass): the sampling pod kept it beside cellfit's class, whose policy is Never, and
    the API server's priority admission refuses such a pod (403, "must not be provided in pod
    spec"): every attempt of every configuration, and the Job never estimated."""
    template = {"spec": {"priorityClassName": "team-high", "priority": 1000, "preemptionPolicy": "PreemptLowerPriority",
                         "containers": [{"name": "trainer", "image": "train"}]}}
    configuration = parse_configurations('{"cpu": {"resources": {"cpu": "4"}}}')["cpu"]
    run = CreateSample(key=SampleKey(configuration="cpu", pilot=0, length="long"), attempt=0, iterations=200)
    body = build_sample_pod(
        job_name="train", job_namespace="ml", job_uid="0123456789ab", template=template, configuration=configuration,
        run=run, indexed=False, scheduler_name="cellfit", priority_class_name="cellfit-sampling",
    )
    assert body["spec"]["priorityClassName"] == "cellfit-sampling"
    assert "priority" not in body["spec"] and "preemptionPolicy" not in body["spec"]
