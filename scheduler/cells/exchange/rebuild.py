"""Matches the ledger lost, rebuilt from what the cluster still shows.

The ledger ConfigMap deleted or emptied (by hand, a namespace deleted, a restore from an old
backup) took every match with it: the replicas gave the cells back at once, and the round judged
the matched objects again as posted, so an offer lent to one tenant, its window under way, could
be matched to another's request, and the borrower lost a loan in force. The objects' statuses
are a second record of every match: cellfit writes a match's status only after its entry is in
the ledger, and only cellfit may write the status subresource. So an object whose status says
``Matched`` or ``Active`` with a ``match`` whose window is not long over (a match that could not
have folded yet), and that no ledger entry records, lost its entry:

* when its other side is posted and records the same match (each names the other, the same VCs,
  window and GPU-hours) and neither spec changed since (the status said nothing of an edit, the
  cells pack exactly as a match's must, and their GPUs times the window's hours are the
  GPU-hours recorded), the entry is rebuilt from the two (the cells from the specs, the rest from
  the statuses) and written back to the ledger by the round like a new match, so its quota move
  and surplus are in force again, under the key the match had;
* otherwise, while its window is not over, it is held (``holds``): matched to nobody else, its
  lender's other offers waiting, its status saying what is missing, until an administrator
  restores the entry or deletes the object.

The settled totals and the matches whose objects are gone cannot be rebuilt: their surplus is
lost with the ledger. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from scheduler.cells.config import VirtualClusterSpec
from scheduler.cells.exchange.holds import Holds
from scheduler.cells.exchange.ledger import Entry
from scheduler.cells.exchange.model import CellCatalog, Offer, Request, Window
from scheduler.cells.exchange.posting import Posting
from scheduler.cells.exchange.preemption import BORROWER_HORIZON_SECONDS
from scheduler.cells.exchange.qualify import packing_problem
from scheduler.cells.exchange.resource import parse_offer, parse_request, seconds_of

# The status rounds GPU-hours to 6 decimals.
_GPU_HOURS_TOLERANCE = 1e-5
_IN_FORCE = ("Matched", "Active")
SPEC_CHANGED = "its spec changed since the match"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Claim:
    """What one object's status says of its match."""

    posting: Posting
    other: str  # the other side's id
    vc: Any
    other_vc: Any
    window: Window | None
    gpu_hours: Any
    explanation: str


def _ref_id(value: Any) -> str | None:
    if not isinstance(value, Mapping) or not isinstance(value.get("namespace"), str) or not isinstance(value.get("name"), str):
        return None
    return f"{value['namespace']}/{value['name']}"


def _claim(posting: Posting, *, now: float) -> _Claim | None:
    """The match ``posting``'s status records as in force, or ``None`` (none, or one over long
    enough to have folded out of the ledger)."""
    status = posting.status
    match = status.get("match")
    if status.get("phase") not in _IN_FORCE or not isinstance(match, Mapping):
        return None
    other = _ref_id(match.get("request" if posting.kind == "offer" else "offer"))
    start, end = seconds_of(match.get("start")), seconds_of(match.get("end"))
    if end is not None and end <= now - BORROWER_HORIZON_SECONDS:
        return None
    window = Window(start=start, end=end) if start is not None and end is not None and start < end else None
    return _Claim(posting=posting, other=other or "?", vc=status.get("virtualCluster"), other_vc=match.get("virtualCluster"),
                  window=window, gpu_hours=match.get("gpuHours"), explanation=str(match.get("explanation") or ""))


def spec_item(*, entry: Entry, posting: Posting) -> Offer | Request | None:
    """The object's spec as an offer or request of the match's VC (``None``: it does not read)."""
    if posting.kind == "offer":
        return parse_offer(posting.obj, vc=entry.lender, posted=entry.matched_at)[0]
    return parse_request(posting.obj, vc=entry.borrower, posted=entry.matched_at)[0]


def spec_edited(*, entry: Entry, kind: str, item: Offer | Request) -> bool:
    """Whether the object's spec says other than its match: other cells, an offer's window not
    covering the match's, a request's window ending elsewhere or starting later."""
    if kind == "offer":
        return item.cells != entry.offer_cells or not item.window.covers(entry.window)
    return item.cells != entry.request_cells or item.window.end != entry.window.end or item.window.start > entry.window.start


def _disagreement(offer: _Claim, request: _Claim | None, base: Mapping[str, VirtualClusterSpec]) -> str | None:
    if request is None or request.other != offer.posting.id or offer.other != request.posting.id:
        return f"{offer.other} is not posted, or its status does not record this match"
    if offer.vc != request.other_vc or request.vc != offer.other_vc or offer.vc not in base or request.vc not in base:
        return "the two statuses do not name the same configured virtual clusters"
    if offer.window is None or offer.window != request.window:
        return "the two statuses do not record the same window"
    if not isinstance(offer.gpu_hours, (int, float)) or not isinstance(request.gpu_hours, (int, float)) \
            or abs(offer.gpu_hours - request.gpu_hours) > _GPU_HOURS_TOLERANCE:
        return "the two statuses do not record the same GPU-hours"
    if any(SPEC_CHANGED in str(c.posting.status.get("message") or "") for c in (offer, request)):
        return "a spec changed since the match"
    return None


