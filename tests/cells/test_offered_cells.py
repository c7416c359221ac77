"""The filter's offered cell nodes, picked from the node index's names by a mask of the offered
slots: the members, and the plans, of the offered names that are cell nodes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.planning import Unplaceable
from tests.cells.helpers import node, node_names, pod, schedule

RACKS, PER_RACK = 4, 4
CELL_NODES = node_names(RACKS, PER_RACK)
PLAIN_NODES = ["cpu-0", "cpu-1"]  # applied Nodes without GPU cells: in the index, in no cell
STRANGERS = ["nowhere", "r9n9"]  # names the index does not hold


def _engine() -> HivedEngine:
    from tests.cells.helpers import rack_cluster

    engine = HivedEngine.from_config(rack_cluster(RACKS, PER_RACK, vcs={
        "a": [{"cellType": "V100-RACK", "count": 2}], "b": [{"cellType": "V100-RACK", "count": 2}]}))
    for name in CELL_NODES:
        engine.apply_node(node(name))
    for name in PLAIN_NODES:
        engine.apply_node(node(name, gpus=0))
    return engine


def _offered_names(rng: random.Random) -> list[str]:
    """A filter's offered names: some cell nodes (one perhaps twice), perhaps plain or unknown ones."""
    names = rng.sample(CELL_NODES, rng.randint(1, len(CELL_NODES)))
    names += rng.sample(PLAIN_NODES, rng.randint(0, len(PLAIN_NODES))) + rng.sample(STRANGERS, rng.randint(0, 1))
    if rng.random() < 0.3:
        names.append(names[0])
    rng.shuffle(names)
    return names


def _as_names(names: list[str]) -> frozenset[str] | None:
    """What the filter planned with before: the offered cell nodes' names, None when all of them."""
    inside = frozenset(name for name in names if name in CELL_NODES)
    return None if len(inside) == len(CELL_NODES) else inside


@pytest.mark.parametrize("seed", range(40))
def test_the_offered_cells_have_the_members_of_the_names_offered(seed: int) -> None:
    rng = random.Random(seed)
    engine = _engine()
    names = _offered_names(rng)
    allowed, outside_at = engine._offered(engine.node_index.resolve(names))
    expected = _as_names(names)
    assert outside_at.tolist() == [at for at, name in enumerate(names) if name not in CELL_NODES]
    if expected is None:
        assert allowed is None
        return
    assert allowed is not None
    assert len(allowed) == len(expected) and set(allowed) == expected and allowed == expected
    for name in [*CELL_NODES, *PLAIN_NODES, *STRANGERS]:
        assert (name in allowed) == (name in expected), name
    assert None not in allowed and 7 not in allowed  # type: ignore[operator]


@pytest.mark.parametrize("seed", range(30))
def test_plans_on_the_offered_cells_are_the_plans_on_their_names(seed: int) -> None:
    """On a cluster partly full of guaranteed and opportunistic pods, every request size of
    either priority plans the same spot (or the same refusal) on the offered cells as on the
    set of their names."""
    rng = random.Random(seed)
    engine = _engine()
    for index in range(rng.randint(0, 14)):
        vc = rng.choice(["a", "b"])
        placed = pod(f"p{index}", rng.choice([1, 1, 2, 4, 8]), vc, priority=rng.choice([None, "opportunistic"]))
        bound = schedule(engine, placed, CELL_NODES)
        if bound is not None:
            engine.apply_pod(bound)
    for attempt in range(12):
        names = _offered_names(rng)
        allowed, _ = engine._offered(engine.node_index.resolve(names))
        request_pod = pod(f"q{attempt}", rng.choice([1, 2, 3, 4, 8]), rng.choice(["a", "b"]),
                          priority=rng.choice([None, "opportunistic"]))
        ctx = engine._context(request_pod)
        outcomes = []
        for given in (allowed, _as_names(names)):
            try:
                spot = engine.allocator.plan(ctx.request, ctx.vc, ctx.targets, allowed=given)
                outcomes.append(("spot", spot.chain, spot.level, [gpu.id for gpu in spot.gpus], spot.root and spot.root.id, spot.new_root))
            except Unplaceable as refusal:
                outcomes.append(("refused", refusal.reason, refusal.resolvable))
        assert outcomes[0] == outcomes[1]


def test_a_filter_places_a_pod_only_on_an_offered_cell_node() -> None:
    engine = _engine()
    offered = ["r2n1", "cpu-0", "nowhere"]
    decision = engine.filter(pod("only", 8, "b"), engine.node_index.resolve(offered))
    assert np.asarray(decision.feasible).tolist() == [0]
