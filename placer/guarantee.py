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

from scheduler.matching.capacity import GuaranteeCell


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
