"""Balanced cell exchange: HiveD's Algorithm 2 (§3.3), pure and deterministic.

One round (:func:`do_matching`) over the bulletin board's open offers and requests:

1. The tenants with open requests, in decreasing surplus (GPU-hours contributed to others minus
   GPU-hours used of others' cells), ties by tenant name. The order is fixed when the round
   starts, as Algorithm 2's outer loop is; a tenant's surplus moving during the round changes
   which offers its later requests get (step 3), not its turn.
2. Each tenant's requests in posting order (ties by id).
3. Of the offers qualifying for the request (``qualify.disqualification`` is ``None``), the one
   whose owner has the lowest surplus *now*, ties by the earliest posted, then id. It is removed
   from the board, and ``gpu_hours`` (the request's GPUs x the hours of its window still to
   come) moves: the requester's surplus goes down by it, the owner's up. Algorithm 2 moves the
   offer's GPU-hours; here the lender is credited for what it lends (the request's window, its
   GPUs those of the offer by the exact packing). The offer leaves the board whole, as in
   Algorithm 2: the rest of a longer offer's window is not lent, and is posted again if wanted.

Before a match counts, ``admit`` (the quota move's feasibility proof, ``quota.QuotaProof``) may
refuse it with a reason; the next qualified offer in the same order is tried then, and the
surplus changes only for an admitted match. So an offer that cannot be carried out never costs
anyone GPU-hours.

``now`` is the time of the round: a request whose window has ended is left unmatched (expired),
one already under way is matched for the rest of its window (and pays for that much), and an
offer whose window has ended is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from scheduler.cells.exchange.model import CellCatalog, Offer, Request, Window, describe_cells
from scheduler.cells.exchange.qualify import disqualification, qualifies
from scheduler.wording import ordinal

# Disqualified offers quoted in an unmatched request's reason; the rest are counted.
_REASONS_SHOWN = 3
# Owners' surpluses quoted in a match's explanation; the rest are counted.
_SURPLUSES_SHOWN = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class Match:
    """``offer``'s cells move from its tenant (the lender) to ``request``'s (the borrower) for
    ``window``: the lender's VC loses ``offer.cells``, the borrower's gains ``request.cells``."""

    request: Request
    offer: Offer
    window: Window
    gpus: int
    gpu_hours: float
    explanation: str

    @property
    def lender(self) -> str:
        return self.offer.tenant

    @property
    def borrower(self) -> str:
        return self.request.tenant


@dataclass(frozen=True, slots=True, kw_only=True)
class Unmatched:
    request: Request
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """The arbiter chose ``offer`` for ``request`` but ``admit`` refused the exchange."""

    request: Request
    offer: Offer
    reason: str


# (candidate, the matches admitted earlier in this round) -> why it is refused, or None.
Admit = Callable[[Match, Sequence[Match]], "str | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Matching:
    """The result of one round; ``surplus`` is after it, for every tenant named in the input."""

    matches: tuple[Match, ...]
    unmatched: tuple[Unmatched, ...]
    refused: tuple[Refused, ...]
    offers_left: tuple[Offer, ...]
    expired_offers: tuple[Offer, ...]
    surplus: dict[str, float]
    tenant_order: tuple[str, ...]




def _explain(
    *,
    request: Request,
    offer: Offer,
    qualified: Sequence[Offer],
    refused: Sequence[Offer],
    surplus: Mapping[str, float],
    turn: int,
    tenants: int,
    gpus: int,
    window: Window,
    gpu_hours: float,
) -> str:
    lender, borrower = offer.tenant, request.tenant
    owners: dict[str, float] = {}
    for candidate in qualified:
        owners.setdefault(candidate.tenant, surplus.get(candidate.tenant, 0.0))
    ranked = sorted(owners.items(), key=lambda kv: (kv[1], kv[0]))
    shown = ", ".join(f"{name} {value:+.2f}" for name, value in ranked[:_SURPLUSES_SHOWN])
    if len(ranked) > _SURPLUSES_SHOWN:
        shown += f" and {len(ranked) - _SURPLUSES_SHOWN} more"
    lowest = surplus.get(lender, 0.0)
    tied = [o for o in qualified if o not in refused and surplus.get(o.tenant, 0.0) == lowest]
    tie = ""
    if len(tied) > 1:
        tie = f"; {len(tied)} offers tie at {lowest:+.2f}, {offer.id} is the earliest posted ({offer.posted:g})"
    # After refusals the chosen owner's surplus is the lowest of the offers left, not of all.
    skipped = ""
    if refused:
        skipped = f", {len(refused)} refused by the quota proof ({', '.join(o.id for o in refused)}), and of the rest"
    before_b, before_l = surplus.get(borrower, 0.0), lowest
    return (
        f"request {request.id} of {borrower} (surplus {before_b:+.2f} GPU-hours, {ordinal(turn)} of {tenants} "
        f"tenants with requests) took offer {offer.id} of {lender} ({describe_cells(offer.cells)} for "
        f"{describe_cells(request.cells)}): of {len(qualified)} qualified offers{skipped} its owner has the lowest surplus "
        f"({shown}){tie}; {gpus} GPUs x {window.hours:.2f} h = {gpu_hours:.2f} GPU-hours; surplus {borrower} "
        f"{before_b:+.2f} -> {before_b - gpu_hours:+.2f}, {lender} {before_l:+.2f} -> {before_l + gpu_hours:+.2f}"
    )


def _unmatched_reason(reasons: Sequence[str], disqualified: int, open_offers: int) -> str:
    if open_offers == 0:
        return "no open offer"
    shown = "; ".join(reasons[:_REASONS_SHOWN])
    more = f"; and {disqualified - _REASONS_SHOWN} more" if disqualified > _REASONS_SHOWN else ""
    return f"no qualified offer among {open_offers} open: {shown}{more}"


def do_matching(
    *,
    offers: Sequence[Offer],
    requests: Sequence[Request],
    surplus: Mapping[str, float],
    catalog: CellCatalog,
    now: float,
    admit: Admit | None = None,
) -> Matching:
    """One round of Algorithm 2 (see the module docstring). Every cell type named by ``offers``
    and ``requests`` must be in ``catalog`` (``validation`` refuses the others at posting)."""
    balance: dict[str, float] = dict(surplus)
    board: list[Offer] = []
    expired: list[Offer] = []
    for offer in sorted(offers, key=lambda o: (o.posted, o.id)):
        (expired if offer.window.end <= now else board).append(offer)
    by_tenant: dict[str, list[Request]] = {}
    for request in requests:
        by_tenant.setdefault(request.tenant, []).append(request)
    for tenant in (*by_tenant, *(o.tenant for o in offers)):
        balance.setdefault(tenant, 0.0)
    order = tuple(sorted(by_tenant, key=lambda t: (-balance[t], t)))
    matches: list[Match] = []
    unmatched: list[Unmatched] = []
    refused: list[Refused] = []
    for turn, tenant in enumerate(order, start=1):
        for request in sorted(by_tenant[tenant], key=lambda r: (r.posted, r.id)):
            if request.window.end <= now:
                unmatched.append(Unmatched(request=request, reason=f"its window ended at {request.window.end:g}"))
                continue
            window = Window(start=max(request.window.start, now), end=request.window.end)
            qualified: list[Offer] = []
            reasons: list[str] = []  # the first few, written; the others counted
            disqualified = 0
            for offer in board:
                if len(reasons) < _REASONS_SHOWN:
                    why = disqualification(offer=offer, request=request, window=window, catalog=catalog)
                    if why is None:
                        qualified.append(offer)
                    else:
                        reasons.append(why)
                        disqualified += 1
                elif qualifies(offer=offer, request=request, window=window, catalog=catalog):
                    qualified.append(offer)
                else:
                    disqualified += 1
            if not qualified:
                unmatched.append(Unmatched(request=request, reason=_unmatched_reason(reasons, disqualified, len(board))))
                continue
            # The board is in posting order, and sorted() is stable: lowest surplus, then earliest.
            ranked = sorted(qualified, key=lambda o: balance[o.tenant])
            gpus = catalog.gpus(request.cells)
            gpu_hours = gpus * window.hours
            chosen: Match | None = None
            refusals: list[str] = []
            refused_offers: list[Offer] = []
            for offer in ranked:
                candidate = Match(
                    request=request,
                    offer=offer,
                    window=window,
                    gpus=gpus,
                    gpu_hours=gpu_hours,
                    explanation=_explain(
                        request=request,
                        offer=offer,
                        qualified=ranked,
                        refused=tuple(refused_offers),
                        surplus=balance,
                        turn=turn,
                        tenants=len(order),
                        gpus=gpus,
                        window=window,
                        gpu_hours=gpu_hours,
                    ),
                )
                why_not = admit(candidate, tuple(matches)) if admit is not None else None
                if why_not is None:
                    chosen = candidate
                    break
                refused.append(Refused(request=request, offer=offer, reason=why_not))
                refusals.append(f"offer {offer.id}: {why_not}")
                refused_offers.append(offer)
            if chosen is None:
                unmatched.append(Unmatched(request=request, reason="every qualified offer was refused: " + "; ".join(refusals)))
                continue
            board.remove(chosen.offer)
            balance[chosen.borrower] -= gpu_hours
            balance[chosen.lender] += gpu_hours
            matches.append(chosen)
    return Matching(
        matches=tuple(matches),
        unmatched=tuple(unmatched),
        refused=tuple(refused),
        offers_left=tuple(board),
        expired_offers=tuple(expired),
        surplus=balance,
        tenant_order=order,
    )

