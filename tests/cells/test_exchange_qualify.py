"""Which offers qualify for a request: tenant, window, and exact packing of the asked cells into
the offered ones (checked against a brute-force packer)."""

from __future__ import annotations

import itertools
import random

import pytest

from scheduler.cells.config import CellTypeSpec
from scheduler.cells.exchange import CellCatalog, Offer, Request, Window, cells_of, disqualification, packing_problem
from tests.cells.helpers import V100_TYPES

TYPES = {
    **V100_TYPES,
    "V100-RACK": {"childType": "V100-NODE", "childCount": 2},
    "A100-NODE": {"childType": "A100", "childCount": 8, "isNodeLevel": True},
}
CATALOG = CellCatalog({name: CellTypeSpec.model_validate(spec) for name, spec in TYPES.items()})


def holds(offered: dict[str, int], asked: dict[str, int]) -> bool:
    return packing_problem(offered=cells_of(offered), asked=cells_of(asked), catalog=CATALOG) is None


def test_catalog_sizes_every_level_and_the_gpu_type():
    assert CATALOG.size("V100").gpus == 1 and CATALOG.size("V100").level == 1
    assert CATALOG.size("V100-SWITCH").gpus == 2
    assert CATALOG.size("V100-SOCKET").gpus == 4
    assert (CATALOG.size("V100-NODE").gpus, CATALOG.size("V100-NODE").level) == (8, 4)
    assert CATALOG.size("V100-RACK").gpus == 16
    assert CATALOG.size("V100-NODE").chain == "V100-RACK"
    assert CATALOG.size("A100").chain == "A100-NODE"
    assert CATALOG.size("H100") is None
    assert CATALOG.gpus(cells_of({"V100-NODE": 2, "V100": 3})) == 19


def test_cells_keep_the_order_written():
    assert cells_of({"b": 1, "a": 2}) == (("b", 1), ("a", 2))
    assert cells_of([("a", 1), ("b", 1)]) == (("a", 1), ("b", 1))
    assert holds({"V100-SOCKET": 1, "V100-NODE": 1}, {"V100-SWITCH": 2, "V100-SOCKET": 2})  # order never matters


@pytest.mark.parametrize(
    "asked",
    [{"V100-NODE": 1}, {"V100": 8}, {"V100-SWITCH": 4}, {"V100-SOCKET": 2}, {"V100-SOCKET": 1, "V100-SWITCH": 1, "V100": 2}],
)
def test_a_node_cell_holds_any_eight_gpus_of_its_chain(asked):
    assert holds({"V100-NODE": 1}, asked)


@pytest.mark.parametrize(
    "asked, why",
    [
        ({"V100": 7}, "8 GPUs of the V100-RACK hierarchy offered, 7 asked"),
        ({"V100": 9}, "8 GPUs of the V100-RACK hierarchy offered, 9 asked"),
        ({"A100": 8}, "0 GPUs of the A100-NODE hierarchy offered, 8 asked"),
    ],
)
def test_gpus_must_be_equal_and_of_the_same_chain(asked, why):
    problem = packing_problem(offered=cells_of({"V100-NODE": 1}), asked=cells_of(asked), catalog=CATALOG)
    assert problem is not None and why in problem


def test_asked_cells_bigger_than_the_offered_ones_do_not_fit():
    # Two sockets are 8 GPUs, but not one node: a node cell needs 8 GPUs under one node.
    assert not holds({"V100-SOCKET": 2}, {"V100-NODE": 1})
    problem = packing_problem(offered=cells_of({"V100-SOCKET": 2}), asked=cells_of({"V100-NODE": 1}), catalog=CATALOG)
    assert "level 4 of the V100-RACK hierarchy or above need 8 GPUs in such cells; the offer has 0" in problem
    assert holds({"V100-NODE": 2}, {"V100": 16})
    assert not holds({"V100-NODE": 2}, {"V100-RACK": 1})
    # Mixed: a node and a socket hold two sockets and two switches; three sockets never hold a node.
    assert holds({"V100-NODE": 1, "V100-SOCKET": 1}, {"V100-SOCKET": 2, "V100-SWITCH": 2})
    assert not holds({"V100-SOCKET": 3}, {"V100-NODE": 1, "V100-SOCKET": 1})


def _brute_force_fits(bins: list[int], items: list[int]) -> bool:
    """Exhaustive packing of item sizes into bin capacities (tiny inputs only)."""
    if sum(bins) != sum(items):
        return False
    items = sorted(items, reverse=True)

    def place(i: int, room: list[int]) -> bool:
        if i == len(items):
            return True
        tried: set[int] = set()
        for b, free in enumerate(room):
            if free >= items[i] and free not in tried:
                tried.add(free)
                room[b] -= items[i]
                if place(i + 1, room):
                    return True
                room[b] += items[i]
        return False

    return place(0, list(bins))


