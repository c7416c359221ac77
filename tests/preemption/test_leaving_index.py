"""FitGpp's per-node index of pods on their way out (terminating, or chosen as victims), which
the preempt verb reads for ~100 candidate nodes instead of walking every pod, stays equal to a
walk over every pod through any sequence of watch events and decisions."""

from __future__ import annotations

import random
from msgspec import structs

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import ZERO, Resources
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine

GI = 2**30


def walked(engine: FitGppEngine) -> dict[str, Resources]:
    leaving: dict[str, Resources] = {}
    for uid in engine._tracked:
        pod = engine.victim(uid)
        assert pod is not None
        if pod.node_name is not None and (pod.terminating or pod.uid in engine._chosen):
            leaving[pod.node_name] = leaving.get(pod.node_name, ZERO) + pod.requests
    return leaving


def test_the_leaving_index_equals_a_walk_over_every_pod() -> None:
    rng = random.Random(7)
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    nodes = [f"n{i}" for i in range(6)]
    for name in nodes:
        engine.apply_node(NodeInfo(name=name, allocatable=Resources(64000, 512 * GI, 8)))
    pods: dict[str, PodInfo] = {}
    for step in range(600):
        action = rng.random()
        if action < 0.45 or not pods:
            uid = f"p{step}"
            pods[uid] = PodInfo(uid=uid, namespace="ml", name=uid, requests=Resources(1000, GI, rng.choice([1, 2, 4])),
                                labels={"cellfit.io/job-class": "best-effort"}, node_name=rng.choice(nodes), phase="Running",
                                owner=OwnerRef("Job", f"job-{step % 9}", f"job-{step % 9}"))
            engine.apply_pod(pods[uid])
        elif action < 0.6:
            uid = rng.choice(sorted(pods))
            pods[uid] = structs.replace(pods[uid], terminating=True)
            engine.apply_pod(pods[uid])
        elif action < 0.75:
            engine.delete_pod(pods.pop(rng.choice(sorted(pods))).uid)
        elif action < 0.85:
            uid = rng.choice(sorted(pods))
            pods[uid] = structs.replace(pods[uid], phase="Succeeded")
            engine.apply_pod(pods.pop(uid))
        else:
            trial = PodInfo(uid=f"te{step}", namespace="ml", name=f"te{step}", requests=Resources(1000, GI, rng.choice([2, 4, 8])),
                            labels={"cellfit.io/job-class": "trial"}, priority=1000)
            engine.decide_preemption(trial, {name: [] for name in rng.sample(nodes, 3)}, {})
        assert engine._leaving == walked(engine), step
    assert engine._leaving  # the sequence did exercise it
