"""Sampling a configuration no node could ever run, and a sample the scheduler cannot place
(hand session, H2): a suspended Job's ``"cpu": "200"`` configuration on 64-core nodes, and under
HiveD a GPU configuration without a ``cellfit.io/virtual-cluster`` label, each got sampling pods
that stayed Pending (``4 Insufficient cpu``; the extender's "the pod has no
cellfit.io/virtual-cluster label") and held ``estimator.maxClusterShare`` for up to
``pendingLimitSeconds`` x ``maxAttempts``, every other tenant's Job "waiting for room for its
sampling pods". Now such a configuration is not sampled (an Event and, with none left, the
condition, naming the field), a sample unschedulable for ``UNSCHEDULABLE_GRACE_SECONDS`` stops
counting against the budget (up to as much again), and samples run on ``allox.nodeSelector``'s
nodes (H3)."""

from __future__ import annotations

import json
import time
from typing import Any, Mapping

from estimator.controller import NODE_RETURN_SECONDS, UNSCHEDULABLE_GRACE_SECONDS, EstimatorController
from estimator.objects import POD_DECODER
from scheduler.cells import HivedEngine
from scheduler.core.resources import Resources
from scheduler.extender.validation import LiveCells, configured_pod_problems
from scheduler.kubectl.why import _sample
from tests.cells.helpers import rack_cluster
from tests.estimator.test_controller import RecordingApi, controller, finished, job, pending
from tests.estimator.test_review_62 import DeletingApi

GIB = 2**30
NODE = Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=4)
POOL = {"pool": "allox"}


def estimator(api: RecordingApi, *, nodes: Mapping[tuple[tuple[str, str], ...], list[Resources]] | None = None,
              pool: Mapping[str, str] | None = None, never_placed: Any = None, cpus: int = 256, share: float = 0.1,
              clock: Any = time.time) -> EstimatorController:
    """An estimator whose nodes are ``nodes``: each node's allocatable, by the labels it carries."""
    by_labels = nodes if nodes is not None else {(): [NODE] * 4}

    def carrying(selector: Mapping[str, str]) -> list[Resources]:
        return [size for labels, sizes in by_labels.items() if all(dict(labels).get(k) == v for k, v in selector.items())
                for size in sizes]

    return controller(api, cpus=cpus, share=share, gpus=16, clock=clock, pool=pool, nodes=carrying, never_placed=never_placed)


def kinds(api: RecordingApi) -> list[str]:
    return sorted(p["metadata"]["annotations"]["cellfit.io/sample-configuration"] for p in api.created)


def test_a_cpu_configuration_larger_than_every_node_is_not_sampled_and_the_job_is_told_the_field() -> None:
    api = RecordingApi()
    sampler = estimator(api)
    sampler._replace_jobs([job("big", cpu="200")])
    sampler.reconcile()
    assert kinds(api) == ["gpu"]  # the gpu configuration is sampled, the cpu one never starts
    said = [message for reason, message in api.events if reason == "ConfigurationNeverRuns"]
    assert said == ["cpu is not sampled: cellfit.io/configurations.cpu.resources: 200 cores a pod, more than any node has "
                    "(64 cores at most): no node could ever run it"]
    # It holds no budget: another tenant's Job is sampled in the same pass.
    other = RecordingApi()
    sampler = estimator(other, cpus=64)  # 6.4 cores of samples: a 200-core one was "always allowed" and held them all
    sampler._replace_jobs([job("big", cpu="200", created="2026-01-01T00:00:00Z"), job("small", created="2026-01-01T00:01:00Z")])
    sampler.reconcile()
    runs = sorted((p["metadata"]["ownerReferences"][0]["name"], p["metadata"]["annotations"]["cellfit.io/sample-configuration"])
                  for p in other.created)
    assert ("small", "cpu") in runs and ("big", "cpu") not in runs, runs


def test_a_job_none_of_whose_configurations_could_run_gets_the_condition_and_no_pod() -> None:
    api = RecordingApi()
    sampler = estimator(api, nodes={(): [Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=0)]})
    sampler._replace_jobs([job("nowhere", cpu="200")])
    sampler.reconcile()
    assert api.created == []
    (condition,) = api.conditions
    assert (condition["status"], condition["reason"]) == ("False", "NeverRuns")
    assert condition["message"] == (
        "nothing is sampled or started: cellfit.io/configurations.cpu.resources: 200 cores a pod, more than any node has "
        "(64 cores at most): no node could ever run it; cellfit.io/configurations.gpu.resources: 1 GPU a pod, more than any "
        "node has (0 GPUs at most): no node could ever run it")
    (view,) = sampler.inspect()["jobs"]
    assert view["state"] == "never-runs"


