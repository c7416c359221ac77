"""What each HiveD virtual cluster may still use of its guarantee, for AlloX admission: its cells
as :class:`~scheduler.matching.capacity.GuaranteeCell` values, read from the allocator's own
public view (``HivedEngine.inspect_virtual_cluster``, what ``/v1/inspect/virtual-clusters/{vc}``
serves), not from a copy of its state.

- a VC cell bound (or pinned) and not draining: its GPUs less those held by guaranteed pods
  and the bad ones; the GPUs of the pods of ``except_pods`` (running AlloX Jobs', which
  admission counts as busy machines of their own) count as free;
- a cell of the quota not bound yet: all its GPUs (the buddy allocator binds one when a pod
  needs it; Theorem 1 keeps one free);
- a draining cell (over the quota after a shrink) takes no new pod: nothing.

Opportunistic pods are not subtracted: a guaranteed pod of the VC preempts them. Pure: plain
dicts in, values out.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from scheduler.matching.capacity import GuaranteeCell


def guarantee_cells(view: Mapping[str, Any], *, except_pods: frozenset[str] = frozenset()) -> list[GuaranteeCell]:
    """One VC's cells from its inspect view (``cells``, ``vcCells``, ``placements``)."""
    cells: list[GuaranteeCell] = []
    for row in view.get("cells", ()):
        unbound = int(row["quota"]) - int(row["bound"])
        cells.extend(GuaranteeCell(gpus=int(row["gpusPerCell"]), free=int(row["gpusPerCell"])) for _ in range(max(unbound, 0)))
    returned: dict[str, int] = {}
    for placement in view.get("placements", ()):
        if placement.get("uid") in except_pods and placement.get("priority") == "guaranteed" and placement.get("vcCell"):
            returned[placement["vcCell"]] = returned.get(placement["vcCell"], 0) + len(placement.get("gpuIndices") or ())
    for cell in view.get("vcCells", ()):
        if cell.get("state") == "draining":
            continue
        gpus = cell["gpus"]
        free = int(gpus["total"]) - int(gpus["guaranteed"]) - int(gpus["bad"]) + returned.get(cell["id"], 0)
        cells.append(GuaranteeCell(gpus=int(gpus["total"]), free=max(min(free, int(gpus["total"]) - int(gpus["bad"])), 0)))
    return cells


def guarantees(views: Sequence[Mapping[str, Any]], *, except_pods: frozenset[str] = frozenset()) -> dict[str, list[GuaranteeCell]]:
    """Every configured VC's cells (the implicit ``default`` VC included), by name."""
    return {str(view["name"]): guarantee_cells(view, except_pods=except_pods) for view in views if view.get("configured", True)}
