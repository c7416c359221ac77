"""The exchange when its ledger does not say all it recorded: an entry that does not read, and a
ledger lost (deleted or emptied). Each on the pure round and on the controller, a real
HivedEngine behind it, with the API double of test_exchange_controller."""

from __future__ import annotations

import threading

import pytest

from scheduler.cells import CellsConfig, HivedEngine
from scheduler.cells.exchange import Posting, exchange_round, ledger
from scheduler.cluster.exchange.controller import ExchangeController
from scheduler.cluster.exchange.objects import CellObject, ConfigMap, Meta, Namespace
from scheduler.cluster.exchange.quotas import ExchangeQuotas
from scheduler.config import ExchangeSettings
from tests.cells.test_exchange_board import CATALOG, CONFIG, HOUR, LABEL, NAMESPACES, T0, TOPOLOGY, by_id, posting
from tests.cells.test_exchange_board import run as board_run
from tests.cells.test_exchange_controller import Api, Clock
from tests.cells.test_exchange_quota import config

def run(offers=(), requests=(), entries=(), now=T0, unread=()):
    return exchange_round(offers=list(offers), requests=list(requests), namespaces=NAMESPACES, base=CONFIG.virtual_clusters,
                          catalog=CATALOG, topology=TOPOLOGY, entries=list(entries), now=now, grace_seconds=300.0, unread=unread)


def matched_pair():
    """a's node offered for [T0, T0 + 1 h), b's request for it, matched before the window."""
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = board_run([offer], [request], now=T0 - 30).new_entries
    return offer, request, entry


def unread_of(key: str, text: str) -> list[ledger.Unread]:
    entries, unread = ledger.read_all({key: text})
    assert entries == []
    return unread