def test_packing_rule_agrees_with_a_brute_force_packer():
    rng = random.Random(17)
    v100 = ["V100", "V100-SWITCH", "V100-SOCKET", "V100-NODE", "V100-RACK"]
    checked = fits = 0
    for _ in range(3000):
        offered = {t: rng.randint(0, 2) for t in rng.sample(v100, rng.randint(1, 3))}
        asked = {t: rng.randint(0, 4) for t in rng.sample(v100, rng.randint(1, 3))}
        offered = {t: n for t, n in offered.items() if n} or {"V100-NODE": 1}
        asked = {t: n for t, n in asked.items() if n} or {"V100": 8}
        bins = [CATALOG.size(t).gpus for t, n in offered.items() for _ in range(n)]
        items = [CATALOG.size(t).gpus for t, n in asked.items() for _ in range(n)]
        if len(items) > 12:
            continue
        expected = _brute_force_fits(bins, items)
        assert holds(offered, asked) == expected, (offered, asked)
        checked += 1
        fits += expected
    assert checked > 1000 and 50 < fits < checked  # both answers are exercised


def _offer(**kw) -> Offer:
    base = dict(id="o1", tenant="a", cells=cells_of({"V100-NODE": 1}), window=Window(start=0, end=7200), posted=0)
    return Offer(**{**base, **kw})


def _request(**kw) -> Request:
    base = dict(id="r1", tenant="b", cells=cells_of({"V100-NODE": 1}), window=Window(start=0, end=3600), posted=0)
    return Request(**{**base, **kw})


def test_disqualification_names_the_reason():
    request = _request()
    assert disqualification(offer=_offer(), request=request, window=request.window, catalog=CATALOG) is None
    assert disqualification(offer=_offer(tenant="b"), request=request, window=request.window, catalog=CATALOG) == "offer o1 is b's own"
    late = _offer(window=Window(start=1800, end=7200))
    assert disqualification(offer=late, request=request, window=request.window, catalog=CATALOG) == "offer o1 ([1800, 7200)) does not cover [0, 3600)"
    short = _offer(window=Window(start=0, end=3599))
    assert "does not cover" in disqualification(offer=short, request=request, window=request.window, catalog=CATALOG)
    exact = _offer(window=Window(start=0, end=3600))  # the same window covers itself
    assert disqualification(offer=exact, request=request, window=request.window, catalog=CATALOG) is None
    small = _offer(cells=cells_of({"V100-SOCKET": 1}))
    assert disqualification(offer=small, request=request, window=request.window, catalog=CATALOG) == (
        "offer o1 (1 V100-SOCKET) cannot hold 1 V100-NODE: 4 GPUs of the V100-RACK hierarchy offered, 8 asked"
    )


def test_window_arithmetic_is_half_open():
    w = Window(start=10, end=20)
    assert w.holds(10) and w.holds(19.999) and not w.holds(20)
    assert not w.overlaps(Window(start=20, end=30)) and not w.overlaps(Window(start=0, end=10))
    assert w.overlaps(Window(start=19, end=30))
    assert w.hours == pytest.approx(10 / 3600)
    assert all(Window(start=a, end=b).covers(Window(start=a, end=b)) for a, b in itertools.product([0, 5], [10, 15]) if a < b)


def test_qualifies_agrees_with_disqualification():
    """The arbiter writes the reasons of the first few offers only and asks ``qualifies`` of the rest."""
    from scheduler.cells.exchange.qualify import qualifies

    rng = random.Random(5)
    types = sorted(CATALOG.sizes)
    for _ in range(2000):
        def cells() -> dict[str, int]:
            return {t: rng.randint(1, 4) for t in rng.sample(types, rng.randint(1, 2))}

        start = rng.choice([0, 1800, 3600])
        offer = Offer(id="o", tenant=rng.choice("ab"), cells=cells_of(cells()), window=Window(start=start, end=start + rng.choice([1800, 7200])), posted=0)
        asked = offer.cells if rng.random() < 0.5 else cells_of(cells())  # half of them the same cells: many qualify
        request = Request(id="r", tenant="b", cells=asked, window=Window(start=3600, end=5400), posted=0)
        window = Window(start=3600, end=5400)
        assert qualifies(offer=offer, request=request, window=window, catalog=CATALOG) is (
            disqualification(offer=offer, request=request, window=window, catalog=CATALOG) is None
        )
