"""Bad offers and requests, refused at posting with a message naming the field; nothing is
posted then, so nothing is lost.

Fields are named as the custom resource spells them (``spec.cells[0].count``,
``spec.window.end``, ``metadata.namespace``). The VC of an offer or request is its namespace's:
the Namespace's label ``cellfit.io/virtual-cluster`` (the key pods use) names it. Namespaces
are cluster-scoped and labelled by the cluster's administrators, so RBAC on the resource in a
namespace decides who may trade that VC's cells.

What a VC may offer: cells of the types in its configured quota, at most as many as it holds,
counting every offer of its own already posted (open or matched) whose window overlaps. Cells of
one type in a VC are interchangeable (the VC's cells are virtual until pods bind them), so a VC
with two node cells may post two one-node offers for the same hours, and a third for any of
those hours is refused: the message names ``spec.window`` and the overlapping offers. It may
not offer cells it only borrows, nor smaller cells cut out of a bigger one it holds (offer the
bigger one: a request for the smaller cells can take it).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from scheduler.cells.config import VirtualClusterSpec
from scheduler.cells.exchange.model import CellCatalog, Cells, Offer, Request, Window, describe_cells
from scheduler.cells.exchange.resource import rfc3339
from scheduler.constants import LABEL_VIRTUAL_CLUSTER
from scheduler.messages import clip, quoted

# How far ahead of its posting a window may reach: a year and a day. Beyond, nobody plans a
# cluster's capacity, and times near year 9999 are past what a calendar date holds.
MAX_DAYS_AHEAD = 366
SECONDS_PER_DAY = 86400.0
_KNOWN_SHOWN = 10
_OVERLAPS_SHOWN = 3


def _known(names: Sequence[str]) -> str:
    ordered = sorted(names)
    text = ", ".join(clip(n) for n in ordered[:_KNOWN_SHOWN]) or "none"
    return f"{text} and {len(ordered) - _KNOWN_SHOWN} more" if len(ordered) > _KNOWN_SHOWN else text


def namespace_virtual_cluster(
    *, namespace: str, labels: Mapping[str, str] | None, virtual_clusters: Mapping[str, VirtualClusterSpec]
) -> tuple[str | None, list[str]]:
    """The VC an offer or request posted in ``namespace`` trades for (``labels``: the Namespace's
    labels, ``None`` when there is no such Namespace), or the problem."""
    if labels is None:
        return None, [f"metadata.namespace: namespace {quoted(namespace)} does not exist"]
    vc = labels.get(LABEL_VIRTUAL_CLUSTER)
    if not vc:
        return None, [
            f"metadata.namespace: namespace {quoted(namespace)} has no label {LABEL_VIRTUAL_CLUSTER}, so it maps to no "
            "virtual cluster (its administrators label it with the virtual cluster it trades for)"
        ]
    if vc not in virtual_clusters:
        return None, [
            f"metadata.namespace: namespace {quoted(namespace)} is labelled {LABEL_VIRTUAL_CLUSTER}={quoted(vc)}, "
            f"which is not a configured virtual cluster (known: {_known(list(virtual_clusters))})"
        ]
    return vc, []


def _window_problems(window: Window, posted: float) -> list[str]:
    problems: list[str] = []
    for name, value in (("start", window.start), ("end", window.end)):
        if not math.isfinite(value):
            problems.append(f"spec.window.{name}: must be a finite time, not {value!r}")
    if problems:
        return problems
    latest = posted + MAX_DAYS_AHEAD * SECONDS_PER_DAY
    if window.end <= window.start:
        problems.append(f"spec.window.end: must be after spec.window.start ({window.end:g} <= {window.start:g})")
    elif window.end <= posted:
        problems.append(f"spec.window.end: {window.end:g} has already passed (posted at {posted:g})")
    elif window.start > latest:
        problems.append(f"spec.window.start: {rfc3339(window.start)} is more than {MAX_DAYS_AHEAD} days after the object "
                        f"was posted ({rfc3339(posted)}); post it nearer the time")
    elif window.end > latest:
        problems.append(f"spec.window.end: {rfc3339(window.end)} is more than {MAX_DAYS_AHEAD} days after the object "
                        f"was posted ({rfc3339(posted)}); a window ends by {rfc3339(latest)}")
    return problems


def _cells_problems(cells: Cells, catalog: CellCatalog) -> list[str]:
    problems: list[str] = []
    if not cells:
        return ["spec.cells: must name at least one cell"]
    seen: set[str] = set()
    for i, (cell_type, count) in enumerate(cells):
        if catalog.size(cell_type) is None:
            problems.append(f"spec.cells[{i}].cellType: unknown cell type {quoted(cell_type)} (known: {_known(list(catalog.sizes))})")
        elif cell_type in seen:
            problems.append(f"spec.cells[{i}].cellType: {quoted(cell_type)} is listed twice")
        seen.add(cell_type)
        if count < 1:
            problems.append(f"spec.cells[{i}].count: must be >= 1, not {count}")
    return problems


def request_problems(*, request: Request, catalog: CellCatalog, virtual_clusters: Mapping[str, VirtualClusterSpec]) -> list[str]:
    """Everything wrong with ``request``, one ``field: message`` each."""
    problems: list[str] = []
    if request.tenant not in virtual_clusters:
        problems.append(f"metadata.namespace: virtual cluster {quoted(request.tenant)} is not configured")
    return problems + _cells_problems(request.cells, catalog) + _window_problems(request.window, request.posted)


def offer_problems(
    *,
    offer: Offer,
    catalog: CellCatalog,
    virtual_clusters: Mapping[str, VirtualClusterSpec],
    posted_offers: Sequence[Offer],
) -> list[str]:
    """Everything wrong with ``offer``, one ``field: message`` each. ``posted_offers``: the offers
    already on the board or matched and not yet over (any tenant's; only ``offer.tenant``'s count;
    a matched offer under ``offer``'s name counts too: it was an object deleted since, whose
    match still lends its cells)."""
    spec = virtual_clusters.get(offer.tenant)
    problems: list[str] = []
    if spec is None:
        problems.append(f"metadata.namespace: virtual cluster {quoted(offer.tenant)} is not configured")
    problems += _cells_problems(offer.cells, catalog)
    problems += _window_problems(offer.window, offer.posted)
    if problems or spec is None:
        return problems
    quota = {c.cell_type: c.count for c in spec.cells}
    overlapping = [o for o in posted_offers if o.tenant == offer.tenant and o is not offer and o.window.overlaps(offer.window)]
    for i, (cell_type, count) in enumerate(offer.cells):
        held = quota.get(cell_type, 0)
        if count > held:
            problems.append(
                f"spec.cells[{i}].count: virtual cluster {quoted(offer.tenant)} holds {held} {cell_type} cells "
                f"and cannot offer {count}"
            )
            continue
        # The most cells of this type the overlapping offers lend at one moment of the window.
        peak, peak_offers = _peak(offer.window, [o for o in overlapping if dict(o.cells).get(cell_type, 0)], cell_type)
        if peak + count > held:
            peak_offers.sort(key=lambda o: (o.posted, o.id))  # named in posting order
            shown = ", ".join(f"{o.id} ({describe_cells(o.cells)}, {o.window.describe()})" for o in peak_offers[:_OVERLAPS_SHOWN])
            if len(peak_offers) > _OVERLAPS_SHOWN:
                shown += f" and {len(peak_offers) - _OVERLAPS_SHOWN} more"
            problems.append(
                f"spec.window: {offer.window.describe()} overlaps offers of virtual cluster {quoted(offer.tenant)} that "
                f"already lend {peak} of its {held} {cell_type} cells then ({shown}); {count} more would be more than it holds"
            )
    return problems


def _peak(window: Window, offers: Sequence[Offer], cell_type: str) -> tuple[int, list[Offer]]:
    """The most ``cell_type`` cells ``offers`` lend at one moment inside ``window``, and those offers.
    One sweep over their starts and ends (ends first at a tie: windows are half-open), so that a
    tenant's thousands of back-to-back offers cost a round n log n per offer, not n squared."""
    events: list[tuple[float, int, int]] = []  # (time, 0 for an end / 1 for a start, cells)
    for other in offers:
        start, end = max(other.window.start, window.start), min(other.window.end, window.end)
        if start < end:
            count = dict(other.cells).get(cell_type, 0)
            events += [(start, 1, count), (end, 0, -count)]
    best, best_at, lent = 0, window.start, 0
    for at, _, cells in sorted(events):
        lent += cells
        if lent > best:
            best, best_at = lent, at
    return best, [o for o in offers if best and o.window.holds(best_at)]