def test_each_resource_fits_some_node_but_none_holds_them_all() -> None:
    api = RecordingApi()
    sampler = estimator(api, nodes={(): [Resources(cpu_millis=64_000, memory_bytes=16 * GIB),
                                         Resources(cpu_millis=8_000, memory_bytes=512 * GIB)]})
    body = job("wide", cpu="32")
    document = json.loads(body.annotations["cellfit.io/configurations"])
    document["cpu"]["resources"]["memory"] = "100Gi"
    raw = json.loads(json.dumps({"metadata": {"name": "wide", "namespace": "ml", "uid": "uid-wide", "annotations": {
        **body.annotations, "cellfit.io/configurations": json.dumps(document)}}, "spec": {
        "suspend": True, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
    from estimator.objects import JOB_DECODER
    sampler._replace_jobs([JOB_DECODER.decode(json.dumps(raw).encode())])
    sampler.reconcile()
    said = [message for reason, message in api.events if reason == "ConfigurationNeverRuns"]
    assert said[0] == ("cpu is not sampled: cellfit.io/configurations.cpu.resources: 32 cores and 100 GiB a pod, more than any "
                       "node has (64 cores and 512 GiB at most, not on one node): no node could ever run it")


def test_samples_run_on_the_pool_and_are_judged_against_its_nodes_only() -> None:
    api = RecordingApi()
    big = Resources(cpu_millis=256_000, memory_bytes=1024 * GIB, gpus=8)
    sampler = estimator(api, pool=POOL, nodes={(("pool", "allox"),): [NODE], (("pool", "other"),): [big]})
    sampler._replace_jobs([job("big", cpu="200")])
    sampler.reconcile()
    assert kinds(api) == ["gpu"]  # a 256-core node outside the pool does not make the cpu configuration runnable
    assert all(p["spec"]["nodeSelector"] == POOL for p in api.created)
    said = [message for reason, message in api.events if reason == "ConfigurationNeverRuns"]
    assert "more than any node of allox.nodeSelector's pool has (64 cores at most)" in said[0]


def test_a_run_of_a_configuration_found_never_runnable_is_deleted() -> None:
    api, now = DeletingApi(), [1_800_000_000.0]
    sampler = estimator(api, nodes={(): [Resources(cpu_millis=256_000, memory_bytes=1024 * GIB, gpus=4)]}, cpus=1024, share=1.0,
                        clock=lambda: now[0])
    sampler._replace_jobs([job("big", cpu="200")])
    sampler.reconcile()
    assert kinds(api) == ["cpu", "gpu"]
    sampler._replace_pods([pending(p) for p in api.created])
    # The 256-core node leaves, and has not come back under its name (NODE_RETURN_SECONDS): the
    # cpu run under way can never be placed now.
    sampler._nodes = lambda selector: [NODE]
    now[0] += NODE_RETURN_SECONDS + 1
    sampler.reconcile()
    assert [name for name in api.deleted if "-cpu-" in name] == [p["metadata"]["name"] for p in api.created if "-cpu-" in p["metadata"]["name"]]
    assert not [name for name in api.deleted if "-gpu-" in name]


def test_under_hived_a_gpu_configuration_without_a_virtual_cluster_is_not_sampled() -> None:
    engine = HivedEngine.from_config(rack_cluster(vcs={"speech": [{"cellType": "V100-NODE", "count": 1}]}))
    cells = LiveCells(engine, lock=__import__("threading").RLock())
    api = RecordingApi()
    sampler = estimator(api, never_placed=lambda pod, configuration: configured_pod_problems(
        pod, configuration, cells=cells, gpu_resource="nvidia.com/gpu"))
    sampler._replace_jobs([job("novc")])
    sampler.reconcile()
    assert kinds(api) == ["cpu"]
    said = [message for reason, message in api.events if reason == "ConfigurationNeverRuns"]
    assert said == ["gpu is not sampled: spec.template.metadata.labels[cellfit.io/virtual-cluster] (in configuration gpu): is missing: "
                    "set it to one of speech: HiveD never places it"]


def unschedulable(pod: dict[str, Any], *, since: str) -> Any:
    status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                  "message": "0/4 nodes are available: 4 Insufficient cpu.", "lastTransitionTime": since}]}
    return POD_DECODER.decode(json.dumps({**pod, "status": status}).encode())


def at(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone


def test_a_sample_unschedulable_past_the_grace_stops_holding_the_budget() -> None:
    api = RecordingApi()
    now = at("2026-01-01T01:00:00Z")
    sampler = estimator(api, cpus=10, share=0.5, clock=lambda: now)  # 5 cores of samples
    sampler._replace_jobs([job("old", cpu="4", created="2026-01-01T00:00:00Z"), job("new", cpu="4", created="2026-01-01T00:01:00Z")])
    sampler.reconcile()
    first = list(api.created)
    assert [p["metadata"]["ownerReferences"][0]["name"] for p in first] == ["old", "old"]
    # Unschedulable for less than the grace: they still hold the budget.
    recently = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - UNSCHEDULABLE_GRACE_SECONDS + 10))
    sampler._replace_pods([unschedulable(p, since=recently) for p in first])
    sampler.reconcile()
    assert len(api.created) == 2
    (old,) = [j for j in sampler.inspect()["jobs"] if j["name"] == "old"]
    assert {s["reason"] for s in old["samples"]} == {"Unschedulable: 0/4 nodes are available: 4 Insufficient cpu."}
    # Past the grace: they no longer count, and the next Job's runs start.
    long_ago = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - UNSCHEDULABLE_GRACE_SECONDS - 10))
    sampler._replace_pods([unschedulable(p, since=long_ago) for p in first])
    sampler.reconcile()
    assert [p["metadata"]["ownerReferences"][0]["name"] for p in api.created[2:]] == ["new", "new"]


