"""Each way this replica's virtual clusters or cells change makes kube-scheduler retry its parked
pods at once (scheduler/cluster/nudge.py, VictimRequeue.cells_may_have_changed, wired in one
place by scheduler/extender/runtime.py): a live reload that applies new VCs (ConfigReloader's
on_applied, as server.py wires it), a discovered node joining, and the cell exchange's quota
moving at a window's edge. Before, the requeue read the cells' summary every
nudge.periodSeconds: a pod naming a VC a reload added waited up to that long.

The runtime is what `cellfit serve` builds, over an API double that records the signal pod's
calls; nudge.periodSeconds is 600 s, the most it can be, so a signal that came from a look every
period would not come within the wait below."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from pathlib import Path
from typing import Any, Callable

import yaml

from scheduler.cells import HivedEngine
from scheduler.cells.config import parse_cells_config
from scheduler.cells.exchange import ledger
from scheduler.cluster.exchange.objects import ConfigMap
from scheduler.cluster.exchange.quotas import ExchangeQuotas
from scheduler.config import ConfigFile, ExchangeSettings, parse_settings
from scheduler.extender.runtime import Runtime, build_runtime
from scheduler.extender.server import _config_reloader
from tests.cells.test_exchange_quotas_live import T0, Clock, entry, quotas_of
from tests.cells.helpers import rack_cluster
from tests.support.configmap import MountedConfigMap
from tests.support.kube_objects import node
from tests.unit.test_victim_requeue import SignalRecordingApi

WAIT_SECONDS = 30.0  # a bound for a loaded machine, far below nudge.periodSeconds (600)
QUIET = "estimator: {enabled: false}\nexchange: {enabled: false}\nleaderElection: {enabled: false}\nreclaim: {enabled: false}\n"
NUDGE = {"nudge": {"periodSeconds": 600, "minIntervalSeconds": 1}}
VISION = {"vision": [{"cellType": "V100-NODE", "count": 3}]}
NLP = {"nlp": [{"cellType": "V100-NODE", "count": 1}]}
SPEECH = {"speech": [{"cellType": "V100-NODE", "count": 1}]}


class RequeueApi(SignalRecordingApi):
    """Also lists the profile's pending pods (the nudge's term reads them): none."""

    def list_pending_pods(self, scheduler_name: str, *, resource_version: str = "0") -> bytes:
        return json.dumps({"metadata": {"resourceVersion": "100"}, "items": []}).encode()


def config_text(vcs: dict[str, Any]) -> str:
    return yaml.safe_dump({"cells": rack_cluster(vcs=vcs), **NUDGE}) + QUIET


def cells_signals(runtime: Runtime) -> float:
    return runtime.metrics.registry.get_sample_value("cellfit_requeue_signals_total", {"reason": "cells-changed"}) or 0.0


def serving(runtime: Runtime, change: Callable[[], None]) -> float:
    """Serve ``runtime``, make ``change`` once the watch has synced, and return the cells-changed
    signals counted once one is (or the wait is over)."""

    async def serve() -> float:
        async with runtime.app.api.router.lifespan_context(runtime.app.api):
            loop = asyncio.get_running_loop()
            deadline = loop.time() + WAIT_SECONDS
            assert runtime.cache is not None
            while not runtime.cache.ready()[0] and loop.time() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.to_thread(change)
            while not cells_signals(runtime) and loop.time() < deadline:
                await asyncio.sleep(0.05)
            return cells_signals(runtime)

    try:
        return asyncio.run(serve())
    finally:
        gc.unfreeze()  # serving froze the heap once synced: not for the tests after this one


def test_a_reload_that_applies_new_virtual_clusters_signals_at_once(tmp_path: Path) -> None:
    mounted = MountedConfigMap(tmp_path / "config")
    mounted.write(config_text({**VISION, **NLP}))
    settings = parse_settings(config_text({**VISION, **NLP}))
    api = RequeueApi(nodes=[node(f"r{r}n{n}", gpus=8) for r in range(2) for n in range(4)])
    runtime = build_runtime(settings, api=api)  # type: ignore[arg-type]
    reloader = _config_reloader(runtime, ConfigFile(path=str(mounted.path), settings=settings))

    def reload() -> None:
        mounted.write(config_text({**VISION, **SPEECH}))
        outcome = reloader.reload_if_changed()
        assert outcome is not None and outcome.result == "applied"

    assert serving(runtime, reload) == 1
    assert [call for call, _ in api.calls] == ["create", "delete"]


def test_a_discovered_node_joining_signals_at_once() -> None:
    settings = parse_settings(yaml.safe_dump({"policy": {"name": "hived"}, **NUDGE}) + QUIET)
    api = RequeueApi(nodes=[node("gpu-a", gpus=8)])
    runtime = build_runtime(settings, api=api)  # type: ignore[arg-type]
    assert runtime.cache is not None
    cache = runtime.cache

    def join() -> None:
        api.nodes = [node("gpu-a", gpus=8), node("gpu-b", gpus=8)]
        cache.nodes._list_and_replace()

    assert serving(runtime, join) == 1


def test_an_exchange_quota_move_is_told() -> None:
    # The runtime hands ExchangeQuotas the same call (on_moved) as the reload and the engine.
    base = parse_cells_config(rack_cluster(1, 4, vcs={"a": [{"cellType": "V100-NODE", "count": 2}],
                                                       "b": [{"cellType": "V100-NODE", "count": 1}],
                                                       "c": [{"cellType": "V100-NODE", "count": 1}]}))
    engine = HivedEngine.from_config(base)
    clock = Clock(T0 - 10)
    moves: list[dict[str, int]] = []
    quotas = ExchangeQuotas(api=object(), engine=engine, lock=threading.RLock(), base=base, namespace="cellfit-system",  # type: ignore[arg-type]
                            settings=ExchangeSettings(), clock=clock, on_moved=lambda: moves.append(quotas_of(engine)))
    e = entry()
    quotas.observe(ConfigMap(data={e.key: ledger.encode(e)}))
    assert quotas.apply() is False and moves == []  # the window is not open yet
    clock.now = T0
    assert quotas.apply() is True and moves == [{"a": 1, "b": 2, "c": 1}]
    assert quotas.apply() is False and len(moves) == 1  # nothing moved
