"""Balanced cell exchange (HiveD Algorithm 2): who is matched first, with whose offer, what the
surplus becomes, and that the result depends on nothing but the board."""

from __future__ import annotations

import random

import pytest

from scheduler.cells.config import CellTypeSpec
from scheduler.cells.exchange import CellCatalog, Match, Offer, Request, Window, cells_of, disqualification, do_matching
from tests.cells.helpers import V100_TYPES

CATALOG = CellCatalog({name: CellTypeSpec.model_validate(spec) for name, spec in V100_TYPES.items()})
HOUR = 3600.0
NODE = {"V100-NODE": 1}


def offer(id: str, tenant: str, cells=NODE, start=0.0, end=10 * HOUR, posted=0.0) -> Offer:
    return Offer(id=id, tenant=tenant, cells=cells_of(cells), window=Window(start=start, end=end), posted=posted)


def request(id: str, tenant: str, cells=NODE, start=0.0, end=2 * HOUR, posted=0.0) -> Request:
    return Request(id=id, tenant=tenant, cells=cells_of(cells), window=Window(start=start, end=end), posted=posted)


def match(offers, requests, surplus=None, now=0.0, admit=None):
    return do_matching(offers=offers, requests=requests, surplus=surplus or {}, catalog=CATALOG, now=now, admit=admit)


def pairs(result) -> list[tuple[str, str]]:
    return [(m.request.id, m.offer.id) for m in result.matches]


def test_one_request_one_offer_moves_gpu_hours():
    result = match([offer("o1", "a")], [request("r1", "b")])
    assert pairs(result) == [("r1", "o1")]
    m = result.matches[0]
    assert (m.lender, m.borrower, m.gpus) == ("a", "b", 8)
    assert m.gpu_hours == pytest.approx(16.0)  # 8 GPUs x the request's 2 h, not the offer's 10 h
    assert m.window == Window(start=0, end=2 * HOUR)
    assert result.surplus == {"a": pytest.approx(16.0), "b": pytest.approx(-16.0)}
    assert result.offers_left == () and result.unmatched == ()


def test_the_tenant_with_the_highest_surplus_is_served_first():
    # One offer, two tenants asking: the bigger contributor gets it, whoever posted first.
    result = match([offer("o1", "a")], [request("r-b", "b", posted=1), request("r-c", "c", posted=2)], surplus={"b": 1.0, "c": 5.0})
    assert pairs(result) == [("r-c", "o1")]
    assert result.tenant_order == ("c", "b")
    assert [u.request.id for u in result.unmatched] == ["r-b"]


def test_equal_surplus_tenants_go_in_name_order():
    result = match([offer("o1", "a")], [request("r-z", "z", posted=0), request("r-m", "m", posted=5)], surplus={"z": 2.0, "m": 2.0})
    assert result.tenant_order == ("m", "z")
    assert pairs(result) == [("r-m", "o1")]


def test_a_tenants_requests_go_in_posting_order():
    result = match([offer("o1", "a")], [request("r2", "b", posted=20), request("r1", "b", posted=10)])
    assert pairs(result) == [("r1", "o1")]
    same_time = match([offer("o1", "a")], [request("rb", "b", posted=10), request("ra", "b", posted=10)])
    assert pairs(same_time) == [("ra", "o1")]  # then by id


def test_the_offer_of_the_owner_with_the_lowest_surplus_is_taken():
    offers = [offer("o-rich", "rich", posted=0), offer("o-poor", "poor", posted=50)]
    result = match(offers, [request("r1", "b")], surplus={"rich": 30.0, "poor": -4.0})
    assert pairs(result) == [("r1", "o-poor")]
    assert [o.id for o in result.offers_left] == ["o-rich"]
    explanation = result.matches[0].explanation
    assert "of 2 qualified offers its owner has the lowest surplus (poor -4.00, rich +30.00)" in explanation
    assert "surplus b +0.00 -> -16.00, poor -4.00 -> +12.00" in explanation


