"""The exchange's durable record: one entry per match, keyed by the match, so that writing it again
(a restart, a retried round) never counts its GPU-hours twice.

The live driver keeps the entries in one ConfigMap (``data``: key -> JSON); everything the
exchange needs after a restart is there: each tenant's surplus (:func:`surplus`, the sum over
the entries, as Algorithm 2 keeps it), and the matches whose quota moves apply now
(:func:`under_way`). The CellOffer / CellRequest statuses are reports of it, rewritten from it.

A ConfigMap holds at most 1 MiB, so a match long over whose offer and request are both deleted,
or over for a day more whatever is posted, is folded (:func:`fold`) into ``settled``: per VC, the GPU-hours lent and borrowed by the matches
folded so far. Removing the entries and adding them to ``settled`` is one write, so nothing is
counted twice or lost. Pure: the caller reads and writes the ConfigMap.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Collection, Iterable, Mapping

from scheduler.cells.exchange.arbiter import Match
from scheduler.cells.exchange.model import Cells, Offer, Request, Window
from scheduler.messages import clip

# ConfigMap keys: [-._a-zA-Z0-9]+; a hash of the pair, since two object names and namespaces
# may be longer than a key may be.
_KEY_PREFIX = "match-"
_KEY_HEX = 20
SETTLED_KEY = "settled"
# An entry over for this long past its fold delay folds even while its objects exist (a day).
FOLD_REGARDLESS_SECONDS = 86400.0


def entry_key(*, offer: str, request: str, offer_uid: str = "", request_uid: str = "") -> str:
    """The ConfigMap key of the match of ``offer`` and ``request`` (``namespace/name`` each; with
    their UIDs, so that an object deleted and posted again under its name is a new match)."""
    digest = hashlib.sha256(f"{offer}\n{request}\n{offer_uid}\n{request_uid}".encode("utf-8")).hexdigest()[:_KEY_HEX]
    return _KEY_PREFIX + digest


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One match as recorded: ``window`` is the match's (the part of the request's window still to
    come when it was matched), ``gpu_hours`` what moved from the borrower's surplus to the lender's."""

    offer: str
    request: str
    lender: str
    borrower: str
    offer_cells: Cells
    request_cells: Cells
    window: Window
    gpus: int
    gpu_hours: float
    matched_at: float
    explanation: str
    offer_uid: str = ""
    request_uid: str = ""
    # Whether it counts in the surplus, decided once its window is over (``charges.settle``), so
    # that a later change of the configured VCs never changes it; None: not decided yet.
    charged: bool | None = None

    @property
    def key(self) -> str:
        return entry_key(offer=self.offer, request=self.request, offer_uid=self.offer_uid, request_uid=self.request_uid)

    def match(self) -> Match:
        """The :class:`Match` it records (offer and request reduced to the matched window)."""
        return Match(
            request=Request(id=self.request, tenant=self.borrower, cells=self.request_cells, window=self.window, posted=self.matched_at),
            offer=Offer(id=self.offer, tenant=self.lender, cells=self.offer_cells, window=self.window, posted=self.matched_at),
            window=self.window,
            gpus=self.gpus,
            gpu_hours=self.gpu_hours,
            explanation=self.explanation,
        )


def entry_of(
    match: Match, *, matched_at: float, offer_uids: Mapping[str, str] | None = None, request_uids: Mapping[str, str] | None = None
) -> Entry:
    """``offer_uids``, ``request_uids``: object id -> its UID, when known."""
    return Entry(
        offer=match.offer.id,
        request=match.request.id,
        lender=match.lender,
        borrower=match.borrower,
        offer_cells=match.offer.cells,
        request_cells=match.request.cells,
        window=match.window,
        gpus=match.gpus,
        gpu_hours=match.gpu_hours,
        matched_at=matched_at,
        explanation=match.explanation,
        offer_uid=(offer_uids or {}).get(match.offer.id, ""),
        request_uid=(request_uids or {}).get(match.request.id, ""),
    )


def encode(entry: Entry) -> str:
    """The entry's ConfigMap value (JSON, keys sorted: the same entry always writes the same text)."""
    decided = {} if entry.charged is None else {"charged": entry.charged}
    return json.dumps(
        {
            **decided,
            "offer": entry.offer,
            "request": entry.request,
            "lender": entry.lender,
            "borrower": entry.borrower,
            "offerCells": [[t, n] for t, n in entry.offer_cells],
            "requestCells": [[t, n] for t, n in entry.request_cells],
            "start": entry.window.start,
            "end": entry.window.end,
            "gpus": entry.gpus,
            "gpuHours": entry.gpu_hours,
            "matchedAt": entry.matched_at,
            "explanation": entry.explanation,
            "offerUid": entry.offer_uid,
            "requestUid": entry.request_uid,
        },
        sort_keys=True,
        separators=(",", ":"),  # no spaces: the ConfigMap's 1 MiB holds more entries
    )


