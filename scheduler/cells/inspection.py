"""Plain-dict views of HiveD's state for ``/v1/inspect/...`` and the metrics gauges.

Everything here is read-only and JSON-serialisable (str, int, float, bool, None, list, dict).
Keys are camelCase like the rest of cellfit's HTTP surface.
"""

from __future__ import annotations

from typing import AbstractSet, Any, Callable, Mapping

from scheduler.cells.allocator import CellAllocator
from scheduler.cells.booking import Booking
from scheduler.cells.node_troubles import free_cells_within, unbindable_sentence
from scheduler.cells.virtual_clusters import VcCellCounts, VcState
from scheduler.cells.topology import Cell, CellState, Chain


def _pod_entry(alloc: CellAllocator, booking: Booking) -> dict[str, Any]:
    victims = [v.pod_key or f"slot {v.id}" for v in alloc.victims(booking)]
    return {
        "pod": booking.pod_key,
        "uid": booking.pod_uid,
        "vc": booking.vc,
        "priority": booking.priority.value,
        "node": booking.node,
        "gpuIndices": booking.gpu_indices,
        "cellType": booking.cell_type,
        "vcCell": booking.root.id if booking.root is not None and booking.holds == "guaranteed" else None,
        "gang": booking.group.name if booking.group is not None else None,
        "waitingForPreemptionOf": victims,
        # A guaranteed pod recovered where no legal VC cell could hold it is tracked like an
        # opportunistic one; operators should see that.
        "outsideVcCells": booking.priority.value == "guaranteed" and booking.holds == "opportunistic",
    }


def _cell_types(alloc: CellAllocator, vc: VcState) -> list[str]:
    types = set(vc.quota) | {t for t, roots in vc.bound.items() if roots} | {c.cell_type for c in vc.pinned}
    return sorted(types, key=lambda t: (alloc.topology.chain_of_type[t].order, -alloc.topology.chain_of_type[t].level_of(t), t))


def _vc_roots(vc: VcState) -> list[Cell]:
    roots = [c for roots in vc.bound.values() for c in roots] + list(vc.pinned)
    return sorted(roots, key=lambda c: c.id)


def _cannot_bind(vc: VcState, troubles: Mapping[str, str]) -> list[dict[str, Any]]:
    """The VC's bound or pinned cells on nodes bad for a known cause (``troubles``: node ->
    cause, :class:`~scheduler.cells.node_troubles.NodeTroubles`), one entry per cell and node."""
    if not troubles:
        return []
    found = []
    for root in _vc_roots(vc):
        for part in _node_parts(root):
            cause = troubles.get(part.node or "")
            if cause is not None:
                found.append({"cell": root.id, "cellType": root.cell_type, "node": part.node, "cause": cause,
                              "message": unbindable_sentence(vc=vc.name, node=str(part.node), cause=cause)})
    return found


def _summary(alloc: CellAllocator, vc: VcState, troubles: Mapping[str, str]) -> dict[str, Any]:
    bookings = [b for b in alloc.bookings.values() if b.vc == vc.name]
    cells = []
    for cell_type in _cell_types(alloc, vc):
        chain = alloc.topology.chain_of_type[cell_type]
        bound = vc.bound.get(cell_type, {})
        cells.append(
            {
                "cellType": cell_type,
                "gpusPerCell": chain.gpus[chain.level_of(cell_type) - 1],
                "quota": vc.quota.get(cell_type, 0),
                "bound": len(bound),
                "draining": sum(1 for c in bound if c in vc.draining),
                "pinned": sum(1 for c in vc.pinned if c.cell_type == cell_type),
            }
        )
    return {
        "name": vc.name,
        "configured": vc.defined,
        "cells": cells,
        "pinnedCells": sorted(c.pinned_id or c.id for c in vc.pinned),
        "pods": {
            "guaranteed": sum(1 for b in bookings if b.pod_uid and b.priority.value == "guaranteed"),
            "opportunistic": sum(1 for b in bookings if b.pod_uid and b.priority.value == "opportunistic"),
        },
        "gpus": {
            "guaranteed": sum(len(b.gpus) for b in bookings if b.holds == "guaranteed"),
            "opportunistic": sum(len(b.gpus) for b in bookings if b.holds == "opportunistic"),
        },
        # Its cells on nodes deleted, cordoned, not ready or short of GPUs, the cause named:
        # the only place a user who may not read Nodes learns it.
        "cannotBind": _cannot_bind(vc, troubles),
    }


