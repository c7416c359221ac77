"""Builders shared by the HiveD tests: configurations, pods, nodes, and a canonical state
snapshot for comparing two engines."""

from __future__ import annotations

import copy
from typing import Any

from scheduler.cells import HivedEngine
from scheduler.cells.topology import CellState
from scheduler.core.model import NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.kube.names import filter_offered

V100_TYPES: dict[str, Any] = {
    "V100-SWITCH": {"childType": "V100", "childCount": 2},
    "V100-SOCKET": {"childType": "V100-SWITCH", "childCount": 2},
    "V100-NODE": {"childType": "V100-SOCKET", "childCount": 2, "isNodeLevel": True},
    "V100-RACK": {"childType": "V100-NODE", "childCount": 4},
}


def rack_cluster(racks: int = 2, nodes_per_rack: int = 4, *, vcs: dict[str, Any] | None = None) -> dict[str, Any]:
    """``racks`` racks of 8-GPU nodes (GPU > switch(2) > socket(4) > node(8) > rack)."""
    types = copy.deepcopy(V100_TYPES)
    types["V100-RACK"] = {"childType": "V100-NODE", "childCount": nodes_per_rack}
    physical = [
        {"cellType": "V100-RACK", "cellChildren": [{"nodeName": f"r{r}n{n}"} for n in range(nodes_per_rack)]}
        for r in range(racks)
    ]
    config: dict[str, Any] = {"topology": {"cellTypes": types, "physicalCells": physical}}
    if vcs is not None:
        config["virtualClusters"] = vcs
    return config


def node_names(racks: int = 2, nodes_per_rack: int = 4) -> list[str]:
    return [f"r{r}n{n}" for r in range(racks) for n in range(nodes_per_rack)]


def pod(
    uid: str,
    gpus: int,
    vc: str | None = "a",
    *,
    priority: str | None = None,
    cell_type: str | None = None,
    gang: tuple[str, int] | None = None,
    node: str | None = None,
    annotations: dict[str, str] | None = None,
    phase: str = "Pending",
) -> PodInfo:
    labels = {}
    if vc is not None:
        labels["cellfit.io/virtual-cluster"] = vc
    if priority is not None:
        labels["cellfit.io/priority"] = priority
    ann = dict(annotations or {})
    if cell_type is not None:
        ann["cellfit.io/cell-type"] = cell_type
    owner = None
    if gang is not None:
        ann["cellfit.io/gang"] = "true"
        ann["cellfit.io/gang-size"] = str(gang[1])
        owner = OwnerRef(kind="Job", name=gang[0], uid=f"uid-{gang[0]}")
    return PodInfo(
        uid=uid,
        namespace="ns",
        name=uid,
        requests=Resources(cpu_millis=1000, gpus=gpus),
        labels=labels,
        annotations=ann,
        node_name=node,
        phase=phase,
        owner=owner,
    )


def bound(p: PodInfo, node: str, annotations: dict[str, str]) -> PodInfo:
    """The pod as the watch reports it after binding."""
    return PodInfo(
        uid=p.uid,
        namespace=p.namespace,
        name=p.name,
        requests=p.requests,
        labels=p.labels,
        annotations={**p.annotations, **annotations},
        node_name=node,
        phase="Running",
        owner=p.owner,
    )


def node(name: str, gpus: int = 8, *, ready: bool = True, unschedulable: bool = False, labels: dict[str, str] | None = None) -> NodeInfo:
    return NodeInfo(
        name=name,
        allocatable=Resources(cpu_millis=64000, memory_bytes=2**38, gpus=gpus),
        labels=labels or {},
        ready=ready,
        unschedulable=unschedulable,
    )


def schedule(engine: HivedEngine, p: PodInfo, nodes: list[str]) -> PodInfo | None:
    """filter -> reserve, as kube-scheduler would; the bound pod, or None when filter refused."""
    decision = filter_offered(engine, p, nodes)
    if not decision.feasible:
        return None
    assert len(decision.feasible) == 1, decision
    placement = engine.reserve(p, decision.feasible[0])
    return bound(p, placement.node_name, dict(placement.annotations))


def snapshot(engine: HivedEngine) -> dict[str, Any]:
    """Everything that defines HiveD's state, independent of booking ids and insertion order."""
    alloc = engine.allocator

    def who(booking_id: int | None) -> str | None:
        if booking_id is None:
            return None
        b = alloc.bookings[booking_id]
        return b.pod_uid or f"slot:{b.group.key if b.group else '?'}:{b.node}:{b.gpu_indices}"

    gpus = {}
    states = {}
    for cell in engine.topology.all_cells():
        if cell.buddy_state() is not CellState.INSIDE:
            states[cell.id] = (cell.buddy_state().value, cell.vc)
        if cell.level == 1 and (cell.guaranteed_owner is not None or cell.opportunistic_owner is not None):
            gpus[cell.id] = (who(cell.guaranteed_owner), who(cell.opportunistic_owner))
    groups = {
        key: sorted((s.node, tuple(s.gpu_indices), s.pod_uid) for s in g.slots) for key, g in alloc.groups.items()
    }
    return {"states": states, "gpus": gpus, "groups": groups, "pods": sorted(alloc.by_pod)}
