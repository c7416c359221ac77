"""Recovery after a restart: bookings re-created from the pods' bind-info, exactly as it
describes them, or, for a pod whose bind-info is missing or no longer fits, the best consistent
booking on the node it runs on. Quotas are not checked (the pod already runs); nothing is ever
double-allocated, and what does not fit is noted as an anomaly.

The same re-creation keeps a *pending* pod's cells that the leader's reclaim booked and recorded
on it (``cellfit.io/reclaim-booking``, in bind-info's format): there the pod runs nowhere yet, so
its VC's quota and Theorem 1's invariant are checked as the planner checks them, and nobody's
cells give way to it.
"""

from __future__ import annotations

from typing import Callable, Sequence

from scheduler.cells.booking import Booking, Group
from scheduler.cells.bookkeeping import Bookkeeper
from scheduler.cells.discovery import legacy_names
from scheduler.cells.buddy import BuddyAllocator
from scheduler.cells.planning import Planner, Spot, Unplaceable
from scheduler.cells.request import CellRequest, Priority
from scheduler.cells.search import View, contains
from scheduler.cells.topology import Cell, CellState, Topology
from scheduler.cells.virtual_clusters import VcState, VirtualClusters

_BOUND, _PINNED = CellState.BOUND, CellState.PINNED
_PRIO_GUARANTEED, _PRIO_OPPORTUNISTIC = Priority.GUARANTEED, Priority.OPPORTUNISTIC
_VIEW_IDLE = View.IDLE


