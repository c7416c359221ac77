"""What a round must not match while the ledger does not say all it recorded.

A ledger entry that does not read (an operator's edit) may still be a match in force: its offer
lent its cells and its request was promised them. Left out and nothing more, its offer was judged
again and could be matched to another tenant's request, and once the entry was fixed the offer
lent its cells twice. So the round holds what the entry's JSON still names:

* the offer and the request it names (``offer``, ``request``, by id; an object posted again
  under the name, with another UID than the entry's, is a new one) are matched to nobody else;
* every offer of the lender it names (``lender``; else the VC of the named offer's namespace)
  waits, since the entry's cells are not known and the lender must not lend them again;
* an entry naming neither an offer nor a lender that resolves stops every new match;

and holds nothing once the window it records (``end``, when that reads) is over: nothing of it is
in force then to lend twice (its GPU-hours stay out of the surplus until it is fixed).

Each object held says why (the entry's key and the field that does not read), until an
administrator fixes the entry (its match is then in force as recorded) or deletes it (its objects
are then judged again as posted). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from scheduler.cells.config import VirtualClusterSpec
from scheduler.cells.exchange.ledger import Unread
from scheduler.cells.exchange.validation import namespace_virtual_cluster


@dataclass(slots=True, kw_only=True)
class Holds:
    """``objects``: (kind, id) -> UID ("": any) -> why that object is matched to nobody;
    ``lenders``: VC -> why its offers wait; ``everything``: why nothing is matched (``None``:
    matching goes on)."""

    objects: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    lenders: dict[str, str] = field(default_factory=dict)
    everything: str | None = None

    def hold(self, *, kind: str, object_id: str, uid: str, why: str) -> None:
        self.objects.setdefault((kind, object_id), {})[uid] = why

    def of(self, *, kind: str, object_id: str, uid: str) -> str | None:
        """Why the object is held (``None``: it is not). An entry without a UID holds any object
        of its name, one with a UID that object (and one whose UID is not known)."""
        whys = self.objects.get((kind, object_id))
        if not whys:
            return None
        if uid in whys or "" in whys:
            return whys.get(uid) or whys[""]
        return None if uid else next(iter(whys.values()))


def _held_object(unread: Unread, kind: str) -> str:
    return (f"held: the exchange ledger's entry naming this {kind} does not read ({unread.problem}); it is matched to "
            f"nobody else and moves no cell until an administrator fixes or deletes data.{unread.key}")


def _lender_of(unread: Unread, namespaces: Mapping[str, Mapping[str, str]], base: Mapping[str, VirtualClusterSpec]) -> str | None:
    if unread.lender is not None:
        return unread.lender
    if unread.offer is None:
        return None
    namespace = unread.offer.partition("/")[0]
    vc, _ = namespace_virtual_cluster(namespace=namespace, labels=namespaces.get(namespace), virtual_clusters=base)
    return vc


def unread_holds(
    *, unread: list[Unread], namespaces: Mapping[str, Mapping[str, str]], base: Mapping[str, VirtualClusterSpec], now: float
) -> Holds:
    """What the entries that do not read hold (see the module docstring)."""
    holds = Holds()
    for entry in unread:
        if entry.end is not None and entry.end <= now:
            continue  # its window is over: nothing of it is in force to lend twice
        if entry.offer is not None:
            holds.hold(kind="offer", object_id=entry.offer, uid=entry.offer_uid, why=_held_object(entry, "offer"))
        if entry.request is not None:
            holds.hold(kind="request", object_id=entry.request, uid=entry.request_uid, why=_held_object(entry, "request"))
        lender = _lender_of(entry, namespaces, base)
        if lender is not None:
            holds.lenders.setdefault(lender, (
                f"virtual cluster {lender}'s offers are matched to nobody while the exchange ledger's entry data.{entry.key}, "
                f"a match it lends in, does not read ({entry.problem}); an administrator fixes or deletes it"))
        elif holds.everything is None:
            holds.everything = (f"no offer is matched while the exchange ledger's entry data.{entry.key} does not read and names "
                                f"no offer or lender ({entry.problem}); an administrator fixes or deletes it")
    return holds
