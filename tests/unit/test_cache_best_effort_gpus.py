"""The cluster cache's best-effort GPU pods, as trial Jobs may count on them: the preemptible
ones' grace periods and the ones already leaving; trial pods and CPU-only pods not counted."""

from __future__ import annotations

import threading

from scheduler.cluster.cache import ClusterCache
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.pods import PodStore
from scheduler.matching.admission import BestEffortGpus
from tests.support.api_double import ListingApi
from tests.support.kube_objects import node, pod


def test_the_cache_counts_best_effort_gpu_pods_preemptible_and_leaving() -> None:
    ours, other = node("ours", gpus=4), node("other", gpus=2)
    ours["metadata"]["labels"]["pool"] = "allox"
    be = {"cellfit.io/job-class": "best-effort"}
    leaving = pod("be-2-x", uid="p2", gpus=1, node_name="ours", phase="Running", labels=be, grace_period_seconds=30, job_uid="j2")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:10Z"
    pods = [pod("be-1-x", uid="p1", gpus=1, node_name="ours", phase="Running", labels=be, grace_period_seconds=180, job_uid="j1"),
            leaving,
            pod("tr-1-x", uid="p3", gpus=1, node_name="ours", phase="Running", labels={"cellfit.io/job-class": "trial"}, job_uid="j3"),
            pod("cpu-1-x", uid="p4", node_name="ours", phase="Running", labels=be, job_uid="j4"),
            pod("be-away-x", uid="p5", gpus=1, node_name="other", phase="Running", labels=be, grace_period_seconds=5, job_uid="j5")]
    cache = ClusterCache(api=ListingApi(nodes=[ours, other], pods=pods), engine=ResourceFitEngine(), lock=threading.RLock(),
                         gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=None)
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    assert cache.best_effort_gpus({"pool": "allox"}) == BestEffortGpus(graces=(180.0,), leaving=1)
    assert sorted(cache.best_effort_gpus().graces) == [5.0, 180.0]
