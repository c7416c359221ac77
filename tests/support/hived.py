"""A small HiveD cluster configured with its topology, so that the extender runs policy hived
with no Kubernetes cluster: three 8-GPU nodes (A100 pairs), two VCs, and a CPU-only node outside
the cells. Shared by the HTTP tests and the fuzzing, which must see the same cells."""

from __future__ import annotations

from tests.support import kube_objects as k

CONFIG = """
cells:
  topology:
    cellTypes:
      A100-PAIR: {childType: A100, childCount: 2}
      A100-NODE: {childType: A100-PAIR, childCount: 4, isNodeLevel: true}
    physicalCells:
    - {cellType: A100-NODE, nodeName: gpu-a}
    - {cellType: A100-NODE, nodeName: gpu-b}
    - {cellType: A100-NODE, nodeName: gpu-c}
  virtualClusters:
    vision:
    - {cellType: A100-NODE, count: 2}
    speech:
    - {cellType: A100-PAIR, count: 2}
"""
NODES = [k.node(name, gpus=8) for name in ("gpu-a", "gpu-b", "gpu-c")] + [k.node("cpu-only", gpus=0)]
