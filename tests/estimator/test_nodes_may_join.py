"""Pools an autoscaler scales up from zero (estimator.nodesMayJoin): a configuration whose node
selector no current node carries was judged never to run and not sampled, so no pod ever stayed
Pending for cluster-autoscaler or Karpenter to add a node for, and the pool never scaled up. With
the pool's labels listed, its sampling pod is created and waits for the node, up to
pendingLimitSeconds a run (then a failed run, as any pod never scheduled, with an Event naming
the setting); without, the never-runs message names the setting. Nor are the listed pool's
nodes up now judged by size: the autoscaler sizes the node it adds for the pending pod."""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

import pytest
from pydantic import ValidationError

from estimator.controller import Capacity, EstimatorController
from estimator.objects import JOB_DECODER
from scheduler.cluster.feed import InterchangeableJobs
from scheduler.config import EstimatorSettings
from scheduler.core.resources import Resources
from tests.estimator.test_estim23_never_runs import kinds
from tests.estimator.test_placer24_selector_never_runs import AUTOSCALED_HINT, NODES, labelled, never_runs
from tests.estimator.test_review_62 import CREATED_AT, Clock, DeletingApi, with_status

GIB = 2**30
UNSCHEDULABLE = {
    "phase": "Pending",
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
        }
    ],
}


def sampler(
    api: DeletingApi,
    *,
    may_join: list[dict[str, str]],
    clock: Clock | None = None,
    pool: Mapping[str, str] | None = None,
    never_placed: Callable[[Mapping[str, Any], Any], Sequence[str]] | None = None,
) -> EstimatorController:
    def carrying(selector: Mapping[str, str]) -> list[Resources]:
        return [size for labels, sizes in NODES.items() if all(dict(labels).get(k) == v for k, v in selector.items()) for size in sizes]

    return EstimatorController(
        api=api,  # type: ignore[arg-type]
        settings=EstimatorSettings(max_cluster_share=1.0, nodes_may_join=may_join),
        gpu_resource="nvidia.com/gpu",
        capacity=lambda: Capacity(cpu_millis=256_000, gpus=16),
        jobs=InterchangeableJobs(),
        clock=clock or Clock(CREATED_AT + 10),
        pool=pool,
        nodes=carrying,
        node_labels=labelled(NODES),
        never_placed=never_placed,
    )


def job(name: str, *, cpu: str = "4", cpu_selector: dict[str, str] | None = None, affinity: list[dict[str, Any]] | None = None) -> Any:
    configurations = {
        "cpu": {"resources": {"cpu": cpu, "memory": "8Gi"}, **({"nodeSelector": cpu_selector} if cpu_selector else {})},
        "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}},
    }
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": affinity}]}}}
    body = {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/iterations": "1000"},
        },
        "spec": {"suspend": True, "template": {"spec": spec}},
    }
    return JOB_DECODER.decode(json.dumps(body).encode())


def told(api: DeletingApi, reason: str) -> list[str]:
    return [message for said, message in api.events if said == reason]


def test_a_configuration_only_an_autoscaled_pool_carries_is_sampled_and_its_pod_waits_for_the_node() -> None:
    api = DeletingApi()
    estimator = sampler(api, may_join=[{"pool": "cpu-big"}])
    estimator._replace_jobs([job("scale", cpu_selector={"pool": "cpu-big"})])
    estimator.reconcile()
    assert kinds(api) == ["cpu", "gpu"]
    (cpu_pod,) = [p for p in api.created if p["metadata"]["annotations"]["cellfit.io/sample-configuration"] == "cpu"]
    assert cpu_pod["spec"]["nodeSelector"] == {"pool": "cpu-big"}  # the label the autoscaler scales its node group for
    assert never_runs(api) == []
    assert told(api, "ConfigurationAwaitsNode") == [
        "cpu is sampled on a node that has yet to join: no node carries cellfit.io/configurations.cpu.nodeSelector (pool=cpu-big) "
        "now; its sampling pod waits up to 1800 s a run (estimator.pendingLimitSeconds, 3 runs) for the autoscaler to add one "
        "(estimator.nodesMayJoin: pool=cpu-big)"
    ]
    # Pending, unschedulable: no pass deletes it while it may wait, nor tells it again.
    estimator._replace_pods([with_status(p, UNSCHEDULABLE) for p in api.created])
    estimator.reconcile()
    assert api.deleted == [] and len(api.created) == 2
    assert len(told(api, "ConfigurationAwaitsNode")) == 1
    assert "cpu waits for a node to join (estimator.nodesMayJoin)" in estimator.inspect()["jobs"][0]["message"]


