"""Planning, without changing anything: which VC a request is for, the (chain, level) targets
that can serve it, and the GPUs a pod would get (:class:`Spot`).

A request for ``n`` GPUs at level ``T`` needs ``n`` GPUs inside one level-``T`` cell. Inside a
VC the placement ignores opportunistic pods altogether, so that a VC decides exactly as its
private cluster would (sharing safety); opportunistic pods only break ties (fewest_victims.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import AbstractSet, Iterable, Mapping, Sequence

from scheduler.cells.booking import Booking
from scheduler.cells.discovery import is_discovered_name, legacy_names
from scheduler.cells.fewest_victims import MAX_CANDIDATES, Shape, equal_picks, equal_spots, victim_cost
from scheduler.cells.request import CellRequest, Priority
from scheduler.cells.search import View, best_spot, pick_gpus
from scheduler.cells.topology import Cell, CellState, Chain, Topology
from scheduler.cells.virtual_clusters import VcState, VirtualClusters

# Enum members as module constants: a global read is several times cheaper than an Enum
# attribute in CPython 3.11, and these are read on every placement.
_FREE = CellState.FREE
_PRIO_GUARANTEED = Priority.GUARANTEED
_VIEW_GUARANTEED, _VIEW_IDLE = View.GUARANTEED, View.IDLE


class Unplaceable(Exception):
    """A request cannot be placed now. ``resolvable`` is true when preemption could help;
    the message is the one-line reason users see. ``resolvable_on``, where ``resolvable`` is
    false: the offered nodes where preemption could still help (a gang whose pods fit there in
    part, the rest wanting cells reclaimed elsewhere), the others' failure unresolvable."""

    def __init__(self, reason: str, *, resolvable: bool = False, resolvable_on: AbstractSet[str] = frozenset()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.resolvable = resolvable
        self.resolvable_on = resolvable_on


class QuotaExhausted(Unplaceable):
    """Every cell of ``vc``'s quota at the ``target`` level or above is in use and none has room
    for the pod: a gang whose earlier pods took the room left says so in its own words
    (:meth:`Planner.gang_quota_reason`). ``targets`` and ``gpus``: what was searched, for
    the engine to tell whether pods leaving hold the quota (quota_leaving.py)."""

    def __init__(self, reason: str, *, vc: VcState, target: Target, targets: Sequence[Target] = (), gpus: int = 0) -> None:
        super().__init__(reason)
        self.vc = vc
        self.target = target
        self.targets = targets
        self.gpus = gpus


# The most holders a reason names; the rest are counted.
NAMED_HOLDERS = 5


# Spot and Target are created on every decision: plain slotted classes (a frozen dataclass's
# __init__ costs four times as much). Treat them as immutable.
@dataclass(slots=True)
class Spot:
    """A planned placement: GPUs, and for a guaranteed one the VC cell holding them."""

    chain: Chain
    level: int
    gpus: tuple[Cell, ...]
    root: Cell | None = None
    new_root: bool = False


@dataclass(slots=True)
class Target:
    """One way to serve a request: in ``chain``, GPUs inside one level-``level`` cell."""

    chain: Chain
    level: int


class Planner:
    """Reads the VCs, the free space and the bookings; never changes them."""

    def __init__(self, *, topology: Topology, virtual_clusters: VirtualClusters, bookings: Mapping[int, Booking]) -> None:
        self.topology = topology
        self._vcs = virtual_clusters
        self._bookings = bookings
        # Memoised per request shape; valid while the VCs' shape_version stays what it was.
        self._memo_version = -1
        self._targets: dict[tuple[str | None, Priority, int, str | None], list[Target]] = {}
        self._capacity: dict[tuple[VcState, Chain, int, int], int] = {}

    # ================================================================== resolving requests

    def vc_state(self, request: CellRequest, default_vc: str | None) -> VcState | None:
        name = request.vc or default_vc
        if name is None:
            raise Unplaceable(f"the pod has no cellfit.io/virtual-cluster label: set it to one of {self._known_vcs()}")
        vc = self._vcs.vcs.get(name)
        if vc is None or not vc.defined:
            unserved = self._vcs.unserved.get(name)
            if unserved is not None:
                raise Unplaceable(f"virtual cluster {name!r} is not served: {unserved}")
            raise Unplaceable(f"unknown virtual cluster {name!r} (known: {self._known_vcs()})")
        return vc

    def _known_vcs(self) -> str:
        """The virtual clusters a pod may name, for a message that tells the user what to write."""
        return ", ".join(sorted(n for n, v in self._vcs.vcs.items() if v.defined)) or "none"

    def _known_cell_types(self) -> str:
        """The cell types a pod may name in cellfit.io/cell-type (at or below node level), each
        chain from its GPU up."""
        names = dict.fromkeys(t for chain in self._vcs.buddies for t in chain.types[: chain.node_level])
        return ", ".join(names) or "none"

    def targets(self, request: CellRequest, vc: VcState | None) -> list[Target]:
        """The (chain, level) pairs that can serve the request, in search order; raises
        :class:`Unplaceable` with the reason when there are none. Memoised: they depend only
        on the request's shape, the VC's quota and the chains, and every pod asks."""
        if self._memo_version != self._vcs.shape_version:
            self._forget_memos()
        key = (vc.name if vc is not None else None, request.priority, request.gpus, request.cell_type)
        cached = self._targets.get(key)
        if cached is None:
            cached = self._targets[key] = self._find_targets(request, vc)
        return cached

    def _find_targets(self, request: CellRequest, vc: VcState | None) -> list[Target]:
        n = request.gpus
        guaranteed = request.priority is _PRIO_GUARANTEED
        owned = vc.owned_types() if (vc is not None and guaranteed) else None
        if request.cell_type is not None:
            cell_type = request.cell_type
            if cell_type not in self.topology.chain_of_type:
                # A discovered type's old unsized name (A100-NODE for A100-8GPU-NODE), where it is one.
                legacy = legacy_names(self.topology.config.cell_types)
                choices = legacy.ambiguous.get(cell_type)
                if choices is not None:
                    raise Unplaceable(
                        f"cell type {cell_type!r} in annotation cellfit.io/cell-type is ambiguous: the cluster has its GPU "
                        f"product in {len(choices)} node sizes, and discovered cell-type names carry the size: set one of "
                        f"{', '.join(repr(c) for c in choices)}"
                    )
                cell_type = legacy.aliases.get(cell_type, cell_type)
            chain = self.topology.chain_of_type.get(cell_type)
            if chain is None or chain not in self._vcs.buddies:
                raise Unplaceable(
                    f"unknown cell type {request.cell_type!r} in annotation cellfit.io/cell-type "
                    f"(known: {self._known_cell_types()})"
                )
            level = chain.level_of(cell_type)
            if level > chain.node_level:
                raise Unplaceable(
                    f"cell type {request.cell_type!r} is above the node level; a pod's GPUs are on one node "
                    f"(use {chain.type_at(chain.node_level)!r} or lower)"
                )
            if n > chain.gpus[level - 1]:
                raise Unplaceable(f"the pod requests {n} GPUs but a {request.cell_type!r} cell holds {chain.gpus[level - 1]}")
            if owned is not None and not any(chain.level_of(t) >= level for t in owned if self.topology.chain_of_type[t] is chain):
                assert vc is not None
                raise Unplaceable(f"virtual cluster {vc.name!r} owns no cell of type {request.cell_type!r} or larger")
            return [Target(chain, level)]
        largest = max(self._vcs.buddies, key=lambda c: (c.gpus[c.node_level - 1], -c.order))
        if n > largest.gpus[largest.node_level - 1]:
            raise Unplaceable(
                f"the pod requests {n} GPUs, more than any node-level cell holds "
                f"(largest: {largest.type_at(largest.node_level)!r} with {largest.gpus[largest.node_level - 1]})"
            )
        found: list[Target] = []
        for chain in self.topology.used_chains:
            smallest = chain.smallest_level_for(n)
            if smallest is None:
                continue
            if owned is not None and not any(
                self.topology.chain_of_type[t] is chain and chain.level_of(t) >= smallest for t in owned
            ):
                continue
            found.append(Target(chain, smallest))
        if not found:
            assert vc is not None
            sizes = sorted(
                {(self.topology.chain_of_type[t].gpus[self.topology.chain_of_type[t].level_of(t) - 1], t) for t in owned or ()}
            )
            largest_owned = f"largest: {sizes[-1][1]!r} with {sizes[-1][0]} GPUs" if sizes else "it owns no cells"
            raise Unplaceable(f"the pod requests {n} GPUs, more than any cell virtual cluster {vc.name!r} owns ({largest_owned})")
        return found

    def gang_capacity(self, vc: VcState, target: Target, gpus: int) -> int:
        """How many pods of ``gpus`` GPUs at ``target`` the VC's whole guarantee could hold.
        Memoised: every gang asks."""
        if self._memo_version != self._vcs.shape_version:
            self._forget_memos()
        chain, level = target.chain, target.level
        key = (vc, chain, level, gpus)
        pods = self._capacity.get(key)
        if pods is None:
            pods = self._capacity[key] = self._count_capacity(vc, chain, level, gpus)
        return pods

    def _forget_memos(self) -> None:
        """What :meth:`targets` and :meth:`gang_capacity` remember depends on the quotas, the
        pinned cells and the chains: forget it when one of them has changed."""
        self._targets.clear()
        self._capacity.clear()
        self._memo_version = self._vcs.shape_version

    def _count_capacity(self, vc: VcState, chain: Chain, level: int, gpus: int) -> int:
        per_cell = chain.gpus[level - 1] // gpus
        pods = 0
        counts: dict[str, int] = dict(vc.quota)
        for cell in vc.pinned:
            counts[cell.cell_type] = counts.get(cell.cell_type, 0) + 1
        for cell_type, count in counts.items():
            if self.topology.chain_of_type[cell_type] is not chain:
                continue
            k = chain.level_of(cell_type)
            if k >= level:
                pods += count * (chain.gpus[k - 1] // chain.gpus[level - 1]) * per_cell
        return pods

    # ================================================================== placing one pod

    def plan(
        self,
        request: CellRequest,
        vc: VcState | None,
        targets: Sequence[Target],
        *,
        allowed: AbstractSet[str] | None,
        view: View | None = None,
    ) -> Spot:
        """The placement a single pod of ``request`` would get; raises :class:`Unplaceable`."""
        if request.priority is _PRIO_GUARANTEED:
            assert vc is not None
            spot = self._plan_guaranteed(vc, targets, request.gpus, allowed, view or _VIEW_GUARANTEED)
            if view is not _VIEW_IDLE and self.preempts(spot):
                return self._fewest_victims(vc, spot, allowed)
            return spot
        return self._plan_opportunistic(targets, request.gpus, allowed)

    @staticmethod
    def preempts(spot: Spot) -> bool:
        """Whether booking ``spot`` would preempt opportunistic pods (its node's count first:
        the usual answer, no, costs one read)."""
        node = spot.gpus[0].node_cell if spot.gpus else None
        return node is not None and node.opportunistic_used > 0 and any(gpu.opportunistic_owner is not None for gpu in spot.gpus)

    def _fewest_victims(self, vc: VcState, spot: Spot, allowed: AbstractSet[str] | None) -> Spot:
        """Among the placements equal to ``spot`` for the VC (fewest_victims.py), the one whose
        GPUs carry the fewest opportunistic pods, then the fewest GPUs of them; ``spot`` itself
        on a tie. The candidates are the images of ``spot`` inside the VC cells shaped like its
        own (a VC cell already bound), or inside the free cells of the level the buddy
        allocator took its new VC cell from."""
        root = spot.root
        assert root is not None
        placed = spot.gpus[0]
        while placed.level < spot.level:
            assert placed.parent is not None
            placed = placed.parent
        if spot.new_root:
            top = root
            while top.buddy_state() is not _FREE:
                assert top.parent is not None
                top = top.parent
            others: Iterable[Cell] = self._vcs.buddies[spot.chain].free_cells(top.level)
        else:
            top = root
            others = vc.usable[root.cell_type].first_with(root.guaranteed_free, len(self.topology.cells_by_id))
        path = [placed]
        while path[-1] is not top:
            parent = path[-1].parent
            assert parent is not None
            path.append(parent)
        path.reverse()
        memo: dict[Cell, Shape] = {}
        bookings = self._bookings

        def size_of(booking_id: int) -> int | None:
            booking = bookings.get(booking_id)
            return len(booking.gpus) if booking is not None and booking.pod_uid is not None else None

        best_gpus, best_cost = spot.gpus, victim_cost(spot.gpus, size_of)
        best_cell = placed
        tried = 0
        tops = [top, *(cell for cell in others if cell is not top)]
        for image in equal_spots(tops, path, memo):
            if allowed is not None and image.node not in allowed:
                continue
            for gpus in equal_picks(placed, spot.gpus, image, memo):
                tried += 1
                cost = victim_cost(gpus, size_of)
                if cost < best_cost:
                    best_gpus, best_cost, best_cell = tuple(gpus), cost, image
                if best_cost == (0, 0) or tried >= MAX_CANDIDATES:
                    break
            if best_cost == (0, 0) or tried >= MAX_CANDIDATES:
                break
        if best_cell is placed and best_gpus is spot.gpus:
            return spot
        new_root = best_cell
        while new_root.level < root.level:
            assert new_root.parent is not None
            new_root = new_root.parent
        return Spot(spot.chain, spot.level, tuple(sorted(best_gpus, key=attrgetter("gpu_index"))), new_root, spot.new_root)

    def _plan_guaranteed(
        self, vc: VcState, targets: Sequence[Target], n: int, allowed: AbstractSet[str] | None, view: View
    ) -> Spot:
        # 1. inside the VC's cells already bound (packing: fullest level-k root first)
        usable = vc.usable
        idle_view = view is _VIEW_IDLE
        for target in targets:
            chain, target_level = target.chain, target.level
            for cell_type in chain.types[target_level - 1 :]:
                index = usable.get(cell_type)
                if not index:
                    continue
                for root in index.at_least(n):
                    if idle_view and root.idle_gpus < n:
                        continue
                    spot = best_spot(root, target_level, n, view, allowed, self.topology.child_indexes)
                    if spot is not None:
                        return Spot(chain, target_level, tuple(pick_gpus(spot, n, view)), root, False)
        # 2. a new VC cell, bound by the buddy allocator; legal only within the quota
        quota_left: list[str] = []
        quota, bound = vc.quota, vc.bound
        chain_of_type = self.topology.chain_of_type
        for target in targets:
            chain, target_level = target.chain, target.level
            for level in range(target_level, chain.top + 1):
                cell_type = chain.types[level - 1]
                if quota.get(cell_type, 0) - len(bound.get(cell_type, ())) <= 0:
                    continue  # VcState.unbound, inlined: every level of every search asks
                if chain_of_type[cell_type] is not chain:
                    # A type two chains share (discovered nodes that stood alone before racks of
                    # them formed): its quota is counted in Theorem 1's demand of its own chain
                    # only, and a cell of it bound from the other would split that one unchecked.
                    continue
                quota_left.append(cell_type)
                spots: dict[Cell, Cell] = {}  # what accept found, so it is not searched twice

                def accept(cell: Cell, _level: int = target_level, _spots: dict[Cell, Cell] = spots) -> bool:
                    spot = best_spot(cell, _level, n, view, allowed, self.topology.child_indexes)
                    if spot is None:
                        return False
                    _spots[cell] = spot
                    return True

                fresh = self._vcs.buddies[chain].find(level, accept, self._vcs.demand_of[chain])
                if fresh is not None:
                    spot = spots.get(fresh) or best_spot(fresh, target_level, n, view, allowed, self.topology.child_indexes)
                    assert spot is not None
                    return Spot(chain, target_level, tuple(pick_gpus(spot, n, view)), fresh, True)
        first = targets[0]
        wanted = first.chain.type_at(first.level)
        if not quota_left:
            raise QuotaExhausted(
                f"virtual cluster {vc.name!r} quota exhausted at level {level_words(wanted, first.chain.gpus[first.level - 1])}: "
                f"none of its cells of type {wanted!r} or larger has {n} free {'GPU' if n == 1 else 'GPUs'} in one {wanted!r}, "
                "and every cell of its quota is already in use",
                vc=vc, target=first, targets=targets, gpus=n,
            )
        offered = "" if allowed is None else " among the offered nodes"
        raise Unplaceable(
            f"no free cell of type {' or '.join(repr(t) for t in quota_left)}{offered} can take {n} GPUs "
            f"in one {wanted!r} (bad nodes or nodes kube-scheduler filtered out)"
        )

    def gang_quota_reason(self, failure: QuotaExhausted, *, gpus: int, size: int, fitting: int) -> str:
        """Why a gang of ``size`` pods of ``gpus`` GPUs does not fit its VC's quota at once when
        ``fitting`` of its pods would: the quota's per-pod reason, planned after the gang's
        earlier pods took the room, reads as if the VC had none. What the gang needs at once,
        what the VC's cells have free and who holds the rest, read with the gang's own slots
        given back."""
        vc, target = failure.vc, failure.target
        wanted = target.chain.type_at(target.level)
        roots = self._quota_roots(vc, target)
        chain = target.chain
        # Quota not bound to a cell yet is free too: the gang's first pods may have taken it.
        unbound = sum(max(vc.unbound(cell_type), 0) * chain.gpus[level - 1]
                      for level, cell_type in enumerate(chain.types[target.level - 1 :], start=target.level))
        free = sum(root.guaranteed_free for root in roots) + unbound
        holders = self._holders(roots)
        held = f", the others held by {_listed(holders)}" if holders else ""
        return (f"virtual cluster {vc.name!r} quota exhausted at level {wanted!r} for the whole gang: it needs "
                f"{_gpus(gpus * size)} at once for its {size} pods, and its cells have room for {fitting} of them now "
                f"({_gpus(free)} free{held})")

    def quota_holders(self, failure: QuotaExhausted) -> str:
        """Who holds the quota ``failure`` found in use: its pods, a few named, the rest
        counted ("" when no pod holds it: cells bound but not in use, on bad nodes)."""
        return _listed(self._holders(self._quota_roots(failure.vc, failure.target)))

    def _quota_roots(self, vc: VcState, target: Target) -> list[Cell]:
        """The VC's cells (bound or pinned) of ``target``'s chain at its level or above."""
        chain = target.chain
        types = chain.types[target.level - 1 :]
        roots = [root for cell_type in types for root in vc.bound.get(cell_type, {})]
        roots.extend(cell for cell in vc.pinned if cell.chain is chain and cell.level >= target.level)
        return roots

    def _holders(self, roots: Iterable[Cell]) -> list[str]:
        """The pods (a gang's slot without its pod yet: the gang) holding GPUs of ``roots``
        as guaranteed, sorted."""
        names: set[str] = set()
        for root in roots:
            for leaf in root.leaves:
                booking = self._bookings.get(leaf.guaranteed_owner) if leaf.guaranteed_owner is not None else None
                if booking is None:
                    continue
                if booking.pod_key is not None:
                    names.add(booking.pod_key)
                elif booking.group is not None:
                    names.add(f"gang {booking.group.name}")
        return sorted(names)

    def _plan_opportunistic(self, targets: Sequence[Target], n: int, allowed: AbstractSet[str] | None) -> Spot:
        for target in targets:
            if allowed is not None and len(allowed) * 8 < len(self.topology.nodes):
                # A few offered nodes (a nodeSelector): rank them directly instead of walking
                # the whole index past nodes kube-scheduler did not offer.
                offered_cells = [self.topology.nodes[name] for name in allowed if name in self.topology.nodes]
                ranked = sorted(
                    (c for c in offered_cells if c.chain is target.chain and c.idle_gpus >= n),
                    key=lambda c: (self._vcs.idle_nodes.held(c), c.idle_gpus, c.id),
                )
                candidates: Iterable[Cell] = ranked
            else:
                candidates = self._vcs.idle_nodes.candidates(target.chain, n)
            for node in candidates:
                if allowed is not None and node.node not in allowed:
                    continue
                spot = best_spot(node, target.level, n, _VIEW_IDLE, None, self.topology.child_indexes)
                if spot is not None:
                    return Spot(target.chain, target.level, tuple(pick_gpus(spot, n, _VIEW_IDLE)))
        wanted = targets[0].chain.type_at(targets[0].level)
        offered = "" if allowed is None else " on the offered nodes"
        raise Unplaceable(f"no idle {n} GPUs in one {wanted!r} cell{offered} for an opportunistic pod")


def level_words(cell_type: str, gpus: int) -> str:
    """A cell level as a reason names it: quoted, and, for a discovered type, how many GPUs its
    cells hold, since its name counts its node's GPUs (``A100-2GPU`` is one GPU of a 2-GPU
    node, discovery.base_name) and reads as a cell of that many."""
    return f"{cell_type!r} (cells of {_gpus(gpus)})" if is_discovered_name(cell_type) else repr(cell_type)


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def _listed(names: Sequence[str]) -> str:
    """``a, b and 3 more``: the first :data:`NAMED_HOLDERS` names, the rest counted."""
    shown = ", ".join(names[:NAMED_HOLDERS])
    return shown + (f" and {len(names) - NAMED_HOLDERS} more" if len(names) > NAMED_HOLDERS else "")