def test_an_entry_that_does_not_read_holds_its_objects_and_its_lenders_other_offers():
    offer, request, entry = matched_pair()
    unread = unread_of(entry.key, ledger.encode(entry).replace('"offerCells":[["V100-NODE",1]]', '"offerCells":"one node"'))
    (problem,) = unread
    assert (problem.offer, problem.request, problem.lender) == ("team-a/idle", "team-b/burst", "a")
    # a's second node, offered for the same hour, and a request of c: a must not lend again what
    # the entry may lend; c's other request takes nothing of a's.
    second = posting("offer", "team-a", "spare", {"V100-NODE": 1}, T0, T0 + HOUR)
    asks = posting("request", "team-c", "more", {"V100-NODE": 1}, T0, T0 + HOUR)
    result = run([offer, second], [request, asks], now=T0 + 60, unread=unread)
    assert result.new_entries == []
    outcomes = by_id(result)
    for held in ("team-a/idle", "team-b/burst"):
        message = outcomes[held].message
        assert message.startswith("held:") and f"data.{entry.key}: offerCells" in message, message
        assert outcomes[held].status["preemptAt"] is None
    assert outcomes["team-a/spare"].phase == "Posted" and f"data.{entry.key}" in outcomes["team-a/spare"].message
    # Another lender's offer is matched as ever.
    from_c = posting("offer", "team-c", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    again = run([offer, second, from_c], [request, asks], now=T0 + 60, unread=unread)
    assert [(e.offer, e.request) for e in again.new_entries] == []  # c's own request cannot take c's offer
    to_b = posting("request", "team-b", "extra", {"V100-NODE": 1}, T0, T0 + HOUR)
    third = run([offer, second, from_c], [request, to_b], now=T0 + 60, unread=unread)
    assert [(e.offer, e.request) for e in third.new_entries] == [("team-c/idle", "team-b/extra")]


def test_a_held_object_keeps_what_it_was_told_and_is_in_force_again_once_the_entry_is_fixed():
    offer, request, entry = matched_pair()
    told = {o.posting.id: o for o in board_run([offer], [request], entries=[entry], now=T0 + 60).outcomes}
    active = [posting_with_status(p, told[p.id].status) for p in (offer, request)]
    unread = unread_of(entry.key, ledger.encode(entry).replace('"end":', '"end":"later","was":'))
    outcomes = by_id(run(active, [], now=T0 + 120, unread=unread)) | by_id(run([], active[1:], now=T0 + 120, unread=unread))
    assert outcomes["team-a/idle"].phase == "Active" and outcomes["team-a/idle"].status["match"] == told["team-a/idle"].status["match"]
    fixed = run(active[:1], active[1:], entries=[entry], now=T0 + 120)
    assert fixed.new_entries == [] and {o.phase for o in fixed.outcomes} == {"Active"}
    assert "held" not in by_id(fixed)["team-a/idle"].message


def posting_with_status(p, status):
    return Posting(kind=p.kind, obj={**p.obj, "status": status}, posted=p.posted)


def test_an_entry_naming_nothing_that_reads_stops_every_new_match():
    offer, request, entry = matched_pair()
    unread = unread_of(entry.key, "{not json")
    assert unread[0].offer is None and unread[0].lender is None
    result = run([offer], [request], now=T0 + 60, unread=unread)
    assert result.new_entries == []
    for outcome in result.outcomes:
        assert outcome.phase == "Posted" and f"data.{entry.key}" in outcome.message and "fixes or deletes" in outcome.message, outcome.message


def cell_object(namespace: str, name: str, uid: str, *, status: dict | None = None) -> CellObject:
    return CellObject(metadata=Meta(name=name, namespace=namespace, uid=uid, generation=1, creationTimestamp="2027-01-15T08:00:00Z"),
                      spec={"cells": [{"cellType": "V100-NODE", "count": 1}],
                            "window": {"start": "2027-01-15T09:00:00Z", "end": "2027-01-15T10:00:00Z"}},
                      status=status)


def controller_on(
    api: Api, *, offers: list[CellObject], requests: list[CellObject], now: float, base: CellsConfig | None = None
) -> tuple[ExchangeController, ExchangeQuotas]:
    """The leader's controller and its replica's quotas over ``api``'s ledger, at ``now``: the VCs
    of ``base`` (by default a with two nodes, b and c with one each); the namespaces na, nb, nc
    labelled with a, b, c."""
    base = base or config(racks=1, nodes=4, a={"V100-NODE": 2}, b={"V100-NODE": 1}, c={"V100-NODE": 1})
    engine, lock, clock = HivedEngine.from_config(base), threading.RLock(), Clock()
    clock.now = now
    quotas = ExchangeQuotas(api=api, engine=engine, lock=lock, base=base, namespace="cellfit",  # type: ignore[arg-type]
                            settings=ExchangeSettings(), clock=clock)
    controller = ExchangeController(api=api, quotas=quotas, engine=engine, lock=lock, settings=ExchangeSettings(), clock=clock)  # type: ignore[arg-type]
    quotas.observe(ConfigMap(data=api.data))
    controller._stores["namespace"].replace([Namespace(metadata=Meta(name=f"n{vc}", labels={LABEL: vc})) for vc in "abc"])
    controller._stores["offer"].replace(offers)
    controller._stores["request"].replace(requests)
    controller._wake.clear()
    return controller, quotas


def test_the_controller_holds_what_an_entry_that_does_not_read_names(caplog):
    offer, request = cell_object("na", "idle", "uid-o"), cell_object("nb", "burst", "uid-r")
    api = Api({})
    controller, _ = controller_on(api, offers=[offer], requests=[request], now=T0 - 60)
    controller.reconcile()
    (key,) = [k for k in api.data if k.startswith("match-")]
    api.data[key] = api.data[key].replace('"lender":"a"', '"lender":7')
    # Another request of c for a's node, and a's second node offered: neither is matched.
    more_offer, asks = cell_object("na", "spare", "uid-s"), cell_object("nc", "more", "uid-m")
    controller, quotas = controller_on(api, offers=[offer, more_offer], requests=[request, asks], now=T0 + 60)
    writes = api.ledger_writes
    controller.reconcile()
    assert api.ledger_writes == writes and quotas.applied == frozenset()
    assert api.statuses["idle"]["message"].startswith("held:") and f"data.{key}: lender" in api.statuses["idle"]["message"]
    assert "matched to nobody for now" in api.statuses["spare"]["message"]
    assert any("held" in r.message and "offer na/idle: held:" in str(getattr(r, "held", "")) for r in caplog.records)


class LosingApi(Api):
    """The API double whose ledger ConfigMap can be deleted (``gone``: reads find none, until
    the controller creates it again) or emptied."""

    def __init__(self, data: dict[str, str]) -> None:
        super().__init__(data)
        self.gone = False

    def get_path(self, path: str) -> bytes | None:  # type: ignore[override]
        return None if self.gone else super().get_path(path)

    def write_path(self, method: str, path: str, body, content_type: str | None = None) -> bytes:
        if "configmaps" in path:
            self.gone = False
        return super().write_path(method, path, body, content_type)


def told(api: Api, obj: CellObject) -> CellObject:
    """``obj`` as the watch shows it once the controller wrote its status."""
    return CellObject(metadata=obj.metadata, spec=obj.spec, status=api.statuses[obj.metadata.name])


@pytest.mark.parametrize("loss", ["deleted", "emptied"])
def test_a_lost_ledger_is_rebuilt_from_the_statuses_and_lends_nothing_twice(loss: str):
    # c lent its node to b for [T0 + 1 h, T0 + 2 h); the window is under way when the ledger is lost.
    # a then asks for a node: with every surplus gone (all 0), a's request came first (ties by
    # name) and took c's offer, judged again as posted: c's node lent to a while b's pods run on
    # it, and b's loan forgotten.
    offer, request = cell_object("nc", "idle", "uid-o"), cell_object("nb", "burst", "uid-r")
    api = LosingApi({})
    controller, _ = controller_on(api, offers=[offer], requests=[request], now=T0 - 60)
    controller.reconcile()
    (original,) = ledger.read(api.data)[0]
    asks = cell_object("na", "more", "uid-m")
    controller, quotas = controller_on(api, offers=[told(api, offer)], requests=[told(api, request), asks], now=T0 + HOUR + 60)
    quotas.apply()
    assert quotas.applied == frozenset({original.key})  # under way
    if loss == "deleted":
        api.gone, api.data = True, {}
        quotas.observe(None)
    else:
        api.data = {}
        quotas.observe(ConfigMap(data={}))
    quotas.apply()
    assert quotas.applied == frozenset()  # the replica gave the cells back when the ledger went
    controller.reconcile()
    (rebuilt,) = ledger.read(api.data)[0]
    assert rebuilt.key == original.key and "rebuilt from the statuses" in rebuilt.explanation
    for field in ("offer", "request", "lender", "borrower", "offer_cells", "request_cells", "window", "gpus", "gpu_hours"):
        assert getattr(rebuilt, field) == getattr(original, field), field
    assert quotas.applied == frozenset({original.key}) and quotas.guarantees()["b"] == {"V100-NODE": 2}
    assert api.statuses["idle"]["phase"] == api.statuses["burst"]["phase"] == "Active"
    assert api.statuses["more"]["phase"] == "Posted"


def lost_pair(*, now: float = T0 + 60):
    """a's node lent to b for [T0, T0 + 1 h), both statuses told, the ledger lost."""
    offer, request, entry = matched_pair()
    outcomes = by_id(board_run([offer], [request], entries=[entry], now=now))
    return [posting_with_status(p, outcomes[p.id].status) for p in (offer, request)], entry


def test_a_lost_match_whose_request_is_gone_holds_the_offer_and_its_lenders_offers():
    (offer, request), _ = lost_pair()
    spare = posting("offer", "team-a", "spare", {"V100-NODE": 1}, T0, T0 + HOUR)
    asks = posting("request", "team-c", "more", {"V100-NODE": 1}, T0, T0 + HOUR)
    result = run([offer, spare], [asks], now=T0 + 120)
    assert result.new_entries == [] and result.rebuilt == []
    outcomes = by_id(result)
    assert outcomes["team-a/idle"].phase == "Active" and outcomes["team-a/idle"].message.startswith("held:")
    assert "team-b/burst is not posted" in outcomes["team-a/idle"].message
    assert "matched to nobody for now" in outcomes["team-a/spare"].message
    assert result.held and result.held[0].startswith("offer team-a/idle: held:")
    # Once the lost match's window is over, nothing of it is in force: a's offers are matched again.
    later = posting("offer", "team-a", "later", {"V100-NODE": 1}, T0 + 2 * HOUR, T0 + 3 * HOUR)
    asks_later = posting("request", "team-c", "later", {"V100-NODE": 1}, T0 + 2 * HOUR, T0 + 3 * HOUR)
    after = run([offer, later], [asks_later], now=T0 + HOUR)
    assert [(e.offer, e.request) for e in after.new_entries] == [("team-a/later", "team-c/later")] and after.held == []


def test_a_lost_match_whose_spec_was_edited_is_held_not_rebuilt_from_the_edit():
    (offer, request), entry = lost_pair()
    # b asks, after the loss, for two nodes under the same name: the edit must not be what is rebuilt.
    edited = posting("request", "team-b", "burst", {"V100-NODE": 2}, T0, T0 + HOUR)
    edited = posting_with_status(edited, request.status)
    result = run([offer], [edited], now=T0 + 120)
    assert result.new_entries == []
    assert "held:" in by_id(result)["team-b/burst"].message and "do not pack" in by_id(result)["team-b/burst"].message
    # Unedited, the same pair is rebuilt.
    (rebuilt,) = run([offer], [request], now=T0 + 120).rebuilt
    assert (rebuilt.key, rebuilt.request_cells, rebuilt.gpu_hours) == (entry.key, entry.request_cells, entry.gpu_hours)


def test_a_returned_match_is_never_rebuilt():
    # A Returned match may have folded into the settled totals: rebuilding it would count it twice.
    (offer, request), _ = lost_pair(now=T0 + 2 * HOUR)
    assert offer.status["phase"] == "Returned"
    assert run([offer], [request], now=T0 + 2 * HOUR).new_entries == []


def test_an_entry_that_does_not_read_holds_nothing_once_its_window_is_over():
    offer, request, entry = matched_pair()
    unread = unread_of(entry.key, ledger.encode(entry).replace('"gpus":8', '"gpus":0'))
    assert unread[0].end == T0 + HOUR
    later = posting("offer", "team-a", "later", {"V100-NODE": 1}, T0 + 2 * HOUR, T0 + 3 * HOUR)
    asks = posting("request", "team-c", "later", {"V100-NODE": 1}, T0 + 2 * HOUR, T0 + 3 * HOUR)
    assert run([later], [asks], now=T0 + HOUR - 1, unread=unread).new_entries == []
    (matched,) = run([later], [asks], now=T0 + HOUR, unread=unread).new_entries
    assert (matched.offer, matched.request) == ("team-a/later", "team-c/later")