def test_without_the_setting_the_configuration_never_runs_and_the_message_names_the_setting() -> None:
    api = DeletingApi()
    estimator = sampler(api, may_join=[])
    estimator._replace_jobs([job("fixed", cpu_selector={"pool": "cpu-big"})])
    estimator.reconcile()
    assert kinds(api) == ["gpu"]
    assert never_runs(api) == [
        "cpu is not sampled: cellfit.io/configurations.cpu.nodeSelector (pool=cpu-big): no node carries it, so no node could ever run it" + AUTOSCALED_HINT
    ]
    assert told(api, "ConfigurationAwaitsNode") == []


def test_a_listed_pool_that_is_not_the_one_selected_changes_nothing() -> None:
    api = DeletingApi()
    estimator = sampler(api, may_join=[{"pool": "gpu-big"}])
    estimator._replace_jobs([job("other", cpu_selector={"pool": "cpu-big"})])
    estimator.reconcile()
    assert kinds(api) == ["gpu"] and len(never_runs(api)) == 1


def test_a_required_node_affinity_only_a_joining_node_meets_is_sampled() -> None:
    api = DeletingApi()
    estimator = sampler(api, may_join=[{"pool": "cpu-big"}])
    estimator._replace_jobs([job("aff", affinity=[{"key": "pool", "operator": "In", "values": ["cpu-big"]}])])
    estimator.reconcile()
    assert kinds(api) == ["cpu", "gpu"] and never_runs(api) == []
    assert told(api, "ConfigurationAwaitsNode") == [
        "cpu and gpu are sampled on a node that has yet to join: no node meets spec.template.spec.affinity.nodeAffinity."
        "requiredDuringSchedulingIgnoredDuringExecution now; their sampling pods wait up to 1800 s a run "
        "(estimator.pendingLimitSeconds, 3 runs) for the autoscaler to add one (estimator.nodesMayJoin: pool=cpu-big)"
    ]


def test_an_unmet_affinity_names_the_setting_when_off() -> None:
    api = DeletingApi()
    estimator = sampler(api, may_join=[])
    estimator._replace_jobs([job("aff", affinity=[{"key": "pool", "operator": "In", "values": ["cpu-big"]}])])
    estimator.reconcile()
    assert api.created == []
    assert never_runs(api) == [
        "cpu and gpu are not sampled: spec.template.spec.affinity.nodeAffinity."
        "requiredDuringSchedulingIgnoredDuringExecution: no node meets it (by its labels), "
        "so no node could ever run it" + AUTOSCALED_HINT
    ]


def test_a_configuration_larger_than_every_node_of_its_listed_pool_awaits_a_node_sized_for_it() -> None:
    """An autoscaler sizes the node it adds for the pending pod (Karpenter), or adds one of a
    larger node group of the pool: the pool's nodes up now are not the node it would add, so a
    configuration only a listed pool runs is not judged by their sizes (review26 #3)."""
    api = DeletingApi()
    estimator = sampler(api, may_join=[{"pool": "cpu-small"}])
    estimator._replace_jobs([job("huge", cpu="200", cpu_selector={"pool": "cpu-small"})])
    estimator.reconcile()
    assert kinds(api) == ["cpu", "gpu"]
    assert never_runs(api) == []
    assert [m for r, m in api.events if r == "ConfigurationAwaitsNode"] == [
        "cpu is sampled on a node that has yet to join: cellfit.io/configurations.cpu.resources: 200 cores a pod, more than "
        "any node has (64 cores at most) now; its sampling pod waits up to 1800 s a run "
        "(estimator.pendingLimitSeconds, 3 runs) for the autoscaler to add one (estimator.nodesMayJoin: pool=cpu-small)"
    ]


