"""A background write asked for after the cache stopped is not made and raises nothing in the
thread that asked: a planned look at the preempted gangs (a threading.Timer already firing when
stop() cancels it) submitted its write to the shut-down writer and died with "cannot schedule new
futures after shutdown" (seen in the full suite, tests/integration/test_preempt_refusal_told_again.py)."""

from __future__ import annotations

import threading

from scheduler.cluster.cache import ClusterCache
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.core.model import PodInfo
from scheduler.core.resources import Resources
from tests.support.api_double import EventRecordingApi
from tests.support.kube_objects import node


def pod_info(name: str) -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace="ml", name=name, requests=Resources(cpu_millis=1000, memory_bytes=2**30, gpus=1))


def test_an_event_asked_for_after_stop_is_not_written_and_raises_nothing() -> None:
    api = EventRecordingApi(nodes=[node("gpu-1")])
    cache = ClusterCache(api=api, engine=ResourceFitEngine(), lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=PodStore(), jobs=None)
    cache.stop()
    cache.record_pod_event(pod=pod_info("late"), reason="Preempted", message="after the stop", warning=False)
    assert api.events == []


def test_a_write_asked_for_before_stop_is_made() -> None:
    api = EventRecordingApi(nodes=[node("gpu-1")])
    cache = ClusterCache(api=api, engine=ResourceFitEngine(), lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=PodStore(), jobs=None)
    cache.record_pod_event(pod=pod_info("early"), reason="Preempted", message="before the stop", warning=False)
    cache._writes.shutdown(wait=True)  # the writer's queue drained, as it is before a process ends
    assert [event["reason"] for event in api.events] == ["Preempted"]
