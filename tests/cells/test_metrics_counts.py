"""The HiveD gauges read from counts kept where the cells change (``inspection.metrics``) equal
the full walk over every cell (tests/cells/metrics_walk.py) after every step of random runs of a
real engine: guaranteed and opportunistic pods and gangs booked and released, nodes turning bad
and healthy, VCs reconfigured (quotas shrunk and restored, pinned cells changing hands, a VC
removed), restarts recovering every pod from its bind-info, and discovered nodes joining and
leaving (racks forming and dissolving)."""

from __future__ import annotations

import copy
import random
from typing import Any, Callable

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cells import HivedEngine
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.errors import ConfigError
from tests.cells.helpers import V100_TYPES, node, pod, schedule
from tests.cells.metrics_walk import metrics_by_walk

NODES_PER_RACK = 18  # more than WIDE: racks index their nodes
V100_NODES = [f"r{r}n{n}" for r in range(3) for n in range(NODES_PER_RACK)]
T4_NODES = [f"t{i}" for i in range(4)]
PINNED = {"r2n16": "p0", "r2n17": "p1", "t3": "pt"}
VCS: dict[str, Any] = {
    "a": {
        "cells": [{"cellType": "V100-NODE", "count": 10}, {"cellType": "V100-SOCKET", "count": 4}, {"cellType": "V100", "count": 4}],
        "pinnedCells": ["p0", "p1"],
    },
    "b": [{"cellType": "V100-RACK", "count": 1}, {"cellType": "V100-NODE", "count": 3}, {"cellType": "T4-NODE", "count": 1}],
    "c": {"cells": [{"cellType": "V100-RACK", "count": 1}, {"cellType": "T4-NODE", "count": 1}], "pinnedCells": ["pt"]},
}
STATES = ("used", "free", "opportunistic", "bad")
GPUS_PER_NODE = {**{name: 8 for name in V100_NODES}, **{name: 4 for name in T4_NODES}}


def configured(vcs: dict[str, Any]) -> dict[str, Any]:
    types = copy.deepcopy(V100_TYPES)
    types["V100-RACK"] = {"childType": "V100-NODE", "childCount": NODES_PER_RACK}
    types["T4-NODE"] = {"childType": "T4", "childCount": 4, "isNodeLevel": True}
    racks = [
        {
            "cellType": "V100-RACK",
            "cellChildren": [{"nodeName": name, **({"pinnedCellId": PINNED[name]} if name in PINNED else {})} for name in V100_NODES[r * NODES_PER_RACK : (r + 1) * NODES_PER_RACK]],
        }
        for r in range(3)
    ]
    standalone = [{"cellType": "T4-NODE", "nodeName": name, **({"pinnedCellId": PINNED[name]} if name in PINNED else {})} for name in T4_NODES]
    return {"topology": {"cellTypes": types, "physicalCells": racks + standalone}, "virtualClusters": vcs}


def reconfigured(rng: random.Random) -> dict[str, Any]:
    """The VCs with a quota shrunk or restored, the pinned T4 node moved, or VC c removed."""
    vcs = copy.deepcopy(VCS)
    vcs["a"]["cells"][0]["count"] = rng.choice([5, 10])
    roll = rng.random()
    if roll < 0.3:
        vcs["c"]["pinnedCells"] = []
        vcs["b"] = {"cells": vcs["b"], "pinnedCells": ["pt"]}
    elif roll < 0.5:
        del vcs["c"]
    return configured(vcs)


def nonzero_gauges(figures: dict[str, Any]) -> set[str]:
    """Which gauges are above zero: ``family.state`` for the cell rows, ``fragmentation``."""
    found = {f"{family}.{state}" for family in ("virtualClusters", "physical") for row in figures[family] for state in STATES if row[state]}
    return found | ({"fragmentation"} if figures["fragmentationTotal"] else set())


class World:
    """One engine, the pods it has bound and the nodes' states, as a restart would list them."""

    def __init__(self, engine: HivedEngine, nodes: dict[str, NodeInfo]) -> None:
        self.engine = engine
        self.nodes = nodes
        self.running: dict[str, PodInfo] = {}
        self.seen: set[str] = set()  # the gauges that were above zero at some step

    def compare(self, step: str) -> None:
        figures = self.engine.metrics()
        assert figures == metrics_by_walk(self.engine.allocator), step
        self.seen |= nonzero_gauges(figures)

    def place(self, pods: list[PodInfo]) -> None:
        names = sorted(self.engine.topology.nodes)
        for member in pods:
            placed = schedule(self.engine, member, names)
            if placed is not None:
                self.engine.apply_pod(placed)
                self.running[placed.uid] = placed

    def found_running(self, rng: random.Random, uid: str, vc: str | None) -> None:
        """An opportunistic pod the watch shows running on a node, without bind-info (bound
        before a restart lost it): it lands wherever it is, VC cells included."""
        names = sorted(self.engine.topology.nodes)
        if not names:
            return  # every node left
        name = rng.choice(names)
        running = pod(uid, rng.choice([1, 2]), vc, priority="opportunistic", node=name, phase="Running")
        self.engine.apply_pod(running)
        self.running[uid] = running

    def delete_some(self, rng: random.Random) -> None:
        for uid in rng.sample(sorted(self.running), min(len(self.running), rng.randint(1, 10))):
            self.engine.delete_pod(uid)
            del self.running[uid]

    def set_health(self, rng: random.Random) -> None:
        name = rng.choice(sorted(self.nodes))
        ready = rng.random() < 0.5
        self.nodes[name] = node(name, self.nodes[name].allocatable.gpus, ready=ready, labels=dict(self.nodes[name].labels))
        self.engine.apply_node(self.nodes[name])

    def recover(self, fresh: HivedEngine, rng: random.Random) -> None:
        """A restart: the new engine lists the nodes, then the pods in any order."""
        for listed in self.nodes.values():
            fresh.apply_node(listed)
        pods = list(self.running.values())
        rng.shuffle(pods)
        for listed_pod in pods:
            fresh.apply_pod(listed_pod)
        self.engine = fresh


