"""The kubelet's Running event after every binding changes nothing the engine reads: the watch
cache records it and does not hand it to the engine again. Decisions after it are those of an
engine handed every event (HiveD's cells, FitGpp's victims), and any other change still reaches
the engine."""

from __future__ import annotations

import json
import threading
from typing import Any

from msgspec.structs import replace

from scheduler.cells import HivedEngine
from scheduler.cluster.cache import ClusterCache
from scheduler.composition import Composition, assemble
from scheduler.config import PreemptionSettings
from scheduler.core.model import PodInfo
from scheduler.core.pods import PodStore
from scheduler.kube import translate, wire
from scheduler.kube.names import filter_offered
from tests.cells.helpers import node_names, rack_cluster, snapshot
from tests.support.api_double import ListingApi
from tests.support.kube_objects import node, pod

NODES = node_names()
VCS = {"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]}


class CountingEngine:
    """The composition's engine, counting the pods it is handed (everything else passes through)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.applied: list[PodInfo] = []

    def apply_pod(self, info: PodInfo) -> None:
        self.applied.append(info)
        self.engine.apply_pod(info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def _composition() -> Composition:
    return assemble(cells=HivedEngine.from_config(rack_cluster(vcs=VCS)), preemption=PreemptionSettings(),
                    clock=lambda: 0.0, pods=PodStore())


def _cache(composition: Composition, engine: Any) -> ClusterCache:
    api = ListingApi(nodes=[node(name, gpus=8) for name in NODES])
    cache = ClusterCache(api=api, engine=engine, lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=composition.pods, jobs=composition.jobs)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    return cache


def _pending(name: str, *, gpus: int, vc: str, opportunistic: bool = False) -> dict[str, Any]:
    labels = {"cellfit.io/virtual-cluster": vc, "cellfit.io/job-class": "best-effort"}
    if opportunistic:
        labels["cellfit.io/priority"] = "opportunistic"
    return pod(name, uid=f"uid-{name}", gpus=gpus, cpu="1", labels=labels, job_uid=f"job-{name}")


def _shown(body: dict[str, Any], *, node_name: str, annotations: dict[str, str], phase: str) -> wire.Pod:
    """The pod as the watch shows it bound to ``node_name`` with ``annotations``, in ``phase``."""
    shown = json.loads(json.dumps(body))
    shown["metadata"]["annotations"] = {**shown["metadata"]["annotations"], **annotations}
    shown["spec"]["nodeName"] = node_name
    shown["status"]["phase"] = phase
    shown["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    if phase == "Running":
        shown["status"]["podIP"] = "10.244.0.5"
        shown["status"]["conditions"].append({"type": "Ready", "status": "True"})
    return wire.POD_DECODER.decode(json.dumps(shown))


def _bind_and_watch(composition: Composition, cache: ClusterCache, every_event: list[wire.Pod] | None,
                    body: dict[str, Any]) -> None:
    """The bind verb's reservation of the node filter chose, then the watch's two events: bound
    (Pending), then Running. ``every_event`` collects them."""
    info = translate.pod_info(wire.POD_DECODER.decode(json.dumps(body)), gpu_resource="nvidia.com/gpu")
    decision = filter_offered(composition.engine, info, NODES)
    assert len(decision.feasible) == 1
    placement = composition.engine.reserve(info, decision.feasible[0])
    for phase in ("Pending", "Running"):
        shown = _shown(body, node_name=placement.node_name, annotations=dict(placement.annotations), phase=phase)
        cache._apply_pod(shown)
        if every_event is not None:
            every_event.append(shown)


def _decisions(composition: Composition) -> dict[str, Any]:
    """HiveD's state, FitGpp's victims, and where new pods would go."""
    engine = composition.engine
    trial = translate.pod_info(wire.POD_DECODER.decode(json.dumps(pod(
        "te-0", uid="uid-te-0", gpus=8, cpu="1", priority=1000,
        labels={"cellfit.io/virtual-cluster": "a", "cellfit.io/job-class": "trial"}))), gpu_resource="nvidia.com/gpu")
    newcomers = [_pending(f"new-{vc}-{gpus}", gpus=gpus, vc=vc, opportunistic=opportunistic)
                 for vc in ("a", "b") for gpus in (1, 4, 8) for opportunistic in (False, True)]
    placed = {}
    for body in newcomers:
        info = translate.pod_info(wire.POD_DECODER.decode(json.dumps(body)), gpu_resource="nvidia.com/gpu")
        decision = filter_offered(engine, info, NODES)
        placed[info.name] = (list(decision.feasible), dict(decision.unresolvable))
    assert composition.preemption is not None
    return {
        "cells": snapshot(composition.placement),  # type: ignore[arg-type]
        "victims": {name: composition.preemption.victim(f"uid-{name}") is not None for name in ("a0", "a1", "b0", "o0")},
        "preemption": composition.preemption.decide_preemption(trial, {name: [] for name in NODES}, {}).victims,
        "placed": placed,
    }


def _burst() -> list[dict[str, Any]]:
    return [_pending("a0", gpus=8, vc="a"), _pending("a1", gpus=2, vc="a"), _pending("b0", gpus=4, vc="b"),
            _pending("o0", gpus=8, vc="b", opportunistic=True)]


def test_decisions_after_the_running_events_are_those_of_an_engine_handed_every_event() -> None:
    fast = _composition()
    counted = CountingEngine(fast.engine)
    fast_cache = _cache(fast, counted)
    events: list[wire.Pod] = []
    for body in _burst():
        _bind_and_watch(fast, fast_cache, events, body)

    every = _composition()  # handed every event, as the watch cache did before
    every_cache = _cache(every, every.engine)
    for body in _burst():
        info = translate.pod_info(wire.POD_DECODER.decode(json.dumps(body)), gpu_resource="nvidia.com/gpu")
        decision = filter_offered(every.engine, info, NODES)
        every.engine.reserve(info, decision.feasible[0])
    for shown in events:
        info = translate.pod_info(shown, gpu_resource="nvidia.com/gpu")
        every.pods.record(info)
        every.engine.apply_pod(info)

    assert _decisions(fast) == _decisions(every)
    # The bound events reached the engine; the Running ones were recorded only.
    assert [info.phase for info in counted.applied] == ["Pending"] * len(_burst())
    assert all(fast.pods.get(f"uid-{body['metadata']['name']}").phase == "Running" for body in _burst())  # type: ignore[union-attr]
    assert every_cache is not None


def test_a_change_beside_the_phase_still_reaches_the_engine() -> None:
    composition = _composition()
    counted = CountingEngine(composition.engine)
    cache = _cache(composition, counted)
    body = _pending("a0", gpus=8, vc="a")
    _bind_and_watch(composition, cache, None, body)
    running = composition.pods.get("uid-a0")
    assert running is not None and running.phase == "Running"
    counted.applied.clear()
    cache._apply_info(replace(running, terminating=True))  # being deleted: FitGpp no longer offers it as a victim
    cache._apply_info(replace(running, phase="Succeeded"))  # finished: forgotten
    assert [info.terminating for info in counted.applied] == [True]
    assert composition.pods.get("uid-a0") is None and composition.preemption is not None
    assert composition.preemption.victim("uid-a0") is None


def test_a_bound_pod_shown_again_unchanged_is_not_handed_to_the_engine() -> None:
    composition = _composition()
    counted = CountingEngine(composition.engine)
    cache = _cache(composition, counted)
    _bind_and_watch(composition, cache, None, _pending("b0", gpus=4, vc="b"))
    recorded = composition.pods.get("uid-b0")
    counted.applied.clear()
    assert recorded is not None
    cache._apply_info(replace(recorded))
    cache._apply_info(replace(recorded, phase="Pending"))  # an older event's phase: no engine reads it
    assert counted.applied == []