def _entry(offer: _Claim, request: _Claim, catalog: CellCatalog) -> Entry | str:
    """The lost entry rebuilt from the two objects, or why it cannot be."""
    assert offer.window is not None  # _disagreement checked it
    draft = Entry(offer=offer.posting.id, request=request.posting.id, lender=str(offer.vc), borrower=str(request.vc),
                  offer_cells=(), request_cells=(), window=offer.window, gpus=0, gpu_hours=float(offer.gpu_hours),
                  matched_at=max(offer.posting.posted, request.posting.posted),
                  explanation=f"rebuilt from the statuses of {offer.posting.id} and {request.posting.id} after the exchange "
                              f"ledger lost it; {offer.explanation}".rstrip("; "),
                  offer_uid=offer.posting.uid, request_uid=request.posting.uid)
    offered, asked = spec_item(entry=draft, posting=offer.posting), spec_item(entry=draft, posting=request.posting)
    if offered is None or asked is None or any(catalog.size(t) is None for t, _ in (*offered.cells, *asked.cells)):
        return "a spec does not read as cells of known types"
    if packing_problem(offered=offered.cells, asked=asked.cells, catalog=catalog) is not None:
        return "the specs' cells do not pack as a match's do (a spec changed since the match)"
    gpus = catalog.gpus(asked.cells)
    if not math.isclose(gpus * draft.window.hours, draft.gpu_hours, rel_tol=1e-9, abs_tol=_GPU_HOURS_TOLERANCE):
        return f"the specs' {gpus} GPUs for {draft.window.hours:g} h are not the {draft.gpu_hours:g} GPU-hours recorded"
    entry = replace(draft, offer_cells=offered.cells, request_cells=asked.cells, gpus=gpus)
    if spec_edited(entry=entry, kind="offer", item=offered) or spec_edited(entry=entry, kind="request", item=asked):
        return "a spec's window does not hold the match's (a spec changed since the match)"
    return entry


def _hold(holds: Holds, claim: _Claim, why: str, *, now: float) -> None:
    if claim.window is not None and claim.window.end <= now:
        return  # over: nothing of it is in force to lend twice; the object is judged as posted
    message = (f"held: its status records a match with {claim.other} that the exchange ledger does not hold (lost), and it "
               f"cannot be rebuilt: {why}; it is matched to nobody else and moves no cell until an administrator restores "
               f"the entry or deletes this object")
    holds.hold(kind=claim.posting.kind, object_id=claim.posting.id, uid=claim.posting.uid, why=message)
    if claim.posting.kind == "offer" and isinstance(claim.vc, str):
        holds.lenders.setdefault(claim.vc, f"virtual cluster {claim.vc}'s offers are matched to nobody while its offer "
                                           f"{claim.posting.id}, matched, is missing from the exchange ledger ({why})")


def lost_matches(
    *,
    offers: Sequence[Posting],
    requests: Sequence[Posting],
    recorded: Callable[[Posting], Entry | None],
    holds: Holds,
    base: Mapping[str, VirtualClusterSpec],
    catalog: CellCatalog,
    now: float,
) -> list[Entry]:
    """The entries rebuilt (see the module docstring); each lost match that cannot be is added
    to ``holds``. Objects ``holds`` already holds (an entry that does not read names them) are
    left to it."""
    claims: dict[str, dict[str, _Claim]] = {"offer": {}, "request": {}}
    for posting in (*offers, *requests):
        if posting.status.get("phase") not in _IN_FORCE:
            continue  # most objects: no lookup of their id
        if recorded(posting) is not None or holds.of(kind=posting.kind, object_id=posting.id, uid=posting.uid) is not None:
            continue
        claim = _claim(posting, now=now)
        if claim is not None:
            claims[posting.kind][posting.id] = claim
    rebuilt: list[Entry] = []
    paired: set[str] = set()
    for offer in claims["offer"].values():
        request = claims["request"].get(offer.other)
        why = _disagreement(offer, request, base)
        result: Entry | str = why if why is not None else _entry(offer, request, catalog)  # type: ignore[arg-type]
        if isinstance(result, Entry):
            rebuilt.append(result)
            paired.add(result.request)
            continue
        _hold(holds, offer, result, now=now)
        if request is not None and request.other == offer.posting.id:
            _hold(holds, request, result, now=now)
            paired.add(request.posting.id)
    for request in claims["request"].values():
        if request.posting.id not in paired:
            _hold(holds, request, f"{request.other} is not posted, or its status does not record this match", now=now)
    return rebuilt