class Recovery:
    def __init__(
        self,
        *,
        topology: Topology,
        virtual_clusters: VirtualClusters,
        planner: Planner,
        bookkeeper: Bookkeeper,
        note: Callable[[str], None],
    ) -> None:
        self.topology = topology
        self._vcs = virtual_clusters
        self._planner = planner
        self._bookkeeper = bookkeeper
        self._note = note

    def recover_exact(
        self,
        *,
        vc_name: str,
        priority: Priority,
        node: str,
        gpu_indices: Sequence[int],
        root_id: str | None,
        cell_type: str | None,
        pod_uid: str | None,
        pod_key: str | None,
        group: Group | None,
        rehome: bool = False,
        pending: bool = False,
    ) -> Booking | None:
        """Re-create a booking exactly as a bind-info describes it; ``None`` when that is no
        longer consistent (unknown cells, GPUs another guaranteed pod holds, a VC cell that is
        now someone else's). Quotas are not checked: the pod is already running. ``pending``:
        the pod runs nowhere yet (a reclaim's record): a free VC cell is bound only within the
        VC's quota and Theorem 1's invariant, the VC must be configured, and no slot gives way."""
        node_cell = self.topology.nodes.get(node)
        if node_cell is None or not gpu_indices:
            return None
        by_index = {leaf.gpu_index: leaf for leaf in node_cell.leaves}
        if any(i not in by_index for i in gpu_indices) or len(set(gpu_indices)) != len(gpu_indices):
            return None
        gpus = tuple(by_index[i] for i in sorted(gpu_indices))
        if pod_uid is not None and not pending:
            self._release_podless_slots(gpus, pod_key=pod_key)
        chain = node_cell.chain
        level = chain.node_level
        if (cell_type is not None and cell_type not in self.topology.chain_of_type) or (root_id and root_id not in self.topology.cells_by_id):
            # Written before discovered names carried the node size (an upgrade): the same cells.
            legacy = legacy_names(self.topology.config.cell_types)
            cell_type = legacy.aliases.get(cell_type, cell_type) if cell_type is not None else None
            root_id = legacy.stable_id(root_id) if root_id else root_id
        if cell_type is not None and self.topology.chain_of_type.get(cell_type) is chain:
            level = min(chain.level_of(cell_type), chain.node_level)
        if priority is _PRIO_OPPORTUNISTIC:
            if any(g.opportunistic_owner is not None for g in gpus):
                return None
            spot = Spot(chain, level, gpus)
            return self._bookkeeper.book(spot, vc=vc_name, priority=priority, pod_uid=pod_uid, pod_key=pod_key, group=group)
        if any(g.guaranteed_owner is not None for g in gpus):
            return None
        vc = self._vcs.vcs.get(vc_name)
        if pending and (vc is None or not vc.defined):
            return None  # a VC no longer configured places no new pod
        if vc is None:
            # The VC was removed from the configuration while the pod ran: keep its cells until
            # the pod is gone, under a quota-less VC.
            vc = self._vcs.vcs[vc_name] = VcState(vc_name)
            vc.defined = False
        if root_id and root_id not in self.topology.cells_by_id and not pending:
            # The VC cell is gone: the discovered cells changed shape since the bind (a rack
            # that dissolved). Keep the pod on exactly its GPUs, in the VC cell that now holds them.
            home = self._home_for(vc, gpus)
            if home is not None:
                self._note(f"pod {pod_key}: its VC cell {root_id} no longer exists; recovered in {home.id}")
            root_id = home.id if home is not None else None
        root = self.topology.cells_by_id.get(root_id) if root_id else None
        if root is None or any(not contains(root, g) for g in gpus):
            return None
        root = self._rehomed(vc, root, rehome=rehome and not pending, pod_key=pod_key)
        buddy = self._vcs.buddies.get(chain)
        if root.state is _BOUND or root.state is _PINNED:
            if root.vc != vc_name:
                return None
            spot = Spot(chain, level, gpus, root, False)
        elif buddy is not None and buddy.is_takeable(root) and (not pending or self._bindable(vc, root, buddy)):
            spot = Spot(chain, level, gpus, root, True)
        else:
            return None
        return self._bookkeeper.book(spot, vc=vc_name, priority=priority, pod_uid=pod_uid, pod_key=pod_key, group=group)

    def _place_on_node(self, request: CellRequest, vc: VcState | None, node: str, *, pod_uid: str, pod_key: str) -> Booking | None:
        """The booking the planner would give ``request`` on idle GPUs of ``node``, or None."""
        node_cell = self.topology.nodes[node]
        try:
            targets = self._planner.targets(request, vc)
            spot = self._planner.plan(
                request, vc, [t for t in targets if t.chain is node_cell.chain] or targets, allowed=frozenset({node}), view=_VIEW_IDLE
            )
        except Unplaceable:
            return None
        if not spot.gpus or spot.gpus[0].node != node:
            return None
        return self._bookkeeper.book(spot, vc=vc.name if vc else (request.vc or ""), priority=request.priority, pod_uid=pod_uid, pod_key=pod_key)

    def _release_podless_slots(self, gpus: Sequence[Cell], *, pod_key: str | None) -> None:
        """A running pod's own record of its GPUs outranks a gang slot without a pod on them: such
        a slot was re-created from a sibling's bind-info, written when that sibling still ran,
        and the slot may have been released and these GPUs bound to this pod since."""
        bookings = self._bookkeeper.bookings
        owners = {owner for g in gpus for owner in (g.guaranteed_owner, g.opportunistic_owner) if owner is not None}
        for owner in sorted(owners):
            slot = bookings.get(owner)
            if slot is not None and slot.pod_uid is None and slot.group is not None:
                self._note(f"pod {pod_key} runs on GPUs {slot.gpu_indices} of {slot.node}; gang {slot.group.name}'s slot there without a pod is released")
                self._bookkeeper.release(slot)

    def _rehomed(self, vc: VcState, root: Cell, *, rehome: bool, pod_key: str | None) -> Cell:
        """The VC cell to recover ``gpus`` in, given the bind-info's ``root``: ``root`` itself
        when binding it keeps Theorem 1's invariant (always, when the cells and quotas are those
        the pod was bound under), unless ``rehome`` (the implicit default VC, alone in the
        cluster); then the VC's cell around it, or the lowest free cell around it of a type with
        quota left whose binding keeps the invariant. That differs after the discovered cells
        regrouped nodes into a rack (the VC owns racks now): binding ``root`` would split a cell
        its quota needs whole, and the rest of it would serve nobody until the pod finished."""
        if root.state is _BOUND or root.state is _PINNED:
            return root
        buddy = self._vcs.buddies.get(root.chain)
        if not rehome or buddy is None or self._bindable(vc, root, buddy) or any(other is not vc for other in self._vcs.vcs.values()):
            # With other VCs a cell around ``root`` may hold their cells, which pods not
            # recovered yet will claim: only the cell the pod was bound in is certain.
            return root
        cell = root.parent
        while cell is not None:
            if cell.state is _BOUND or cell.state is _PINNED:
                home = cell if cell.vc == vc.name else None
                break
            if buddy.is_takeable(cell) and self._bindable(vc, cell, buddy):
                home = cell
                break
            cell = cell.parent
        else:
            home = None
        if home is None:
            return root
        self._note(f"pod {pod_key}: its VC cell {root.id} would break virtual cluster {vc.name!r}'s cells; recovered in {home.id}")
        return home

    def _bindable(self, vc: VcState, cell: Cell, buddy: BuddyAllocator) -> bool:
        """Whether ``vc`` may bind the free ``cell`` as the planner would: quota of its type left,
        counted in its own chain (a type two chains share counts in one), and Theorem 1's
        invariant kept."""
        return (
            vc.unbound(cell.cell_type) > 0
            and self.topology.chain_of_type.get(cell.cell_type) is cell.chain
            and buddy.keeps_invariant(cell, self._vcs.demand(cell.chain))
        )

    def _home_for(self, vc: VcState, gpus: Sequence[Cell]) -> Cell | None:
        """The VC cell a running pod's ``gpus`` can be recovered in: the VC's cell holding them,
        or else the lowest free cell holding them of a type the VC owns; ``None`` if neither."""
        cell: Cell | None = gpus[0]
        while cell is not None and not all(contains(cell, g) for g in gpus):
            cell = cell.parent
        owned = vc.owned_types()
        buddy = self._vcs.buddies.get(gpus[0].chain)
        while cell is not None:
            if cell.state is _BOUND or cell.state is _PINNED:
                return cell if cell.vc == vc.name else None
            if cell.cell_type in owned and buddy is not None and buddy.is_takeable(cell):
                return cell
            cell = cell.parent
        return None

    def recover_on_node(
        self,
        request: CellRequest,
        vc: VcState | None,
        node: str,
        *,
        pod_uid: str,
        pod_key: str,
        gpu_indices: Sequence[int] = (),
    ) -> Booking | None:
        """The best consistent booking for a pod found running on ``node`` without (usable)
        bind-info: inside its VC if a legal cell is there, else on idle GPUs of the node, held
        like an opportunistic pod so nothing is ever double-allocated. ``gpu_indices`` (from a
        bind-info that no longer fits) are kept when they are still untracked: they are the
        GPUs the pod's containers were given."""
        node_cell = self.topology.nodes.get(node)
        if node_cell is None or request.gpus == 0:
            return None
        untracked = sum(1 for leaf in node_cell.leaves if leaf.guaranteed_owner is None and leaf.opportunistic_owner is None)
        if untracked < request.gpus:
            # The pod runs there (another scheduler counted the node's free GPUs): gang slots
            # without a pod on the node are plans, and give way.
            self._release_podless_slots(node_cell.leaves, pod_key=pod_key)
        vc_name = vc.name if vc else (request.vc or "")
        by_index = {leaf.gpu_index: leaf for leaf in node_cell.leaves}
        kept = [by_index.get(i) for i in sorted(set(gpu_indices))]
        if len(kept) == request.gpus and all(g is not None and g.guaranteed_owner is None and g.opportunistic_owner is None for g in kept):
            gpus = tuple(g for g in kept if g is not None)
            home = self._home_for(vc, gpus) if vc is not None and request.priority is _PRIO_GUARANTEED else None
            level = node_cell.chain.node_level
            if home is None:
                if request.priority is _PRIO_GUARANTEED:
                    self._note(f"pod {pod_key} on {node} has no consistent HiveD placement; its GPUs are tracked outside any VC cell")
                return self._bookkeeper.book(Spot(node_cell.chain, level, gpus), vc=vc_name, priority=request.priority, pod_uid=pod_uid, pod_key=pod_key, holds="opportunistic")
            spot = Spot(node_cell.chain, level, gpus, home, home.state is not _BOUND and home.state is not _PINNED)
            return self._bookkeeper.book(spot, vc=vc_name, priority=request.priority, pod_uid=pod_uid, pod_key=pod_key)
        if vc is not None or request.priority is not _PRIO_GUARANTEED:
            # A guaranteed pod of no known VC (none labelled, or one not configured) has no VC
            # cell to be placed in: only idle GPUs, below.
            placed = self._place_on_node(request, vc, node, pod_uid=pod_uid, pod_key=pod_key)
            if placed is not None:
                return placed
        idle = [leaf for leaf in node_cell.leaves if leaf.guaranteed_owner is None and leaf.opportunistic_owner is None]
        if len(idle) < request.gpus:
            self._note(f"pod {pod_key} runs on {node} but the node has only {len(idle)} untracked GPUs for its {request.gpus}")
            return None
        self._note(f"pod {pod_key} on {node} has no consistent HiveD placement; its GPUs are tracked outside any VC cell")
        spot = Spot(node_cell.chain, node_cell.chain.node_level, tuple(idle[: request.gpus]))
        return self._bookkeeper.book(
            spot, vc=vc.name if vc else (request.vc or ""), priority=request.priority, pod_uid=pod_uid, pod_key=pod_key, holds="opportunistic"
        )