def test_parked_samples_count_again_beyond_as_much_again_as_the_budget() -> None:
    api = RecordingApi()
    now = at("2026-01-01T01:00:00Z")
    long_ago = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - UNSCHEDULABLE_GRACE_SECONDS - 10))
    sampler = estimator(api, cpus=10, share=0.5, clock=lambda: now)
    names = ["a", "b", "c", "d"]
    sampler._replace_jobs([job(n, cpu="4", created=f"2026-01-01T00:0{i}:00Z") for i, n in enumerate(names)])
    for _ in range(4):
        sampler.reconcile()
        sampler._replace_pods([unschedulable(p, since=long_ago) for p in api.created])
    owners = sorted({p["metadata"]["ownerReferences"][0]["name"] for p in api.created})
    # a's runs parked (5 cores), b's parked beyond them count against the budget: c and d wait.
    assert owners == ["a", "b"], owners


def test_why_job_carries_a_pending_samples_reason() -> None:
    row = {"configuration": "cpu", "length": "long", "pod": "p-1", "state": "pending",
           "reason": "Unschedulable: 0/4 nodes are available: 4 Insufficient cpu."}
    assert _sample(row) == "cpu long (p-1: Unschedulable: 0/4 nodes are available: 4 Insufficient cpu.)"


def test_every_state_the_estimator_shows_is_counted_by_the_jobs_gauge() -> None:
    from typing import get_args

    from estimator.controller import JobState
    from scheduler.extender.metrics import ESTIMATOR_JOB_STATES
    assert set(get_args(JobState)) == set(ESTIMATOR_JOB_STATES)


def test_a_template_selecting_nodes_outside_the_pool_is_not_sampled_outside_it() -> None:
    """The placer refuses to start such a Job (placer/rewrite.py, PoolConflict): its samples would
    have run outside the pool, on nodes its pods never go to."""
    from estimator.objects import JOB_DECODER
    api = RecordingApi()
    sampler = estimator(api, pool=POOL)
    raw = json.loads(json.dumps({"metadata": {"name": "batch", "namespace": "ml", "uid": "uid-batch", "annotations": dict(
        job("batch").annotations)}, "spec": {"suspend": True, "template": {"spec": {
            "nodeSelector": {"pool": "batch"}, "containers": [{"name": "c", "image": "i"}]}}}}))
    sampler._replace_jobs([JOB_DECODER.decode(json.dumps(raw).encode())])
    sampler.reconcile()
    assert api.created == []
    (condition,) = api.conditions
    assert condition["reason"] == "NeverRuns"
    assert condition["message"].startswith("nothing is sampled or started: spec.template.spec.nodeSelector[pool]: 'batch' is not "
                                           "'allox'"), condition["message"]
    assert condition["message"].count("is not 'allox'") == 1  # told once, though neither configuration runs
    said = [message for reason, message in api.events if reason == "ConfigurationNeverRuns"]
    assert len(said) == 1 and said[0].startswith("cpu and gpu are not sampled: spec.template.spec.nodeSelector[pool]"), said


