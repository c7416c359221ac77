"""Which matches count in the surplus: those in effect.

Algorithm 2 moves a match's GPU-hours from the borrower's surplus to the lender's when it is
matched, and so does the exchange: a match for later is the lender's commitment (the quota proof
keeps its cells from being lent again) and the borrower's claim, so the borrower's priority is
spent at once, not again in every round until the window opens. But a match the configured VCs
cannot carry (a replica started on a file that cut its lender, ``quota.applicable``) moves no
cell: its borrower got nothing and its lender lent nothing, and charging it lowered the
borrower's priority and raised the lender's for cells that never changed hands. So a match
counts in the surplus when it is, or will be, in effect as the configured VCs stand, judged
where the quota moves are:

* one not open yet: carried when its window opens (with the matches under way then, in the
  order the replicas apply them);
* one under way: carried now (what the replicas apply, ``not_applied`` being the others);
* one over: carried as its window ended (``preemption.carried_at_end``), decided once, by the
  leader's first round after its end (:func:`settle`, written into the entry as ``charged``), so
  that a later change of the configured VCs (a lender's quota cut the next day) never charges or
  refunds a match long over; it folds into the settled totals with that charge (``ledger.fold``).

Whole matches: a match carried for part of its window only (a restart on a cut file in the
middle of it) counts whole or not at all by the moment above; the ledger keeps no history of the
quotas. Pure.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from scheduler.cells.config import VirtualClusterSpec
from scheduler.cells.exchange.ledger import Entry
from scheduler.cells.exchange.preemption import carried_at_end
from scheduler.cells.exchange.quota import applicable
from scheduler.cells.topology import Topology


def _carried_at(at: float, *, entries: Sequence[Entry], topology: Topology, base: Mapping[str, VirtualClusterSpec]) -> set[str]:
    """The keys of the entries under way at ``at`` that the configured VCs carry then."""
    under_way = sorted((e for e in entries if e.window.holds(at)), key=lambda e: (e.matched_at, e.key))
    matches = [e.match() for e in under_way]
    key_of = {id(m): e.key for m, e in zip(matches, under_way)}
    return {key_of[id(m)] for m in applicable(topology=topology, base=base, matches=matches, at=at).applied}


def charged(*, entries: Sequence[Entry], topology: Topology, base: Mapping[str, VirtualClusterSpec], now: float) -> list[Entry]:
    """The entries whose GPU-hours count in the surplus at ``now`` (see the module docstring), in
    their order."""
    carried: dict[float, set[str]] = {}

    def carried_then(at: float) -> set[str]:
        if at not in carried:
            carried[at] = _carried_at(at, entries=entries, topology=topology, base=base)
        return carried[at]

    def counts(entry: Entry) -> bool:
        if entry.window.end <= now:
            if entry.charged is not None:
                return entry.charged
            return carried_at_end(entry=entry, entries=entries, topology=topology, base=base)
        return entry.key in carried_then(max(entry.window.start, now))

    return [e for e in entries if counts(e)]


def settle(*, entries: Sequence[Entry], topology: Topology, base: Mapping[str, VirtualClusterSpec], now: float) -> list[Entry]:
    """The entries over at ``now`` whose charge is not decided yet, each with it decided (carried
    as its window ended): for the leader to write back under their keys."""
    return [replace(e, charged=carried_at_end(entry=e, entries=entries, topology=topology, base=base))
            for e in entries if e.window.end <= now and e.charged is None]