def virtual_clusters(alloc: CellAllocator, *, troubles: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every VC's summary; ``troubles``: the cause of each bad node the engine knows (node -> cause)."""
    return {"virtualClusters": [_summary(alloc, alloc.vcs[name], troubles or {}) for name in sorted(alloc.vcs)]}


def guarantees(
    alloc: CellAllocator, *, except_pods: AbstractSet[str] = frozenset(), within: AbstractSet[str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Each VC's cells as AlloX admission reads them (placer/guarantee.py): its quota not bound
    yet, one row per cell, and its bound or pinned cells with their GPUs held by guaranteed pods
    (less those of ``except_pods``), bad, and whether draining. ``opportunistic``: the row's GPUs
    opportunistic pods of any VC hold, which HiveD preempts for the VC's guaranteed pods, so they
    are the VC's though no node shows them free (user25 #2: AlloX listed no ``gpu@vc-a`` machine
    while another VC's opportunistic pods ran on vc-a's free cells); for the quota not bound
    yet, those on the free cells it may bind, told against its rows in turn. O(VCs + cells + except_pods),
    no walk over the bookings: it is read under the engine lock on every admission pass.

    ``within``: the nodes AlloX's pods may run on (``allox.nodeSelector``; ``None``: every
    node). A VC's pods there can use only what its cells hold on those nodes: a bound cell counts
    its GPUs on them, and the quota not bound yet at most as many cells as lie free wholly on them
    (HiveD binds a free cell of the type where the pod is offered), its cell types of one chain
    together at most the free GPUs there; each VC is capped alone, so several VCs together may
    count one free cell each."""
    returned: dict[Cell, int] = {}
    returned_on: dict[tuple[Cell, str], int] = {}  # (VC cell, node) -> GPUs given back there
    for uid in except_pods:
        booking = alloc.by_pod.get(uid)
        if booking is not None and booking.holds == "guaranteed" and booking.root is not None:
            returned[booking.root] = returned.get(booking.root, 0) + len(booking.gpus)
            for gpu in booking.gpus:
                part = (booking.root, gpu.node or "")
                returned_on[part] = returned_on.get(part, 0) + 1
    free_within: dict[tuple[int, int], int] = {}  # (chain, level) -> free physical cells wholly on ``within``
    result: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(alloc.vcs):
        vc = alloc.vcs[name]
        if not vc.defined:
            continue
        rows: list[dict[str, Any]] = []
        # Per chain, the free GPUs on ``within`` this VC's quota may still bind: its cell types
        # (largest first) draw on one budget, so a free node is not counted as a node and again
        # as its sockets.
        budgets: dict[int, int] = {}
        reclaimable: dict[int, int] = {}  # per chain, opportunistic GPUs on free cells not yet told against a row
        left: dict[Cell, int] = {}  # the same per node part of those free cells
        for cell_type in _cell_types(alloc, vc):
            chain = alloc.topology.chain_of_type[cell_type]
            gpus = chain.gpus[chain.level_of(cell_type) - 1]
            unbound = max(vc.unbound(cell_type), 0)
            if within is not None and unbound:
                level = chain.level_of(cell_type)
                # By chain and level: a type name may also name a level of an older chain (a
                # discovered node regrouped into a rack keeps its former chain known).
                for counted in (level, 1):
                    if (chain.order, counted) not in free_within:
                        free_within[chain.order, counted] = free_cells_within(alloc, chain, counted, within)
                budget = budgets.setdefault(chain.order, free_within[chain.order, 1])
                unbound = min(unbound, free_within[chain.order, level], budget // gpus)
                budgets[chain.order] = budget - unbound * gpus
            if unbound and chain.order not in reclaimable:
                reclaimable[chain.order] = _opportunistic_on_free(alloc, chain, chain.level_of(cell_type), within)
            for _ in range(unbound):
                # The free cell HiveD binds for the row is not known: the opportunistic GPUs on
                # the free cells are told against the rows in turn, each at most its GPUs.
                taken = min(gpus, reclaimable.get(chain.order, 0))
                reclaimable[chain.order] = reclaimable.get(chain.order, 0) - taken
                row: dict[str, Any] = {"gpus": gpus, "guaranteed": 0, "bad": 0, "draining": False, "opportunistic": taken}
                if taken:
                    row["nodes"] = _free_cells_by_node(alloc, chain, chain.level_of(cell_type), within, gpus=gpus, taken=taken, left=left)
                rows.append(row)
        for root in _vc_roots(vc):
            if within is None:
                row = {"gpus": root.total, "guaranteed": root.guaranteed_used - returned.get(root, 0), "bad": root.bad,
                       "draining": root in vc.draining, "opportunistic": _gpu_counts(root)["opportunistic"]}
                if row["opportunistic"]:
                    row["nodes"] = _vc_cell_by_node(alloc, root, _node_parts(root), returned_on)
                rows.append(row)
                continue
            nodes = [n for n in _node_parts(root) if n.node in within]
            if nodes:
                row = {
                    "gpus": sum(n.total for n in nodes),
                    "guaranteed": sum(n.guaranteed_used - returned_on.get((root, n.node or ""), 0) for n in nodes),
                    "bad": sum(n.bad for n in nodes),
                    "draining": root in vc.draining,
                    "opportunistic": sum(_gpu_counts(n)["opportunistic"] for n in nodes),
                }
                if row["opportunistic"]:
                    row["nodes"] = _vc_cell_by_node(alloc, root, nodes, returned_on)
                rows.append(row)
        result[name] = rows
    return result


def _vc_cell_by_node(
    alloc: CellAllocator, root: Cell, parts: tuple[Cell, ...] | list[Cell], returned_on: Mapping[tuple[Cell, str], int]
) -> list[dict[str, Any]]:
    """A bound VC cell's room on each node it spans, for a row opportunistic pods hold GPUs of:
    ``gpus`` the VC's there (neither guaranteed-held nor bad, the opportunistic pods' included),
    ``opportunistic`` of those the pods hold, ``pods`` their UIDs (reclaimed with the cell, their
    cores and memory free with them). AlloX judges a pod by one node's room, not the cell's total."""
    return [
        {"node": part.node, "gpus": max(part.total - part.bad - (part.guaranteed_used - returned_on.get((root, part.node or ""), 0)), 0),
         "opportunistic": _gpu_counts(part)["opportunistic"], "pods": _opportunistic_pods(alloc, part)}
        for part in parts if part.node is not None
    ]


def _free_cells_by_node(
    alloc: CellAllocator, chain: Chain, level: int, within: AbstractSet[str] | None, *, gpus: int, taken: int, left: dict[Cell, int]
) -> list[dict[str, Any]]:
    """For a row of the quota not bound yet (a cell of ``gpus`` GPUs at ``level``), each node part
    of ``chain``'s free cells HiveD may bind it on where opportunistic pods hold GPUs: ``gpus``
    the row's there (at most the part's healthy ones); ``opportunistic`` the row's ``taken``
    GPUs told against the parts in turn (``left``: each part's not yet told against a row), so
    that the rows' parts add up to the rows' own; ``pods`` the UIDs of the pods there where the
    row's cell takes the whole part (a node-level cell or larger; in a part larger than the cell,
    which of its pods HiveD reclaims is not known: none)."""
    buddy = alloc.buddies.get(chain)
    if buddy is None:
        return []
    found = []
    for higher in range(level, chain.top + 1):
        for free in buddy.free_cells(higher):
            for part in _node_parts(free):
                if part.node is None or (within is not None and part.node not in within) or part.bad or not part.opportunistic_used:
                    continue
                healthy = part.total - part.bad
                told = min(left.setdefault(part, _gpu_counts(part)["opportunistic"]), taken)
                left[part] -= told
                taken -= told
                found.append({"node": part.node, "gpus": min(gpus, healthy), "opportunistic": told,
                              "pods": _opportunistic_pods(alloc, part) if healthy <= gpus else []})
    return found


def _opportunistic_pods(alloc: CellAllocator, cell: Cell) -> list[str]:
    """The UIDs of the opportunistic pods holding GPUs of ``cell`` (not those leaving for a
    guaranteed pod already booked there)."""
    owners = {gpu.opportunistic_owner for gpu in cell.leaves if gpu.opportunistic_owner is not None and gpu.guaranteed_owner is None}
    bookings = (alloc.bookings.get(owner) for owner in owners)
    return sorted(booking.pod_uid for booking in bookings if booking is not None and booking.pod_uid is not None)


def _opportunistic_on_free(alloc: CellAllocator, chain: Chain, level: int, within: AbstractSet[str] | None) -> int:
    """The GPUs opportunistic pods (of any VC) hold on ``chain``'s free cells of ``level`` or
    above on ``within``'s
    nodes (every node for ``None``), none of them bad: the cells a VC's quota not bound yet
    binds, whose opportunistic pods HiveD preempts for the VC's guaranteed pods (§3.2)."""
    buddy = alloc.buddies.get(chain)
    if buddy is None:
        return 0
    return sum(
        part.opportunistic_used
        for higher in range(level, chain.top + 1)
        for free in buddy.free_cells(higher)
        for part in _node_parts(free)
        if (within is None or part.node in within) and not part.bad
    )


