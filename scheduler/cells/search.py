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
from itertools import islice
from operator import attrgetter
from typing import AbstractSet, Mapping, Sequence

from scheduler.cells.offered import OfferedNodes
from scheduler.cells.topology import Cell, ChildIndex


class View(Enum):
    GUARANTEED = "guaranteed"
    IDLE = "idle"


# A global read is several times cheaper than an Enum attribute in CPython 3.11.
_VIEW_GUARANTEED = View.GUARANTEED


def available(cell: Cell, view: View) -> int:
    return cell.guaranteed_free if view is _VIEW_GUARANTEED else cell.idle_gpus


def node_allowed(cell: Cell, allowed: AbstractSet[str] | None) -> bool:
    """For a cell at or below the node level: is its node among the offered ones."""
    return allowed is None or cell.node in allowed


# A walk of a wide cell's index goes straight to the offered nodes it has not reached once it has
# walked past this many children per offered node (putting one in order costs 5-10 steps of the
# walk), where at least as many are left to walk.
_STRAIGHT = 8

# Packing keys (C-level attribute getters: these sorts run on every placement).
_GUARANTEED_KEY = attrgetter("guaranteed_free", "opportunistic_used", "ordinal")
_IDLE_KEY = attrgetter("idle_gpus", "ordinal")


def best_spot(
    cell: Cell, level: int, gpus: int, view: View, allowed: AbstractSet[str] | None, child_indexes: Mapping[Cell, ChildIndex]
) -> Cell | None:
    """The best-fit level-``level`` cell inside ``cell`` (or ``cell`` itself) with ``gpus``
    available GPUs on an allowed node; ``None`` when there is none. ``child_indexes`` are the
    wide cells' indexes of their children (:attr:`Topology.child_indexes`).

    Greedy: at each level the child with the fewest available GPUs that still holds the request
    is tried first, and the search backtracks only when a child is fragmented below."""
    guaranteed = view is _VIEW_GUARANTEED
    free = cell.guaranteed_free if guaranteed else cell.idle_gpus
    if free < gpus:
        return None
    if cell.level == level:
        return cell if allowed is None or cell.node is None or cell.node in allowed else None
    node = cell.node
    if node is not None and allowed is not None and node not in allowed:
        return None
    child_index = child_indexes.get(cell)
    if child_index is not None:
        if guaranteed:
            # Wide cell: children come best-fit first from its index (ties in insertion order).
            # Most searches end at the first one; only then is the index walked.
            first = child_index.first_at_least(gpus)
            if first is None:
                return None
            found = best_spot(first, level, gpus, view, allowed, child_indexes)
            if found is not None:
                return found
            by_node = child_index.by_node
            if allowed is None or not by_node:
                for group in child_index.groups_at_least(gpus):
                    for kid in group:
                        if kid is not first:
                            found = best_spot(kid, level, gpus, view, allowed, child_indexes)
                            if found is not None:
                                return found
                return None
            # Node children, some offered: a node not offered is walked past without a search (a
            # filter walks past hundreds). A walk longer than going straight to the offered nodes
            # would cost (a reservation: one node) goes straight to the ones it has not reached,
            # unless what is left to walk could cost less (kube-scheduler's 10% of 5,000 nodes).
            budget = len(allowed) * _STRAIGHT
            if 2 * budget >= len(by_node):
                budget = len(by_node)  # no group is longer: the whole walk
            searched = 1 if first.node in allowed else 0  # offered nodes searched, in walk order
            # A filter's offered nodes are asked inline, in C (offered.py): the walk may pass
            # hundreds of nodes not offered (thousands at 5,000), and a Python __contains__ per
            # node would cost more; which way is chosen once a group, not at every node.
            masked = allowed if isinstance(allowed, OfferedNodes) else None
            for group in child_index.groups_at_least(gpus):
                walked = islice(group, budget)
                if masked is not None:
                    mask, slot_of = masked.mask, masked.slot_of
                    # A node-level cell's node is named (str).
                    offered_kids = (kid for kid in walked if mask[slot_of(kid.node, -1)] and kid is not first)  # type: ignore[arg-type]
                else:
                    offered_kids = (kid for kid in walked if kid.node in allowed and kid is not first)
                for kid in offered_kids:
                    searched += 1
                    found = best_spot(kid, level, gpus, view, allowed, child_indexes)
                    if found is not None:
                        return found
                if len(group) > budget:
                    least = max(gpus, 1)  # at_least(0) is at_least(1): a full node is in no group
                    offered = [(kid, kid.guaranteed_free) for kid in map(by_node.get, allowed) if kid is not None and kid.guaranteed_free >= least]
                    for kid in child_index.in_walk_order(offered)[searched:]:
                        found = best_spot(kid, level, gpus, view, allowed, child_indexes)
                        if found is not None:
                            return found
                    return None
                budget -= len(group)
            return None
    elif free == cell.total and (allowed is None or node is not None) and (not guaranteed or cell.opportunistic_used == 0):
        # An untouched cell: its children tie on the packing key, so the first child is the
        # best fit at every level down (the sort below would pick the same one).
        while cell.level > level:
            cell = cell.children[0]
            if cell.level > level and cell in child_indexes:
                return best_spot(cell, level, gpus, view, allowed, child_indexes)
        return cell
    if guaranteed:
        kids = [c for c in cell.children if c.guaranteed_free >= gpus]
        if len(kids) > 1:
            kids.sort(key=_GUARANTEED_KEY)
    else:
        kids = [c for c in cell.children if c.idle_gpus >= gpus]
        if len(kids) > 1:
            kids.sort(key=_IDLE_KEY)
    for kid in kids:
        found = best_spot(kid, level, gpus, view, allowed, child_indexes)
        if found is not None:
            return found
    return None


def pick_gpus(cell: Cell, gpus: int, view: View) -> Sequence[Cell]:
    """``gpus`` available GPUs inside ``cell`` (which must hold that many), packed: a single
    child that fits is preferred (best fit), otherwise the fullest children are emptied first.
    In the guaranteed view GPUs without an opportunistic pod are preferred (fewer preemptions)."""
    if cell.level == 1:
        return (cell,)
    guaranteed = view is _VIEW_GUARANTEED
    free = cell.guaranteed_free if guaranteed else cell.idle_gpus
    if free == gpus:
        # Every available GPU of the cell goes (a whole node for an 8-GPU pod): the packing
        # order below would pick exactly these, one sorted level at a time.
        if free == cell.total:
            return cell.leaves
        if guaranteed:
            return [leaf for leaf in cell.leaves if leaf.guaranteed_owner is None and not leaf.is_bad]
        return [leaf for leaf in cell.leaves if leaf.guaranteed_owner is None and leaf.opportunistic_owner is None and not leaf.is_bad]
    if free == cell.total and (not guaranteed or cell.opportunistic_used == 0):
        # An untouched cell: children tie on the key, so packing takes the first GPUs in order.
        return cell.leaves[:gpus]
    if guaranteed:
        kids = [c for c in cell.children if c.guaranteed_free > 0]
        kids.sort(key=_GUARANTEED_KEY)
        for kid in kids:
            if kid.guaranteed_free >= gpus:
                return pick_gpus(kid, gpus, view)
    else:
        kids = [c for c in cell.children if c.idle_gpus > 0]
        kids.sort(key=_IDLE_KEY)
        for kid in kids:
            if kid.idle_gpus >= gpus:
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
