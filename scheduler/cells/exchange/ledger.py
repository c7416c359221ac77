"""The exchange's durable record: one entry per match, keyed by the match, so that writing it again
(a restart, a retried round) never counts its GPU-hours twice.

The live driver keeps the entries in one ConfigMap (``data``: key -> JSON); everything the
exchange needs after a restart is there: each tenant's surplus (:func:`surplus`, the sum over
the entries, as Algorithm 2 keeps it), and the matches whose quota moves apply now
(:func:`matches`). The CellOffer / CellRequest statuses are reports of it, rewritten from it.
Pure: the caller reads and writes the ConfigMap.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from scheduler.cells.exchange.arbiter import Match
from scheduler.cells.exchange.model import Cells, Offer, Request, Window
from scheduler.messages import clip

# ConfigMap keys: [-._a-zA-Z0-9]+; a hash of the pair, since two object names and namespaces
# may be longer than a key may be.
_KEY_PREFIX = "match-"
_KEY_HEX = 20


def entry_key(*, offer: str, request: str) -> str:
    """The ConfigMap key of the match of ``offer`` and ``request`` (``namespace/name`` each)."""
    digest = hashlib.sha256(f"{offer}\n{request}".encode("utf-8")).hexdigest()[:_KEY_HEX]
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

    @property
    def key(self) -> str:
        return entry_key(offer=self.offer, request=self.request)

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


def entry_of(match: Match, *, matched_at: float) -> Entry:
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
    )


def encode(entry: Entry) -> str:
    """The entry's ConfigMap value (JSON, keys sorted: the same entry always writes the same text)."""
    return json.dumps(
        {
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
        },
        sort_keys=True,
    )


def _cells(value: Any, field: str) -> Cells:
    if not isinstance(value, list) or not all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], int) and not isinstance(p[1], bool) for p in value
    ):
        raise ValueError(f"{field}: must be a list of [cellType, count]")
    return tuple((p[0], p[1]) for p in value)


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{field}: must be a finite number")
    return float(value)


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
        if isinstance(gpus, bool) or not isinstance(gpus, int):
            raise ValueError("gpus: must be a whole number")
        entry = Entry(
            offer=_text(raw.get("offer"), "offer"),
            request=_text(raw.get("request"), "request"),
            lender=_text(raw.get("lender"), "lender"),
            borrower=_text(raw.get("borrower"), "borrower"),
            offer_cells=_cells(raw.get("offerCells"), "offerCells"),
            request_cells=_cells(raw.get("requestCells"), "requestCells"),
            window=Window(start=_number(raw.get("start"), "start"), end=_number(raw.get("end"), "end")),
            gpus=gpus,
            gpu_hours=_number(raw.get("gpuHours"), "gpuHours"),
            matched_at=_number(raw.get("matchedAt"), "matchedAt"),
            explanation=str(raw.get("explanation") or ""),
        )
    except ValueError as error:  # json.JSONDecodeError included
        raise ValueError(f"data.{key}: {clip(str(error))}") from None
    if entry.key != key:
        raise ValueError(f"data.{key}: records {entry.offer} -> {entry.request}, whose key is {entry.key}")
    return entry


def read(data: Mapping[str, str] | None) -> tuple[list[Entry], list[str]]:
    """Every entry of a ConfigMap's ``data`` (in key order), and the problems of those that do
    not read (left out, never rewritten: an operator's edit is theirs to fix)."""
    entries: list[Entry] = []
    problems: list[str] = []
    for key in sorted(data or {}):
        if not key.startswith(_KEY_PREFIX):
            continue
        try:
            entries.append(decode(key, (data or {})[key]))
        except ValueError as error:
            problems.append(str(error))
    return entries, problems


def surplus(entries: Iterable[Entry]) -> dict[str, float]:
    """Each tenant's surplus: GPU-hours lent minus GPU-hours borrowed."""
    balance: dict[str, float] = {}
    for entry in entries:
        balance[entry.lender] = balance.get(entry.lender, 0.0) + entry.gpu_hours
        balance[entry.borrower] = balance.get(entry.borrower, 0.0) - entry.gpu_hours
    return balance


def exchanged(entries: Iterable[Entry]) -> dict[str, dict[str, float]]:
    """Per VC, the GPU-hours it ``lent`` and ``borrowed`` (the metrics' figures)."""
    totals: dict[str, dict[str, float]] = {}
    for entry in entries:
        totals.setdefault(entry.lender, {"lent": 0.0, "borrowed": 0.0})["lent"] += entry.gpu_hours
        totals.setdefault(entry.borrower, {"lent": 0.0, "borrowed": 0.0})["borrowed"] += entry.gpu_hours
    return totals


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