def _node_parts(cell: Cell) -> tuple[Cell, ...]:
    """The node-level cells of ``cell``, or the cell itself when it lies inside one node."""
    return cell.node_cells if cell.level >= cell.chain.node_level else (cell,)


def _leaving(cell: Cell) -> int:
    """The cell's GPUs booked for a guaranteed pod while the opportunistic pod on them, a victim,
    still leaves (invariant 4: one GPU, both owners). Such a GPU is the guaranteed pod's; counted
    as opportunistic too, an 8-GPU node read GUARANTEED 8 OPPORTUNISTIC 8 IDLE 0 while its victim
    left (live session). From the counters where every GPU is healthy (each is idle or has an
    owner, so the GPUs counted twice are what exceeds the total); a walk of the GPUs where some
    are bad (those may hold pods or not)."""
    if cell.bad == 0:
        return cell.guaranteed_used + cell.opportunistic_used + cell.idle_gpus - cell.total
    return sum(1 for gpu in cell.leaves if gpu.guaranteed_owner is not None and gpu.opportunistic_owner is not None)


def _gpu_counts(cell: Cell) -> dict[str, int]:
    """Each GPU in one of ``idle``, ``guaranteed`` and ``opportunistic`` at most, so that on
    healthy cells they add up to ``total``. ``leaving``: of the ``guaranteed`` ones, those an
    opportunistic pod preempted for the guaranteed pod still uses (not in ``opportunistic``)."""
    gone = _leaving(cell)
    return {"total": cell.total, "idle": cell.idle_gpus, "guaranteed": cell.guaranteed_used,
            "opportunistic": cell.opportunistic_used - gone, "leaving": gone, "bad": cell.bad}