def random_pods(rng: random.Random, step: int, vcs: list[str | None], sizes: list[int]) -> list[PodInfo]:
    vc = rng.choice(vcs)
    priority = rng.choice([None, None, "opportunistic"])
    if rng.random() < 0.3:
        size = rng.randint(2, 6)
        gpus = rng.choice([8, 4])
        return [pod(f"g{step}-{i}", gpus, vc, gang=(f"job{step}", size), priority=priority) for i in range(size)]
    return [pod(f"p{step}", rng.choice(sizes), vc, priority=priority)]


def run_configured(seed: int, steps: int) -> World:
    rng = random.Random(seed)
    config = configured(VCS)
    world = World(HivedEngine.from_config(config), {name: node(name, gpus) for name, gpus in GPUS_PER_NODE.items()})
    for step in range(steps):
        roll = rng.random()
        if roll < 0.45:
            world.place(random_pods(rng, step, ["a", "b", "c"], [1, 1, 2, 4, 8]))
        elif roll < 0.52:
            world.found_running(rng, f"o{step}", rng.choice(["a", "b", "c"]))
        elif roll < 0.7:
            world.delete_some(rng)
        elif roll < 0.82:
            world.set_health(rng)
        elif roll < 0.92:
            try:
                config = reconfigured(rng)
                world.engine.reconfigure(config)
            except ConfigError:
                pass  # a pinned cell still running its VC's pods: the running VCs stay
        else:
            world.recover(HivedEngine.from_config(config), rng)
        world.compare(f"seed {seed} step {step}")
    return world


RACK_LABEL = "topology.kubernetes.io/rack"


def a100(name: str, rack: str | None) -> NodeInfo:
    labels = {"nvidia.com/gpu.product": "A100", **({RACK_LABEL: rack} if rack else {})}
    return node(name, 8, labels=labels)


def run_discovered(seed: int, steps: int) -> World:
    rng = random.Random(seed)
    start = [a100(f"r0-n{i}", "r0") for i in range(4)] + [a100(f"s{i}", None) for i in range(2)]
    world = World(HivedEngine.from_nodes(start, rack_label=RACK_LABEL), {n.name: n for n in start})
    joined = 0
    for step in range(steps):
        roll = rng.random()
        if roll < 0.35:
            world.place(random_pods(rng, step, [None], [1, 2, 4, 8]))
        elif roll < 0.42:
            world.found_running(rng, f"o{step}", None)
        elif roll < 0.55:
            world.delete_some(rng)
        elif roll < 0.7:
            joined += 1
            rack = rng.choice(["r0", "r1", None])
            arriving = a100(f"j{joined}", rack)
            world.nodes[arriving.name] = arriving
            world.engine.apply_node(arriving)
        elif roll < 0.82 and world.nodes:
            leaving = rng.choice(sorted(world.nodes))
            del world.nodes[leaving]
            world.engine.delete_node(leaving)
        elif roll < 0.92 and world.nodes:
            world.set_health(rng)
        else:
            world.recover(HivedEngine.from_nodes(list(world.nodes.values()), rack_label=RACK_LABEL), rng)
        world.compare(f"seed {seed} step {step}")
    return world


@pytest.mark.parametrize("run", [run_configured, run_discovered], ids=["configured", "discovered"])
@settings(max_examples=35, deadline=None, derandomize=True)
@given(seed=st.integers(0, 100_000))
def test_counts_equal_the_walk_at_every_step(run: Callable[[int, int], World], seed: int) -> None:
    run(seed, 45)


def test_the_runs_reach_every_gauge() -> None:
    """Every gauge is above zero at some step of a few runs (a check that the tests test); 8 runs, as a
    VC cell with only opportunistic pods on it (its guaranteed pods gone, the cell still bound) is rare."""
    seen = set().union(*(run_configured(seed, 50).seen for seed in range(8)))
    assert seen == {f"{family}.{state}" for family in ("virtualClusters", "physical") for state in STATES} | {"fragmentation"}


def test_a_node_type_two_chains_hold_is_one_series_counted_over_both() -> None:
    """Nodes joining one by one form a rack of two, which dissolves when the rack's other nodes
    make another rack size the most common: the rack chain stays known and its node type is the
    standalone nodes' too. Its fragmentation counts every node of the type (it read the empty
    rack chain's 0.0 while two of six nodes could not take a whole-node pod), and each cell type
    is one row (two rows gave /metrics two series with the same labels)."""
    engine = HivedEngine.from_nodes([a100("s0", None), a100("s1", None)], rack_label=RACK_LABEL)
    for i in range(4):
        engine.apply_node(a100(f"r1-n{i}", "r1"))
    assert [chain.type_at(chain.node_level) for chain in engine.topology.used_chains] == ["A100-8GPU-NODE", "A100-8GPU-NODE"]
    for name in ("s0", "s1"):
        placed = schedule(engine, pod(f"on-{name}", 2, None), [name])
        assert placed is not None
        engine.apply_pod(placed)
    figures = engine.metrics()
    assert figures["fragmentation"] == {"A100-8GPU-NODE": 2 / 6}
    assert figures["fragmentationTotal"] == 2 / 6
    types = [row["cellType"] for row in figures["physical"]]
    assert sorted(types) == ["A100-8GPU", "A100-8GPU-NODE", "A100-8GPU-RACK"]
    assert figures == metrics_by_walk(engine.allocator)
