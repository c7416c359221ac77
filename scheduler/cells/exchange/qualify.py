"""Which offers qualify for a request (Algorithm 2's ``QualifiedOffers``).

An offer qualifies when it is another tenant's, its window covers the request's, and its cells
can hold exactly the cells asked for: the same GPUs in every cell chain (a V100 is not an A100),
and the asked cells packable into the offered ones. Packing is exact, not a heuristic, because
the sizes within a chain divide one another (each level is ``childCount`` cells of the level
below): the asked cells fit iff, at every level L, the GPUs asked in cells at level L or above
are at most the GPUs offered in cells at level L or above. (Necessary: such cells fit only in
such cells. Sufficient: placed largest first, each cell finds room, since every free space in
a cell at level L or above is a multiple of a level-L cell.) So one 8-GPU node cell holds eight
1-GPU cells, or two 4-GPU sockets, and two 8-GPU node cells hold sixteen 1-GPU cells but never one
16-GPU cell above the node.

The GPUs must be equal, not merely enough: Algorithm 2 removes a matched offer whole and moves
its GPU-hours, so an offer larger than the request would take from the lender more than the
borrower gets. A VC lends several cells separately by posting several offers.
"""

from __future__ import annotations

from scheduler.cells.exchange.model import CellCatalog, Cells, Offer, Request, Window, describe_cells


def _by_chain(cells: Cells, catalog: CellCatalog) -> dict[str, dict[int, int]]:
    """chain -> level -> GPUs in ``cells`` at that level."""
    table: dict[str, dict[int, int]] = {}
    for cell_type, count in cells:
        size = catalog.sizes[cell_type]
        levels = table.setdefault(size.chain, {})
        levels[size.level] = levels.get(size.level, 0) + size.gpus * count
    return table


def packing_problem(*, offered: Cells, asked: Cells, catalog: CellCatalog) -> str | None:
    """Why ``offered`` cannot hold exactly ``asked`` (``None``: it can). Every type must be known."""
    have, want = _by_chain(offered, catalog), _by_chain(asked, catalog)
    for chain in sorted(have.keys() | want.keys()):
        have_levels, want_levels = have.get(chain, {}), want.get(chain, {})
        have_total, want_total = sum(have_levels.values()), sum(want_levels.values())
        if have_total != want_total:
            return f"{have_total} GPUs of the {chain} hierarchy offered, {want_total} asked"
        have_above = want_above = 0
        for level in sorted(have_levels.keys() | want_levels.keys(), reverse=True):
            have_above += have_levels.get(level, 0)
            want_above += want_levels.get(level, 0)
            if want_above > have_above:
                return f"the cells asked at level {level} of the {chain} hierarchy or above need {want_above} GPUs in such cells; the offer has {have_above}"
    return None


def disqualification(*, offer: Offer, request: Request, window: Window, catalog: CellCatalog) -> str | None:
    """Why ``offer`` cannot serve ``request`` during ``window`` (the part of the request's window
    still to come); ``None`` when it qualifies."""
    if offer.tenant == request.tenant:
        return f"offer {offer.id} is {request.tenant}'s own"
    if not offer.window.covers(window):
        return f"offer {offer.id} ({offer.window.describe()}) does not cover {window.describe()}"
    problem = packing_problem(offered=offer.cells, asked=request.cells, catalog=catalog)
    if problem is not None:
        return f"offer {offer.id} ({describe_cells(offer.cells)}) cannot hold {describe_cells(request.cells)}: {problem}"
    return None


def qualifies(*, offer: Offer, request: Request, window: Window, catalog: CellCatalog) -> bool:
    """Whether ``disqualification`` is ``None``, without writing the reason (the arbiter quotes
    only the first few reasons of an unmatched request, and weighs every offer for every request)."""
    return (
        offer.tenant != request.tenant
        and offer.window.covers(window)
        and packing_problem(offered=offer.cells, asked=request.cells, catalog=catalog) is None
    )
