"""The cache gives AlloX each of its nodes' allocatable, not only their sum: a pod more than any
one node holds never fits, however much they hold together (placer/controller.py, NoMachine)."""

from __future__ import annotations

import threading

from scheduler.cluster.cache import ClusterCache
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.core.resources import Resources
from tests.support.api_double import ListingApi
from tests.support.kube_objects import node

GIB = 2**30


def test_each_node_carrying_the_selector_with_its_allocatable_and_their_sum() -> None:
    allox = [node("a-0", gpus=0, cpu="32", memory="128Gi"), node("a-1", gpus=4, cpu="16", memory="64Gi")]
    for item in allox:
        item["metadata"]["labels"]["pool"] = "allox"
    api = ListingApi(nodes=[*allox, node("other", gpus=8, cpu="256")])
    cache = ClusterCache(api=api, engine=ResourceFitEngine(), lock=threading.RLock(), gpu_resource="nvidia.com/gpu",
                         pods=PodStore(), jobs=None)
    cache.nodes._list_and_replace()
    by_node = cache.allocatable_by_node({"pool": "allox"})
    assert by_node == {"a-0": Resources(cpu_millis=32_000, memory_bytes=128 * GIB, gpus=0),
                       "a-1": Resources(cpu_millis=16_000, memory_bytes=64 * GIB, gpus=4)}
    assert cache.capacity({"pool": "allox"}) == Resources(cpu_millis=48_000, memory_bytes=192 * GIB, gpus=4)
    assert set(cache.allocatable_by_node()) == {"a-0", "a-1", "other"}
