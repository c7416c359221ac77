"""The clusters of the ``hived`` experiment, as the HiveD configuration ``cellfit serve`` reads
(``cells:`` section, ``scheduler/cells/README.md``) and as Node objects:

* the shared cluster: ``racks`` rack cells of node cells of GPUs; one virtual cluster per tenant
  holding its quota's rack and node cells;
* a tenant's private cluster: exactly its quota's cells as physical cells (each rack cell a
  rack of its own, each node cell a standalone node) and one virtual cluster owning them all.

Cell types: ``GPU`` (a leaf) < ``GPU-NODE`` (``gpus_per_node`` GPUs, the node level) <
``GPU-RACK`` (``nodes_per_rack`` nodes). No level between the GPU and the node: the quota-only
baseline places a pod's GPUs anywhere on a node, so HiveD's pods ask for no more than that.
"""

from __future__ import annotations

from typing import Any, Final

from scheduler.core.model import NodeInfo
from scheduler.core.resources import Resources
from scheduler.simulator.hived.workload import ClusterShape, HivedWorkload, Tenant

GPU_TYPE: Final = "GPU"
NODE_TYPE: Final = "GPU-NODE"
RACK_TYPE: Final = "GPU-RACK"


def cell_types(shape: ClusterShape) -> dict[str, Any]:
    return {
        NODE_TYPE: {"childType": GPU_TYPE, "childCount": shape.gpus_per_node, "isNodeLevel": True},
        RACK_TYPE: {"childType": NODE_TYPE, "childCount": shape.nodes_per_rack},
    }


def _quota(tenant: Tenant) -> list[dict[str, Any]]:
    cells = []
    if tenant.racks:
        cells.append({"cellType": RACK_TYPE, "count": tenant.racks})
    if tenant.nodes:
        cells.append({"cellType": NODE_TYPE, "count": tenant.nodes})
    return cells


def shared_cells_config(workload: HivedWorkload) -> dict[str, Any]:
    """The shared cluster with one VC per tenant (its quota's cells)."""
    shape = workload.shape
    physical = [
        {"cellType": RACK_TYPE, "cellId": f"rack-{r}", "cellChildren": [{"nodeName": f"r{r}n{n}"} for n in range(shape.nodes_per_rack)]}
        for r in range(shape.racks)
    ]
    return {
        "topology": {"cellTypes": cell_types(shape), "physicalCells": physical},
        "virtualClusters": {tenant.name: _quota(tenant) for tenant in workload.tenants},
    }


def private_node_names(workload: HivedWorkload, tenant: Tenant) -> list[str]:
    shape = workload.shape
    racked = [f"{tenant.name}-r{r}n{n}" for r in range(tenant.racks) for n in range(shape.nodes_per_rack)]
    return racked + [f"{tenant.name}-n{i}" for i in range(tenant.nodes)]


def private_cells_config(workload: HivedWorkload, tenant: Tenant) -> dict[str, Any]:
    """The tenant's private cluster: its quota's cells, and one VC owning every one of them."""
    shape = workload.shape
    physical: list[dict[str, Any]] = [
        {
            "cellType": RACK_TYPE,
            "cellId": f"{tenant.name}-rack-{r}",
            "cellChildren": [{"nodeName": f"{tenant.name}-r{r}n{n}"} for n in range(shape.nodes_per_rack)],
        }
        for r in range(tenant.racks)
    ]
    physical += [{"cellType": NODE_TYPE, "nodeName": f"{tenant.name}-n{i}"} for i in range(tenant.nodes)]
    return {
        "topology": {"cellTypes": cell_types(shape), "physicalCells": physical},
        "virtualClusters": {tenant.name: _quota(tenant)},
    }


def gpu_nodes(names: list[str], gpus_per_node: int) -> list[NodeInfo]:
    """Node objects with GPUs only (pods ask for GPUs alone; see ClusterShape)."""
    return [NodeInfo(name=name, allocatable=Resources(gpus=gpus_per_node)) for name in names]
