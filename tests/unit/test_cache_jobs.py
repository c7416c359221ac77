"""The watch cache tells the engine about Jobs deleted while its watch was down (a relist)."""

from __future__ import annotations

import threading

from scheduler.cluster.cache import ClusterCache
from scheduler.core.pods import PodStore
from scheduler.core.fit import ResourceFitEngine
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.support.api_double import ListingApi


def job(name: str, preemptions: int) -> dict:
    return {"metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "resourceVersion": "7",
                         "annotations": {"cellfit.io/preemptions": str(preemptions)}}}


def test_a_relist_forgets_the_jobs_it_no_longer_lists():
    api = ListingApi(nodes=[], jobs=[job("kept", 1), job("gone", 1)])
    engine = FitGppEngine(ResourceFitEngine(), settings=FitGppSettings())
    engine.holds.displaced(job_uid="uid-gone", node_name="n1")
    cache = ClusterCache(api=api, engine=engine, lock=threading.RLock(), gpu_resource="nvidia.com/gpu", pods=PodStore(), jobs=engine)  # type: ignore[arg-type]
    assert cache.jobs is not None
    cache.jobs._list_and_replace()
    assert engine.preemptions_of_job("uid-gone") == 1 and engine.holds.active
    api.jobs = [job("kept", 1)]  # "gone" was deleted while the watch was down (410, relist)
    cache.jobs._list_and_replace()
    assert engine.preemptions_of_job("uid-gone") == 0 and not engine.holds.active
    assert engine.preemptions_of_job("uid-kept") == 1
    assert cache.sizes()["jobs"] == 1
