"""A pod whose deletion hangs (Terminating long past its grace period: a GPU process stuck in the
driver, a container runtime that never stops it, a kubelet that never confirms) holds its GPUs in
kube-scheduler's cache: AlloX counts its room free only for its grace period and
LEAVING_MARGIN_SECONDS from when the watch cache first saw it leaving (review27 #1: ba002c0 judged
the grace period alone, so AlloX kept starting GPU Jobs onto the room, each suspended again
after 300 s, for as long as the pod hung). A real ClusterCache over a listing API double.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from scheduler.cluster import cache as cache_module
from scheduler.cluster.cache import LEAVING_MARGIN_SECONDS
from scheduler.extender.runtime import LEAVING_FREE_SECONDS
from tests.cluster.test_leaving_pods_free_for_allox import cache_with, leaving
from tests.support import kube_objects as k


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_pod_leaving_past_its_grace_and_the_margin_holds_its_room_again(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(cache_module, "time", SimpleNamespace(monotonic=clock, time=time.time))
    hung = leaving(k.pod("hung-0", uid="hung", gpus=8, node_name="gpu-a", phase="Running",
                         labels={"cellfit.io/virtual-cluster": "vision"}, grace_period_seconds=30))
    cache, _ = cache_with([hung])
    assert cache.free_by_node(leaving_within=LEAVING_FREE_SECONDS)["gpu-a"].gpus == 8  # first seen leaving: free soon
    clock.now += 30 + LEAVING_MARGIN_SECONDS
    assert cache.leaving_pods(within=LEAVING_FREE_SECONDS) == frozenset({"hung"})  # within its grace and the margin
    clock.now += 1
    assert cache.free_by_node(leaving_within=LEAVING_FREE_SECONDS)["gpu-a"].gpus == 0  # stuck: it holds its room
    assert cache.leaving_pods(within=LEAVING_FREE_SECONDS) == frozenset()
