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