def _freeing(alloc: CellAllocator, root: Cell, leaving: Callable[[int], bool]) -> dict[str, Any]:
    """The healthy GPUs of ``root`` the pods leaving it free once gone (every pod on the GPU
    leaving: ``leaving``, booking id -> whether its pod is leaving within its time), and those
    pods: what a guaranteed pod of the VC waits for (freeing.py), for ``kubectl cellfit why``."""
    gpus = 0
    held: set[int] = set()
    for leaf in root.leaves:
        owners = [owner for owner in (leaf.guaranteed_owner, leaf.opportunistic_owner) if owner is not None]
        if not leaf.is_bad and owners and all(leaving(owner) for owner in owners):
            gpus += 1
            held.update(owners)
    pods = sorted({b.pod_key for i in held if (b := alloc.bookings.get(i)) is not None and b.pod_key})
    return {"gpus": gpus, "pods": pods}


def virtual_cluster(
    alloc: CellAllocator, name: str, *, troubles: Mapping[str, str] | None = None, leaving: Callable[[int], bool] | None = None
) -> dict[str, Any] | None:
    """One VC's summary, its cells and placements; ``troubles`` as for :func:`virtual_clusters`;
    with ``leaving``, each cell's GPUs pods leaving free (:func:`_freeing`)."""
    vc = alloc.vcs.get(name)
    if vc is None:
        return None
    known = troubles or {}
    result = _summary(alloc, vc, known)
    pods_by_root: dict[Cell, list[str]] = {}
    for booking in alloc.bookings.values():
        if booking.root is not None and booking.holds == "guaranteed" and booking.pod_key:
            pods_by_root.setdefault(booking.root, []).append(booking.pod_key)
    result["vcCells"] = [
        {
            "id": root.id,
            "cellType": root.cell_type,
            "state": "pinned" if root.state is CellState.PINNED else ("draining" if root in vc.draining else "bound"),
            "nodes": [n.node for n in root.node_cells] if root.level >= root.chain.node_level else [root.node],
            "gpus": _gpu_counts(root),
            "badNodes": {n.node: known[n.node] for n in _node_parts(root) if n.node is not None and n.node in known},
            "pods": sorted(pods_by_root.get(root, [])),
            **({"freeing": _freeing(alloc, root, leaving)} if leaving is not None else {}),
        }
        for root in _vc_roots(vc)
    ]
    result["placements"] = [
        _pod_entry(alloc, b) for b in sorted(alloc.bookings.values(), key=lambda b: b.id) if b.vc == name
    ]
    result["gangs"] = [
        {"name": g.name, "size": g.size, "gpusPerPod": g.gpus, "priority": g.priority.value, "podsPlaced": len(g.members())}
        for g in sorted(alloc.groups.values(), key=lambda g: g.name)
        if g.vc == name
    ]
    return result


