"""The leaf ledger: which booking owns each GPU, and the counters every cell keeps over its
subtree (guaranteed, opportunistic, idle, bad GPUs), kept exact on every booking, release and
health change, with every index keyed by a counter moved along: the buddy free lists (clean or
not), wide cells' child indexes, the VCs' usable cells, and the idle node index.

This is the inner loop of every booking and release: one function per shape of change, no
per-cell calls, no closures.
"""

from __future__ import annotations

from enum import Enum
from typing import Sequence

from scheduler.cells.buddy import BuddyAllocator
from scheduler.cells.idle_index import IdleNodeIndex
from scheduler.cells.topology import Cell, CellState, Chain, Topology
from scheduler.cells.virtual_clusters import VcState


class LeafChange(Enum):
    """What happens to a booking's GPUs (see :meth:`LeafLedger.change_leaves`)."""

    BOOK_GUARANTEED = "book-guaranteed"
    BOOK_OPPORTUNISTIC = "book-opportunistic"
    CLEAR_GUARANTEED = "clear-guaranteed"
    CLEAR_OPPORTUNISTIC = "clear-opportunistic"
    BAD = "bad"
    HEALTHY = "healthy"


# Enum members as module constants: a global read is several times cheaper than an Enum
# attribute in CPython 3.11, and these are read on every booking.
_FREE, _INSIDE, _SPLIT = CellState.FREE, CellState.INSIDE, CellState.SPLIT
_BOUND, _PINNED = CellState.BOUND, CellState.PINNED
BOOK_GUARANTEED, BOOK_OPPORTUNISTIC = LeafChange.BOOK_GUARANTEED, LeafChange.BOOK_OPPORTUNISTIC
CLEAR_GUARANTEED, CLEAR_OPPORTUNISTIC = LeafChange.CLEAR_GUARANTEED, LeafChange.CLEAR_OPPORTUNISTIC
_BAD, _HEALTHY = LeafChange.BAD, LeafChange.HEALTHY


