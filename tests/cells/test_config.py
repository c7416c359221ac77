"""Configuration validation: every problem names the field it is about."""

from __future__ import annotations

import copy

import pytest

from scheduler.cells import CellsConfig, check_config, parse_cells_config
from scheduler.errors import ConfigError
from tests.cells.helpers import rack_cluster


def problems(data, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        check_config(data, **kw)
    return str(info.value)


def test_valid_config_with_bare_list_and_object_vcs():
    data = rack_cluster(
        vcs={
            "a": [{"cellType": "V100-NODE", "count": 2}],
            "b": {"cells": [{"cellType": "V100-RACK", "count": 1}]},
        }
    )
    checked = check_config(data)
    assert set(checked.virtual_clusters) == {"a", "b"}
    assert checked.default_vc is None
    assert "8 nodes" in checked.summary and "2 V100-RACK" in checked.summary


def test_child_count_must_be_positive():
    data = rack_cluster(vcs={})
    data["topology"]["cellTypes"]["V100-NODE"]["childCount"] = 0
    assert "topology.cellTypes.V100-NODE.childCount: must be >= 1" in problems(data)


def test_misspelled_key_is_an_error():
    data = rack_cluster(vcs={})
    data["topology"]["cellTypes"]["V100-NODE"]["isNodeLvl"] = True
    assert "topology.cellTypes.V100-NODE.isNodeLvl: is not a known field" in problems(data)
    data = rack_cluster(vcs={"a": {"cels": []}})
    assert "virtualClusters.a.cels: is not a known field" in problems(data)


def test_missing_and_ill_typed_fields():
    data = rack_cluster(vcs={"a": [{"cellType": "V100-NODE"}]})
    assert "virtualClusters.a[0].count: is required" in problems(data)
    data = rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": "many"}]})
    assert "virtualClusters.a[0].count: must be an integer" in problems(data)


def test_prefix_names_the_section():
    data = rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": -1}]})
    assert "cells.virtualClusters.a[0].count: must be >= 0" in problems(data, prefix="cells")


def test_cell_type_with_two_parents():
    data = rack_cluster(vcs={})
    data["topology"]["cellTypes"]["OTHER"] = {"childType": "V100-SOCKET", "childCount": 2}
    text = problems(data)
    assert "topology.cellTypes.OTHER.childType" in text and "only one parent type" in text


def test_cycle_is_reported():
    data = {"topology": {"cellTypes": {"A": {"childType": "B", "childCount": 2}, "B": {"childType": "A", "childCount": 2}}, "physicalCells": []}}
    assert "cycle" in problems(data)


def test_node_level_required_once():
    data = rack_cluster(vcs={})
    data["topology"]["cellTypes"]["V100-NODE"]["isNodeLevel"] = False
    assert "topology.cellTypes.V100-RACK: no cell type in" in problems(data)
    data = rack_cluster(vcs={})
    data["topology"]["cellTypes"]["V100-RACK"]["isNodeLevel"] = True
    assert "topology.cellTypes.V100-NODE.isNodeLevel" in problems(data) or "topology.cellTypes.V100-RACK.isNodeLevel" in problems(data)


def test_physical_cells_structure():
    data = rack_cluster(vcs={})
    data["topology"]["physicalCells"][0]["cellChildren"].pop()
    assert "topology.physicalCells[0].cellChildren: a 'V100-RACK' cell has 4 children, 3 are listed" in problems(data)
    data = rack_cluster(vcs={})
    data["topology"]["physicalCells"][1]["cellChildren"][0]["nodeName"] = "r0n0"
    assert "topology.physicalCells[1].cellChildren[0].nodeName: node 'r0n0' already appears" in problems(data)
    data = rack_cluster(vcs={})
    del data["topology"]["physicalCells"][0]["cellChildren"][2]["nodeName"]
    assert "topology.physicalCells[0].cellChildren[2].nodeName: is required" in problems(data)
    data = rack_cluster(vcs={})
    data["topology"]["physicalCells"].append({"cellType": "V100-SOCKET", "nodeName": "x"})
    assert "topology.physicalCells[2].cellType: 'V100-SOCKET' is below the node level" in problems(data)
    data = rack_cluster(vcs={})
    data["topology"]["physicalCells"].append({"cellType": "NOPE"})
    assert "topology.physicalCells[2].cellType: unknown cell type 'NOPE'" in problems(data)


def test_virtual_cluster_references():
    data = rack_cluster(vcs={"a": [{"cellType": "V100-NOD", "count": 1}]})
    assert "virtualClusters.a[0].cellType: unknown cell type 'V100-NOD'" in problems(data)
    data = rack_cluster(vcs={"a": {"cells": [], "pinnedCells": ["p0"]}})
    assert "virtualClusters.a.pinnedCells[0]: no physical cell has pinnedCellId 'p0'" in problems(data)
    data = rack_cluster(vcs={"bad name!": []})
    assert "virtualClusters.bad name!: 'bad name!' is not a valid label value" in problems(data)
    data = rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 1}, {"cellType": "V100-NODE", "count": 1}]})
    assert "virtualClusters.a[1].cellType: 'V100-NODE' is listed twice" in problems(data)


def test_pinned_cells_are_exclusive():
    data = rack_cluster(vcs={"a": {"pinnedCells": ["p"]}, "b": {"pinnedCells": ["p"]}})
    data["topology"]["physicalCells"][0]["cellChildren"][0]["pinnedCellId"] = "p"
    assert "virtualClusters.b.pinnedCells[0]: 'p' is already pinned to virtual cluster 'a'" in problems(data)


def test_all_problems_reported_at_once():
    data = rack_cluster(vcs={"a": [{"cellType": "X", "count": 1}], "b": [{"cellType": "Y", "count": 1}]})
    text = problems(data)
    assert "virtualClusters.a[0].cellType" in text and "virtualClusters.b[0].cellType" in text


def test_parse_accepts_a_model_and_round_trips_aliases():
    data = rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 2}]})
    config = parse_cells_config(data)
    assert isinstance(config, CellsConfig)
    dumped = config.model_dump(by_alias=True, exclude_defaults=True)
    assert dumped["topology"]["cellTypes"]["V100-NODE"]["childCount"] == 2
    assert parse_cells_config(copy.deepcopy(dumped)) == config


def test_no_topology_offline_check():
    checked = check_config({"virtualClusters": {"a": [{"cellType": "anything", "count": 1}]}})
    assert checked.topology is None and "discovered" in checked.summary


def test_readme_example_is_valid():
    import pathlib
    import re

    import yaml

    readme = pathlib.Path(__file__).resolve().parents[2] / "scheduler" / "cells" / "README.md"
    block = re.search(r"```yaml\n(.*?)```", readme.read_text(), re.S)
    assert block is not None
    checked = check_config(yaml.safe_load(block.group(1)))
    assert set(checked.virtual_clusters) == {"research", "prod"}