def _cell_tree(alloc: CellAllocator, cell: Cell, inherited: str, vc: str | None, *, gpus: bool) -> dict[str, Any]:
    own = cell.buddy_state()
    state = inherited if own is CellState.INSIDE else own.value
    if cell.state in (CellState.BOUND, CellState.PINNED):
        vc = cell.vc
    entry: dict[str, Any] = {"id": cell.id, "cellType": cell.cell_type, "level": cell.level, "state": state, "vc": vc}
    if cell.pinned_id is not None:
        entry["pinnedCellId"] = cell.pinned_id
    if cell.level == 1:
        guaranteed = alloc.bookings.get(cell.guaranteed_owner) if cell.guaranteed_owner is not None else None
        opportunistic = alloc.bookings.get(cell.opportunistic_owner) if cell.opportunistic_owner is not None else None
        entry["gpuIndex"] = cell.gpu_index
        entry["bad"] = cell.is_bad
        entry["priority"] = "guaranteed" if guaranteed else ("opportunistic" if opportunistic else None)
        entry["pods"] = [b.pod_key or f"gang slot {b.id}" for b in (guaranteed, opportunistic) if b is not None]
        return entry
    entry["gpus"] = _gpu_counts(cell)
    if cell.level == cell.chain.node_level:
        entry["healthy"] = cell.bad == 0
    entry["children"] = [_cell_tree(alloc, child, state, vc, gpus=gpus) for child in cell.children if gpus or child.level > 1]
    return entry


def cells(alloc: CellAllocator, *, node: str | None = None, gpus: bool = True) -> dict[str, Any]:
    """The physical tree. With ``node``, only that node's subtree (the whole tree of a large
    cluster is tens of megabytes); without ``gpus``, no GPU cells (a tenth of the tree at 8 GPUs
    a node, built under the engine lock)."""
    if node is not None:
        cell = alloc.topology.nodes.get(node)
        if cell is None:
            return {"cells": []}
        state, vc = "inside", None
        for ancestor in cell.ancestors():
            if ancestor.buddy_state() is not CellState.INSIDE:
                state = ancestor.buddy_state().value
                vc = ancestor.vc if ancestor.state in (CellState.BOUND, CellState.PINNED) else None
                break
        return {"cells": [_cell_tree(alloc, cell, state, vc, gpus=gpus)]}
    return {"cells": [_cell_tree(alloc, top, "inside", None, gpus=gpus) for top in alloc.topology.top_cells]}