def test_why_job_says_a_job_no_node_could_ever_run_is_not_estimated() -> None:
    """Not "estimating: no sample started yet": the estimator's NeverRuns condition is its answer."""
    from scheduler.kubectl.objects import CellfitView, job_from
    from scheduler.kubectl.why import explain_job
    from tests.kubectl.test_why import interchangeable
    message = ("nothing is sampled or started: cellfit.io/configurations.cpu.resources: 200 cores a pod, more than any node has "
               "(64 cores at most): no node could ever run it")
    condition = {"type": "Estimated", "status": "False", "reason": "NeverRuns", "message": message}
    entry = {"namespace": "ns", "name": "ij", "state": "never-runs", "message": message, "samples": []}
    answer = explain_job(job_from(interchangeable(conditions=[condition])), CellfitView(estimator_entry=entry))
    assert (answer.reason, answer.summary) == ("not-estimated", f"not estimated (NeverRuns): {message}")


def test_the_estimate_of_the_other_configuration_says_which_was_not_sampled() -> None:
    api = RecordingApi()
    sampler = estimator(api)
    sampler._replace_jobs([job("big", cpu="200")])
    sampler.reconcile()
    sampler._replace_pods([finished(p, 3.0, splits=[[5, 2.0]]) for p in api.created])
    sampler.reconcile()
    (condition,) = [c for c in api.conditions if c["status"] == "True"]
    assert condition["message"].startswith("estimated gpu ")
    assert condition["message"].endswith("; cpu not sampled: cellfit.io/configurations.cpu.resources: 200 cores a pod, more than "
                                         "any node has (64 cores at most): no node could ever run it"), condition["message"]
    (estimated,) = [json.loads(a["cellfit.io/estimate"]) for _, a in api.annotations if "cellfit.io/estimate" in a]
    assert set(estimated) - {"overheadFraction"} == {"gpu"}, estimated



class WatchedCluster:
    """What the extender's ``_estimator`` reads of the watch cache: the Jobs' feed, the capacity,
    each node's allocatable by the labels it carries."""

    def __init__(self, nodes: Mapping[tuple[tuple[str, str], ...], list[Resources]]) -> None:
        from scheduler.cluster.feed import InterchangeableJobs
        self.interchangeable = InterchangeableJobs()
        self._nodes = nodes

    def nodes_synced(self) -> bool:
        return True

    def capacity(self, selector: Mapping[str, str] | None = None) -> Resources:
        return Resources(cpu_millis=256_000, memory_bytes=1024 * GIB, gpus=16)

    def allocatable_by_node(self, selector: Mapping[str, str] | None = None) -> dict[str, Resources]:
        return {f"{i}-{n}": size for i, (labels, sizes) in enumerate(self._nodes.items()) for n, size in enumerate(sizes)
                if all(dict(labels).get(k) == v for k, v in (selector or {}).items())}

    def node_labels(self, selector: Mapping[str, str] | None = None) -> list[Mapping[str, str]]:
        return [dict(labels) for labels, sizes in self._nodes.items() for _ in sizes
                if all(dict(labels).get(k) == v for k, v in (selector or {}).items())]


def test_the_extenders_estimator_is_wired_to_the_pool_its_nodes_and_hiveds_virtual_clusters() -> None:
    import threading

    from scheduler.config import parse_settings
    from scheduler.extender.metrics import ExtenderMetrics
    from scheduler.extender.runtime import _estimator
    settings = parse_settings("allox: {nodeSelector: {pool: allox}}\n")
    engine = HivedEngine.from_config(rack_cluster(vcs={"speech": [{"cellType": "V100-NODE", "count": 1}]}))
    api = RecordingApi()
    cache = WatchedCluster({(("pool", "allox"),): [NODE], (("pool", "other"),): [Resources(cpu_millis=512_000, gpus=8)]})
    sampler = _estimator(settings, api, cache, ExtenderMetrics(), hived=engine, lock=threading.RLock())  # type: ignore[arg-type]
    assert sampler is not None
    sampler._replace_jobs([job("novc", cpu="200")])
    sampler._replace_pods([])
    sampler.reconcile()
    assert api.created == []
    (condition,) = api.conditions
    assert condition["reason"] == "NeverRuns"
    assert "200 cores a pod, more than any node of allox.nodeSelector's pool has (64 cores at most)" in condition["message"]
    assert "spec.template.metadata.labels[cellfit.io/virtual-cluster] (in configuration gpu): is missing" in condition["message"]
