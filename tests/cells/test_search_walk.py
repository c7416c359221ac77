"""best_spot walks past a wide cell's children it knows hold nothing for the search (the first
child, searched already; a node that is not offered) without searching them: the spot it finds
is the one the full walk finds, checked against that walk kept here as it was."""

from __future__ import annotations

import random
from typing import AbstractSet, Mapping

import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.search import _GUARANTEED_KEY, _IDLE_KEY, View, best_spot
from scheduler.cells.topology import Cell, ChildIndex
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule

RACKS, PER_RACK = 2, 24  # more than topology.WIDE nodes a rack: the racks have child indexes


def full_walk(
    cell: Cell, level: int, gpus: int, view: View, allowed: AbstractSet[str] | None, child_indexes: Mapping[Cell, ChildIndex]
) -> Cell | None:
    """best_spot as it was before it skipped children: every child of the index searched."""
    guaranteed = view is View.GUARANTEED
    free = cell.guaranteed_free if guaranteed else cell.idle_gpus
    if free < gpus:
        return None
    if cell.level == level:
        return cell if allowed is None or cell.node is None or cell.node in allowed else None
    node_name = cell.node
    if node_name is not None and allowed is not None and node_name not in allowed:
        return None
    child_index = child_indexes.get(cell)
    if child_index is not None:
        if guaranteed:
            first = child_index.first_at_least(gpus)
            if first is None:
                return None
            found = full_walk(first, level, gpus, view, allowed, child_indexes)
            if found is not None:
                return found
            for kid in child_index.at_least(gpus):
                found = full_walk(kid, level, gpus, view, allowed, child_indexes)
                if found is not None:
                    return found
            return None
    elif free == cell.total and (allowed is None or node_name is not None) and (not guaranteed or cell.opportunistic_used == 0):
        while cell.level > level:
            cell = cell.children[0]
            if cell.level > level and cell in child_indexes:
                return full_walk(cell, level, gpus, view, allowed, child_indexes)
        return cell
    kids = [c for c in cell.children if (c.guaranteed_free if guaranteed else c.idle_gpus) >= gpus]
    if len(kids) > 1:
        kids.sort(key=_GUARANTEED_KEY if guaranteed else _IDLE_KEY)
    for kid in kids:
        found = full_walk(kid, level, gpus, view, allowed, child_indexes)
        if found is not None:
            return found
    return None


def _engine(rng: random.Random) -> HivedEngine:
    """Racks partly full of guaranteed and opportunistic pods of both VCs."""
    engine = HivedEngine.from_config(rack_cluster(RACKS, PER_RACK, vcs={
        "a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 12}]}))
    names = node_names(RACKS, PER_RACK)
    for name in names:
        engine.apply_node(node(name))
    for index in range(rng.randint(0, 60)):
        placed = pod(f"p{index}", rng.choice([1, 1, 1, 2, 4, 8]), rng.choice(["a", "b"]),
                     priority=rng.choice([None, None, "opportunistic"]))
        bound = schedule(engine, placed, rng.sample(names, rng.randint(1, len(names))))
        if bound is not None:
            engine.apply_pod(bound)
    return engine


@pytest.mark.parametrize("seed", range(25))
def test_the_spot_found_is_the_full_walk_s(seed: int) -> None:
    rng = random.Random(seed)
    engine = _engine(rng)
    topology = engine.topology
    names = node_names(RACKS, PER_RACK)
    roots = [cell for cell in topology.all_cells() if cell.level > 1]
    searched = 0
    for _ in range(300):
        root = rng.choice(roots)
        level = rng.randint(1, root.level)
        gpus = rng.choice([1, 1, 2, 3, 4, 8])
        allowed = rng.choice([None, frozenset(rng.sample(names, 1)), frozenset(rng.sample(names, rng.randint(1, len(names))))])
        for view in View:
            expected = full_walk(root, level, gpus, view, allowed, topology.child_indexes)
            assert best_spot(root, level, gpus, view, allowed, topology.child_indexes) is expected
            searched += expected is not None
    assert searched > 0  # some searches find a spot, not only refusals


def test_a_reservation_s_one_node_is_found_past_every_other_node_of_the_rack() -> None:
    engine = _engine(random.Random(7))
    topology = engine.topology
    rack = next(cell for cell in topology.all_cells() if cell in topology.child_indexes)
    last = rack.children[-1]
    spot = best_spot(rack, 1, 1, View.GUARANTEED, frozenset({last.node or ""}), topology.child_indexes)
    expected = full_walk(rack, 1, 1, View.GUARANTEED, frozenset({last.node or ""}), topology.child_indexes)
    assert spot is expected and (spot is None or spot.node == last.node)
