"""What a HiveD configuration may describe is bounded before a cell is built, and the field to fix
is named: one ``childCount: 1000000000`` once built cells until memory ran out (10^7 reached
19.6 GB). Checked with ``parse_cells_config`` (structure only), so these tests never build a tree."""

from __future__ import annotations

import pytest

from scheduler.cells import parse_cells_config
from scheduler.errors import ConfigError
from tests.cells.helpers import rack_cluster

BOUND = "a topology may describe at most 262,144 GPUs in 1,048,576 cells"


def problems(data) -> str:
    with pytest.raises(ConfigError) as info:
        parse_cells_config(data, prefix="cells")
    return str(info.value)


def test_a_child_count_that_makes_one_cell_too_big_is_named():
    data = rack_cluster(racks=1, nodes_per_rack=1)
    data["topology"]["cellTypes"]["V100-NODE"]["childCount"] = 10**9
    assert problems(data) == (
        "cells.topology.cellTypes.V100-NODE.childCount: 1,000,000,000 x 'V100-SOCKET' makes one 'V100-NODE' cell hold "
        f"4,000,000,000 GPUs in 7,000,000,001 cells; {BOUND}"
    )


def test_the_bound_itself_is_accepted_and_one_rack_more_is_not():
    parse_cells_config(rack_cluster(racks=128, nodes_per_rack=256))  # 262,144 GPUs, 491,648 cells
    assert problems(rack_cluster(racks=129, nodes_per_rack=256)) == (
        f"cells.topology.physicalCells: the 33,024 nodes listed hold 264,192 GPUs in 495,489 cells; {BOUND}"
    )


def test_cells_are_bounded_as_well_as_gpus():
    # Fourteen levels of one child each between the GPU and an 8-GPU node: 121 cells a node.
    types = {"L1": {"childType": "GPU", "childCount": 1}}
    types |= {f"L{i}": {"childType": f"L{i - 1}", "childCount": 1} for i in range(2, 15)}
    types["NODE"] = {"childType": "L14", "childCount": 8, "isNodeLevel": True}
    nodes = [{"cellType": "NODE", "nodeName": f"n{i}"} for i in range(9_000)]
    message = problems({"topology": {"cellTypes": types, "physicalCells": nodes}})
    assert message == f"cells.topology.physicalCells: the 9,000 nodes listed hold 72,000 GPUs in 1,089,000 cells; {BOUND}"


def test_a_hierarchy_of_more_than_sixteen_levels_is_refused():
    types = {"L1": {"childType": "GPU", "childCount": 1}}
    types |= {f"L{i}": {"childType": f"L{i - 1}", "childCount": 1} for i in range(2, 17)}
    types["L16"]["isNodeLevel"] = True
    assert problems({"topology": {"cellTypes": types, "physicalCells": []}}) == (
        "cells.topology.cellTypes.L16: its hierarchy has 17 levels (GPU included); at most 16"
    )


def test_more_than_256_cell_types_are_refused():
    types = {f"NODE{i}": {"childType": f"GPU{i}", "childCount": 8, "isNodeLevel": True} for i in range(257)}
    assert problems({"topology": {"cellTypes": types, "physicalCells": []}}) == (
        "cells.topology.cellTypes: 257 cell types; at most 256 may be configured"
    )


def test_a_long_cycle_is_found_once_per_type_in_linear_time():
    types = {f"T{i}": {"childType": f"T{(i + 1) % 200}", "childCount": 2} for i in range(200)}
    lines = problems({"topology": {"cellTypes": types, "physicalCells": []}}).splitlines()
    assert lines[0].startswith("cells.topology.cellTypes.T0.childType: cycle T0 -> T1 -> T2")
    assert lines[0].endswith("-> T199 -> T0") and lines[-1] == "... and 180 more problems"


def test_known_names_are_listed_once_and_cut():
    types = {f"NODE{i:03d}": {"childType": f"GPU{i}", "childCount": 8, "isNodeLevel": True} for i in range(256)}
    nodes = [{"cellType": "NODE000", "nodeName": "n0"}]
    vcs = {f"vc{i}": [{"cellType": "NOPE", "count": 1}] for i in range(1_000)}
    lines = problems({"topology": {"cellTypes": types, "physicalCells": nodes}, "virtualClusters": vcs}).splitlines()
    known = ", ".join(sorted([*types, *(f"GPU{i}" for i in range(256))])[:10])  # GPU types are cell types of VCs too
    assert lines[0] == f"cells.virtualClusters.vc0[0].cellType: unknown cell type 'NOPE' (known: {known} and 502 more)"
    assert len(lines) == 21 and lines[-1] == "... and 980 more problems"
