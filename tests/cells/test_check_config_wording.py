"""``cellfit check-config`` counts nodes in words a person writes: "1 node", not "1 nodes"
(seen live on a one-node topology)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cli import main

ONE_NODE = """
policy: {name: hived}
cells:
  topology:
    cellTypes:
      A100-NODE: {childType: A100, childCount: 8, isNodeLevel: true}
    physicalCells:
    - {cellType: A100-NODE, nodeName: gpu-node-1}
  virtualClusters:
    nlp: [{cellType: A100-NODE, count: 1}]
"""


def test_one_node_is_one_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    config = tmp_path / "cellfit.yaml"
    config.write_text(ONE_NODE)
    assert main(["check-config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "A100-NODE (8 GPUs each): 1 node, 1 standalone" in out and "1 nodes" not in out


DISCOVERED_WITH_VCS = """
policy: {name: hived}
cells:
  virtualClusters:
    vision: [{cellType: A100-NODE, count: 1}]
    nlp: [{cellType: A100-NODE, count: 1}]
"""


def test_vcs_on_a_discovered_topology_are_said_to_be_checked_at_startup(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """check-config said only "valid" of VCs naming a cell type the cluster's GPUs do not have;
    cellfit serve then refused the file (seen live), with nothing here saying it was unchecked."""
    config = tmp_path / "cellfit.yaml"
    config.write_text(DISCOVERED_WITH_VCS)
    assert main(["check-config", str(config)]) == 0
    out = capsys.readouterr().out
    assert ("cells: discovered from the cluster's Nodes at startup; virtual clusters vision, nlp are checked against "
            "them then, not here: their cell types must be ones discovery names") in out, out


def test_no_vcs_on_a_discovered_topology_says_no_more(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    config = tmp_path / "cellfit.yaml"
    config.write_text("policy: {name: hived}\n")
    assert main(["check-config", str(config)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "cells: discovered from the cluster's Nodes at startup"


def test_check_config_hints_the_sized_names_discovery_gives_and_names_an_unsized_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """check-config hinted "<product>-NODE", a name that stops naming anything once a second node
    size of the product joins (H4): it says the sized names, and names the VC fields that are not
    of that form."""
    config = tmp_path / "cellfit.yaml"
    config.write_text(DISCOVERED_WITH_VCS.replace("nlp: [{cellType: A100-NODE", "nlp: [{cellType: A100-8GPU-NODE"))
    assert main(["check-config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "<product>-<n>GPU-NODE for a node of n GPUs" in out and "<product>-NODE," not in out, out
    assert out.splitlines()[-1] == (
        "warning: cells.virtualClusters.vision[0].cellType is not of that form: an unsized <product>-NODE (-RACK, <product>) "
        "is taken while the cluster has one node size of the product, with a warning naming the stable name, and refused "
        "once it has several"), out