def test_ties_between_owners_go_to_the_earliest_posted_offer_then_id():
    offers = [offer("o-late", "x", posted=9), offer("o-early", "y", posted=3), offer("o-early2", "z", posted=3)]
    result = match(offers, [request("r1", "b")])
    assert pairs(result) == [("r1", "o-early")]
    assert "3 offers tie at +0.00, o-early is the earliest posted (3)" in result.matches[0].explanation


def test_owner_surplus_moves_during_the_round():
    # b's two requests: the first goes to x (lowest surplus), which then has +16 > y's +5.
    offers = [offer("x1", "x", posted=0), offer("x2", "x", posted=1), offer("y1", "y", posted=2)]
    result = match(offers, [request("r1", "b", posted=0), request("r2", "b", posted=1)], surplus={"x": 0.0, "y": 5.0})
    assert pairs(result) == [("r1", "x1"), ("r2", "y1")]
    assert result.surplus == {"b": pytest.approx(-32), "x": pytest.approx(16), "y": pytest.approx(21)}


def test_the_tenant_order_is_fixed_when_the_round_starts():
    # c starts richest; after its first match it is poorer than b, yet its second request still
    # comes before b's (Algorithm 2 iterates tenants in the order sorted at the start).
    offers = [offer("o1", "a", posted=0), offer("o2", "a", posted=1)]
    requests = [request("c1", "c", posted=0), request("c2", "c", posted=1), request("b1", "b", posted=0)]
    result = match(offers, requests, surplus={"c": 10.0, "b": 0.0})
    assert result.tenant_order == ("c", "b")
    assert pairs(result) == [("c1", "o1"), ("c2", "o2")]
    assert result.unmatched[0].request.id == "b1" and result.unmatched[0].reason == "no open offer"


def test_a_tenant_never_takes_its_own_offer():
    result = match([offer("o1", "b")], [request("r1", "b")])
    assert result.matches == ()
    assert result.unmatched[0].reason == "no qualified offer among 1 open: offer o1 is b's own"


def test_spatial_exchange_a_node_for_eight_gpus():
    result = match([offer("o1", "a", cells={"V100-NODE": 1})], [request("r1", "b", cells={"V100": 8})])
    assert pairs(result) == [("r1", "o1")]
    assert "(1 V100-NODE for 8 V100)" in result.matches[0].explanation


def test_unmatched_reason_lists_the_first_disqualifications():
    offers = [offer(f"o{i}", "a", cells={"V100-SOCKET": 1}, posted=i) for i in range(5)]
    result = match(offers, [request("r1", "b")])
    reason = result.unmatched[0].reason
    assert reason.startswith("no qualified offer among 5 open: offer o0 (1 V100-SOCKET) cannot hold 1 V100-NODE")
    assert reason.endswith("; and 2 more")


def test_now_trims_a_request_under_way_and_expires_ended_ones():
    offers = [offer("o1", "a", start=0, end=10 * HOUR), offer("gone", "a", start=0, end=HOUR)]
    requests = [request("r-old", "b", start=0, end=HOUR, posted=0), request("r-now", "c", start=0, end=4 * HOUR, posted=1)]
    result = match(offers, requests, now=HOUR)
    assert [o.id for o in result.expired_offers] == ["gone"]
    assert [(u.request.id, u.reason) for u in result.unmatched] == [("r-old", "its window ended at 3600")]
    m = result.matches[0]
    assert (m.request.id, m.window, m.gpu_hours) == ("r-now", Window(start=HOUR, end=4 * HOUR), pytest.approx(24.0))


def test_an_offer_opening_later_does_not_cover_a_request_under_way():
    result = match([offer("o1", "a", start=2 * HOUR, end=10 * HOUR)], [request("r1", "b", start=HOUR, end=3 * HOUR)], now=0)
    assert result.matches == ()
    assert "does not cover [3600, 10800)" in result.unmatched[0].reason