class LeafLedger:
    """Changes GPUs' owners and health, and everything that counts them. The buddy allocators,
    the idle node index and the VCs are the ones :class:`VirtualClusters` keeps (shared, not
    copied: cells join and VCs come and go there)."""

    def __init__(
        self, *, topology: Topology, buddies: dict[Chain, BuddyAllocator], idle_nodes: IdleNodeIndex, vcs: dict[str, VcState]
    ) -> None:
        self.topology = topology
        self.buddies = buddies
        self.idle_nodes = idle_nodes
        self.vcs = vcs

    def change_leaves(self, leaves: Sequence[Cell], change: LeafChange, booking_id: int = 0) -> None:
        """Apply ``change`` to GPUs and propagate the counter deltas up the tree, one level at a
        time so that every ancestor is updated once however many of its GPUs changed, moving
        cells between the indexes whose keys changed. This is the inner loop of every booking
        and release: one function, no per-cell calls, no closures."""
        book_guaranteed, book_opportunistic = change is BOOK_GUARANTEED, change is BOOK_OPPORTUNISTIC
        clear_guaranteed, clear_opportunistic = change is CLEAR_GUARANTEED, change is CLEAR_OPPORTUNISTIC
        bad = change is _BAD
        # Deltas per cell: [bad, guaranteed_used, opportunistic_used, idle_gpus, guaranteed_free].
        level: dict[Cell, list[int]] = {}  # cells whose deltas are still to be applied
        above: dict[Cell, list[int]] = {}  # their parents, deltas summed
        child_indexes = self.topology.child_indexes
        for leaf in leaves:
            bad_before, guaranteed_before, opportunistic_before = leaf.is_bad, leaf.guaranteed_owner is not None, leaf.opportunistic_owner is not None
            if book_guaranteed:
                leaf.guaranteed_owner = booking_id
            elif book_opportunistic:
                leaf.opportunistic_owner = booking_id
            elif clear_guaranteed:
                if leaf.guaranteed_owner == booking_id:
                    leaf.guaranteed_owner = None
            elif clear_opportunistic:
                if leaf.opportunistic_owner == booking_id:
                    leaf.opportunistic_owner = None
            else:
                leaf.is_bad = bad
            bad_after, guaranteed_after, opportunistic_after = leaf.is_bad, leaf.guaranteed_owner is not None, leaf.opportunistic_owner is not None
            if bad_before == bad_after and guaranteed_before == guaranteed_after and opportunistic_before == opportunistic_after:
                continue
            d_bad, d_guaranteed, d_opportunistic = bad_after - bad_before, guaranteed_after - guaranteed_before, opportunistic_after - opportunistic_before
            d_idle = (not (bad_after or guaranteed_after or opportunistic_after)) - (not (bad_before or guaranteed_before or opportunistic_before))
            d_guaranteed_free = (not (bad_after or guaranteed_after)) - (not (bad_before or guaranteed_before))
            parent = leaf.parent
            if leaf.state is not _INSIDE or parent is None or parent.state is _SPLIT or parent in child_indexes:
                # A GPU that is a VC cell, free on its own, or under a wide cell: the general
                # path below moves it in its indexes.
                level[leaf] = [d_bad, d_guaranteed, d_opportunistic, d_idle, d_guaranteed_free]
                continue
            leaf.bad += d_bad
            leaf.guaranteed_used += d_guaranteed
            leaf.opportunistic_used += d_opportunistic
            leaf.idle_gpus += d_idle
            leaf.guaranteed_free += d_guaranteed_free
            if d_bad or d_opportunistic:  # a GPU's counts are 0 or 1: any change flips it
                self._census_flips(leaf, d_bad, d_opportunistic)
            acc = above.get(parent)
            if acc is None:
                above[parent] = [d_bad, d_guaranteed, d_opportunistic, d_idle, d_guaranteed_free]
            else:
                acc[0] += d_bad
                acc[1] += d_guaranteed
                acc[2] += d_opportunistic
                acc[3] += d_idle
                acc[4] += d_guaranteed_free
        idle_nodes = self.idle_nodes
        vcs = self.vcs
        blocked_nodes = self.topology.census.blocked_nodes
        while True:
            for cell, d in level.items():
                d_bad, d_guaranteed, d_opportunistic, d_idle, d_guaranteed_free = d
                parent = cell.parent
                counted_change = False  # whether a count the gauges keep changes with this cell
                if d_guaranteed:
                    old_guaranteed = cell.guaranteed_used
                    new_guaranteed = cell.guaranteed_used = old_guaranteed + d_guaranteed
                    counted_change = not old_guaranteed or not new_guaranteed
                if d_idle:
                    old_idle = cell.idle_gpus
                    new_idle = cell.idle_gpus = old_idle + d_idle
                    if cell.node_cell is cell:
                        idle_nodes.idle_changed(cell, old_idle)
                        total = cell.total
                        if (old_idle < total) is not (new_idle < total):
                            blocked_nodes[cell.chain] += 1 if new_idle < total else -1
                if d_guaranteed_free:
                    old_free = cell.guaranteed_free
                    new_free = cell.guaranteed_free = old_free + d_guaranteed_free
                    if parent is not None:
                        child_index = child_indexes.get(parent)
                        if child_index is not None:
                            child_index.move(cell, old_free, new_free)
                    if cell.vc is not None and (cell.state is _BOUND or cell.state is _PINNED):
                        vc = vcs.get(cell.vc)
                        if vc is not None and cell not in vc.draining:
                            vc.usable[cell.cell_type].move(cell, old_free, new_free)
                if d_bad or d_opportunistic:
                    old_bad, old_opportunistic = cell.bad, cell.opportunistic_used
                    cell.bad = old_bad + d_bad
                    cell.opportunistic_used = old_opportunistic + d_opportunistic
                    bad_flip = (cell.bad > 0) - (old_bad > 0)
                    opportunistic_flip = (cell.opportunistic_used > 0) - (old_opportunistic > 0)
                    if bad_flip or opportunistic_flip:
                        self._census_flips(cell, bad_flip, opportunistic_flip)
                        counted_change = True
                    state = cell.state
                    if state is _FREE or (state is _INSIDE and parent is not None and parent.state is _SPLIT):
                        self.buddies[cell.chain].reclassify(cell)
                if counted_change and cell.vc is not None:
                    self._recount_vc_cell(cell, d_guaranteed, d_opportunistic, d_bad)
                if parent is not None:
                    acc = above.get(parent)
                    if acc is None:
                        above[parent] = d  # this level is done with d: hand it up as is
                    else:
                        acc[0] += d_bad
                        acc[1] += d_guaranteed
                        acc[2] += d_opportunistic
                        acc[3] += d_idle
                        acc[4] += d_guaranteed_free
            if not above:
                return
            level, above = above, {}

    def _census_flips(self, cell: Cell, bad: int, opportunistic: int) -> None:
        """``cell`` started (+1) or stopped (-1) having a bad or an opportunistic GPU."""
        census = self.topology.census
        if bad:
            census.flip_bad(cell.cell_type, bad)
        if opportunistic:
            census.flip_opportunistic(cell.cell_type, opportunistic)

    def _recount_vc_cell(self, cell: Cell, d_guaranteed: int, d_opportunistic: int, d_bad: int) -> None:
        """A VC cell's counters moved by these deltas: its VC's gauges follow."""
        if cell.state is not _BOUND and cell.state is not _PINNED:
            return
        vc = self.vcs.get(cell.vc) if cell.vc is not None else None
        if vc is not None:
            vc.recount(
                cell,
                guaranteed_before=cell.guaranteed_used - d_guaranteed,
                opportunistic_before=cell.opportunistic_used - d_opportunistic,
                bad_before=cell.bad - d_bad,
            )

    def change_whole_node(self, leaves: Sequence[Cell], booking_id: int, *, book: bool) -> bool:
        """:meth:`change_leaves` for a guaranteed booking of every GPU of a healthy node without
        opportunistic pods (an 8-GPU pod, each slot of a gang of them), in far fewer steps (see
        :meth:`change_whole_nodes`). Returns False, having changed nothing, when the booking is
        not of that shape."""
        node = leaves[0].node_cell if leaves else None
        total = len(leaves)
        if node is None or node.total != total or node.opportunistic_used or node.bad or node.guaranteed_used != (0 if book else total):
            return False
        if not book:
            for leaf in leaves:  # make sure they are all this booking's before writing anything
                if leaf.node_cell is not node or leaf.guaranteed_owner != booking_id:
                    return False
        # The node's counters (no guaranteed, opportunistic or bad GPU) prove its GPUs untouched
        # when booking, and a booking's GPUs are distinct GPUs of one node.
        self.change_whole_nodes((node,), (booking_id,), book=book)
        return True

    def change_whole_nodes(self, nodes: Sequence[Cell], booking_ids: Sequence[int], *, book: bool) -> None:
        """Book (``book``) or clear every GPU of each of ``nodes`` for the guaranteed booking at
        the same position of ``booking_ids``, exactly as :meth:`change_leaves` would one node
        after another; the caller has checked that each node is healthy, without opportunistic
        pods, and wholly free (or wholly that booking's). The counters of the GPUs and of the
        cells inside a node are known outright, and an ancestor shared by several nodes takes
        their summed delta once (a rack holding a gang's 8 slots: one index move, not 8).

        Cells inside a node are never VC cells, free cells or wide cells here: the booking's VC
        cell holds all of the node, so it is the node or above."""
        level: dict[Cell, int] = {}  # cells whose deltas (GPUs booked) are still to be applied
        for node, booking_id in zip(nodes, booking_ids):
            if book:
                for leaf in node.leaves:
                    leaf.guaranteed_owner = booking_id
                    leaf.guaranteed_used = 1
                    leaf.idle_gpus = leaf.guaranteed_free = 0
                for cell in node.inner:
                    cell.guaranteed_used = cell.total
                    cell.idle_gpus = cell.guaranteed_free = 0
                level[node] = node.total
            else:
                for leaf in node.leaves:
                    leaf.guaranteed_owner = None
                    leaf.guaranteed_used = 0
                    leaf.idle_gpus = leaf.guaranteed_free = 1
                for cell in node.inner:
                    cell.guaranteed_used = 0
                    cell.idle_gpus = cell.guaranteed_free = cell.total
                level[node] = -node.total
        idle_nodes = self.idle_nodes
        vcs = self.vcs
        blocked_nodes = self.topology.census.blocked_nodes
        child_indexes = self.topology.child_indexes
        while level:
            above: dict[Cell, int] = {}
            for cell, booked in level.items():
                parent = cell.parent
                cell.guaranteed_used += booked
                old_idle = cell.idle_gpus
                new_idle = cell.idle_gpus = old_idle - booked
                if cell.node_cell is cell:
                    idle_nodes.idle_changed(cell, old_idle)
                    total = cell.total
                    if (old_idle < total) is not (new_idle < total):
                        blocked_nodes[cell.chain] += 1 if new_idle < total else -1
                old_free = cell.guaranteed_free
                new_free = cell.guaranteed_free = old_free - booked
                if cell.vc is not None and (cell.state is _BOUND or cell.state is _PINNED):
                    vc = vcs.get(cell.vc)
                    if vc is not None:
                        if not cell.guaranteed_used or cell.guaranteed_used == booked:
                            # It starts or stops holding guaranteed GPUs; nothing else changes here.
                            # (VcState.recount, inlined: every whole-node release of a node VC cell
                            # comes here.)
                            if not cell.bad:  # a bad cell stays bad (VcCellCounts: one state a cell)
                                counts = vc.counts[cell.cell_type]
                                busy = 1 if booked > 0 else -1
                                counts.used += busy
                                if cell.opportunistic_used:
                                    counts.opportunistic -= busy
                                else:
                                    counts.idle -= busy
                        if cell not in vc.draining:
                            vc.usable[cell.cell_type].move(cell, old_free, new_free)
                if parent is not None:
                    child_index = child_indexes.get(parent)
                    if child_index is not None:
                        child_index.move(cell, old_free, new_free)
                    # Re-inserted, not updated: cells of a level are moved in the order of their
                    # last change, so that an index holding several of them ends in the order
                    # node-by-node bookings would leave it (a moved cell goes last in its bucket).
                    above[parent] = above.pop(parent, 0) + booked
            level = above

    def set_node_bad(self, node_name: str, bad: bool) -> bool:
        """Mark a node's GPUs bad or healthy; returns whether anything changed. Bookings on the
        node are kept: a bad cell only stops *new* placements."""
        node = self.topology.nodes.get(node_name)
        if node is None or all(leaf.is_bad == bad for leaf in node.leaves):
            return False

        self.change_leaves(node.leaves, _BAD if bad else _HEALTHY)
        buddy = self.buddies.get(node.chain)
        if buddy is not None:
            buddy.node_health(node, bad=bad)
        return True

