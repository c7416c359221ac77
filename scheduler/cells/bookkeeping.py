"""The bookings: each pod's GPUs (or a gang slot's) by id and by pod, booked, released, and
handed from pod to pod. Booking a guaranteed spot that needs a new VC cell binds it; releasing
a VC cell's last guaranteed booking gives the cell back to the free space.
"""

from __future__ import annotations

from scheduler.cells.booking import Booking, Group, Hold
from scheduler.cells.ledger import BOOK_GUARANTEED, BOOK_OPPORTUNISTIC, CLEAR_GUARANTEED, CLEAR_OPPORTUNISTIC, LeafLedger
from scheduler.cells.planning import Spot
from scheduler.cells.request import Priority
from scheduler.cells.topology import Cell, CellState, Chain
from scheduler.cells.virtual_clusters import VirtualClusters

# Enum members as module constants: a global read is several times cheaper than an Enum
# attribute in CPython 3.11, and these are read on every booking.
_BOUND = CellState.BOUND
_PRIO_GUARANTEED = Priority.GUARANTEED


class Bookkeeper:
    """Every booking, under the next id (ids say the order bookings were made in)."""

    def __init__(self, *, virtual_clusters: VirtualClusters, ledger: LeafLedger) -> None:
        self._vcs = virtual_clusters
        self._ledger = ledger
        self.bookings: dict[int, Booking] = {}
        self.by_pod: dict[str, Booking] = {}
        self.groups: dict[str, Group] = {}  # gangs by key
        self.next_id = 1

    def book(
        self,
        spot: Spot,
        *,
        vc: str,
        priority: Priority,
        pod_uid: str | None,
        pod_key: str | None,
        group: Group | None = None,
        holds: Hold | None = None,
    ) -> Booking:
        holds = holds or ("guaranteed" if priority is _PRIO_GUARANTEED and spot.root is not None else "opportunistic")
        booking = self.new_booking(vc, priority, holds, spot.chain, spot.level, spot.root, spot.gpus, pod_uid, pod_key, group)
        if holds == "guaranteed":
            node = booking.gpus[0].node_cell if booking.gpus else None
            overlapped = [leaf.opportunistic_owner for leaf in booking.gpus if leaf.opportunistic_owner is not None] if node is None or node.opportunistic_used else ()
            if not self._ledger.change_whole_node(booking.gpus, booking.id, book=True):
                self._ledger.change_leaves(booking.gpus, BOOK_GUARANTEED, booking.id)
        else:
            self._ledger.change_leaves(booking.gpus, BOOK_OPPORTUNISTIC, booking.id)
        if spot.new_root:
            # Bound after the GPUs are booked, so that the new VC cell enters the VC's index and
            # the idle index with its final counts (a whole node: not at all) instead of being
            # added and moved at once.
            assert spot.root is not None
            self._vcs.bind(self._vcs.vcs[vc], spot.root)
        if holds == "guaranteed" and overlapped:
            # An opportunistic gang slot nobody runs in yet has no pod to preempt: drop it.
            for other_id in sorted(set(overlapped)):
                other = self.bookings.get(other_id)
                if other is not None and other.pod_uid is None:
                    self.release(other)
        return booking

    def new_booking(
        self,
        vc: str,
        priority: Priority,
        holds: Hold,
        chain: Chain,
        level: int,
        root: Cell | None,
        gpus: tuple[Cell, ...],
        pod_uid: str | None,
        pod_key: str | None,
        group: Group | None,
    ) -> Booking:
        """A booking registered under the next id; its GPUs are the caller's to change."""
        # Positional: the same fields as Booking declares them, cheaper than keywords here.
        booking = Booking(self.next_id, vc, priority, holds, chain, level, root, gpus, pod_uid, pod_key, group)
        self.next_id += 1
        self.bookings[booking.id] = booking
        if pod_uid is not None:
            self.by_pod[pod_uid] = booking
        return booking

    def release(self, booking: Booking) -> None:
        if self.bookings.pop(booking.id, None) is None:
            return
        if booking.pod_uid is not None and self.by_pod.get(booking.pod_uid) is booking:
            del self.by_pod[booking.pod_uid]
        if booking.holds == "guaranteed":
            if not self._ledger.change_whole_node(booking.gpus, booking.id, book=False):
                self._ledger.change_leaves(booking.gpus, CLEAR_GUARANTEED, booking.id)
            root = booking.root
            if root is not None and root.state is _BOUND and root.guaranteed_used == 0:
                self._vcs.unbind(root)
            elif root is not None and root.vc is not None:
                vc = self._vcs.vcs.get(root.vc)
                if vc is not None and root.state is _BOUND:
                    self._vcs.refresh_draining(vc, root.cell_type)
        else:
            self._ledger.change_leaves(booking.gpus, CLEAR_OPPORTUNISTIC, booking.id)
        if booking.group is not None and booking in booking.group.slots:
            booking.group.slots.remove(booking)
            if not booking.group.slots and self.groups.get(booking.group.key) is booking.group:
                del self.groups[booking.group.key]

    def victims(self, booking: Booking) -> list[Booking]:
        """Opportunistic bookings whose GPUs this guaranteed booking needs, in a stable order."""
        if booking.holds != "guaranteed" or not booking.gpus:
            return []
        node = booking.gpus[0].node_cell  # a booking's GPUs are on one node
        if node is not None and not node.opportunistic_used:
            return []  # asked for every free gang slot on each gang pod's filter: skip reading the GPUs
        ids = sorted({leaf.opportunistic_owner for leaf in booking.gpus if leaf.opportunistic_owner is not None})
        return [self.bookings[i] for i in ids if i in self.bookings]

    def assign(self, booking: Booking, pod_uid: str, pod_key: str) -> None:
        previous = self.by_pod.get(pod_uid)
        if previous is not None and previous is not booking:
            self.unassign(previous)
        booking.pod_uid = pod_uid
        booking.pod_key = pod_key
        self.by_pod[pod_uid] = booking

    def unassign(self, booking: Booking) -> None:
        """The pod left its booking. A gang slot stays booked for the gang while any of the
        gang's pods still holds a slot; a lone booking is released."""
        if booking.pod_uid is not None and self.by_pod.get(booking.pod_uid) is booking:
            del self.by_pod[booking.pod_uid]
        booking.pod_uid = None
        booking.pod_key = None
        group = booking.group
        if group is None:
            self.release(booking)
            return
        if not group.members():
            for slot in list(group.slots):
                self.release(slot)
            self.groups.pop(group.key, None)