def _cells(value: Any, field: str) -> Cells:
    # Counts of at least 1, as every match has: a count below 1 in an edited entry would move
    # quota the other way (a "lender" lending -1 node gains one).
    if not isinstance(value, list) or not value or not all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], int) and not isinstance(p[1], bool)
        and p[1] >= 1 for p in value
    ):
        raise ValueError(f"{field}: must be a non-empty list of [cellType, count], each count >= 1")
    return tuple((p[0], p[1]) for p in value)


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{field}: must be a finite number")
    return float(value)


def _not_negative(value: float, field: str) -> float:
    if value < 0:
        raise ValueError(f"{field}: must be >= 0, not {value:g}")
    return value


def _window(raw: Mapping[str, Any]) -> Window:
    start, end = _number(raw.get("start"), "start"), _number(raw.get("end"), "end")
    if end <= start:
        raise ValueError(f"end: must be after start ({end:g} <= {start:g})")
    return Window(start=start, end=end)


def _decided(value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise ValueError("charged: must be true or false when present")
    return value


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{field}: must be a non-empty string")
    return value


def decode(key: str, text: str) -> Entry:
    """A ConfigMap value -> :class:`Entry`; ``ValueError`` naming the key and field otherwise
    (a key that is not the entry's own is refused too: it would count the match twice)."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("must be a JSON object")
        gpus = raw.get("gpus")
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise ValueError("gpus: must be a whole number >= 1")
        entry = Entry(
            offer=_text(raw.get("offer"), "offer"),
            request=_text(raw.get("request"), "request"),
            lender=_text(raw.get("lender"), "lender"),
            borrower=_text(raw.get("borrower"), "borrower"),
            offer_cells=_cells(raw.get("offerCells"), "offerCells"),
            request_cells=_cells(raw.get("requestCells"), "requestCells"),
            window=_window(raw),
            gpus=gpus,
            gpu_hours=_not_negative(_number(raw.get("gpuHours"), "gpuHours"), "gpuHours"),
            matched_at=_number(raw.get("matchedAt"), "matchedAt"),
            explanation=str(raw.get("explanation") or ""),
            offer_uid=str(raw.get("offerUid") or ""),
            request_uid=str(raw.get("requestUid") or ""),
            charged=_decided(raw.get("charged")),
        )
    except ValueError as error:  # json.JSONDecodeError included
        raise ValueError(f"data.{key}: {clip(str(error))}") from None
    if entry.key != key:
        raise ValueError(f"data.{key}: records {entry.offer} -> {entry.request}, whose key is {entry.key}")
    return entry


@dataclass(frozen=True, slots=True, kw_only=True)
class Unread:
    """An entry that does not read, with what its JSON still names (``None``: that part does not
    read either). Its match may still hold: the round holds what it names (``board``)."""

    key: str
    problem: str  # "data.<key>: <field>: <what is wrong>"
    offer: str | None
    request: str | None
    lender: str | None
    borrower: str | None
    offer_uid: str = ""
    request_uid: str = ""
    end: float | None = None  # its window's end, when that reads


def _named(raw: Any, field: str) -> str | None:
    value = raw.get(field) if isinstance(raw, dict) else None
    return value if isinstance(value, str) and value else None


def _unread(key: str, text: str, problem: str) -> Unread:
    try:
        raw = json.loads(text)
    except ValueError:
        raw = None
    return Unread(
        key=key, problem=problem, offer=_named(raw, "offer"), request=_named(raw, "request"), lender=_named(raw, "lender"),
        borrower=_named(raw, "borrower"), offer_uid=_named(raw, "offerUid") or "", request_uid=_named(raw, "requestUid") or "",
        end=_end(raw),
    )


def _end(raw: Any) -> float | None:
    try:
        return _number(raw.get("end"), "end") if isinstance(raw, dict) else None
    except ValueError:
        return None


def read_all(data: Mapping[str, str] | None) -> tuple[list[Entry], list[Unread]]:
    """Every entry of a ConfigMap's ``data`` (in key order), and those that do not read (left
    out of the entries, never rewritten: an operator's edit is theirs to fix)."""
    entries: list[Entry] = []
    unread: list[Unread] = []
    for key in sorted(data or {}):
        if not key.startswith(_KEY_PREFIX):
            continue
        text = (data or {})[key]
        try:
            entries.append(decode(key, text))
        except ValueError as error:
            unread.append(_unread(key, text, str(error)))
    return entries, unread


def read(data: Mapping[str, str] | None) -> tuple[list[Entry], list[str]]:
    """:func:`read_all`, with each entry that does not read as its problem (key and field)."""
    entries, unread = read_all(data)
    return entries, [u.problem for u in unread]


# Per VC, the GPU-hours ``lent`` and ``borrowed`` by the matches folded out of the entries.
Settled = dict[str, dict[str, float]]


def read_settled(data: Mapping[str, str] | None) -> tuple[Settled, list[str]]:
    """The ``settled`` totals of a ConfigMap's ``data`` (none: empty), or the problem."""
    text = (data or {}).get(SETTLED_KEY)
    if text is None:
        return {}, []
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("must be a JSON object {vc: {lent, borrowed}}")
        settled: Settled = {}
        for vc, roles in raw.items():
            if not isinstance(roles, dict):
                raise ValueError(f"{vc}: must be {{lent, borrowed}}")
            settled[str(vc)] = {role: _number(roles.get(role, 0.0), f"{vc}.{role}") for role in ("lent", "borrowed")}
    except ValueError as error:
        return {}, [f"data.{SETTLED_KEY}: {clip(str(error))}"]
    return settled, []


def encode_settled(settled: Settled) -> str:
    return json.dumps({vc: {"lent": r["lent"], "borrowed": r["borrowed"]} for vc, r in sorted(settled.items())}, sort_keys=True)


def exchanged(entries: Iterable[Entry], settled: Settled | None = None) -> dict[str, dict[str, float]]:
    """Per VC, the GPU-hours it ``lent`` and ``borrowed`` (the metrics' figures), folded ones included."""
    totals: dict[str, dict[str, float]] = {vc: dict(roles) for vc, roles in (settled or {}).items()}
    for entry in entries:
        totals.setdefault(entry.lender, {"lent": 0.0, "borrowed": 0.0})["lent"] += entry.gpu_hours
        totals.setdefault(entry.borrower, {"lent": 0.0, "borrowed": 0.0})["borrowed"] += entry.gpu_hours
    return totals


def surplus(entries: Iterable[Entry], settled: Settled | None = None) -> dict[str, float]:
    """Each tenant's surplus: GPU-hours lent minus GPU-hours borrowed, folded ones included
    (the callers pass the entries in effect, ``charges.charged``)."""
    return {vc: roles["lent"] - roles["borrowed"] for vc, roles in exchanged(entries, settled).items()}


def fold(
    entries: Iterable[Entry], settled: Settled, *, now: float, objects: set[str], after_seconds: float,
    charged: Collection[str] | None = None,
) -> tuple[list[Entry], Settled]:
    """The entries to fold now, and ``settled`` with them added: those whose window ended more
    than ``after_seconds`` ago and neither of whose offer and request is among ``objects`` (the
    ids still posted), and, whatever is posted, those over for :data:`FOLD_REGARDLESS_SECONDS`
    more (nothing deletes a Returned object; its status stays Returned without the entry).
    ``charged``: the keys of the entries that count in the surplus (``charges``; ``None``: all);
    one that does not folds as nothing."""
    folded = [
        e for e in entries
        if e.window.end + after_seconds < now
        and ((e.offer not in objects and e.request not in objects) or e.window.end + after_seconds + FOLD_REGARDLESS_SECONDS < now)
    ]
    counted = folded if charged is None else [e for e in folded if e.key in charged]
    return folded, exchanged(counted, settled) if folded else settled


def under_way(entries: Iterable[Entry], *, now: float) -> list[Entry]:
    """The entries whose quota move applies at ``now``."""
    return [e for e in entries if e.window.holds(now)]


def not_over(entries: Iterable[Entry], *, now: float) -> list[Entry]:
    """The entries whose window has not ended at ``now`` (the quota proof's ``active``)."""
    return [e for e in entries if e.window.end > now]


def next_edge(entries: Iterable[Entry], *, now: float, grace_seconds: float | None) -> float | None:
    """The first time after ``now`` at which a window opens or ends, or a grace period ends:
    when the quotas or the pods to preempt change next (``None``: never)."""
    times: list[float] = []
    for entry in entries:
        times += [entry.window.start, entry.window.end]
        if grace_seconds is not None:
            times += [entry.window.start + grace_seconds, entry.window.end + grace_seconds]
    later = [t for t in times if t > now]
    return min(later) if later else None
