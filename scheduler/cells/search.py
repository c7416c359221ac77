"""Where inside a cell a request's GPUs go: best-fit descent and packing GPU choice.

Two views of availability (§3.2's two cell views):

* ``GUARANTEED``: a GPU is available unless a guaranteed pod holds it or it is bad. GPUs that
  opportunistic pods use count as available, because a guaranteed pod may preempt them. This is
  the view in which a VC behaves exactly like its private cluster.
* ``IDLE``: only GPUs with no pod at all (and healthy) are available. Opportunistic pods never
  preempt, and recovery of a pod without bind-info must not invent victims.

Packing rule everywhere: among cells that hold the request, take the one with the fewest
available GPUs, so that emptier (higher-level) cells stay whole for larger requests.
"""

from __future__ import annotations

from enum import Enum
from typing import AbstractSet

from scheduler.cells.topology import Cell


class View(Enum):
    GUARANTEED = "guaranteed"
    IDLE = "idle"


def available(cell: Cell, view: View) -> int:
    return cell.gfree if view is View.GUARANTEED else cell.hfree


def node_allowed(cell: Cell, allowed: AbstractSet[str] | None) -> bool:
    """For a cell at or below the node level: is its node among the offered ones."""
    return allowed is None or cell.node in allowed


def best_spot(cell: Cell, level: int, gpus: int, view: View, allowed: AbstractSet[str] | None) -> Cell | None:
    """The best-fit level-``level`` cell inside ``cell`` (or ``cell`` itself) with ``gpus``
    available GPUs on an allowed node; ``None`` when there is none.

    Greedy: at each level the child with the fewest available GPUs that still holds the request
    is tried first, and the search backtracks only when a child is fragmented below."""
    if available(cell, view) < gpus:
        return None
    if cell.level == level:
        return cell if cell.above_node or node_allowed(cell, allowed) else None
    if cell.node is not None and allowed is not None and cell.node not in allowed:
        return None
    if view is View.GUARANTEED and cell.child_index is not None:
        # Wide cell: children come best-fit first from its index (ties in insertion order).
        for kid in cell.child_index.at_least(gpus):
            found = best_spot(kid, level, gpus, view, allowed)
            if found is not None:
                return found
        return None
    if view is View.GUARANTEED:
        kids = sorted((c for c in cell.children if c.gfree >= gpus), key=lambda c: (c.gfree, c.opp, c.ordinal))
    else:
        kids = sorted((c for c in cell.children if c.hfree >= gpus), key=lambda c: (c.hfree, c.ordinal))
    for kid in kids:
        found = best_spot(kid, level, gpus, view, allowed)
        if found is not None:
            return found
    return None


def pick_gpus(cell: Cell, gpus: int, view: View) -> list[Cell]:
    """``gpus`` available GPUs inside ``cell`` (which must hold that many), packed: a single
    child that fits is preferred (best fit), otherwise the fullest children are emptied first.
    In the guaranteed view GPUs without an opportunistic pod are preferred (fewer preemptions)."""
    if cell.level == 1:
        return [cell]

    def key(c: Cell) -> tuple[int, int, int]:
        return (available(c, view), c.opp if view is View.GUARANTEED else 0, c.ordinal)

    kids = sorted((c for c in cell.children if available(c, view) > 0), key=key)
    for kid in kids:
        if available(kid, view) >= gpus:
            return pick_gpus(kid, gpus, view)
    chosen: list[Cell] = []
    remaining = gpus
    for kid in kids:
        take = min(available(kid, view), remaining)
        chosen.extend(pick_gpus(kid, take, view))
        remaining -= take
        if remaining == 0:
            break
    return chosen


def contains(outer: Cell, inner: Cell) -> bool:
    cell: Cell | None = inner
    while cell is not None:
        if cell is outer:
            return True
        cell = cell.parent
    return False