def test_admit_refusal_tries_the_next_offer_and_moves_no_surplus():
    seen: list[tuple[str, tuple[str, ...]]] = []

    def admit(candidate: Match, admitted) -> str | None:
        seen.append((candidate.offer.id, tuple(m.offer.id for m in admitted)))
        return "infeasible" if candidate.offer.id == "o-poor" else None

    offers = [offer("o-rich", "rich"), offer("o-poor", "poor")]
    result = match(offers, [request("r1", "b"), request("r2", "b", posted=1)], surplus={"rich": 5.0, "poor": -5.0}, admit=admit)
    assert pairs(result) == [("r1", "o-rich")]
    assert [(r.request.id, r.offer.id, r.reason) for r in result.refused] == [("r1", "o-poor", "infeasible"), ("r2", "o-poor", "infeasible")]
    assert result.unmatched[0].reason == "every qualified offer was refused: offer o-poor: infeasible"
    assert result.surplus["poor"] == -5.0  # a refused exchange costs and earns nothing
    assert seen == [("o-poor", ()), ("o-rich", ()), ("o-poor", ("o-rich",))]
    assert [o.id for o in result.offers_left] == ["o-poor"]
    assert "of 2 qualified offers, 1 refused by the quota proof (o-poor), and of the rest its owner has the lowest surplus (poor -5.00, rich +5.00)" in result.matches[0].explanation


def _random_board(rng: random.Random):
    tenants = ["a", "b", "c", "d"]
    kinds = [{"V100-NODE": 1}, {"V100": 8}, {"V100-SOCKET": 2}, {"V100-SOCKET": 1}, {"V100": 4}]
    offers = [
        offer(f"o{i}", rng.choice(tenants), cells=rng.choice(kinds), start=rng.randint(0, 3) * HOUR, end=rng.randint(4, 9) * HOUR, posted=rng.randint(0, 5))
        for i in range(rng.randint(0, 8))
    ]
    requests = [
        request(f"r{i}", rng.choice(tenants), cells=rng.choice(kinds), start=rng.randint(0, 4) * HOUR, end=rng.randint(5, 8) * HOUR, posted=rng.randint(0, 5))
        for i in range(rng.randint(0, 8))
    ]
    surplus = {t: float(rng.randint(-3, 3)) for t in tenants if rng.random() < 0.7}
    return offers, requests, surplus


def test_result_depends_on_the_board_not_the_input_order_and_conserves_surplus():
    rng = random.Random(2026)
    matched = 0
    for _ in range(400):
        offers, requests, surplus = _random_board(rng)
        first = match(offers, requests, surplus, now=HOUR)
        shuffled_offers, shuffled_requests = offers[:], requests[:]
        rng.shuffle(shuffled_offers)
        rng.shuffle(shuffled_requests)
        again = match(shuffled_offers, shuffled_requests, dict(reversed(list(surplus.items()))), now=HOUR)
        assert pairs(again) == pairs(first)
        assert [m.explanation for m in again.matches] == [m.explanation for m in first.matches]
        assert again.surplus == first.surplus
        assert sum(first.surplus.values()) == pytest.approx(sum(surplus.values()))  # GPU-hours move, never appear
        used = [m.offer.id for m in first.matches]
        assert len(used) == len(set(used))  # each offer matched at most once
        for m in first.matches:
            assert m.lender != m.borrower and m.offer.window.covers(m.window)
            assert CATALOG.gpus(m.offer.cells) == CATALOG.gpus(m.request.cells) == m.gpus
        assert {o.id for o in first.offers_left} | set(used) | {o.id for o in first.expired_offers} == {o.id for o in offers}
        matched += len(first.matches)
    assert matched > 100


def test_each_match_takes_the_lowest_surplus_owner_among_the_offers_left():
    rng = random.Random(7)
    for _ in range(300):
        offers, requests, surplus = _random_board(rng)
        result = match(offers, requests, surplus, now=0)
        # Replay: before each match, no open qualified offer had a poorer owner.
        balance = {**{t: 0.0 for t in "abcd"}, **surplus}
        board = sorted(offers, key=lambda o: (o.posted, o.id))
        for m in result.matches:
            qualified = [o for o in board if disqualification(offer=o, request=m.request, window=m.window, catalog=CATALOG) is None]
            assert min(balance[o.tenant] for o in qualified) == balance[m.lender]
            board.remove(m.offer)
            balance[m.borrower] -= m.gpu_hours
            balance[m.lender] += m.gpu_hours
