"""One round of the exchange over the posted objects: what the live driver does on every change
and at every window edge, as a pure function.

From the CellOffer and CellRequest objects (as the API server returns them), the Namespaces'
labels, the configured VCs, the topology and the ledger, :func:`exchange_round` validates what
is not matched yet (``validation``; offers in posting order, each against the offers posted
before it and the matched ones), matches the open offers and requests (``arbiter.do_matching``
with the surplus of the ledger's matches in effect, ``charges``, and ``quota.QuotaProof`` over
the exchanges not over yet), and says what each object's status is now and which ledger entries
are new (a match the ledger lost, ``rebuild``, among them); what an entry that does not read or
a lost match names is held (``holds``). The ledger decides a
matched object's status: a match holds until its window ends even if the offer or request is
deleted, or its namespace relabelled (the borrower was promised the cells).

Phases: ``Posted`` (on the board; the message says why nothing took it), ``Matched`` (its window
has not opened), ``Active`` (the cells are lent), ``Returned`` (the window ended), ``Expired``
(the window ended unmatched; one Returned whose entry the ledger folded stays Returned), ``Invalid`` (refused; the message names the field; an object the
round fails to read at all is Invalid alone, saying why, and the others go on).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Sequence

from scheduler.cells.config import VirtualClusterSpec
from scheduler.cells.exchange.arbiter import Refused, do_matching
from scheduler.cells.exchange.charges import charged
from scheduler.cells.exchange.holds import Holds, unread_holds
from scheduler.cells.exchange.ledger import Entry, Settled, Unread, entry_of, not_over, surplus
from scheduler.cells.exchange.model import CellCatalog, Offer, Request, describe_cells
from scheduler.cells.exchange.posting import Posting
from scheduler.cells.exchange.quota import QuotaProof
from scheduler.cells.exchange.rebuild import SPEC_CHANGED, lost_matches, spec_edited, spec_item
from scheduler.cells.exchange.resource import parse_offer, parse_request, rfc3339
from scheduler.cells.exchange.validation import namespace_virtual_cluster, offer_problems, request_problems
from scheduler.cells.topology import Topology
from scheduler.messages import clip

Phase = Literal["Posted", "Matched", "Active", "Returned", "Expired", "Invalid"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What ``posting``'s status is after the round."""

    posting: Posting
    phase: Phase
    status: dict[str, Any]

    @property
    def message(self) -> str:
        return str(self.status.get("message") or "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Round:
    outcomes: list[Outcome]
    new_entries: list[Entry]
    refused: list[Refused]
    surplus: dict[str, float]
    problems: list[str] = field(default_factory=list)
    rebuilt: list[Entry] = field(default_factory=list)  # of ``new_entries``: matches the ledger lost (``rebuild``)
    held: list[str] = field(default_factory=list)  # "kind id: why" of each object held (``holds``)


def _ref(object_id: str) -> dict[str, str]:
    namespace, _, name = object_id.partition("/")
    return {"namespace": namespace, "name": name}


def phase_of(entry: Entry, *, now: float) -> Phase:
    if now < entry.window.start:
        return "Matched"
    return "Active" if now < entry.window.end else "Returned"


def _matched_status(
    entry: Entry, posting: Posting, *, now: float, grace_seconds: float | None, draining: Mapping[str, int],
    not_applied: Mapping[str, str],
) -> Outcome:
    phase = phase_of(entry, now=now)
    start, end = rfc3339(entry.window.start), rfc3339(entry.window.end)
    lent, asked = describe_cells(entry.offer_cells), describe_cells(entry.request_cells)
    as_offer = posting.kind == "offer"
    if phase == "Active" and entry.key in not_applied:
        return _not_in_effect_status(entry, posting, lent=lent, asked=asked, end=end, why=not_applied[entry.key])
    preempt_at = None
    if grace_seconds is not None:
        preempt_at = (entry.window.start if as_offer else entry.window.end) + grace_seconds
    when = f"at {rfc3339(preempt_at)}" if preempt_at is not None else "never (they drain)"
    held = draining.get(entry.lender, 0)
    kept = draining.get(entry.borrower, 0)
    if as_offer:
        message = {
            "Matched": f"matched: {lent} lent to virtual cluster {entry.borrower} ({entry.request}) from {start} to {end}",
            "Active": f"{lent} lent to virtual cluster {entry.borrower} ({entry.request}) until {end}",
            "Returned": f"the window ended at {end}: {lent} are {entry.lender}'s again",
        }[phase]
        if phase == "Active" and held:
            message += (f"; {held} guaranteed pods of {entry.lender} still hold cells it lends (they take no new pod, "
                        f"and are preempted {when})")
    else:
        message = {
            "Matched": f"matched: {asked} of virtual cluster {entry.lender} ({entry.offer}) from {start} to {end}",
            "Active": (f"{asked} of virtual cluster {entry.lender} ({entry.offer}) are {entry.borrower}'s until {end}; "
                       f"its guaranteed pods still on them then are preempted {when}"),
            "Returned": f"the window ended at {end}: the cells went back to {entry.lender}",
        }[phase]
        if phase == "Active" and held:
            message += (f"; {held} guaranteed pods of {entry.lender} still hold the lent cells: this VC's pods wait "
                        f"for them (the lender's are preempted at {rfc3339(entry.window.start + grace_seconds)})"
                        if grace_seconds is not None else f"; {held} guaranteed pods of {entry.lender} still hold the lent cells")
        if phase == "Returned" and kept and preempt_at is not None and now < preempt_at:
            message += f"; {kept} guaranteed pods of {entry.borrower} still hold cells it returns: preempted {when}"
    if phase != "Returned":
        message += _spec_note(entry, posting)
    if phase == "Matched":
        message += f" ({entry.explanation})" if entry.explanation else ""
    return _outcome(entry, posting, phase=phase, message=message, preempt_at=preempt_at)


def _spec_note(entry: Entry, posting: Posting) -> str:
    """What the matched object's spec says that the match does not: an edit since the match (the
    match stands as the ledger has it), or an offer's hours outside the match, which left the
    board with it (Algorithm 2 takes a matched offer whole)."""
    as_offer = posting.kind == "offer"
    item = spec_item(entry=entry, posting=posting)
    if item is None:
        return ""
    window = item.window
    if spec_edited(entry=entry, kind=posting.kind, item=item):
        return (f"; {SPEC_CHANGED} ({describe_cells(item.cells)} for [{rfc3339(window.start)}, "
                f"{rfc3339(window.end)})): the match stands as recorded, and a change needs a new {posting.kind}")
    if as_offer and window != entry.window:
        return (f"; the rest of its window ([{rfc3339(window.start)}, {rfc3339(window.end)})) is lent to nobody and left "
                "the board with the match: post a new offer for those hours")
    return ""


def _not_in_effect_status(entry: Entry, posting: Posting, *, lent: str, asked: str, end: str, why: str) -> Outcome:
    """An exchange under way that the configured VCs cannot carry: nothing moved, so nobody's pods
    are preempted for it (the controller preempts only for an exchange in effect)."""
    what = (f"{lent} lent to virtual cluster {entry.borrower} ({entry.request})" if posting.kind == "offer"
            else f"{asked} of virtual cluster {entry.lender} ({entry.offer}) for {entry.borrower}")
    message = (f"{what} until {end}, but not in effect: the configured virtual clusters cannot carry it (a configuration "
               f"changed since the match), so no cell moved and no pod is preempted for it: {why}")
    return _outcome(entry, posting, phase="Active", message=message, preempt_at=None)


def _outcome(entry: Entry, posting: Posting, *, phase: Phase, message: str, preempt_at: float | None) -> Outcome:
    as_offer = posting.kind == "offer"
    match = {
        ("request" if as_offer else "offer"): _ref(entry.request if as_offer else entry.offer),
        "virtualCluster": entry.borrower if as_offer else entry.lender,
        "start": rfc3339(entry.window.start),
        "end": rfc3339(entry.window.end),
        "gpuHours": round(entry.gpu_hours, 6),
        "explanation": entry.explanation,
    }
    status = {
        "phase": phase,
        "virtualCluster": entry.lender if as_offer else entry.borrower,
        "message": message,
        "observedGeneration": posting.generation,
        "match": match,
        "preemptAt": rfc3339(preempt_at) if preempt_at is not None else None,
    }
    return Outcome(posting=posting, phase=phase, status=status)


def _matchable(offers: list[Offer], holds: Holds) -> list[Offer]:
    """The open offers the round may match: none while ``holds.everything``, none of a held lender."""
    return [] if holds.everything else [o for o in offers if o.tenant not in holds.lenders]


def _held_status(posting: Posting, why: str) -> Outcome:
    """A held object keeps what cellfit last told of it (its phase and match), with ``why``: no
    cell moves for a match the ledger does not read, so no preemption is promised."""
    last = posting.status
    phase = last.get("phase") if last.get("phase") in ("Matched", "Active", "Returned") else "Posted"
    # The generation the kept match was told at: a spec edited since is not taken by holding it.
    generation = last.get("observedGeneration") if "observedGeneration" in last else posting.generation
    status = {"phase": phase, "virtualCluster": last.get("virtualCluster"), "message": why, "observedGeneration": generation,
              "match": last.get("match"), "preemptAt": None}
    return Outcome(posting=posting, phase=phase, status=status)  # type: ignore[arg-type]


def _plain_status(posting: Posting, phase: Phase, message: str, vc: str | None) -> Outcome:
    status = {"phase": phase, "virtualCluster": vc, "message": message, "observedGeneration": posting.generation,
              "match": None, "preemptAt": None}
    return Outcome(posting=posting, phase=phase, status=status)


def exchange_round(
    *,
    offers: Sequence[Posting],
    requests: Sequence[Posting],
    namespaces: Mapping[str, Mapping[str, str]],
    base: Mapping[str, VirtualClusterSpec],
    catalog: CellCatalog,
    topology: Topology,
    entries: Sequence[Entry],
    now: float,
    grace_seconds: float | None,
    draining: Mapping[str, int] | None = None,
    settled: Settled | None = None,
    not_applied: Mapping[str, str] | None = None,
    unread: Sequence[Unread] = (),
) -> Round:
    """One round (see the module docstring). ``namespaces``: labels of every Namespace (one
    missing does not exist); ``draining``: per VC, its guaranteed pods on draining cells (for
    the messages: whose pods the borrower waits for); ``settled``: the ledger's folded totals;
    ``not_applied``: entry key -> why the configured VCs cannot carry that exchange under way
    (``quota.applicable``), said in its objects' status; ``unread``: the ledger's entries that
    do not read, whose objects (and lenders) are held (``holds``)."""
    draining = draining or {}
    holds = unread_holds(unread=list(unread), namespaces=namespaces, base=base, now=now)
    not_applied = not_applied or {}
    # Every entry of a name: an object deleted and posted again under it has a match of its own
    # beside the first object's, and only the UID tells which one is the live object's.
    by_offer: dict[str, list[Entry]] = {}
    by_request: dict[str, list[Entry]] = {}

    def index(entry: Entry) -> None:
        by_offer.setdefault(entry.offer, []).append(entry)
        by_request.setdefault(entry.request, []).append(entry)

    for entry in entries:
        index(entry)

    def recorded(posting: Posting) -> Entry | None:
        """The entry of ``posting``'s match; None for an object posted again under a matched
        one's name (another UID): it is new. An entry or object without a UID (written before
        entries had them, a test) matches by name, the latest matched first."""
        candidates = (by_offer if posting.kind == "offer" else by_request).get(posting.id, [])
        by_name: Entry | None = None
        for entry in candidates:
            uid = entry.offer_uid if posting.kind == "offer" else entry.request_uid
            if uid and posting.uid:
                if uid == posting.uid:
                    return entry
            elif by_name is None or entry.matched_at > by_name.matched_at:
                by_name = entry
        return by_name
    rebuilt = lost_matches(offers=offers, requests=requests, recorded=recorded, holds=holds, base=base, catalog=catalog, now=now)
    for entry in rebuilt:
        index(entry)
    entries = [*entries, *rebuilt]
    outcomes: list[Outcome] = []
    vcs: dict[str, str] = {}

    def parsed(posting: Posting) -> Offer | Request | None:
        vc, problems = namespace_virtual_cluster(
            namespace=posting.namespace, labels=namespaces.get(posting.namespace), virtual_clusters=base
        )
        item: Offer | Request | None = None
        if vc is not None:
            vcs[posting.id] = vc
            parse = parse_offer if posting.kind == "offer" else parse_request
            item, problems = parse(posting.obj, vc=vc, posted=posting.posted)
        if item is None:
            outcomes.append(_plain_status(posting, "Invalid", "; ".join(problems), vc))
        return item

    open_offers: list[Offer] = []
    # Per lender: an offer is validated against its own VC's offers only (a tenant's thousands of
    # offers must not make every other tenant's validation slower).
    posted_by_tenant: dict[str, list[Offer]] = {}
    for matched in not_over(entries, now=now):
        posted_by_tenant.setdefault(matched.lender, []).append(matched.match().offer)
    round_problems: list[str] = []

    def guarded(posting: Posting, judge: Callable[[], None]) -> None:
        """``judge()`` the one object; if it fails, that object alone is Invalid, saying why (an
        object no schema checked, a defect): the round goes on for every other one."""
        try:
            judge()
        except Exception as error:  # noqa: BLE001 - one object must never stop the round
            reason = f"{type(error).__name__}: {clip(str(error))}"
            round_problems.append(f"{posting.kind} {posting.id}: {reason}")
            outcomes.append(_plain_status(posting, "Invalid", f"cellfit could not read it: {reason}", vcs.get(posting.id)))

    def judge_offer(posting: Posting) -> None:
        offer = parsed(posting)
        if not isinstance(offer, Offer):
            return
        problems = offer_problems(offer=offer, catalog=catalog, virtual_clusters=base, posted_offers=posted_by_tenant.get(offer.tenant, []))
        if problems:
            outcomes.append(_plain_status(posting, "Invalid", "; ".join(problems), offer.tenant))
        else:
            open_offers.append(offer)
            posted_by_tenant.setdefault(offer.tenant, []).append(offer)

    def judge_request(posting: Posting) -> None:
        request = parsed(posting)
        if not isinstance(request, Request):
            return
        problems = request_problems(request=request, catalog=catalog, virtual_clusters=base)
        if problems:
            outcomes.append(_plain_status(posting, "Invalid", "; ".join(problems), request.tenant))
        else:
            open_requests.append(request)

    open_requests: list[Request] = []

    def held(posting: Posting) -> str | None:
        return holds.of(kind=posting.kind, object_id=posting.id, uid=posting.uid)

    for posting in sorted(offers, key=lambda p: (p.posted, p.id)):
        if recorded(posting) is None and held(posting) is None:
            guarded(posting, lambda: judge_offer(posting))
    for posting in sorted(requests, key=lambda p: (p.posted, p.id)):
        if recorded(posting) is None and held(posting) is None:
            guarded(posting, lambda: judge_request(posting))

    # In the order the replicas apply them (by match time, then key), so that the proof carries
    # the same exchanges they do when the configured VCs cannot carry them all.
    active = sorted(not_over(entries, now=now), key=lambda e: (e.matched_at, e.key))
    proof = QuotaProof(topology=topology, base=base, active=tuple(e.match() for e in active))
    matching = do_matching(offers=_matchable(open_offers, holds), requests=[] if holds.everything else open_requests,
                           surplus=surplus(charged(entries=entries, topology=topology, base=base, now=now), settled),
                           catalog=catalog, now=now, admit=proof)
    offer_uids, request_uids = ({p.id: p.uid for p in postings} for postings in (offers, requests))
    matched_now = [entry_of(m, matched_at=now, offer_uids=offer_uids, request_uids=request_uids) for m in matching.matches]
    for entry in matched_now:
        index(entry)
    new_entries = [*rebuilt, *matched_now]

    refusals: dict[str, list[str]] = {}
    for refused in matching.refused:
        refusals.setdefault(refused.offer.id, []).append(f"refused for {refused.request.id}: {refused.reason}")
    unmatched = {u.request.id: u.reason for u in matching.unmatched}
    told = {id(o.posting) for o in outcomes}
    # By id, the first of a name (one lookup per object, not a walk of the board).
    open_offer_of: dict[str, Offer] = {}
    for open_offer in open_offers:
        open_offer_of.setdefault(open_offer.id, open_offer)
    open_request_of: dict[str, Request] = {}
    for open_request in open_requests:
        open_request_of.setdefault(open_request.id, open_request)

    held_told: list[str] = []

    def told_of_match_or_hold(posting: Posting) -> bool:
        """Whether ``posting``'s status is its ledger entry's or its hold's (told here)."""
        match_entry = recorded(posting)
        if match_entry is not None:
            outcomes.append(_matched_status(match_entry, posting, now=now, grace_seconds=grace_seconds, draining=draining,
                                            not_applied=not_applied))
            return True
        why_held = held(posting)
        if why_held is not None:
            outcomes.append(_held_status(posting, why_held))
            held_told.append(f"{posting.kind} {posting.id}: {why_held}")
            return True
        return False

    def tell_offer(posting: Posting) -> None:
        if told_of_match_or_hold(posting):
            return
        offer = open_offer_of.get(posting.id)
        if offer is None:
            return  # Invalid, told above
        if offer.window.end <= now and posting.status.get("phase") == "Returned":
            outcomes.append(Outcome(posting=posting, phase="Returned", status=dict(posting.status)))  # its entry folded
            return
        if offer.window.end <= now:
            outcomes.append(_plain_status(posting, "Expired", f"the window ended at {rfc3339(offer.window.end)} with no request taking it", offer.tenant))
            return
        waits = holds.everything or holds.lenders.get(offer.tenant)
        message = f"on the board, matched to nobody for now: {waits}" if waits else "on the board: no open request qualifies for it yet"
        if posting.id in refusals:
            message += "; the quota proof " + "; ".join(refusals[posting.id])
        outcomes.append(_plain_status(posting, "Posted", message, offer.tenant))

    def tell_request(posting: Posting) -> None:
        if told_of_match_or_hold(posting):
            return
        request = open_request_of.get(posting.id)
        if request is None:
            return
        if request.window.end <= now and posting.status.get("phase") == "Returned":
            outcomes.append(Outcome(posting=posting, phase="Returned", status=dict(posting.status)))  # its entry folded
            return
        if request.window.end <= now:
            outcomes.append(_plain_status(posting, "Expired", f"the window ended at {rfc3339(request.window.end)} unmatched", request.tenant))
            return
        why = holds.everything or unmatched.get(posting.id, "not matched yet")
        outcomes.append(_plain_status(posting, "Posted", "waiting for an offer: " + why, request.tenant))

    for posting in offers:
        if id(posting) not in told:
            guarded(posting, lambda: tell_offer(posting))
    for posting in requests:
        if id(posting) not in told:
            guarded(posting, lambda: tell_request(posting))
    return Round(outcomes=outcomes, new_entries=new_entries, refused=list(matching.refused), surplus=dict(matching.surplus),
                 problems=round_problems, rebuilt=rebuilt, held=held_told)
