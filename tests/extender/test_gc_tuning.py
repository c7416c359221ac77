"""scheduler/extender/gc_tuning.py wired into ``cellfit serve``'s lifespan: the long-lived heap is
frozen out of garbage collections once the watch cache has synced, not before, and each
collection is counted in ``cellfit_gc_pause_seconds`` by generation while the server runs."""

from __future__ import annotations

import asyncio
import gc
from typing import Iterator

import pytest

from scheduler.config import parse_settings
from scheduler.extender.gc_tuning import freeze_once_ready
from scheduler.extender.runtime import Runtime, build_runtime
from tests.support.api_double import ListingApi
from tests.support.hived import NODES

SETTINGS = ("policy: {name: resource-fit}\nestimator: {enabled: false}\nexchange: {enabled: false}\n"
            "leaderElection: {enabled: false}\nnudge: {enabled: false}\n")
WAIT_SECONDS = 30.0  # a bound for a loaded machine, not a timing under test


@pytest.fixture(autouse=True)
def nothing_frozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def full_collections(runtime: Runtime) -> float:
    value = runtime.metrics.registry.get_sample_value("cellfit_gc_pause_seconds_count", {"generation": "2"})
    assert value is not None
    return value


async def until(condition: object) -> bool:
    deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
    while not condition() and asyncio.get_running_loop().time() < deadline:  # type: ignore[operator]
        await asyncio.sleep(0.05)
    return bool(condition())  # type: ignore[operator]


def test_serving_freezes_the_heap_once_the_watch_cache_has_synced_and_counts_collections():
    runtime = build_runtime(parse_settings(SETTINGS), api=ListingApi(nodes=NODES))  # type: ignore[arg-type]
    cache = runtime.cache
    assert cache is not None
    seen: dict[str, object] = {}

    async def serve() -> None:
        async with runtime.app.api.router.lifespan_context(runtime.app.api):
            seen["synced"] = await until(lambda: cache.ready()[0])
            seen["frozen"] = await until(lambda: gc.get_freeze_count() > 0)
            before = full_collections(runtime)
            gc.collect()
            seen["counted"] = full_collections(runtime) - before
        after = full_collections(runtime)
        gc.collect()
        seen["counted_after_shutdown"] = full_collections(runtime) - after

    asyncio.run(serve())
    assert seen == {"synced": True, "frozen": True, "counted": 1.0, "counted_after_shutdown": 0.0}


def test_nothing_is_frozen_before_the_first_sync():
    synced = False
    frozen_while_waiting: list[int] = []

    async def run() -> None:
        nonlocal synced
        freezing = asyncio.create_task(freeze_once_ready(ready=lambda: synced, what="test", poll_seconds=0.01))
        for _ in range(5):
            await asyncio.sleep(0.02)
            frozen_while_waiting.append(gc.get_freeze_count())
        synced = True
        await asyncio.wait_for(freezing, WAIT_SECONDS)

    asyncio.run(run())
    assert frozen_while_waiting == [0] * 5
    assert gc.get_freeze_count() > 0
