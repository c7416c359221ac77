"""A configured topology naming a node that has no Node object (a typo, a node not yet joined):
once the watch has synced, its cells are bad as a deleted node's are, and a warning names the
node and the field that names it; when the Node appears, its cells are healthy
(scheduler/extender/runtime.py, mark_missing_nodes). Before, such a cell was listed free and
healthy with 8 idle GPUs, a VC's guarantee on a node that does not exist (seen live).

A real HivedEngine fed by a real ClusterCache over a listing API double."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from pathlib import Path

import pytest
import yaml

from scheduler.cells import HivedEngine, parse_cells_config
from scheduler.cells.config import node_name_paths
from scheduler.cluster.cache import ClusterCache
from scheduler.core.pods import PodStore
from scheduler.config import parse_settings
from scheduler.extender.configuration import ConfigReloader
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.runtime import build_runtime, mark_missing_nodes, missing_nodes_once_synced
from scheduler.kube.names import filter_offered
from tests.cells.helpers import pod
from tests.support.api_double import EventRecordingApi, ListingApi
from tests.support.hived import CONFIG as HIVED_CONFIG
from tests.support.hived import NODES as HIVED_NODES
from tests.support.kube_objects import node

CONFIG = {
    "topology": {
        "cellTypes": {"A100-NODE": {"childType": "A100", "childCount": 8, "isNodeLevel": True}},
        "physicalCells": [{"cellType": "A100-NODE", "nodeName": "gpu-node-1"}, {"cellType": "A100-NODE", "nodeName": "gpu-node-9"}],
    },
    "virtualClusters": {"nlp": [{"cellType": "A100-NODE", "count": 1}], "speech": [{"cellType": "A100-NODE", "count": 1}]},
}
LOGGER = "scheduler.extender.runtime"
WAIT_SECONDS = 30.0  # a bound for a loaded machine, not a timing under test


class World:
    """gpu-node-1 exists; gpu-node-9, which the topology names too, does not (yet)."""

    def __init__(self) -> None:
        self.config = parse_cells_config(CONFIG)
        self.engine = HivedEngine.from_config(self.config)
        self.lock = threading.RLock()
        self.api = EventRecordingApi(nodes=[node("gpu-node-1")], pods=[])
        self.cache = ClusterCache(api=self.api, engine=self.engine, lock=self.lock, gpu_resource="nvidia.com/gpu",  # type: ignore[arg-type]
                                  pods=PodStore(), jobs=None)
        self.cache.nodes._list_and_replace()

    def mark(self) -> dict[str, str]:
        assert self.config.topology is not None
        return mark_missing_nodes(topology=self.config.topology, engine=self.engine, cache=self.cache, lock=self.lock)

    def healthy(self, name: str) -> bool:
        (cell,) = self.engine.inspect_cells(node=name)["cells"]
        return bool(cell["healthy"])

    def placeable_on(self, name: str) -> bool:
        return bool(filter_offered(self.engine, pod("p", 8, "speech"), [name]).feasible)


def test_a_configured_node_without_a_node_object_is_bad_and_named_with_its_field(caplog: pytest.LogCaptureFixture):
    world = World()
    assert world.healthy("gpu-node-9") and world.placeable_on("gpu-node-9")  # what the live session saw
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert world.mark() == {"gpu-node-9": "cells.topology.physicalCells[1].nodeName"}
    assert not world.healthy("gpu-node-9") and not world.placeable_on("gpu-node-9")
    assert world.healthy("gpu-node-1") and world.placeable_on("gpu-node-1")
    (warned,) = [r for r in caplog.records if r.name == LOGGER and getattr(r, "node", None) == "gpu-node-9"]
    # HiveD says once per VC what the missing node costs it (scheduler/cells/node_troubles.py),
    # once the pods' bindings are known (the watch cache's pods list applied whole).
    with caplog.at_level(logging.WARNING):
        world.engine.pods_listed()
    assert {r.virtualCluster for r in caplog.records if r.name == "scheduler.cells.node_troubles"} == {"nlp", "speech"}  # type: ignore[attr-defined]
    assert warned.field == "cells.topology.physicalCells[1].nodeName"  # type: ignore[attr-defined]


def test_its_cells_are_healthy_once_the_node_appears():
    world = World()
    world.mark()
    world.api.nodes = [node("gpu-node-1"), node("gpu-node-9")]
    world.cache.nodes._list_and_replace()
    assert world.healthy("gpu-node-9") and world.placeable_on("gpu-node-9")


def test_every_configured_node_present_marks_nothing():
    world = World()
    world.api.nodes = [node("gpu-node-1"), node("gpu-node-9")]
    world.cache.nodes._list_and_replace()
    assert world.mark() == {} and world.healthy("gpu-node-9")


def test_nothing_is_marked_before_the_watch_has_synced():
    # Before the first list every node is missing: marking then would make every cell bad.
    looks: list[bool] = []
    marked: list[int] = []

    def ready() -> bool:
        looks.append(len(looks) >= 2)
        return looks[-1]

    def mark() -> None:
        marked.append(len(looks))

    asyncio.run(missing_nodes_once_synced(ready=ready, mark=mark, poll_seconds=0))
    assert looks == [False, False, True] and marked == [3]


def test_serving_marks_the_missing_node_once_the_watch_has_synced(caplog: pytest.LogCaptureFixture):
    settings = parse_settings(HIVED_CONFIG + "estimator: {enabled: false}\nexchange: {enabled: false}\n"
                              "leaderElection: {enabled: false}\nnudge: {enabled: false}\nreclaim: {enabled: false}\n")
    present = [n for n in HIVED_NODES if n["metadata"]["name"] != "gpu-c"]
    runtime = build_runtime(settings, api=ListingApi(nodes=present))  # type: ignore[arg-type]
    cells = runtime.cells
    assert cells is not None

    def gpu_c_bad() -> bool:
        with runtime.lock:
            (cell,) = cells.inspect_cells(node="gpu-c")["cells"]
            return not cell["healthy"]

    async def serve() -> bool:
        async with runtime.app.api.router.lifespan_context(runtime.app.api):
            deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
            while not gpu_c_bad() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
            return gpu_c_bad()

    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            assert asyncio.run(serve())
    finally:
        gc.unfreeze()  # serving froze the heap once synced: not for the tests after this one
    assert [getattr(r, "field", None) for r in caplog.records if getattr(r, "node", None) == "gpu-c"] == [
        "cells.topology.physicalCells[2].nodeName"]


def test_a_configured_node_whose_node_object_does_not_read_is_told_apart_from_a_missing_one(caplog: pytest.LogCaptureFixture):
    # The Node exists; the watch cache could not translate it (a malformed allocatable). Its
    # cells are bad all the same, but "has no Node object" would send the operator looking for a
    # typo in the topology: the warning says the Node exists, and why it does not read.
    world = World()
    unreadable = node("gpu-node-9")
    unreadable["status"]["allocatable"]["nvidia.com/gpu"] = "eight"
    world.api.nodes = [node("gpu-node-1"), unreadable]
    world.cache.nodes._list_and_replace()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert world.mark() == {"gpu-node-9": "cells.topology.physicalCells[1].nodeName"}
    assert not world.healthy("gpu-node-9") and not world.placeable_on("gpu-node-9")
    (warned,) = [r for r in caplog.records if r.name == LOGGER and getattr(r, "node", None) == "gpu-node-9"]
    assert "has no Node object" not in warned.getMessage()
    assert "could not be read" in warned.getMessage()
    assert warned.field == "cells.topology.physicalCells[1].nodeName"  # type: ignore[attr-defined]
    assert warned.reason == (  # type: ignore[attr-defined]
        "Node.status.allocatable[nvidia.com/gpu]: 'eight' is not a Kubernetes quantity (e.g. '500m', '2', '16Gi', '1e3')")


def test_a_node_that_reads_again_is_no_longer_told_unreadable():
    world = World()
    unreadable = node("gpu-node-9")
    unreadable["status"]["allocatable"]["nvidia.com/gpu"] = "eight"
    world.api.nodes = [node("gpu-node-1"), unreadable]
    world.cache.nodes._list_and_replace()
    assert world.cache.unreadable_nodes() == {"gpu-node-9": (
        "Node.status.allocatable[nvidia.com/gpu]: 'eight' is not a Kubernetes quantity (e.g. '500m', '2', '16Gi', '1e3')")}
    world.api.nodes = [node("gpu-node-1"), node("gpu-node-9")]
    world.cache.nodes._list_and_replace()
    assert world.cache.unreadable_nodes() == {} and world.healthy("gpu-node-9")
    world.api.nodes = [node("gpu-node-1"), unreadable]
    world.cache.nodes._list_and_replace()
    world.api.nodes = [node("gpu-node-1")]  # deleted while it did not read
    world.cache.nodes._list_and_replace()
    assert world.cache.unreadable_nodes() == {}


def test_a_reload_naming_other_nodes_waits_for_a_restart_so_the_check_at_start_covers_every_node(tmp_path: Path) -> None:
    """The check runs once, at start, on the topology the engine was built from. That covers the
    process's life only because a live reload never changes the topology: one that names a node
    the running topology does not (or drops one) is not applied and waits for a restart, whose
    check names it. Were topology changes ever applied live, the check would have to follow them."""
    startup = parse_settings(yaml_text(CONFIG))
    assert startup.cells.topology is not None
    engine = HivedEngine.from_config(startup.cells, prefix="cells")
    path = tmp_path / "cellfit.yaml"
    path.write_text(yaml_text(CONFIG))
    reloader = ConfigReloader(path=str(path), running=startup, cells=engine, lock=threading.RLock(), metrics=ExtenderMetrics())
    renamed = {**CONFIG, "topology": {**CONFIG["topology"], "physicalCells": [
        {"cellType": "A100-NODE", "nodeName": "gpu-node-1"}, {"cellType": "A100-NODE", "nodeName": "gpu-node-7"}]}}
    path.write_text(yaml_text(renamed))
    outcome = reloader.reload_if_changed()
    assert outcome is not None and outcome.result == "needs_restart"
    assert outcome.restart == {"cells": "topology changed: needs a restart"}
    assert reloader.running.cells.topology == startup.cells.topology
    assert set(node_name_paths(startup.cells.topology)) == {"gpu-node-1", "gpu-node-9"} == set(engine.topology.nodes)


def yaml_text(cells: dict[str, object]) -> str:
    return yaml.safe_dump({"cells": cells})
