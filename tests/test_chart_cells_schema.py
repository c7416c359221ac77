"""The chart's values.schema.json looks inside ``cells`` (the HiveD topology and virtual
clusters) as ``cellfit check-config`` reads it: the same keys, of the same types, so that
``helm install`` with a misspelled key there fails naming it. Before, ``cells.topology`` and
``cells.virtualClusters`` were any mapping: ``childCont: 8`` rendered, and cellfit refused the
ConfigMap only when its pods started (CrashLoopBackOff, the reason in their log).

The refusals run helm (as tests/test_chart_offline.py finds it); the agreement with cellfit's
models is read from them (scheduler/cells/config.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from scheduler.cells.config import CellTypeSpec, PhysicalCellSpec, TopologyConfig, VirtualCellSpec, VirtualClusterSpec
from scheduler.config import parse_settings
from scheduler.errors import ConfigError
from tests.cells.helpers import rack_cluster
from tests.support.hived import CONFIG as HIVED_CONFIG
from tests.test_chart_offline import CHART, NONDEFAULT_VALUES, helm, render_args

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFINITIONS = SCHEMA["definitions"]

# What a valid cells section of the chart looks like: a rack of two nodes and a node, a pinned
# cell, a VC written each way.
VALID: dict[str, Any] = {
    "topology": {
        "cellTypes": {
            "A100-PAIR": {"childType": "A100", "childCount": 2},
            "A100-NODE": {"childType": "A100-PAIR", "childCount": 4, "isNodeLevel": True},
            "A100-RACK": {"childType": "A100-NODE", "childCount": 2},
        },
        "physicalCells": [
            {"cellType": "A100-RACK", "cellId": "rack-a",
             "cellChildren": [{"nodeName": "gpu-a-0"}, {"nodeName": "gpu-a-1", "pinnedCellId": "pinned-a"}]},
            {"cellType": "A100-NODE", "nodeName": "gpu-b-0"},
        ],
    },
    "virtualClusters": {
        "vision": [{"cellType": "A100-NODE", "count": 1}],
        "nlp": {"cells": [{"cellType": "A100-PAIR", "count": 2}], "pinnedCells": ["pinned-a"]},
    },
}


def with_change(path: str, value: Any) -> dict[str, Any]:
    """VALID with the key at ``path`` (dots and [i]) set to ``value``; ``rename:NEW`` renames it."""
    cells = copy.deepcopy(VALID)
    *parents, last = path.replace("[", ".").replace("]", "").split(".")
    node: Any = cells
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if isinstance(value, str) and value.startswith("rename:"):
        node[value.removeprefix("rename:")] = node.pop(last)
    else:
        node[last] = value
    return cells


def aliases(model: type[BaseModel]) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}


@pytest.mark.parametrize(
    ("definition", "model"),
    [("hivedCellType", CellTypeSpec), ("hivedPhysicalCell", PhysicalCellSpec), ("hivedVirtualCell", VirtualCellSpec)],
)
def test_each_cell_s_keys_are_cellfit_s(definition: str, model: type[BaseModel]) -> None:
    assert set(DEFINITIONS[definition]["properties"]) == aliases(model)
    required = {info.alias or name for name, info in model.model_fields.items() if info.is_required()}
    assert set(DEFINITIONS[definition].get("required", ())) == required


def test_the_topology_s_and_a_virtual_cluster_s_keys_are_cellfit_s() -> None:
    cells = SCHEMA["properties"]["cells"]["properties"]
    assert set(cells["topology"]["properties"]) == aliases(TopologyConfig) == set(cells["topology"]["required"])
    [_bare, written_out] = DEFINITIONS["hivedVirtualCluster"]["oneOf"]
    assert set(written_out["properties"]) == aliases(VirtualClusterSpec)


def cells_errors(cells: Any) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA)
    return [error.message for error in validator.iter_errors({"cells": cells})]


@pytest.mark.parametrize(
    "cells",
    [VALID, yaml.safe_load(NONDEFAULT_VALUES.read_text())["cells"], yaml.safe_load(HIVED_CONFIG)["cells"],
     rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 3}], "b": {"cells": [{"cellType": "V100-NODE", "count": 0}]}}),
     {"topology": None, "virtualClusters": {}}],
    ids=["valid", "nondefault-values", "hived-support", "rack-cluster", "discovered"],
)
def test_what_cellfit_takes_the_schema_takes(cells: Any) -> None:
    parse_settings(yaml.safe_dump({"cells": cells}))  # cellfit takes it
    assert cells_errors(cells) == []


# Each refused by cellfit too (a check that the schema refuses nothing cellfit takes), and by
# helm with the key named.
MISTAKES = [
    ("topology.cellTypes.A100-NODE.childCount", "rename:childCont", "childCont"),
    ("topology.cellTypes.A100-NODE.isNodeLevel", "rename:isNodeLvl", "isNodeLvl"),
    ("topology.cellTypes.A100-NODE.childCount", "eight", "childCount"),
    ("topology.physicalCells[1].nodeName", "rename:node", "node"),
    ("topology.physicalCells[0].cellChildren[1].pinnedCellId", "rename:pinnedCell", "pinnedCell"),
    ("topology.physicalCells[0].cellChildren", "rename:children", "children"),
    ("topology.physicalCells", "rename:physicalCell", "physicalCells"),
    ("virtualClusters.vision[0].cellType", "rename:cellTyp", "cellTyp"),
    ("virtualClusters.vision[0].count", "two", "count"),
    ("virtualClusters.nlp.pinnedCells", "rename:pinned", "pinned"),
    ("virtualClusters.nlp.cells[0].count", -1, "count"),
    ("virtualClusters.vision", "rename:vision team", "vision team"),  # a VC's name is a label value
    ("virtualClusters.vision", "rename:", "virtualClusters"),
]


@pytest.mark.parametrize(("path", "change", "named"), MISTAKES, ids=[f"{p}={c}" for p, c, _ in MISTAKES])
def test_a_mistake_inside_cells_fails_helm_naming_the_key(path: str, change: Any, named: str, tmp_path: Path) -> None:
    cells = with_change(path, change)
    with pytest.raises(ConfigError):
        parse_settings(yaml.safe_dump({"cells": cells}))
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"cells": cells}))
    proc = helm(*render_args("-f", str(values)), check=False)
    assert proc.returncode != 0, f"cells with {path} -> {change} rendered without complaint"
    assert "schema" in proc.stderr and named in proc.stderr, proc.stderr


def test_a_valid_cells_section_renders(tmp_path: Path) -> None:
    # The schema's branches (a VC as a list, as {cells, pinnedCells}) as helm's validator takes them.
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"cells": VALID}))
    helm(*render_args("-f", str(values)))


def test_a_vc_written_as_one_cell_is_refused_as_cellfit_refuses_it() -> None:
    cells = with_change("virtualClusters.vision", {"cellType": "A100-NODE", "count": 1})
    with pytest.raises(ConfigError, match="not one cell"):
        parse_settings(yaml.safe_dump({"cells": cells}))
    assert cells_errors(cells)
