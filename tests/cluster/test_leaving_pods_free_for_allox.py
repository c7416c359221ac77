"""AlloX counts free the room of pods being deleted with a short grace period (user25 #3, HIGH, 2
of 2 live: a GPU Job deleted with `--wait=false`, its pods exiting in 10-20 s, and the next
second 14 interchangeable Jobs all started on CPU, ten times slower: "no GPU ... was free for it:
pods AlloX did not start ... held every one, so no end was known to wait for").

The watch cache's free_by_node leaves out a terminating pod whose grace period is at most
``leaving_within`` (the runtime passes LEAVING_FREE_SECONDS, 120 s, inside the NotBound limit of
300 s a Job started there is given), and leaving_pods names them for HiveD's guarantee view.
A real ClusterCache over a listing API double, HiveD's engine behind it.
"""

from __future__ import annotations

import threading
from typing import Any

from scheduler.cells import HivedEngine, parse_cells_config
from scheduler.cluster.cache import ClusterCache
from scheduler.config import parse_settings
from scheduler.core.pods import PodStore
from scheduler.extender.runtime import LEAVING_FREE_SECONDS
from tests.support import kube_objects as k
from tests.support.api_double import EventRecordingApi
from tests.support.hived import CONFIG, NODES


def leaving(body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["deletionTimestamp"] = "2026-11-28T22:30:00Z"
    return body


def cache_with(pods: list[dict[str, Any]]) -> tuple[ClusterCache, HivedEngine]:
    config = parse_cells_config(parse_settings(CONFIG).cells.model_dump(by_alias=True, exclude_none=True))
    engine = HivedEngine.from_config(config)
    api = EventRecordingApi(nodes=NODES, pods=pods)
    cache = ClusterCache(api=api, engine=engine, lock=threading.RLock(), gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                         pods=PodStore(), jobs=None)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    return cache, engine


def scene() -> tuple[ClusterCache, HivedEngine]:
    labels = {"cellfit.io/virtual-cluster": "vision"}
    return cache_with([
        leaving(k.pod("exiting-0", uid="exiting", gpus=8, node_name="gpu-a", phase="Running", labels=labels, grace_period_seconds=30)),
        leaving(k.pod("checkpointing-0", uid="checkpointing", gpus=8, node_name="gpu-b", phase="Running", labels=labels,
                      grace_period_seconds=600)),
        k.pod("running-0", uid="running", gpus=8, node_name="gpu-c", phase="Running", labels=labels),
    ])


def test_a_pod_leaving_within_the_bound_leaves_its_room_free() -> None:
    cache, _ = scene()
    free = cache.free_by_node(leaving_within=LEAVING_FREE_SECONDS)
    assert {name: r.gpus for name, r in free.items() if name.startswith("gpu")} == {"gpu-a": 8, "gpu-b": 0, "gpu-c": 0}
    assert cache.free_by_node()["gpu-a"].gpus == 0  # without the bound, as before


def test_its_cells_are_free_in_the_vcs_guarantee_too() -> None:
    cache, engine = scene()
    assert cache.leaving_pods(within=LEAVING_FREE_SECONDS) == frozenset({"exiting"})
    def vision_held(except_pods: frozenset[str] = frozenset()) -> list[int]:
        return sorted(cell["guaranteed"] for cell in engine.inspect_guarantees(except_pods=except_pods)["vision"])

    assert vision_held() == [8, 8]
    assert vision_held(cache.leaving_pods(within=LEAVING_FREE_SECONDS)) == [0, 8]  # gpu-a's cell: its pod's exit is near
