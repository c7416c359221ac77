"""A configuration whose node selector no node carries is never sampled (user24, F16): its
sampling pod stayed Unschedulable ("didn't match Pod's node affinity/selector") for
pendingLimitSeconds x maxAttempts. Now, as a configuration too large for every node, it gets a
ConfigurationNeverRuns Event naming the field, and none of its pods; a node carrying the labels
that left within NODE_RETURN_SECONDS still counts."""

from __future__ import annotations

import json
from typing import Any, Mapping

from estimator.controller import NODE_RETURN_SECONDS
from estimator.objects import JOB_DECODER
from scheduler.core.resources import Resources
from tests.estimator.test_controller import RecordingApi
from tests.estimator.test_estim23_never_runs import estimator, kinds
from tests.placer.test_placer24_allox_reasons import cache_of
from tests.support.kube_objects import node

GIB = 2**30
# What a selector or affinity no node meets adds: the setting for pools an autoscaler scales from zero.
AUTOSCALED_HINT = "; for a pool an autoscaler scales up from zero, list its nodes' labels in estimator.nodesMayJoin"
CPU_NODE = Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=0)
GPU_NODE = Resources(cpu_millis=64_000, memory_bytes=256 * GIB, gpus=8)
NODES: dict[tuple[tuple[str, str], ...], list[Resources]] = {(("pool", "cpu-small"),): [CPU_NODE], (("pool", "gpu"),): [GPU_NODE]}


def job(name: str, *, cpu_selector: dict[str, str] | None = None, template_selector: dict[str, str] | None = None) -> Any:
    configurations = {"cpu": {"resources": {"cpu": "4", "memory": "8Gi"}, **({"nodeSelector": cpu_selector} if cpu_selector else {})},
                      "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if template_selector:
        spec["nodeSelector"] = template_selector
    body = {"metadata": {"name": name, "namespace": "bad", "uid": f"uid-{name}", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/iterations": "1000"}},
            "spec": {"suspend": True, "template": {"spec": spec}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def never_runs(api: RecordingApi) -> list[str]:
    return [message for reason, message in api.events if reason == "ConfigurationNeverRuns"]


def test_a_configurations_node_selector_no_node_carries_is_not_sampled_and_names_the_field() -> None:
    api = RecordingApi()
    sampler = estimator(api, nodes=NODES)
    sampler._replace_jobs([job("nsel", cpu_selector={"pool": "cpu-big"})])
    sampler.reconcile()
    assert kinds(api) == ["gpu"]
    assert never_runs(api) == ["cpu is not sampled: cellfit.io/configurations.cpu.nodeSelector (pool=cpu-big): no node carries "
                               "it, so no node could ever run it" + AUTOSCALED_HINT]


def test_a_template_node_selector_no_node_carries_names_the_templates_field_for_every_configuration() -> None:
    api = RecordingApi()
    sampler = estimator(api, nodes=NODES)
    sampler._replace_jobs([job("tsel", template_selector={"zone": "mars"})])
    sampler.reconcile()
    assert api.created == []
    assert never_runs(api) == ["cpu and gpu are not sampled: spec.template.spec.nodeSelector (zone=mars): no node carries it, "
                               "so no node could ever run it" + AUTOSCALED_HINT]
    (condition,) = api.conditions
    assert condition["reason"] == "NeverRuns"


def test_a_node_selector_some_node_carries_is_sampled() -> None:
    api = RecordingApi()
    sampler = estimator(api, nodes=NODES)
    sampler._replace_jobs([job("ok", cpu_selector={"pool": "cpu-small"})])
    sampler.reconcile()
    assert "cpu" in kinds(api)
    assert never_runs(api) == []


def test_a_node_carrying_the_labels_that_left_moments_ago_still_counts_and_not_after() -> None:
    now = [1767225600.0]
    nodes = dict(NODES)
    api = RecordingApi()
    sampler = estimator(api, nodes=nodes, clock=lambda: now[0])
    sampler._replace_jobs([job("first", cpu_selector={"pool": "cpu-small"})])
    sampler.reconcile()
    del nodes[(("pool", "cpu-small"),)]  # deleted, maybe to be re-created under its name
    now[0] += NODE_RETURN_SECONDS / 2
    sampler._replace_jobs([job("first", cpu_selector={"pool": "cpu-small"}), job("soon", cpu_selector={"pool": "cpu-small"})])
    sampler.reconcile()
    assert never_runs(api) == []
    now[0] += NODE_RETURN_SECONDS
    sampler._replace_jobs([job("first", cpu_selector={"pool": "cpu-small"}), job("soon", cpu_selector={"pool": "cpu-small"}),
                           job("late", cpu_selector={"pool": "cpu-small"})])
    sampler.reconcile()
    assert "cpu is not sampled: cellfit.io/configurations.cpu.nodeSelector (pool=cpu-small): no node carries it, so no node " \
           "could ever run it" + AUTOSCALED_HINT in never_runs(api)


# ------------------------------------------------------------------ required node affinity


def affinity_job(name: str, expressions: list[dict[str, Any]]) -> Any:
    configurations = {"cpu": {"resources": {"cpu": "4"}}, "gpu": {"resources": {"nvidia.com/gpu": "1", "cpu": "1"}}}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}}
    body = {"metadata": {"name": name, "namespace": "bad", "uid": f"uid-{name}", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "annotations": {"cellfit.io/configurations": json.dumps(configurations), "cellfit.io/iterations": "1000"}},
            "spec": {"suspend": True, "template": {"spec": {"affinity": affinity, "containers": [{"name": "c", "image": "i"}]}}}}
    return JOB_DECODER.decode(json.dumps(body).encode())


def labelled(nodes: dict[tuple[tuple[str, str], ...], list[Resources]]) -> Any:
    def labels(selector: Mapping[str, str]) -> list[dict[str, str]]:
        return [dict(key) for key in nodes if all(dict(key).get(k) == v for k, v in selector.items())]
    return labels


def sampled_with_affinity(expressions: list[dict[str, Any]]) -> RecordingApi:
    api = RecordingApi()
    sampler = estimator(api, nodes=NODES)
    sampler._node_labels = labelled(NODES)
    sampler._replace_jobs([affinity_job("aff", expressions)])
    sampler.reconcile()
    return api


def test_a_required_node_affinity_no_nodes_labels_meet_is_not_sampled() -> None:
    api = sampled_with_affinity([{"key": "pool", "operator": "In", "values": ["cpu-big"]}])
    assert api.created == []
    assert never_runs(api) == ["cpu and gpu are not sampled: spec.template.spec.affinity.nodeAffinity."
                               "requiredDuringSchedulingIgnoredDuringExecution: no node meets it (by its labels), "
                               "so no node could ever run it" + AUTOSCALED_HINT]


def test_a_required_node_affinity_a_node_meets_is_sampled() -> None:
    api = sampled_with_affinity([{"key": "pool", "operator": "NotIn", "values": ["gpu"]}])
    assert never_runs(api) == [] and "cpu" in kinds(api)


def test_the_cluster_cache_gives_the_labels_of_the_nodes_carrying_a_selector() -> None:
    big, small = node("cpu-big", gpus=0), node("cpu-small", gpus=0)
    big["metadata"]["labels"]["pool"] = "cpu-big"
    cache = cache_of(nodes=[big, small], pods=[])
    assert [labels.get("pool") for labels in cache.node_labels({"pool": "cpu-big"})] == ["cpu-big"]
    assert len(cache.node_labels()) == 2
