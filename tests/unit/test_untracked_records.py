"""The records kept per pod are invisible to the garbage collector: a cluster's tens of thousands
of long-lived pod records, tracked, made every full collection (a stall of every verb) ~2 ms
longer per thousand pods, and their arrival started collections (tests/benchmarks/bench_gc.py).
A record holds strings, numbers, string mappings and other records, never a cycle."""

from __future__ import annotations

import gc

import msgspec

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, NodeInfo
from scheduler.core.resources import Resources
from scheduler.kube import translate, wire
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.support.kube_objects import node, pod


def _pod(name: str, node_name: str) -> wire.Pod:
    body = pod(name, uid=f"uid-{name}", gpus=1, node_name=node_name, phase="Running", labels={"team": "a"},
               annotations={"cellfit.io/job-class": "trial"})
    return msgspec.convert(body, wire.Pod)


def test_a_pods_record_its_requests_and_its_owner_are_not_tracked() -> None:
    info = translate.pod_info(_pod("train-0", "node-0"), gpu_resource="nvidia.com/gpu")
    assert info.owner is not None and info.requests.gpus == 1 and info.labels["team"] == "a"
    for record in (info, info.requests, info.owner):
        assert not gc.is_tracked(record), type(record).__name__


def test_nodes_jobs_and_resources_made_anywhere_are_not_tracked() -> None:
    assert not gc.is_tracked(Resources(1000, 2**30, 1))
    assert not gc.is_tracked(NodeInfo(name="n", allocatable=Resources(1000, 2**30, 8), labels={"rack": "r1"}))
    assert not gc.is_tracked(JobInfo(uid="u", namespace="ml", name="j", annotations={"a": "b"}))


def test_the_engines_keep_no_tracked_object_per_pod() -> None:
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    for index in range(10):
        body = node(f"node-{index}", gpus=8, cpu="64")
        engine.apply_node(translate.node_info(msgspec.convert(body, wire.Node), gpu_resource="nvidia.com/gpu"))
    gc.collect()
    before = len(gc.get_objects())
    infos = [translate.pod_info(_pod(f"train-{i}", f"node-{i % 10}"), gpu_resource="nvidia.com/gpu") for i in range(500)]
    for info in infos:
        engine.apply_pod(info)
    gc.collect()
    # A few containers grow (the engines' dicts); no object is added per pod.
    assert len(gc.get_objects()) - before < 50
    assert engine.inner.free_on("node-0").gpus == 8 - 50
