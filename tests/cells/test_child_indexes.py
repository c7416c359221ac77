"""The index of a wide cell's children (best fit by guaranteed free GPUs) is kept by the
topology, not carried by the cell: built with the tree, moved by every booking and release,
and forgotten with the cells it indexes."""

from __future__ import annotations

from scheduler.cells import HivedEngine
from scheduler.cells.buckets import Buckets
from scheduler.cells.topology import WIDE, Cell, Topology
from tests.cells.helpers import node_names, pod, rack_cluster, schedule

NODES_PER_RACK = WIDE + 4  # a rack with more children than WIDE is a wide cell


def _wide_engine() -> HivedEngine:
    return HivedEngine.from_config(rack_cluster(racks=2, nodes_per_rack=NODES_PER_RACK, vcs={"a": [{"cellType": "V100-RACK", "count": 1}]}))


def _keyed(index: Buckets[Cell]) -> dict[str, int]:
    return {cell.id: key for key, cell in index.items_at_least(1)}


def _expected(topology: Topology, rack: Cell) -> dict[str, int]:
    """What the index of ``rack`` holds when exact: every child with a free GPU, by that count."""
    assert rack in topology.child_indexes
    return {child.id: child.guaranteed_free for child in rack.children if child.guaranteed_free}


def test_cells_carry_no_index_of_their_children() -> None:
    assert "child_index" not in Cell.__slots__


def test_only_wide_cells_have_an_index_of_their_children() -> None:
    topology = _wide_engine().topology
    racks = topology.top_cells
    assert set(topology.child_indexes) == set(racks)
    for rack in racks:
        assert _keyed(topology.child_indexes[rack]) == _expected(topology, rack)


def test_bookings_and_releases_move_children_in_their_rack_index() -> None:
    engine = _wide_engine()
    names = node_names(racks=2, nodes_per_rack=NODES_PER_RACK)
    placed = [schedule(engine, pod(f"p{i}", gpus, vc="a"), names) for i, gpus in enumerate((1, 2, 8, 3))]
    assert all(p is not None for p in placed)
    topology = engine.topology
    busy = [rack for rack in topology.top_cells if rack.guaranteed_used]
    assert busy, "the pods went somewhere"
    for rack in topology.top_cells:
        assert _keyed(topology.child_indexes[rack]) == _expected(topology, rack)
    for p in placed:
        assert p is not None
        engine.delete_pod(p.uid)
    for rack in topology.top_cells:
        assert _keyed(topology.child_indexes[rack]) == _expected(topology, rack)
        assert len(topology.child_indexes[rack]) == NODES_PER_RACK


def test_a_removed_top_cell_takes_its_index_with_it() -> None:
    engine = _wide_engine()
    topology = engine.topology
    spare = next(rack for rack in topology.top_cells if rack.vc is None)
    engine.allocator.remove_top_cell(spare)
    assert spare not in topology.child_indexes
    assert set(topology.child_indexes) == set(topology.top_cells)
