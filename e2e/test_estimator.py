"""The sampling-pod estimator on a real control plane (issue: sampling-pod estimator).

A user applies an interchangeable Job (suspended, ``cellfit.io/configurations``,
``cellfit.io/iterations``). cellfit creates its sampling pods, kube-scheduler places them through
cellfit, they complete, and the Job gets ``cellfit.io/estimate``, an Event and the ``Estimated``
condition.

KWOK nodes run no process, so the stage ``e2e/cluster/stages/pod-sample-complete.yaml`` plays the
workload: a sampling pod of k iterations finishes a + b·k seconds after it starts (a and b are the
configuration's annotations ``cellfit.io/e2e-startup-seconds`` and
``cellfit.io/e2e-seconds-per-iteration``) and leaves the termination message the training program
would write, with the split the long run was asked for (the time reached at the short length,
as train.py reports it) unless the configuration says its workload reports none. The estimate
must match the played durations of the whole run (a + b·N). cellfit runs with the chart's config
and RBAC (the extender's ServiceAccount token).
"""

from __future__ import annotations

import json
import time
from typing import Any, Collection, Iterator

import pytest

from chart_support import (
    KWOK_TOLERATION,
    CellfitProcess,
    Cluster,
    Release,
    Scenarios,
    ensure_release,
    local_extender,
    wait_for,
)

pytestmark = pytest.mark.e2e
SCENARIOS = Scenarios("estimator-")
WHERE = SCENARIOS.selector("sampling")
ITERATIONS = 500  # samples of 5 and 10 iterations (1% and 2%): one run of 10 with a split at 5
PLAYED = {"cpu": (1.0, 0.2), "gpu": (2.0, 0.05)}  # start-up a, seconds per iteration b


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, CellfitProcess, Any]]:
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    SCENARIOS.add_nodes(cluster, "sampling", 2)
    try:
        with local_extender(cluster, release, tmp_path_factory.mktemp("estimator"), name="estimator") as cellfit:
            yield cluster, release, cellfit, control_plane
    finally:
        SCENARIOS.delete_nodes(cluster, ["sampling"])
        # The chart's AlloX admission starts estimated Jobs: left behind, they would stay in the
        # queue of every later module's cellfit, holding its machines as running Jobs.
        for namespace in cluster.kubectl("get", "namespaces", "-o", "name").stdout.split():
            if namespace.startswith("namespace/estimate-"):
                cluster.kubectl("-n", namespace.split("/", 1)[1], "delete", "jobs", "--all", "--wait=false", check=False)


def configurations(
    *, played: dict[str, tuple[float, float]] = PLAYED, message: bool = True, splits: Collection[str] = ("cpu", "gpu")
) -> dict[str, Any]:
    """``splits``: the configurations whose workload reports the split it is asked for."""

    def annotations(kind: str) -> dict[str, str]:
        startup, per_iteration = played[kind]
        notes = {"cellfit.io/e2e-startup-seconds": str(startup), "cellfit.io/e2e-seconds-per-iteration": str(per_iteration)}
        if not message:
            notes["cellfit.io/e2e-termination-message"] = "false"
        if kind not in splits:
            notes["cellfit.io/e2e-splits"] = "false"
        return notes

    return {
        "cpu": {"resources": {"cpu": "4", "memory": "8Gi"}, "env": {"OMP_NUM_THREADS": "4"}, "annotations": annotations("cpu")},
        "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1", "memory": "4Gi"}, "annotations": annotations("gpu")},
    }


def interchangeable_job(name: str, scheduler_name: str, *, configs: Any = None, iterations: int | str = ITERATIONS) -> dict[str, Any]:
    annotations = {
        "cellfit.io/configurations": configs if isinstance(configs, str) else json.dumps(configs or configurations()),
        "cellfit.io/iterations": str(iterations),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "schedulerName": scheduler_name,
                    "restartPolicy": "Never",
                    "tolerations": [KWOK_TOLERATION],
                    "nodeSelector": dict(WHERE),
                    # Written for GPUs: the cpu configuration's pods must not keep this limit.
                    "containers": [{"name": "train", "image": "trainer:fake",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                },
            },
        },
    }


