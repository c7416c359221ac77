"""What each HiveD virtual cluster may still use of its guarantee, for AlloX admission: its cells
as :class:`~scheduler.matching.capacity.GuaranteeCell` values, read from the allocator's own
view (``HivedEngine.inspect_guarantees``), not from a copy of its state.

- a VC cell bound (or pinned) and not draining: its GPUs less those held by guaranteed pods
  and the bad ones; the GPUs of running AlloX Jobs' pods (which admission counts as busy
  machines of their own) are already left out of the held ones by the engine's view;
- a cell of the quota not bound yet: all its GPUs (the buddy allocator binds one when a pod
  needs it; Theorem 1 keeps one free);
- a draining cell (over the quota after a shrink) takes no new pod: nothing.

Opportunistic pods are not subtracted: a guaranteed pod of the VC preempts them. Pure: plain
values in, values out.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from scheduler.matching.admission import WaitingJob, gpu_slots_for
from scheduler.matching.capacity import GuaranteeCell, NodeResources, guaranteed_gpu_machines


def guarantee_cells(rows: Sequence[Mapping[str, Any]]) -> list[GuaranteeCell]:
    """One VC's cells from its rows of the engine's view (``gpus``, ``guaranteed``, ``bad``,
    ``draining``)."""
    cells: list[GuaranteeCell] = []
    for row in rows:
        if row["draining"]:
            continue
        total, bad = int(row["gpus"]), int(row["bad"])
        cells.append(GuaranteeCell(gpus=total, free=max(min(total - int(row["guaranteed"]) - bad, total - bad), 0)))
    return cells


def guarantees(view: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, list[GuaranteeCell]]:
    """Every VC's cells (the implicit ``default`` VC included), by name."""
    return {str(name): guarantee_cells(rows) for name, rows in view.items()}


def gpus_per_pod(jobs: Sequence[WaitingJob], *, free: Sequence[NodeResources]) -> dict[str, int]:
    """Per virtual cluster, the most GPUs one of its queued GPU configurations asks for: a GPU
    machine of that VC must hold any of them (``gpu_slots_for``, as a CPU slot holds the largest
    CPU configuration). A configuration no node of ``free`` holds (``gpu_shortfall``: more GPUs
    than any has free, or more cores or memory than any with its GPUs free) sizes nothing: one
    user's 16 GPUs a pod on nodes of 8 would leave the VC no GPU machine. A VC absent: 1."""
    pools = {job.pool: 0 for job in jobs if job.pool is not None}
    return {kind.split("@", 1)[1]: size for kind, size in gpu_slots_for(jobs, free_nodes=free, gpu_pools=pools).items()}


def pool_machines(
    cells: Mapping[str, Sequence[GuaranteeCell]], *, free: Sequence[NodeResources], sizes: Mapping[str, int]
) -> dict[str, int]:
    """Each VC's GPU machines for :func:`scheduler.matching.admission.decide` (``gpu_pools``):
    what its free guarantee on AlloX's nodes holds (``guaranteed_gpu_machines`` of ``sizes``,
    :func:`gpus_per_pod`), and no more than those nodes have GPUs ``free`` (running AlloX Jobs'
    included): several VCs' guarantees may count one free GPU (the implicit default VC owns
    every GPU)."""
    return {vc: min(count, sum(node.gpu // max(sizes.get(vc, 1), 1) for node in free))
            for vc, count in guaranteed_gpu_machines(cells, gpus_per_pod=sizes).items()}
