"""A search of a wide cell offered some of its nodes walks its index only so far (``_STRAIGHT``
children per offered node, where twice as many are there; a reservation, one node: 8), then goes
straight to the offered nodes it has not reached, put in the order the walk would meet them by
each entry's insertion number: the spot it finds is the one the full walk finds, as bookings and
releases move nodes between the index's keys (a node moved goes last among its key's), with
every offered set from one node to all."""

from __future__ import annotations

import random

import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.buckets import Buckets
from scheduler.cells.search import _STRAIGHT, View, best_spot
from scheduler.cells.topology import ChildIndex
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule
from tests.cells.test_search_walk import full_walk

PER_RACK = 80  # a wide rack: a walk offered a few nodes (fewer than PER_RACK / 2 / _STRAIGHT) may stop early


@pytest.mark.parametrize("seed", range(20))
def test_items_are_put_in_the_walk_s_order_whatever_moved_them(seed: int) -> None:
    rng = random.Random(seed)
    index: Buckets[int] = Buckets()
    keys: dict[int, int] = {}
    for step in range(400):
        item = rng.randrange(30)
        new = rng.choice([0, 0, 1, 2, 3, 5, 8])
        if item in keys:
            index.move(item, keys[item], new)
        else:
            index.add(item, new)
        keys[item] = new
        if step % 10:
            continue
        at_least = rng.choice([1, 1, 2, 3, 8])
        walk = list(index.at_least(at_least))
        assert [item for group in index.groups_at_least(at_least) for item in group] == walk
        some = rng.sample(sorted(keys), rng.randint(0, len(keys)))
        keyed = [(i, keys[i]) for i in some if keys[i] >= at_least]
        assert index.in_walk_order(keyed) == [i for i in walk if i in some]
    with pytest.raises(KeyError):  # a key not the index's
        index.in_walk_order([(item, key + 1) for item, key in keys.items() if key][:1])


def test_two_entries_under_one_key_come_in_insertion_order_not_by_item() -> None:
    index: Buckets[str] = Buckets()
    for item in ("b", "a", "c"):
        index.add(item, 4)
    index.move("b", 4, 2)
    index.move("b", 2, 4)  # b went last among the 4s
    assert list(index.at_least(1)) == ["a", "c", "b"]
    assert index.in_walk_order([("b", 4), ("a", 4)]) == ["a", "b"]


def _churned(rng: random.Random) -> HivedEngine:
    """One wide rack of a VC's and a loose one, pods of both VCs placed and some deleted, so
    nodes have moved between keys (and back) many times."""
    engine = HivedEngine.from_config(rack_cluster(2, PER_RACK, vcs={
        "a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 20}]}))
    names = node_names(2, PER_RACK)
    for name in names:
        engine.apply_node(node(name))
    placed: list[str] = []
    for index in range(rng.randint(20, 160)):
        if placed and rng.random() < 0.35:
            engine.delete_pod(placed.pop(rng.randrange(len(placed))))
            continue
        new = pod(f"p{index}", rng.choice([1, 1, 1, 2, 3, 4, 8]), rng.choice(["a", "b"]), priority=rng.choice([None, None, "opportunistic"]))
        bound = schedule(engine, new, rng.sample(names, rng.randint(1, len(names))))
        if bound is not None:
            engine.apply_pod(bound)
            placed.append(bound.uid)
    return engine


@pytest.mark.parametrize("seed", range(20))
def test_a_few_offered_nodes_find_the_full_walk_s_spot(seed: int) -> None:
    rng = random.Random(seed)
    topology, names = _churned(rng).topology, node_names(2, PER_RACK)
    roots = [cell for cell in topology.all_cells() if cell.level > 1]
    racks = list(topology.child_indexes)
    straight = found = 0
    for _ in range(400):
        root = rng.choice(racks) if rng.random() < 0.6 else rng.choice(roots)
        level = rng.randint(1, root.level)
        gpus = rng.choice([1, 1, 2, 3, 4, 8])
        start = rng.randrange(len(names))
        window = [names[(start + i) % len(names)] for i in range(rng.randint(1, len(names)))]  # kube-scheduler's, rotating
        allowed = rng.choice([
            frozenset(rng.sample(names, 1)),
            frozenset(rng.sample(names, rng.randint(1, PER_RACK // _STRAIGHT))),
            frozenset(window[: rng.randint(1, 2 * PER_RACK // _STRAIGHT)]),
            frozenset(window),
        ])
        index = topology.child_indexes.get(root)
        budget = len(allowed) * _STRAIGHT
        straight += index is not None and 2 * budget < PER_RACK and len(list(index.at_least(gpus))) > budget  # a walk may stop
        for view in View:
            expected = full_walk(root, level, gpus, view, allowed, topology.child_indexes)
            assert best_spot(root, level, gpus, view, allowed, topology.child_indexes) is expected
            found += expected is not None
    assert straight > 50 and found > 50  # walks long enough to stop early, and spots found, not only refusals


def test_a_reservation_goes_to_its_node_past_fuller_nodes_not_offered() -> None:
    engine = _churned(random.Random(3))
    topology = engine.topology
    rack = topology.top_cells[0]
    index = topology.child_indexes[rack]
    assert isinstance(index, ChildIndex) and len(index.by_node) == PER_RACK
    walk = [kid for kid in index.at_least(1) if kid.node is not None]
    last = walk[-1]  # the emptiest node there is, walked to last
    spot = best_spot(rack, 1, 1, View.GUARANTEED, frozenset({last.node or ""}), topology.child_indexes)
    assert spot is not None and spot.node == last.node
    assert spot is full_walk(rack, 1, 1, View.GUARANTEED, frozenset({last.node or ""}), topology.child_indexes)
