"""Gangs: every slot of a gang booked at once, or none.

Each slot after the first is planned where a full search would put it, without the search when
that is provably the VC cell that took the previous slot or the next clean cell of the free
list the previous slot's VC cell came off; slots that each take a whole clean node are booked
together (see the README's Speed section, and tests/cells/test_gang_batch.py, which checks them
against slot-by-slot search with every shortcut off).
"""

from __future__ import annotations

from typing import AbstractSet, Mapping, Sequence

from scheduler.cells.booking import Booking, Group
from scheduler.cells.bookkeeping import Bookkeeper
from scheduler.cells.ledger import LeafLedger
from scheduler.cells.planning import Planner, QuotaExhausted, Spot, Target, Unplaceable
from scheduler.cells.request import CellRequest, GangSpec, Priority
from scheduler.cells.search import View, best_spot, pick_gpus
from scheduler.cells.topology import Cell, CellState, Chain
from scheduler.cells.virtual_clusters import VcState, VirtualClusters

# Enum members as module constants: a global read is several times cheaper than an Enum
# attribute in CPython 3.11.
_FREE, _INSIDE, _SPLIT = CellState.FREE, CellState.INSIDE, CellState.SPLIT
_BOUND, _PINNED = CellState.BOUND, CellState.PINNED
_PRIO_GUARANTEED = Priority.GUARANTEED
_VIEW_GUARANTEED = View.GUARANTEED


