"""Cells a guaranteed pod's virtual cluster is getting back already, without a preemption.

kube-scheduler calls the preempt verb (and the leader's reclaim books, scheduler/cluster/
stranded.py) among the nodes where removing pods would make room: a node whose GPUs the VC's own
pods still hold while they terminate is not among them, nor is one whose opportunistic pods are
already leaving. Planned among those nodes alone, a pod of the VC would preempt an opportunistic
pod elsewhere while the cells it could have are being freed: a preemption for nothing (seen live,
one try in three). kube-scheduler's own preemption holds back the same way while victims of an
earlier preemption are still terminating on the nominated node (its PodEligibleToPreemptOthers).

:func:`freeing_cell` finds such a cell: one of the request's level inside the VC's usable cells
(bound or pinned, not draining) where enough healthy GPUs are free or held only by pods that are
leaving, and that needs those pods gone (free GPUs alone would not do: the pod would be placed
there without anyone leaving, and a node kube-scheduler refuses it for other reasons must not
stop its preemption for good). The wait it causes ends when those pods are gone.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple, Sequence

from scheduler.cells.planning import Target
from scheduler.cells.topology import Cell
from scheduler.cells.virtual_clusters import VcState


class FreeingCell(NamedTuple):
    """A cell the VC gets back once the bookings ``leaving`` (ids, ascending) are gone."""

    cell: Cell
    leaving: list[int]


def freeing_cell(vc: VcState, targets: Sequence[Target], gpus: int, *, leaving: Callable[[int], bool]) -> FreeingCell | None:
    """The first cell, in the VC's cells' order, of a target's level with ``gpus`` healthy GPUs
    each free or held only by bookings that are ``leaving`` (booking id -> whether its pod is
    leaving), fewer than ``gpus`` of them free now; None when there is none."""
    for target in targets:
        for cell in _cells_at(_usable_roots(vc, target), target.level):
            found = _freed_by_leaving(cell, gpus, leaving)
            if found is not None:
                return FreeingCell(cell, found)
    return None


def _usable_roots(vc: VcState, target: Target) -> list[Cell]:
    """The VC's cells of the target's chain at its level or above that its pods may use."""
    chain = target.chain
    roots = [root for cell_type in chain.types[target.level - 1 :] for root in vc.bound.get(cell_type, ()) if root not in vc.draining]
    roots.extend(cell for cell in vc.pinned if cell.chain is chain and cell.level >= target.level)
    return roots


def _cells_at(roots: Sequence[Cell], level: int) -> Iterator[Cell]:
    for root in roots:
        stack = [root]
        while stack:
            cell = stack.pop()
            if cell.level == level:
                yield cell
            elif cell.level > level:
                stack.extend(reversed(cell.children))


def _freed_by_leaving(cell: Cell, gpus: int, leaving: Callable[[int], bool]) -> list[int] | None:
    if cell.total - cell.bad < gpus:
        return None
    free = usable = 0
    held: set[int] = set()
    for leaf in cell.leaves:
        if leaf.is_bad:
            continue
        owners = [owner for owner in (leaf.guaranteed_owner, leaf.opportunistic_owner) if owner is not None]
        if not owners:
            free += 1
            usable += 1
        elif all(leaving(owner) for owner in owners):
            usable += 1
            held.update(owners)
    return sorted(held) if usable >= gpus and free < gpus else None
