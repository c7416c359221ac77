"""AlloX admission under HiveD on a real control plane (issue 13: "Under HiveD, a GPU
configuration uses only what the Job's VC may use, and HiveD still places the pods"), and a Job
of two pods placed on two GPUs.

Two fake nodes of 2 GPUs and 64 cores; cellfit runs the hived policy with a written topology (one
node-level cell per node, so other modules' nodes stay outside) and two virtual clusters,
``vision`` and ``speech``, of one node each; ``allox.nodeSelector`` limits AlloX to the two
nodes. Interchangeable Jobs carry their VC in the pod template's ``cellfit.io/virtual-cluster``
label and a user-set estimate; KWOK plays the run time (``cellfit.io/e2e-run-for`` in each
configuration's annotations).

(a) A guaranteed pod of ``vision`` holds both of vision's GPUs (its whole quota); speech's two
    GPUs are idle. A Job of vision (5 s on a GPU, 20 s on a CPU) starts on CPU: AlloX counts
    only vision's free guarantee, not speech's idle GPUs. A Job of speech starts on a GPU, and
    HiveD binds its pod in speech's cell (bind-info ``vc: speech``). A GPU-only Job of vision
    waits (``Placed=False``, ``WaitingForQuota``) until vision's holder is deleted, then starts
    on a GPU and HiveD binds it in vision's cell.
(b) A Job of parallelism 2 (10 s on a GPU, 600 s on a CPU) of speech starts on the GPU
    configuration with both pods at once; each pod carries exactly that configuration's
    resources and is bound by HiveD in speech's cell, on its own GPU.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest
import yaml

from chart_support import (
    CellfitProcess,
    Cluster,
    Release,
    Scenarios,
    allox_extender,
    assert_no_double_booking,
    ensure_release,
    gpu_pod,
    is_active,
    wait_for,
)
from test_allox_admission import completed, get_job, interchangeable_job

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
SCENARIOS = Scenarios("allox-")
SCENARIO = SCENARIOS.name("hived")
WHERE = SCENARIOS.selector("hived")
NODES = [SCENARIOS.node("hived", index) for index in range(2)]


def cells_config() -> dict[str, Any]:
    return {
        "topology": {
            "cellTypes": {"E2E-NODE": {"childType": "E2E-GPU", "childCount": 2, "isNodeLevel": True}},
            "physicalCells": [{"cellType": "E2E-NODE", "nodeName": node} for node in NODES],
        },
        "virtualClusters": {"vision": [{"cellType": "E2E-NODE", "count": 1}], "speech": [{"cellType": "E2E-NODE", "count": 1}]},
    }


@pytest.fixture(scope="module")
def env(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Release, CellfitProcess, Any]]:
    cluster = Cluster.from_control_plane(control_plane)
    release = ensure_release(cluster)
    cluster.add_gpu_nodes(2, f"{SCENARIO}-gpu", labels=WHERE, gpus=2)  # before cellfit: the topology names them
    release_config = yaml.safe_load(release.cellfit_config_text)
    sections = {"policy": {**release_config.get("policy", {}), "name": "hived"},
                "cells": {**release_config.get("cells", {}), **cells_config()}}
    allox = {"alpha": 1.0, "debounceSeconds": 1.0, "resyncSeconds": 2, "omegaGridSeconds": 0}
    try:
        with allox_extender(cluster, release, tmp_path_factory.mktemp(SCENARIO), name=SCENARIO, where=WHERE, allox=allox,
                            sections=sections) as cellfit:
            yield cluster, release, cellfit, control_plane
    finally:
        SCENARIOS.delete_nodes(cluster, ["hived"])


def vc_job(name: str, scheduler_name: str, vc: str, *, cpu_seconds: float | None, gpu_seconds: float,
           parallelism: int = 1) -> dict[str, Any]:
    body = interchangeable_job(name, scheduler_name, cpu_seconds or 600, gpu_seconds)
    if cpu_seconds is None:  # an estimate for the GPU configuration alone: it cannot run on CPU
        body["metadata"]["annotations"]["cellfit.io/estimate"] = json.dumps({"gpu": {"seconds": gpu_seconds}})
    body["metadata"]["labels"] = dict(WHERE)
    body["spec"]["template"]["metadata"]["labels"] = {**WHERE, "cellfit.io/virtual-cluster": vc}
    body["spec"]["template"]["spec"]["nodeSelector"] = dict(WHERE)
    if parallelism > 1:
        body["spec"]["parallelism"] = parallelism
        body["spec"]["completions"] = parallelism
    return body


def placed_condition(job: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in job.get("status", {}).get("conditions") or [] if c["type"] == "Placed"), {})


def bind_info(pod: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(pod["metadata"].get("annotations", {}).get("cellfit.io/bind-info", "{}")))


def job_pods(cluster: Cluster, ns: str, name: str) -> list[dict[str, Any]]:
    return cluster.pods(ns, f"batch.kubernetes.io/job-name={name}")


def done(cluster: Cluster, ns: str, name: str, timeout: float) -> dict[str, Any]:
    return dict(wait_for(lambda: (lambda j: j if completed(j) else None)(get_job(cluster, ns, name)), timeout, f"{name} completed"))


def diagnosis(cluster: Cluster, ns: str, cellfit: CellfitProcess) -> str:
    lines = []
    for job in cluster.kubectl_json("-n", ns, "get", "jobs")["items"]:
        lines.append(f"{job['metadata']['name']}: suspend={job['spec'].get('suspend')} "
                     f"placement={job['metadata'].get('annotations', {}).get('cellfit.io/placement')} {placed_condition(job)}")
    for pod in cluster.pods(ns):
        lines.append(f"  pod {pod['metadata']['name']}: {pod['status'].get('phase')} on {pod['spec'].get('nodeName')} {bind_info(pod)}")
    return "\n".join(lines) + f"\n/v1/inspect/allox: {json.dumps(cellfit.get('/v1/inspect/allox'))[:1500]}\ncellfit's log:\n{cellfit.tail(20)}"


def test_a_job_uses_only_its_vcs_guarantee_and_hived_binds_it_there(env: Any) -> None:
    cluster, release, cellfit, cp = env
    ns = cp.create_namespace("allox-hived")
    scheduler = release.scheduler_name
    holder = gpu_pod("vision-holder", scheduler_name=scheduler, node_selector=WHERE, gpus=2,
                     labels={"cellfit.io/virtual-cluster": "vision"})
    cluster.apply(holder, namespace=ns)
    held = wait_for(lambda: (lambda p: p if p["spec"].get("nodeName") and bind_info(p) else None)(
        cluster.kubectl_json("-n", ns, "get", "pod", "vision-holder")), 60, "vision's holder bound by HiveD")
    assert bind_info(held)["vc"] == "vision"
    vision_node = held["spec"]["nodeName"]
    (speech_node,) = [n for n in NODES if n != vision_node]

    try:
        # vision's guarantee is all in use, speech's GPUs are idle: vision's Job runs on CPU.
        cluster.apply(vc_job("v-cpu", scheduler, "vision", cpu_seconds=20, gpu_seconds=5), namespace=ns)
        job = done(cluster, ns, "v-cpu", 120)
        assert job["metadata"]["annotations"]["cellfit.io/placement"] == "cpu"
        (pod,) = job_pods(cluster, ns, "v-cpu")
        assert "nvidia.com/gpu" not in json.dumps(pod["spec"]["containers"][0]["resources"])

        # speech's Job takes a GPU of speech, placed by HiveD in speech's cell.
        cluster.apply(vc_job("s-gpu", scheduler, "speech", cpu_seconds=20, gpu_seconds=5), namespace=ns)
        job = done(cluster, ns, "s-gpu", 120)
        assert job["metadata"]["annotations"]["cellfit.io/placement"] == "gpu"
        (pod,) = job_pods(cluster, ns, "s-gpu")
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
        info = bind_info(pod)
        assert info["vc"] == "speech" and info["priority"] == "guaranteed" and pod["spec"]["nodeName"] == speech_node, info

        # A GPU-only Job of vision waits for vision's GPUs, though speech's are idle.
        cluster.apply(vc_job("v-gpu", scheduler, "vision", cpu_seconds=None, gpu_seconds=5), namespace=ns)
        condition = wait_for(lambda: (lambda c: c if c.get("reason") == "WaitingForQuota" else None)(
            placed_condition(get_job(cluster, ns, "v-gpu"))), 60, "v-gpu waiting for vision's quota")
        assert "virtual cluster 'vision'" in condition["message"], condition
        assert get_job(cluster, ns, "v-gpu")["spec"]["suspend"] is True and not job_pods(cluster, ns, "v-gpu")
        view = cellfit.get("/v1/inspect/allox")
        assert f"{ns}/v-gpu" in view["lastDecision"]["waitingForQuota"], view["lastDecision"]

        # vision's holder goes: vision's Job starts on a GPU, in a cell of vision's (HiveD's
        # buddy allocator binds either node's cell now that both are free).
        cluster.kubectl("-n", ns, "delete", "pod", "vision-holder", "--wait=true", timeout=120)
        job = done(cluster, ns, "v-gpu", 120)
        assert job["metadata"]["annotations"]["cellfit.io/placement"] == "gpu"
        (pod,) = job_pods(cluster, ns, "v-gpu")
        info = bind_info(pod)
        assert info["vc"] == "vision" and info["priority"] == "guaranteed", info
    except AssertionError as error:
        raise AssertionError(f"{error}\n{diagnosis(cluster, ns, cellfit)}") from None


def test_a_job_of_two_pods_starts_on_two_gpus_of_its_vc_in_the_gpu_configuration(env: Any) -> None:
    cluster, release, cellfit, cp = env
    ns = cp.create_namespace("allox-pair")
    try:
        cluster.apply(vc_job("pair", release.scheduler_name, "speech", cpu_seconds=600, gpu_seconds=10, parallelism=2), namespace=ns)
        # Both pods run at once, each on its own GPU of speech's cell.
        both = wait_for(lambda: (lambda pods: pods if len(pods) == 2 and all(p["spec"].get("nodeName") and bind_info(p) for p in pods) else None)(
            [p for p in job_pods(cluster, ns, "pair") if is_active(p)]), 90, "both pods of the pair bound")
        assert_no_double_booking(both, gpus_per_node=2)
        for pod in both:
            (container,) = pod["spec"]["containers"]
            assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
            assert {k: container["resources"]["requests"].get(k) for k in ("cpu", "memory")} == {"cpu": "1", "memory": "4Gi"}
            assert pod["metadata"]["labels"]["cellfit.io/placement"] == "gpu"
            assert bind_info(pod)["vc"] == "speech"
        job = done(cluster, ns, "pair", 120)
        assert job["metadata"]["annotations"]["cellfit.io/placement"] == "gpu"
        assert len(job_pods(cluster, ns, "pair")) == 2  # exactly once: no pod recreated
        (event,) = [e["message"] for e in cluster.events(ns, "pair", kind="Job") if e["reason"] == "Placed"]
        assert "started on gpu" in event
    except AssertionError as error:
        raise AssertionError(f"{error}\n{diagnosis(cluster, ns, cellfit)}") from None
