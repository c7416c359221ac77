"""review26 #3: a configuration awaiting a node of an estimator.nodesMayJoin pool (32 cores a
pod, pool=cpu-big, no such node now) has its sampling pod Pending: the trigger for the
autoscaler. Karpenter (the README's own example, karpenter.sh/nodepool) sizes each node for the
pods pending: a 16-core node of the pool joins for another Job's pod. The next pass judges the
configuration by that node's size, "more than any node has": never-runs, and deletes the Pending
sample, the very pod Karpenter was about to add a 32-core node for. Whether a configuration is
sampled now depends on whether a smaller node of its pool happened to be up at that pass.
Fixed: only a listed pool's nodes run it, so their sizes now do not make it never-runs."""

from __future__ import annotations

from typing import Mapping

from estimator.controller import Capacity, EstimatorController
from scheduler.cluster.feed import InterchangeableJobs
from scheduler.config import EstimatorSettings
from scheduler.core.resources import Resources
from tests.estimator.test_nodes_may_join import UNSCHEDULABLE, job
from tests.estimator.test_placer24_selector_never_runs import labelled
from tests.estimator.test_review_62 import CREATED_AT, Clock, DeletingApi, with_status

GIB = 2**30


def test_an_awaiting_sample_is_not_deleted_when_a_smaller_node_of_its_pool_joins() -> None:
    nodes: dict[tuple[tuple[str, str], ...], list[Resources]] = {
        (("pool", "gpu"),): [Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=8)],
    }

    def carrying(selector: Mapping[str, str]) -> list[Resources]:
        return [size for labels, sizes in nodes.items() if all(dict(labels).get(k) == v for k, v in selector.items()) for size in sizes]

    api = DeletingApi()
    clock = Clock(CREATED_AT + 10)
    estimator = EstimatorController(
        api=api,  # type: ignore[arg-type]
        settings=EstimatorSettings(max_cluster_share=1.0, nodes_may_join=[{"pool": "cpu-big"}]),
        gpu_resource="nvidia.com/gpu",
        capacity=lambda: Capacity(cpu_millis=256_000, gpus=16),
        jobs=InterchangeableJobs(),
        clock=clock,
        nodes=carrying,
        node_labels=labelled(nodes),
    )
    estimator._replace_jobs([job("scale", cpu="32", cpu_selector={"pool": "cpu-big"})])
    estimator.reconcile()
    cpu = [p for p in api.created if p["metadata"]["annotations"]["cellfit.io/sample-configuration"] == "cpu"]
    assert len(cpu) == 1  # awaiting the node, Pending
    estimator._replace_pods([with_status(p, UNSCHEDULABLE) for p in api.created])
    nodes[(("pool", "cpu-big"),)] = [Resources(cpu_millis=16_000, memory_bytes=64 * GIB, gpus=0)]  # joined for another pod
    clock.now += 60
    estimator.reconcile()
    assert cpu[0]["metadata"]["name"] not in api.deleted, [m for r, m in api.events if r == "ConfigurationNeverRuns"]
