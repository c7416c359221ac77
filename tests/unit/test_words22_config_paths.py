"""Where a configuration mistake is, said as the user wrote the file: a VC written as a bare
list of cells has no ``cells`` key of its own, list indexes read ``[0]`` in every message, and a
VC written as one cell's mapping is told its shape, not two unknown keys."""

from __future__ import annotations

import pytest

from scheduler.config import parse_settings
from scheduler.errors import ConfigError

# One A100 node; the VCs follow, as each test writes them.
TOPOLOGY = ("cells:\n  topology: {cellTypes: {A100-NODE: {childType: A100, childCount: 8, isNodeLevel: true}}, "
            "physicalCells: [{cellType: A100-NODE, nodeName: node-00}]}\n  virtualClusters:\n")


def refused(vcs: str) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_settings(TOPOLOGY + vcs, source="cellfit.yaml")
    return str(raised.value)


def test_a_vc_written_as_a_list_is_named_as_written() -> None:
    said = refused('    vision: [{cellType: A100-NODE, count: "one"}]\n')
    assert said.startswith("cellfit.yaml: cells.virtualClusters.vision[0].count: ")


def test_a_vc_written_with_its_cells_key_keeps_it_and_indexes_read_in_brackets() -> None:
    said = refused('    vision: {cells: [{cellType: A100-NODE, count: "one"}]}\n')
    assert said.startswith("cellfit.yaml: cells.virtualClusters.vision.cells[0].count: ")


def test_a_semantic_problem_of_a_vc_written_as_a_list_is_named_as_written() -> None:
    said = refused("    vision: [{cellType: H100-NODE, count: 1}]\n")
    assert said.startswith("cellfit.yaml: cells.virtualClusters.vision[0].cellType: unknown cell type 'H100-NODE'"), said


def test_a_vc_written_as_one_cell_is_told_its_shape() -> None:
    said = refused("    vision: {cellType: A100-NODE, count: 1}\n")
    assert "unknown key" not in said
    assert said == ("cellfit.yaml: cells.virtualClusters.vision: a virtual cluster is a list of cells, or "
                    "{cells: [...], pinnedCells: [...]}, not one cell: write [{cellType: ..., count: ...}] "
                    "(got {'cellType': 'A100-NODE', 'count': 1})")