def test_a_configuration_larger_than_every_node_of_an_unlisted_pool_stays_never_runs() -> None:
    api = DeletingApi()
    estimator = sampler(api, may_join=[{"pool": "cpu-big"}])
    estimator._replace_jobs([job("huge", cpu="200", cpu_selector={"pool": "cpu-small"})])
    estimator.reconcile()
    assert kinds(api) == ["gpu"]
    assert never_runs(api) == [
        "cpu is not sampled: cellfit.io/configurations.cpu.resources: 200 cores a pod, more than any node has (64 cores at most): no node could ever run it"
    ]


def test_a_sampling_pod_no_node_joins_for_ends_at_the_pending_limit_with_an_event_naming_the_setting() -> None:
    clock = Clock(CREATED_AT + 10)
    api = DeletingApi()
    estimator = sampler(api, may_join=[{"pool": "cpu-big"}], clock=clock)
    estimator._replace_jobs([job("never", cpu_selector={"pool": "cpu-big"})])
    estimator.reconcile()
    clock.now = CREATED_AT + 1800 + 60  # past estimator.pendingLimitSeconds: no node joined
    estimator._replace_pods([with_status(p, UNSCHEDULABLE) for p in api.created])
    estimator.reconcile()
    (first_cpu,) = [p["metadata"]["name"] for p in api.created[:2] if p["metadata"]["annotations"]["cellfit.io/sample-configuration"] == "cpu"]
    assert first_cpu in api.deleted
    retried = [p for p in api.created[2:] if p["metadata"]["annotations"]["cellfit.io/sample-configuration"] == "cpu"]
    assert [p["metadata"]["annotations"]["cellfit.io/sample-attempt"] for p in retried] == ["1"]
    assert told(api, "NodeNotJoined") == [
        f"sample {first_cpu} (cpu) was not scheduled within 1800 s: no node of estimator.nodesMayJoin (pool=cpu-big) joined; "
        "attempt 1 of 3 (estimator.maxAttempts): check the autoscaler's node group for those labels, or raise "
        "estimator.pendingLimitSeconds"
    ]
    recorded = json.loads([notes for _, notes in api.annotations if "cellfit.io/sampling" in notes][-1]["cellfit.io/sampling"])
    assert "no node of estimator.nodesMayJoin (pool=cpu-big) joined" in recorded["failed"][first_cpu]


def test_a_joining_node_does_not_override_hived() -> None:
    """HiveD's virtual clusters are configured, not found on nodes: a GPU configuration none of
    them places never runs, whatever node may join."""
    api = DeletingApi()
    estimator = sampler(api, may_join=[{"pool": "cpu-big"}], never_placed=lambda pod, configuration: ["no virtual cluster"])
    estimator._replace_jobs([job("hived", affinity=[{"key": "pool", "operator": "In", "values": ["cpu-big"]}])])
    estimator.reconcile()
    assert kinds(api) == ["cpu"]
    assert never_runs(api) == ["gpu is not sampled: no virtual cluster: HiveD never places it"]


@pytest.mark.parametrize("pools", [[{}], [{"": "x"}]])
def test_an_entry_that_names_no_labels_is_refused_naming_the_field(pools: list[dict[str, str]]) -> None:
    with pytest.raises(ValidationError, match=r"nodesMayJoin\[0\]"):
        EstimatorSettings.model_validate({"nodesMayJoin": pools})
