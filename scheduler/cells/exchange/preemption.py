"""Which pods the live driver preempts when a drain's grace period ends (``quota.WindowPlan``).

``reconfigure`` never evicts: when a window opens, the lender's VC cells beyond its new quota
drain; when it ends, the borrower's do. At the window's start plus the grace period the
lender's guaranteed pods still on draining cells of the lent types are preempted; at its end
plus the grace the borrower's on draining cells of the types it borrowed. At most as many
draining cells per type as the exchange moved are emptied, each exchange its own (two exchanges
lending a node each empty two node cells, not the same one twice), so a drain of another cause (a
smaller quota in the configuration file) is not cut short by the exchange beyond that. The
borrower's side is looked at for ``horizon_seconds`` (a day) after its grace ends, while its pods
still hold draining cells of the types it borrowed (a deletion that failed, a pod stuck
terminating), then no more: a later drain of the same VC is none of this exchange's business.

Input is ``HivedEngine.inspect_virtual_cluster(vc)`` per VC (``vcCells[].state``, ``.pods``,
``placements[].uid``). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from scheduler.cells.config import VirtualClusterSpec
from scheduler.cells.exchange.ledger import Entry
from scheduler.cells.exchange.model import Cells, describe_cells
from scheduler.cells.exchange.quota import applicable
from scheduler.cells.exchange.resource import rfc3339
from scheduler.cells.topology import Topology
from scheduler.wording import duration

# How long after its grace the borrower's side is looked at: a day, so a pod whose deletion failed
# or that is stuck terminating is tried again, while a later drain of the VC (another cause's)
# is left alone. The ledger keeps the entry at least this long.
BORROWER_HORIZON_SECONDS = 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Preemption:
    pod: str  # namespace/name
    uid: str | None
    vc: str
    cell: str
    reason: str


def _draining_pods(view: Mapping[str, Any], cells: Cells, *, claimed: set[str]) -> list[tuple[str, str, str | None]]:
    """(pod, cell id, uid) on at most ``count`` draining cells of each type of ``cells``, none of
    the ``claimed`` ones (another exchange's); the cells taken are added to ``claimed``."""
    uids = {p.get("pod"): p.get("uid") for p in view.get("placements") or []}
    wanted = dict(cells)
    found: list[tuple[str, str, str | None]] = []
    for cell in sorted(view.get("vcCells") or [], key=lambda c: str(c.get("id"))):
        cell_type, cell_id = cell.get("cellType"), str(cell.get("id"))
        if cell.get("state") != "draining" or not cell.get("pods") or wanted.get(cell_type, 0) <= 0 or cell_id in claimed:
            continue
        wanted[cell_type] -= 1
        claimed.add(cell_id)
        found += [(pod, cell_id, uids.get(pod)) for pod in cell["pods"]]
    return found


def due_preemptions(
    *,
    entries: Iterable[Entry],
    now: float,
    grace_seconds: float | None,
    views: Mapping[str, Mapping[str, Any]],
    horizon_seconds: float = BORROWER_HORIZON_SECONDS,
) -> list[Preemption]:
    """The pods to preempt at ``now`` (each once, in entry order). ``grace_seconds`` None: none."""
    if grace_seconds is None:
        return []
    due: list[Preemption] = []
    seen: set[str] = set()
    # Per VC, the draining cells an exchange has taken: two exchanges moving a cell of the same
    # type each empty one of their own.
    claimed: dict[str, set[str]] = {}
    entries = list(entries)
    for entry in entries:
        sides: list[tuple[str, Cells, str]] = []
        if entry.window.start + grace_seconds <= now < entry.window.end:
            sides.append((entry.lender, entry.offer_cells,
                          f"cell exchange {entry.offer} -> {entry.request}: virtual cluster {entry.lender} lent "
                          f"{describe_cells(entry.offer_cells)} from {rfc3339(entry.window.start)}, and its guaranteed pods "
                          f"still on the lent cells {duration(grace_seconds)} later are preempted"))
        if entry.window.end + grace_seconds <= now < _borrower_side_until(entry, entries, grace_seconds, horizon_seconds):
            sides.append((entry.borrower, entry.request_cells,
                          f"cell exchange {entry.offer} -> {entry.request}: the window ended at {rfc3339(entry.window.end)}, "
                          f"and virtual cluster {entry.borrower}'s guaranteed pods still on the cells it returned "
                          f"{duration(grace_seconds)} later are preempted"))
        for vc, cells, reason in sides:
            view = views.get(vc)
            if view is None:
                continue
            for pod, cell, uid in _draining_pods(view, cells, claimed=claimed.setdefault(vc, set())):
                if pod in seen:
                    continue
                seen.add(pod)
                due.append(Preemption(pod=pod, uid=uid, vc=vc, cell=cell, reason=reason))
    return due


def _borrower_side_until(entry: Entry, entries: Sequence[Entry], grace_seconds: float, horizon_seconds: float) -> float:
    """Until when ``entry``'s borrower side is looked at: the horizon, cut short where the borrower
    starts lending a type it borrowed (a later exchange) after this side's grace: the cells that
    drain then are that exchange's, preempted only when its own lender grace ends. (A lending
    from before this grace's end drains beside this exchange's return, each claiming its own.)"""
    borrowed = {cell_type for cell_type, _ in entry.request_cells}
    lends = [other.window.start for other in entries
             if other.lender == entry.borrower and other.window.start > entry.window.end + grace_seconds
             and borrowed & {cell_type for cell_type, _ in other.offer_cells}]
    return min([entry.window.end + grace_seconds + horizon_seconds, *lends])


def draining_pods(views: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Per VC, its guaranteed pods on draining cells (for the statuses' messages)."""
    return {
        vc: sum(len(c.get("pods") or []) for c in view.get("vcCells") or [] if c.get("state") == "draining")
        for vc, view in views.items()
    }


def carried_at_end(*, entry: Entry, entries: Sequence[Entry], topology: Topology, base: Mapping[str, VirtualClusterSpec]) -> bool:
    """Whether ``entry``'s quota move was in effect as its window ended: applied with the exchanges
    under way just before its end, in the order the replicas apply them (``quota.applicable``, by
    match time then key), on ``base``. An exchange the configured VCs could not carry moved no
    cell, so the borrower's pods on draining cells then are another drain's, never its to preempt."""
    end = entry.window.end
    under_way = sorted((e for e in entries if e.window.start < end <= e.window.end), key=lambda e: (e.matched_at, e.key))
    # Every one of them holds at the latest start among them, and none ends before ``end``.
    at = max(e.window.start for e in under_way)
    matches = [e.match() for e in under_way]
    key_of = {id(m): e.key for m, e in zip(matches, under_way)}
    result = applicable(topology=topology, base=base, matches=matches, at=at)
    return entry.key in {key_of[id(m)] for m in result.applied}