class GangPlanner:
    def __init__(self, *, virtual_clusters: VirtualClusters, ledger: LeafLedger, planner: Planner, bookkeeper: Bookkeeper) -> None:
        self._vcs = virtual_clusters
        self._ledger = ledger
        self._planner = planner
        self._bookkeeper = bookkeeper

    def plan_group(
        self,
        request: CellRequest,
        gang: GangSpec,
        vc: VcState | None,
        targets: Sequence[Target],
        *,
        allowed: AbstractSet[str] | None,
    ) -> Group:
        """Book every slot of a gang, or nothing (raises :class:`Unplaceable`)."""
        vc_name = vc.name if vc is not None else (request.vc or "")
        if request.priority is _PRIO_GUARANTEED:
            assert vc is not None
            capacity = max(self._planner.gang_capacity(vc, t, request.gpus) for t in targets)
            if gang.size > capacity:
                raise Unplaceable(
                    f"gang {gang.name} needs {gang.size} pods x {request.gpus} GPUs but virtual cluster "
                    f"{vc.name!r} can hold at most {capacity} such pod{'' if capacity == 1 else 's'} even when idle"
                )
        group = Group(
            key=gang.key,
            name=gang.name,
            vc=vc_name,
            priority=request.priority,
            size=gang.size,
            gpus=request.gpus,
            cell_type=targets[0].chain.type_at(targets[0].level),
        )
        guaranteed_vc = vc if request.priority is _PRIO_GUARANTEED else None
        target_of: dict[Chain, Target] = {}
        for target in targets:
            target_of.setdefault(target.chain, target)
        listed: Cell | None = None  # the previous slot's VC cell, if bound straight off a free list
        slots = group.slots
        try:
            while len(slots) < gang.size:
                spot = None
                if guaranteed_vc is not None and slots:
                    previous = slots[-1]
                    if previous.root is not None and previous.root.guaranteed_free >= request.gpus:
                        spot = self._plan_in_last_root(guaranteed_vc, previous, target_of, request.gpus, allowed)
                        if spot is not None and self._planner.preempts(spot):
                            spot = None  # the full plan weighs its victims against its equals
                    if spot is None and listed is not None:
                        spot = self._plan_next_listed(guaranteed_vc, listed, target_of, request.gpus, allowed)
                if spot is None:
                    spot = self._planner.plan(request, vc, targets, allowed=allowed)
                root = spot.root
                # Free on a list of its own level: a top-level FREE cell, or a child of a split one.
                off_list = spot.new_root and root is not None and (
                    root.state is _FREE or (root.state is _INSIDE and root.parent is not None and root.parent.state is _SPLIT)
                )
                if guaranteed_vc is not None and allowed is None:
                    last_off_list = self._book_whole_nodes(guaranteed_vc, group, spot, off_list, target_of, gang.size - len(slots))
                    if last_off_list is not None:
                        listed = slots[-1].root if last_off_list else None
                        continue
                listed = root if off_list else None
                slots.append(
                    self._bookkeeper.book(spot, vc=vc_name, priority=request.priority, pod_uid=None, pod_key=None, group=group)
                )
        except Unplaceable as failure:
            fitting = len(group.slots)
            # The offered nodes that took some of the gang's pods, when the rest found no free
            # cell among the offered nodes though the VC has quota left: cells kube-scheduler
            # left out (an opportunistic pod's GPUs, say) may take them once reclaimed, and
            # these nodes with them. Preemption may help there, for the whole gang (user26 H2).
            room_on: frozenset[str] = frozenset()
            if guaranteed_vc is not None and allowed is not None and not isinstance(failure, QuotaExhausted):
                room_on = frozenset(slot.node for slot in group.slots if slot.node is not None)
            for slot in list(group.slots):
                self._bookkeeper.release(slot)
            reason = failure.reason
            if isinstance(failure, QuotaExhausted) and fitting:
                # Planned after the gang's earlier pods took the room left, the per-pod reason
                # says the VC has none: say what the gang needs at once instead.
                reason = self._planner.gang_quota_reason(failure, gpus=request.gpus, size=gang.size, fitting=fitting)
            raise Unplaceable(
                f"gang {gang.name} ({gang.size} pods x {request.gpus} GPUs) cannot be placed all at once: {reason}",
                resolvable=failure.resolvable,
                resolvable_on=room_on,
            ) from None
        group.cell_type = group.slots[0].cell_type if group.slots else group.cell_type
        self._bookkeeper.groups[gang.key] = group
        return group

    def _book_whole_nodes(
        self, vc: VcState, group: Group, spot: Spot, off_list: bool, target_of: Mapping[Chain, Target], count: int
    ) -> bool | None:
        """Book the planned slot ``spot`` and up to ``count - 1`` slots after it at once where
        each slot takes a whole clean node (8-GPU pods on 8-GPU nodes), exactly where and how
        slot-by-slot booking would put them, with the work the slots share done once (see
        :meth:`LeafLedger.change_whole_nodes`, :meth:`VirtualClusters.adopt`). ``off_list``: ``spot`` binds a VC cell
        straight off the free list of its level. Returns whether the last slot booked did so
        too, or ``None`` when ``spot`` is not of that kind (nothing is booked then).

        Which nodes, not a heuristic: a search per slot would take these one after another.
        Inside a wide VC cell of nodes (the spot's, bound before or by this slot)
        :meth:`_plan_in_last_root` takes the first node of the cell's index with every GPU
        free, which is where best fit put the spot itself; booking it takes it out of the index
        and moves no other entry, so the next slot takes the next such node. When the spot binds
        a fresh node, its search found no VC cell able to take it and nothing for the targets
        before its own, and booking it changes neither (see :meth:`_plan_next_listed`); at the
        node level it took the first clean free node, or split a free cell when there was none
        (a clean free node always holds the request). Either way the clean free nodes are then
        the ones after it on the list, or the split's, and with quota left Algorithm 1 takes
        the first of them: the node level is the lowest with a free cell, so there is no
        deviation to check. Binding it changes nothing else on the list, nor any draining (none
        is allowed here). A node with opportunistic pods ends the run: its slot needs the
        general booking, which evicts.

        GPUs are booked before the new VC cells are registered, as :meth:`Bookkeeper.book` does for one:
        with no draining and the quota respected, a registration moves nothing the later slots'
        bookings move, and a new cell enters the VC's index where its last move would have put
        it (last in the bucket of its final free count)."""
        root = spot.root
        chain = spot.chain
        node_level = chain.node_level
        n = group.gpus
        target = target_of.get(chain)
        if root is None or target is None or target.level != node_level or n != chain.gpus[node_level - 1]:
            return None
        anchor = spot.gpus[0].node_cell
        if anchor is None or anchor.opportunistic_used or anchor.guaranteed_free != n:
            return None
        nodes: list[Cell]
        fresh_nodes = False  # every slot binds its own node
        child_index = self._vcs.topology.child_indexes.get(root)
        if root.level == node_level + 1 and child_index is not None:
            # A root from the VC's index is the VC's and usable; a new one is once bound (as
            # draining cannot change then).
            if spot.new_root and vc.draining:
                return None
            nodes = child_index.first_with(n, count)
            if not nodes or nodes[0] is not anchor:
                return None
        elif root is anchor and spot.new_root and not vc.draining:
            cell_type = root.cell_type
            left = vc.quota.get(cell_type, 0) - len(vc.bound.get(cell_type, ()))
            buddy = self._vcs.buddies[chain]
            buddy.take(anchor)  # what follows it on the list is what the next slots take
            nodes = [anchor, *buddy.first_clean_cells(node_level, max(min(count, left) - 1, 0))]
            fresh_nodes = True
        else:
            return None
        ids = []
        slots = group.slots
        new_booking = self._bookkeeper.new_booking
        vc_name, priority = vc.name, group.priority
        for node in nodes:
            if node.opportunistic_used or node.guaranteed_free != n:
                break
            booking = new_booking(
                vc_name, priority, "guaranteed", chain, node_level, node if fresh_nodes else root, node.leaves, None, None, group
            )
            slots.append(booking)
            ids.append(booking.id)
        del nodes[len(ids) :]
        self._ledger.change_whole_nodes(nodes, ids, book=True)
        if fresh_nodes:
            buddy = self._vcs.buddies[chain]
            for node in nodes[1:]:
                buddy.take(node)
            self._vcs.adopt(vc, nodes)
        elif spot.new_root:
            self._vcs.bind(vc, root)
        return off_list if len(nodes) == 1 else fresh_nodes

    def _plan_in_last_root(
        self, vc: VcState, previous: Booking, target_of: Mapping[Chain, Target], n: int, allowed: AbstractSet[str] | None
    ) -> Spot | None:
        """The next gang slot where :meth:`Planner.plan` would put it, found without the search when it
        goes into the VC cell that took the previous slot. Exact, not a heuristic: the previous
        slot's search found every VC cell it tried before that one unable to hold the request (or
        bound that one fresh after all of them failed). Booking the slot changed nothing outside
        that cell, and only lowered its free count, which moves it earlier in best-fit order; so
        the same search for this slot tries that cell first among those that can succeed."""
        root = previous.root
        if root is None or root.vc != vc.name or root in vc.draining or root.guaranteed_free < n:
            return None
        if root.state is not _BOUND and root.state is not _PINNED:
            return None
        target = target_of.get(root.chain)
        if target is None or target.level > root.level:
            return None
        spot = best_spot(root, target.level, n, _VIEW_GUARANTEED, allowed, self._vcs.topology.child_indexes)
        if spot is None:
            return None
        return Spot(target.chain, target.level, tuple(pick_gpus(spot, n, _VIEW_GUARANTEED)), root, False)

    def _plan_next_listed(
        self, vc: VcState, previous: Cell, target_of: Mapping[Chain, Target], n: int, allowed: AbstractSet[str] | None
    ) -> Spot | None:
        """The next gang slot where :meth:`Planner.plan` would put it, when the previous slot bound a new
        VC cell straight off the free list of its level L and that cell cannot take this slot
        (:meth:`_plan_in_last_root` said no). Exact, not a heuristic: the previous slot's search
        found no VC cell able to take it and nothing at the levels and targets before L, and
        binding a level-L cell off the list changes neither (other cells are untouched, and f_L
        and r_L - a_L both drop by one, which leaves every deviation check of Theorem 1's
        invariant as it was). So the search comes to level L again, where Algorithm 1 takes the
        first acceptable clean cell of the level's free list; only that is done here. ``None``
        (the full search runs) when the level has no free cell, no quota left, or no clean
        acceptable cell."""
        chain, level = previous.chain, previous.level
        target = target_of.get(chain)
        buddy = self._vcs.buddies.get(chain)
        if target is None or target.level > level or buddy is None:
            return None
        cell_type = previous.cell_type
        if vc.quota.get(cell_type, 0) - len(vc.bound.get(cell_type, ())) <= 0:
            return None
        target_level = target.level
        if target_level == level and allowed is None:
            # The request fills whole cells of the free list's level (an 8-GPU pod, a node):
            # a clean free cell holds it whole, so the first one is the answer.
            clean = buddy.first_clean_cells(level, 1)
            if not clean or clean[0].guaranteed_free < n:
                return None
            return Spot(chain, target_level, tuple(pick_gpus(clean[0], n, _VIEW_GUARANTEED)), clean[0], True)
        found = buddy.first_clean(level, lambda cell: best_spot(cell, target_level, n, _VIEW_GUARANTEED, allowed, self._vcs.topology.child_indexes))
        if found is None:
            return None
        cell, spot = found
        return Spot(chain, target_level, tuple(pick_gpus(spot, n, _VIEW_GUARANTEED)), cell, True)



def give_back_gang(bookkeeper: Bookkeeper, key: str) -> list[Booking]:
    """A gang preempted whole (FitGpp takes a gang member only together with every other one):
    none of its bookings outlives its pods. Its slots without a pod go now (returned); each slot
    a member still holds while it leaves becomes that pod's own booking, which goes when the pod
    does, not kept for a replacement; and the gang is forgotten, so that its next pods plan it
    afresh, all or nothing, under the rooms the preemption keeps (its preemptor's first). Before,
    a slot left booked on the preemptor's node went to the gang's next pod, or kept the
    preemptor's VC quota from it, for ever (user24 F14)."""
    group = bookkeeper.groups.pop(key, None)
    if group is None:
        return []
    free = [slot for slot in group.slots if slot.pod_uid is None]
    for slot in group.slots:
        if slot.pod_uid is not None:
            slot.group = None
    for slot in free:
        bookkeeper.release(slot)
    group.slots.clear()
    return free
