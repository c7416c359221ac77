"""The watch cache tells HiveD when it has applied a whole pods list, so that what waited for the
bindings (a VC's quota not bound, judged by scheduler/cells/node_troubles.py) is judged then and
not on the first pod a relist applies (review27 #4: node statuses seen mid-relist warned for VCs
bound with running pods). A real ClusterCache and the runtime cellfit serve builds, over the API
double.
"""

from __future__ import annotations

from tests.cluster.test_leaving_pods_free_for_allox import cache_with
from scheduler.cells import HivedEngine
from scheduler.config import Settings
from scheduler.extender.runtime import build_runtime
from tests.support.api_double import EventRecordingApi
from tests.support.hived import CONFIG, NODES
from scheduler.config import parse_settings


def test_each_pods_list_applied_whole_is_told() -> None:
    cache, _ = cache_with([])
    told: list[int] = []
    cache.on_pods_listed = lambda: told.append(len(told))
    cache.pods._list_and_replace()
    cache.pods._list_and_replace()
    assert told == [0, 1]


def test_cellfit_serve_wires_it_to_hived() -> None:
    settings = Settings.model_validate({
        **parse_settings(CONFIG).model_dump(by_alias=True, exclude_none=True),
        "policy": {"name": "hived"}, "estimator": {"enabled": False}, "leaderElection": {"enabled": False},
    })
    runtime = build_runtime(settings, api=EventRecordingApi(nodes=NODES))  # type: ignore[arg-type]
    cache = runtime.cache
    assert cache is not None and cache.on_pods_listed is not None
    engine = cache.on_pods_listed.__self__  # type: ignore[attr-defined]
    assert isinstance(engine, HivedEngine) and not engine.node_troubles._recovered
    cache.pods._list_and_replace()
    assert engine.node_troubles._recovered  # HiveD heard the list applied: what waited is judged