def sampling_pods(cluster: Cluster, ns: str, job_uid: str) -> list[dict[str, Any]]:
    return cluster.pods(ns, f"cellfit.io/sample-job={job_uid}")


def job(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    return cluster.kubectl_json("-n", ns, "get", "job", name, "-o", "json")


def estimate_of(cluster: Cluster, ns: str, name: str) -> dict[str, Any] | None:
    text = job(cluster, ns, name)["metadata"].get("annotations", {}).get("cellfit.io/estimate")
    return json.loads(text) if text else None


def test_interchangeable_job_is_sampled_on_both_configurations_and_estimated(env: Any) -> None:
    cluster, release, cellfit, cp = env
    ns = cp.create_namespace("estimate")
    # The gpu workload reports the split it is asked for; the cpu one does not, so its short run
    # follows its long one.
    cluster.apply(interchangeable_job("resnet", release.scheduler_name, configs=configurations(splits=("gpu",))), namespace=ns)
    uid = job(cluster, ns, "resnet")["metadata"]["uid"]

    estimate = wait_for(lambda: estimate_of(cluster, ns, "resnet"), 120, "the Job's cellfit.io/estimate")
    for kind, (startup, per_iteration) in PLAYED.items():
        truth = startup + per_iteration * ITERATIONS
        assert estimate[kind]["seconds"] == pytest.approx(truth, rel=0.10), (kind, estimate[kind])
        assert estimate[kind]["method"] == "samples"
    assert [(s["iterations"], s.get("splits")) for s in estimate["gpu"]["samples"]] == [(10, [[5, pytest.approx(2.25)]])]
    assert [(s["iterations"], s.get("splits")) for s in estimate["cpu"]["samples"]] == [(10, None), (5, None)]

    pods = sampling_pods(cluster, ns, uid)
    assert len(pods) == 3 and {p["status"]["phase"] for p in pods} == {"Succeeded"}
    for pod in pods:
        kind = pod["metadata"]["annotations"]["cellfit.io/sample-configuration"]
        (container,) = pod["spec"]["containers"]
        assert pod["spec"]["nodeName"], "placed by kube-scheduler through cellfit"
        assert pod["spec"]["priorityClassName"] == "cellfit-sampling"
        env_vars = {e["name"]: e["value"] for e in container.get("env", [])}
        assert env_vars["CELLFIT_SAMPLE_ITERATIONS"] in ("5", "10")
        if env_vars["CELLFIT_SAMPLE_ITERATIONS"] == "10":  # a long run: asked for the short length's time
            assert env_vars["CELLFIT_SAMPLE_SPLIT_ITERATIONS"] == "5"
        if kind == "cpu":  # exactly the configuration: the template's GPU limit is gone
            assert container["resources"] == {"requests": {"cpu": "4", "memory": "8Gi"}}
            assert env_vars["OMP_NUM_THREADS"] == "4"
        else:
            assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
        assert pod["metadata"]["ownerReferences"][0]["uid"] == uid
        assert "job-name" not in pod["metadata"]["labels"], "the Job controller must not count it"

    condition = next(c for c in job(cluster, ns, "resnet")["status"]["conditions"] if c["type"] == "Estimated")
    assert condition["status"] == "True"
    events = [e for e in cluster.events(ns, "resnet", kind="Job") if e["reason"] == "Estimated"]
    assert events and "from 3 samples" in events[0]["message"]
    view = cellfit.get("/v1/inspect/estimates")
    (mine,) = [j for j in view["jobs"] if j["namespace"] == ns]
    assert mine["state"] == "estimated"
    # The estimator never starts the Job itself; AlloX admission (on in the chart) may start it
    # once estimated, and then it says so with its placement.
    after = job(cluster, ns, "resnet")
    assert after["spec"]["suspend"] is True or "cellfit.io/placement" in after["metadata"]["annotations"]


def test_without_a_termination_message_the_container_times_are_used(env: Any) -> None:
    cluster, release, _, cp = env
    ns = cp.create_namespace("estimate-times")
    # Whole-second timestamps put about 0.6 s of error on the difference of two sample times,
    # which the fit extrapolates N / (k_long - k_short) = 100 times: samples of 20 and 40
    # iterations run 10 s apart on either configuration, so the slope is known to ~6% (with
    # 5 and 10 iterations, 2 s apart, it was off by more than 35% about one run in four).
    iterations = 2000
    played = {"cpu": (1.0, 0.5), "gpu": (2.0, 0.4)}  # long 21 s / 18 s, then short 11 s / 10 s
    body = interchangeable_job("bert", release.scheduler_name, configs=configurations(played=played, message=False), iterations=iterations)
    cluster.apply(body, namespace=ns)
    estimate = wait_for(lambda: estimate_of(cluster, ns, "bert"), 150, "the Job's cellfit.io/estimate")
    for kind, (startup, per_iteration) in played.items():
        truth = startup + per_iteration * iterations
        assert estimate[kind]["seconds"] == pytest.approx(truth, rel=0.35), (kind, estimate[kind])
        assert estimate[kind]["uncertaintySeconds"] > 0.05 * truth, "second resolution must show in the uncertainty"


def test_invalid_configurations_are_reported_and_nothing_is_sampled(env: Any) -> None:
    cluster, release, _, cp = env
    ns = cp.create_namespace("estimate-invalid")
    cluster.apply(interchangeable_job("bad", release.scheduler_name, configs='{"gpu": {"resources": {"nvidia.com/gpu": "one"}}}'), namespace=ns)
    uid = job(cluster, ns, "bad")["metadata"]["uid"]

    def reported() -> dict[str, Any] | None:
        conditions = job(cluster, ns, "bad").get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Estimated"), None)

    condition = wait_for(reported, 60, "the Estimated condition")
    assert condition["status"] == "False" and condition["reason"] == "InvalidSpec"
    assert "cellfit.io/configurations.gpu.resources.nvidia.com/gpu" in condition["message"]
    events = [e for e in cluster.events(ns, "bad", kind="Job") if e["reason"] == "InvalidInterchangeableJob"]
    assert events and events[0]["type"] == "Warning"
    assert sampling_pods(cluster, ns, uid) == []


def test_a_job_deleted_mid_sampling_leaves_no_pod(env: Any) -> None:
    cluster, release, _, cp = env
    ns = cp.create_namespace("estimate-delete")
    slow = {"cpu": (1.0, 30.0), "gpu": (1.0, 30.0)}  # samples of minutes
    cluster.apply(interchangeable_job("long", release.scheduler_name, configs=configurations(played=slow)), namespace=ns)
    uid = job(cluster, ns, "long")["metadata"]["uid"]
    wait_for(lambda: len([p for p in sampling_pods(cluster, ns, uid) if p["status"].get("phase") == "Running"]) == 2, 90,
             "both long sampling runs running")
    cluster.kubectl("-n", ns, "delete", "job", "long", "--wait=false")
    wait_for(lambda: sampling_pods(cluster, ns, uid) == [], 60, "every sampling pod gone")


def test_a_restart_mid_sampling_loses_no_sample_and_starts_none_twice(env: Any) -> None:
    cluster, release, cellfit, cp = env
    ns = cp.create_namespace("estimate-restart")
    played = {"cpu": (1.0, 1.0), "gpu": (2.0, 0.5)}  # samples of 4-11 s
    cluster.apply(interchangeable_job("resume", release.scheduler_name, configs=configurations(played=played)), namespace=ns)
    uid = job(cluster, ns, "resume")["metadata"]["uid"]
    wait_for(lambda: len(sampling_pods(cluster, ns, uid)) == 2, 60, "both long sampling runs created")
    created = {p["metadata"]["name"]: p["metadata"]["uid"] for p in sampling_pods(cluster, ns, uid)}
    cellfit.stop()
    time.sleep(12)  # the samples finish while cellfit is down
    cellfit.start()
    estimate = wait_for(lambda: estimate_of(cluster, ns, "resume"), 120, "the estimate after the restart")
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in sampling_pods(cluster, ns, uid)}
    assert after == created, "the restarted controller created or replaced sampling pods"
    for kind, (startup, per_iteration) in played.items():
        assert estimate[kind]["seconds"] == pytest.approx(startup + per_iteration * ITERATIONS, rel=0.10)
        assert len(estimate[kind]["samples"]) == 1  # the long run and its split
