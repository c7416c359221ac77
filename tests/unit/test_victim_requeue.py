"""A requeue signal follows a preemption once cellfit's watch has seen the victims go
(scheduler/cluster/nudge.py, VictimRequeue): the watch cache tells it when a pod it chose as a
victim leaves the engine, and one signal pod (created, deleted) covers the victims that go
together. The API is a recording test double; the signal against a real control plane is
e2e/test_outage_nudge.py's."""

from __future__ import annotations

import threading
import time
from typing import Any

from scheduler.cluster.cache import ClusterCache
from scheduler.core.pods import PodStore
from scheduler.cluster.nudge import VictimRequeue
from scheduler.constants import REQUEUE_SIGNAL_NODE
from scheduler.core.fit import ResourceFitEngine
from scheduler.errors import KubernetesApiError
from scheduler.kube import wire
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.support.api_double import EventRecordingApi
from tests.support.kube_objects import dumps, node, pod


class SignalRecordingApi(EventRecordingApi):
    """Also records the requeue signal's two calls."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.calls: list[tuple[str, str]] = []

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        assert pod["spec"]["nodeName"] == REQUEUE_SIGNAL_NODE
        self.calls.append(("create", pod["metadata"]["name"]))

    def delete_pod(self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None) -> None:
        assert grace_period_seconds == 0
        self.calls.append(("delete", name))


def running(name: str) -> dict[str, Any]:
    return pod(name, uid=f"uid-{name}", gpus=4, node_name="gpu-a", phase="Running")


def cache_with(*names: str) -> tuple[SignalRecordingApi, ClusterCache, list[int]]:
    api = SignalRecordingApi(nodes=[node("gpu-a")], pods=[running(name) for name in names])
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    cache = ClusterCache(api=api, engine=engine, lock=threading.RLock(), gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=engine)  # type: ignore[arg-type]
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    told = [0]

    def gone() -> None:
        told[0] += 1

    cache.on_victims_gone = gone
    return api, cache, told


def preempt(cache: ClusterCache, *names: str) -> None:
    cache.remember_victims(f"uid-{name}" for name in names)


def deleted(name: str) -> wire.Pod:
    return wire.POD_DECODER.decode(dumps(running(name)))


def test_the_watch_tells_when_a_victim_goes_and_only_then() -> None:
    _, cache, told = cache_with("be-1", "be-2", "other")
    preempt(cache, "be-1", "be-2")
    cache._delete_pod(deleted("other"))  # not a victim
    assert told == [0]
    cache._delete_pod(deleted("be-1"))
    cache._delete_pod(deleted("be-2"))
    assert told == [2]
    cache._delete_pod(deleted("be-1"))  # seen again (a relist): told once only
    assert told == [2]


def test_a_victim_that_ends_rather_than_being_deleted_also_counts() -> None:
    _, cache, told = cache_with("be-1")
    preempt(cache, "be-1")
    ended = running("be-1")
    ended["status"]["phase"] = "Failed"  # SIGTERM'd, exited; the pod object stays for now
    cache._apply_pod(wire.POD_DECODER.decode(dumps(ended)))
    assert told == [1]


def test_a_relist_that_no_longer_lists_a_victim_counts_too() -> None:
    api, cache, told = cache_with("be-1", "kept")
    preempt(cache, "be-1")
    api.pods = [running("kept")]  # deleted while the watch was down (HTTP 410)
    cache.pods._list_and_replace()
    assert told == [1]


def test_victims_that_go_together_share_one_signal_pod() -> None:
    api = SignalRecordingApi(nodes=[])
    sent = threading.Event()
    requeue = VictimRequeue(api=api, namespace="cellfit", delay_seconds=0.2, min_interval_seconds=0.5, on_signal=sent.set)
    requeue.start()
    try:
        for _ in range(5):
            requeue.victims_gone()
        assert sent.wait(5), "no signal sent"
        time.sleep(0.3)
        assert [call for call, _ in api.calls] == ["create", "delete"] and requeue.sent == 1
        assert api.calls[0][1] == api.calls[1][1]  # the same signal pod, created then deleted
        sent.clear()
        requeue.victims_gone()  # later victims: a second signal, no sooner than the interval
        assert sent.wait(5), "no second signal"
        assert requeue.sent == 2 and len(api.calls) == 4
    finally:
        requeue.stop()


class RefusingOnceApi(SignalRecordingApi):
    """The API server refuses the first signal pod (say, a 503 during its leader change)."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.refused = 0

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        if not self.refused:
            self.refused += 1
            raise KubernetesApiError("create pod cellfit/cellfit-requeue-x: HTTP 503", status=503)
        super().create_pod(namespace=namespace, pod=pod)


def test_a_signal_the_api_refused_is_sent_again() -> None:
    api = RefusingOnceApi(nodes=[])
    sent = threading.Event()
    requeue = VictimRequeue(api=api, namespace="cellfit", delay_seconds=0.05, min_interval_seconds=0.2, on_signal=sent.set)
    requeue.start()
    try:
        requeue.victims_gone()
        assert sent.wait(5), "the refused signal was never sent again"
        assert api.refused == 1 and [call for call, _ in api.calls] == ["create", "delete"]
    finally:
        requeue.stop()