def metrics(alloc: CellAllocator) -> dict[str, Any]:
    """Gauges. ``virtualClusters`` rows count a VC's cells per cell type, each cell once, in
    the first state that holds (:class:`VcCellCounts`): ``bad`` (a bad GPU), ``used`` (bound or
    pinned and holding guaranteed pods), ``opportunistic`` (only opportunistic pods on it),
    ``free`` (quota not bound, plus its cells with no pod). ``physical`` rows count physical cells per type: ``used`` (bound or pinned),
    ``free`` (on the buddy free list), ``opportunistic`` and ``bad`` (cells with at least one
    such GPU). ``fragmentation`` is, per node type, the share of node-level cells that cannot
    host a whole-node request (fewer idle healthy GPUs than the node has).

    Read from counts kept where the cells change (``VcState.counts``, the buddy allocators'
    free and held counts, ``Topology.census``): O(VCs x cell types + chains x levels), no walk
    over the cells, because a scrape holds the engine lock that every verb waits for."""
    return {
        "virtualClusters": _vc_rows(alloc),
        "physical": _physical_rows(alloc),
        **_fragmentation(alloc),
    }


def _vc_rows(alloc: CellAllocator) -> list[dict[str, Any]]:
    rows = []
    for name in sorted(alloc.vcs):
        vc = alloc.vcs[name]
        for cell_type in _cell_types(alloc, vc):
            counts = vc.counts.get(cell_type) or VcCellCounts()
            rows.append(
                {
                    "vc": name,
                    "cellType": cell_type,
                    "used": counts.used,
                    "free": max(vc.unbound(cell_type), 0) + counts.idle,
                    "opportunistic": counts.opportunistic,
                    "bad": counts.bad,
                }
            )
    return rows


def _physical_rows(alloc: CellAllocator) -> list[dict[str, Any]]:
    """One row per cell type name, counted over every chain that holds it (a discovered node
    type is kept in its own chain when racks of it form, so two chains hold it): one series
    per label set on /metrics."""
    held: dict[str, int] = {}
    free: dict[str, int] = {}
    for chain, buddy in alloc.buddies.items():
        for index, (held_here, free_here) in enumerate(zip(buddy.held_counts(), buddy.free_counts())):
            cell_type = chain.types[index]
            held[cell_type] = held.get(cell_type, 0) + held_here
            free[cell_type] = free.get(cell_type, 0) + free_here
    census = alloc.topology.census
    rows: dict[str, dict[str, Any]] = {}
    for chain in alloc.topology.used_chains:
        for level in range(chain.top, 0, -1):
            cell_type = chain.type_at(level)
            rows.setdefault(
                cell_type,
                {
                    "cellType": cell_type,
                    "level": level,
                    "used": held.get(cell_type, 0),
                    "free": free.get(cell_type, 0),
                    "opportunistic": census.opportunistic.get(cell_type, 0),
                    "bad": census.bad.get(cell_type, 0),
                },
            )
    return list(rows.values())


def _fragmentation(alloc: CellAllocator) -> dict[str, Any]:
    """Per node type, over every chain whose node level it is (see :func:`_physical_rows`)."""
    census = alloc.topology.census
    nodes: dict[str, int] = {}
    blocked: dict[str, int] = {}
    for chain in alloc.topology.used_chains:
        node_type = chain.type_at(chain.node_level)
        nodes[node_type] = nodes.get(node_type, 0) + census.nodes.get(chain, 0)
        blocked[node_type] = blocked.get(node_type, 0) + census.blocked_nodes.get(chain, 0)
    total_nodes = len(alloc.topology.nodes)
    return {
        "fragmentation": {node_type: blocked[node_type] / count if count else 0.0 for node_type, count in nodes.items()},
        "fragmentationTotal": sum(blocked.values()) / total_nodes if total_nodes else 0.0,
    }
