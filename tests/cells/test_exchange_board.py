"""One exchange round over posted objects (``board.exchange_round``), the ledger that keeps the
matches and the surplus across restarts (``ledger``), and the pods preempted when a drain's
grace ends (``preemption``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scheduler.cells.config import parse_cells_config
from scheduler.cells.exchange import CellCatalog, Posting, exchange_round, ledger
from scheduler.cells.exchange.preemption import draining_pods, due_preemptions
from scheduler.cells.exchange.resource import rfc3339
from scheduler.cells.topology import Topology
from tests.cells.helpers import rack_cluster

HOUR = 3600.0
T0 = 1_800_000_000.0  # a round time, seconds since the epoch
LABEL = "cellfit.io/virtual-cluster"


def cells_config(**vcs: dict[str, int]) -> Any:
    return parse_cells_config(rack_cluster(1, 4, vcs={n: [{"cellType": t, "count": c} for t, c in cells.items()] for n, cells in vcs.items()}))


CONFIG = cells_config(a={"V100-NODE": 2}, b={"V100-NODE": 1}, c={"V100-NODE": 1})
TOPOLOGY = Topology(CONFIG.topology)
CATALOG = CellCatalog(CONFIG.topology.cell_types)
NAMESPACES = {"team-a": {LABEL: "a"}, "team-b": {LABEL: "b"}, "team-c": {LABEL: "c"}, "nolabel": {}}


def posting(kind: str, ns: str, name: str, cells: dict[str, int], start: float, end: float, posted: float = T0 - 60) -> Posting:
    obj = {"metadata": {"namespace": ns, "name": name, "generation": 1},
           "spec": {"cells": [{"cellType": t, "count": n} for t, n in cells.items()],
                    "window": {"start": rfc3339(start), "end": rfc3339(end)}}}
    return Posting(kind=kind, obj=obj, posted=posted)  # type: ignore[arg-type]


def run(offers=(), requests=(), entries=(), now=T0, grace=300.0, draining=None, base=None):
    return exchange_round(offers=list(offers), requests=list(requests), namespaces=NAMESPACES, base=base or CONFIG.virtual_clusters,
                          catalog=CATALOG, topology=TOPOLOGY, entries=list(entries), now=now, grace_seconds=grace, draining=draining)


def by_id(result) -> dict[str, Any]:
    return {o.posting.id: o for o in result.outcomes}


def test_a_round_matches_records_the_entry_and_every_status_says_with_whom():
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + 2 * HOUR)
    request = posting("request", "team-b", "burst", {"V100": 8}, T0 + HOUR, T0 + 2 * HOUR)
    result = run([offer], [request])
    (entry,) = result.new_entries
    assert (entry.offer, entry.request, entry.lender, entry.borrower) == ("team-a/idle", "team-b/burst", "a", "b")
    assert entry.gpu_hours == pytest.approx(8.0) and result.surplus == {"a": pytest.approx(8.0), "b": pytest.approx(-8.0)}
    outcomes = by_id(result)
    o, r = outcomes["team-a/idle"], outcomes["team-b/burst"]
    assert o.phase == r.phase == "Matched"
    assert o.status["match"]["request"] == {"namespace": "team-b", "name": "burst"} and o.status["match"]["virtualCluster"] == "b"
    assert r.status["match"]["offer"] == {"namespace": "team-a", "name": "idle"} and r.status["virtualCluster"] == "b"
    assert o.status["preemptAt"] == rfc3339(T0 + HOUR + 300) and r.status["preemptAt"] == rfc3339(T0 + 2 * HOUR + 300)
    assert "took offer team-a/idle" in r.message


def test_the_ledger_decides_later_rounds_without_matching_twice():
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + 2 * HOUR)
    request = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = run([offer], [request]).new_entries
    data = {entry.key: ledger.encode(entry)}
    entries, problems = ledger.read(data)
    assert problems == [] and entries == [entry]
    for now, phase in ((T0 + 1, "Active"), (T0 + HOUR, "Returned")):
        later = run([offer], [request], entries=entries, now=now)
        assert later.new_entries == []
        assert {o.phase for o in later.outcomes} == {phase}
    # A second request in the same hour finds no offer: the one offer is taken.
    again = run([offer], [request, posting("request", "team-c", "more", {"V100-NODE": 1}, T0, T0 + HOUR)], entries=entries, now=T0 + 1)
    assert by_id(again)["team-c/more"].phase == "Posted" and again.new_entries == []
    assert ledger.surplus(entries) == {"a": pytest.approx(8.0), "b": pytest.approx(-8.0)}


def test_bad_input_is_invalid_naming_the_field_and_matches_nothing():
    offers = [
        posting("offer", "team-a", "too-many", {"V100-NODE": 3}, T0, T0 + HOUR),
        posting("offer", "team-a", "unknown", {"H100-NODE": 1}, T0, T0 + HOUR),
        posting("offer", "nolabel", "nowhere", {"V100-NODE": 1}, T0, T0 + HOUR),
        posting("offer", "missing", "ghost", {"V100-NODE": 1}, T0, T0 + HOUR),
        posting("offer", "team-b", "first", {"V100-NODE": 1}, T0, T0 + HOUR, posted=T0 - 100),
        posting("offer", "team-b", "overlap", {"V100-NODE": 1}, T0 + 600, T0 + HOUR, posted=T0 - 50),
    ]
    result = run(offers, [])
    outcomes = by_id(result)
    assert outcomes["team-a/too-many"].phase == "Invalid" and "spec.cells[0].count" in outcomes["team-a/too-many"].message
    assert "spec.cells[0].cellType: unknown cell type 'H100-NODE'" in outcomes["team-a/unknown"].message
    assert outcomes["nolabel/nowhere"].message.startswith("metadata.namespace:") and outcomes["nolabel/nowhere"].status["virtualCluster"] is None
    assert "does not exist" in outcomes["missing/ghost"].message
    assert outcomes["team-b/first"].phase == "Posted"
    assert outcomes["team-b/overlap"].phase == "Invalid" and outcomes["team-b/overlap"].message.startswith("spec.window:")
    assert result.new_entries == []


def test_a_matched_offer_counts_against_the_lenders_later_offers():
    first = posting("offer", "team-b", "first", {"V100-NODE": 1}, T0, T0 + HOUR, posted=T0 - 100)
    request = posting("request", "team-a", "r", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = run([first], [request]).new_entries
    second = posting("offer", "team-b", "second", {"V100-NODE": 1}, T0 + 60, T0 + 2 * HOUR, posted=T0)
    later = by_id(run([first, second], [request], entries=[entry], now=T0 + 10))
    assert later["team-b/second"].phase == "Invalid" and "team-b/first" in later["team-b/second"].message


def test_expired_and_unmatched_say_why():
    offer = posting("offer", "team-a", "old", {"V100-NODE": 1}, T0 - 2 * HOUR, T0 - HOUR, posted=T0 - 3 * HOUR)
    request = posting("request", "team-b", "late", {"V100-NODE": 1}, T0 - 2 * HOUR, T0 - HOUR, posted=T0 - 3 * HOUR)
    wants = posting("request", "team-c", "big", {"V100-NODE": 2}, T0, T0 + HOUR)
    outcomes = by_id(run([offer], [request, wants]))
    assert outcomes["team-a/old"].phase == "Expired" and outcomes["team-b/late"].phase == "Expired"
    assert outcomes["team-c/big"].phase == "Posted" and "no open offer" in outcomes["team-c/big"].message


def test_an_active_status_names_the_lenders_pods_the_borrower_waits_for():
    offer = posting("offer", "team-a", "busy", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "r", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = run([offer], [request]).new_entries
    outcomes = by_id(run([offer], [request], entries=[entry], now=T0 + 5, draining={"a": 2}))
    assert "2 guaranteed pods of a still hold" in outcomes["team-a/busy"].message
    assert f"preempted at {rfc3339(T0 + 300)}" in outcomes["team-b/r"].message


def test_ledger_refuses_entries_that_do_not_read_and_keys_not_their_own():
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "r", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = run([offer], [request]).new_entries
    other = ledger.entry_key(offer="x/y", request="z/w")
    broken = json.loads(ledger.encode(entry))
    broken["gpuHours"] = "lots"
    entries, problems = ledger.read({entry.key: ledger.encode(entry), other: ledger.encode(entry),
                                     ledger.entry_key(offer="p/q", request="r/s"): json.dumps(broken), "settings": "x"})
    assert entries == [entry]
    assert any(f"data.{other}: records team-a/idle -> team-b/r" in p for p in problems)
    assert any("gpuHours: must be a finite number" in p for p in problems)
    assert ledger.next_edge([entry], now=T0, grace_seconds=300) == T0 + 300
    assert ledger.next_edge([entry], now=T0 + HOUR + 300, grace_seconds=300) is None
    assert ledger.exchanged([entry]) == {"a": {"lent": pytest.approx(8.0), "borrowed": 0.0}, "b": {"lent": 0.0, "borrowed": pytest.approx(8.0)}}


def view(vc: str, cells: list[tuple[str, str, list[str]]]) -> dict[str, Any]:
    return {"name": vc, "vcCells": [{"id": i, "cellType": "V100-NODE", "state": s, "pods": p} for i, s, p in cells],
            "placements": [{"pod": p, "uid": f"uid-{p}"} for _, _, pods in cells for p in pods]}


def test_preemption_waits_for_the_grace_then_takes_only_draining_cells_of_the_moved_type():
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "r", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = run([offer], [request]).new_entries
    views = {"a": view("a", [("n1", "draining", ["team-a/old"]), ("n2", "bound", ["team-a/keep"])]),
             "b": view("b", [("n3", "draining", ["team-b/late"]), ("n4", "draining", ["team-b/other"])])}
    assert due_preemptions(entries=[entry], now=T0 + 299, grace_seconds=300, views=views) == []
    (lender,) = due_preemptions(entries=[entry], now=T0 + 300, grace_seconds=300, views=views)
    assert (lender.pod, lender.uid, lender.vc) == ("team-a/old", "uid-team-a/old", "a") and "lent" in lender.reason
    assert due_preemptions(entries=[entry], now=T0 + HOUR + 10, grace_seconds=300, views=views) == []
    (borrower,) = due_preemptions(entries=[entry], now=T0 + HOUR + 300, grace_seconds=300, views=views)
    assert borrower.pod == "team-b/late"  # one cell moved: one draining cell emptied, not two
    # Still there hours later (a deletion that failed, a pod stuck terminating): tried again.
    assert [p.pod for p in due_preemptions(entries=[entry], now=T0 + 3 * HOUR, grace_seconds=300, views=views)] == ["team-b/late"]
    # A day on, a drain of the VC is another cause's, none of this exchange's business.
    assert due_preemptions(entries=[entry], now=T0 + HOUR + 300 + 86400, grace_seconds=300, views=views) == []
    assert due_preemptions(entries=[entry], now=T0 + HOUR + 300, grace_seconds=None, views=views) == []
    assert draining_pods(views) == {"a": 1, "b": 2}


def test_folding_long_over_matches_of_deleted_objects_keeps_every_gpu_hour_once():
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "r", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = run([offer], [request]).new_entries
    settled = {"a": {"lent": 3.0, "borrowed": 1.0}}
    after = 300 + 3600.0
    # Over, but the request still exists: kept.
    assert ledger.fold([entry], settled, now=T0 + 3 * HOUR, objects={"team-b/r"}, after_seconds=after) == ([], settled)
    # Both gone, but not long enough over: kept.
    assert ledger.fold([entry], settled, now=T0 + HOUR + 60, objects=set(), after_seconds=after)[0] == []
    folded, totals = ledger.fold([entry], settled, now=T0 + 3 * HOUR, objects=set(), after_seconds=after)
    assert folded == [entry]
    assert totals == {"a": {"lent": pytest.approx(11.0), "borrowed": 1.0}, "b": {"lent": 0.0, "borrowed": pytest.approx(8.0)}}
    # The surplus is the same before and after the fold.
    assert ledger.surplus([entry], settled) == pytest.approx(ledger.surplus([], totals))
    data = {ledger.SETTLED_KEY: ledger.encode_settled(totals)}
    assert ledger.read_settled(data) == (totals, [])
    assert ledger.read_settled({ledger.SETTLED_KEY: '{"a": {"lent": "x"}}'})[1] == ["data.settled: a.lent: must be a finite number"]
    # Without the settled totals b and c tie (b first, by name); with them, b is in debt.
    tied = run([posting("offer", "team-a", "o2", {"V100-NODE": 1}, T0 + 4 * HOUR, T0 + 5 * HOUR)],
               [posting("request", "team-b", "r2", {"V100-NODE": 1}, T0 + 4 * HOUR, T0 + 5 * HOUR),
                posting("request", "team-c", "r3", {"V100-NODE": 1}, T0 + 4 * HOUR, T0 + 5 * HOUR)], now=T0 + 3 * HOUR)
    assert [e.borrower for e in tied.new_entries] == ["b"]
    settled_round = exchange_round(
        offers=[posting("offer", "team-a", "o2", {"V100-NODE": 1}, T0 + 4 * HOUR, T0 + 5 * HOUR)],
        requests=[posting("request", "team-b", "r2", {"V100-NODE": 1}, T0 + 4 * HOUR, T0 + 5 * HOUR),
                  posting("request", "team-c", "r3", {"V100-NODE": 1}, T0 + 4 * HOUR, T0 + 5 * HOUR)],
        namespaces=NAMESPACES, base=CONFIG.virtual_clusters, catalog=CATALOG, topology=TOPOLOGY, entries=[], now=T0 + 3 * HOUR,
        grace_seconds=300, settled=totals)
    assert [e.borrower for e in settled_round.new_entries] == ["c"]


def with_uid(p: Posting, uid: str) -> Posting:
    obj = {**p.obj, "metadata": {**p.obj["metadata"], "uid": uid}}
    return Posting(kind=p.kind, obj=obj, posted=p.posted)


def test_an_object_posted_again_under_a_matched_ones_name_is_a_new_one():
    offer = with_uid(posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR), "uid-1")
    request = with_uid(posting("request", "team-b", "r", {"V100-NODE": 1}, T0, T0 + HOUR), "uid-2")
    (entry,) = run([offer], [request]).new_entries
    assert (entry.offer_uid, entry.request_uid) == ("uid-1", "uid-2")
    assert ledger.read({entry.key: ledger.encode(entry)}) == ([entry], [])
    # The request deleted and posted again (a new UID): not the matched one; the offer is taken.
    again = with_uid(request, "uid-3")
    outcomes = by_id(run([offer], [again], entries=[entry], now=T0 + 5))
    assert outcomes["team-a/idle"].phase == "Active"
    assert outcomes["team-b/r"].phase == "Posted" and "no open offer" in outcomes["team-b/r"].message
    assert ledger.entry_key(offer="team-a/idle", request="team-b/r", request_uid="uid-3") != entry.key


@pytest.mark.parametrize("reverse", [False, True])
def test_an_offer_posted_again_under_a_matched_ones_name_is_matched_once_in_either_ledger_order(reverse: bool):
    """Both entries of the name stay in the ledger: the live object is the one whose UID an
    entry records, whichever entry the ledger lists last (key order is a hash's)."""
    base = cells_config(a={"V100-NODE": 3}, b={"V100-NODE": 1}).virtual_clusters
    window = (T0 + HOUR, T0 + 3 * HOUR)
    first = with_uid(posting("offer", "team-a", "idle", {"V100-NODE": 1}, *window), "uid-o1")
    r1 = with_uid(posting("request", "team-b", "r1", {"V100-NODE": 1}, *window), "uid-r1")
    (e1,) = run([first], [r1], base=base).new_entries
    # Tenant a deletes the offer and applies the same manifest again (a new UID); b asks again.
    again = with_uid(posting("offer", "team-a", "idle", {"V100-NODE": 1}, *window, posted=T0), "uid-o2")
    r2 = with_uid(posting("request", "team-b", "r2", {"V100-NODE": 1}, *window, posted=T0), "uid-r2")
    (e2,) = run([again], [r1, r2], entries=[e1], now=T0 + 10, base=base).new_entries
    assert (e2.offer_uid, e2.request) == ("uid-o2", "team-b/r2")
    entries = [e2, e1] if reverse else [e1, e2]
    r3 = with_uid(posting("request", "team-b", "r3", {"V100-NODE": 1}, *window, posted=T0 + 20), "uid-r3")
    third = run([again], [r1, r2, r3], entries=entries, now=T0 + 30, base=base)
    assert third.new_entries == []
    outcomes = by_id(third)
    assert outcomes["team-b/r3"].phase == "Posted"
    assert outcomes["team-a/idle"].status["match"]["request"] == {"namespace": "team-b", "name": "r2"}


def test_a_matched_offer_counts_against_one_posted_again_under_its_name():
    """The matched object and the one posted again under its name are two offers of the VC."""
    window = (T0 + HOUR, T0 + 2 * HOUR)
    first = with_uid(posting("offer", "team-c", "idle", {"V100-NODE": 1}, *window), "uid-o1")
    r1 = with_uid(posting("request", "team-b", "r1", {"V100-NODE": 1}, *window), "uid-r1")
    (e1,) = run([first], [r1]).new_entries
    again = with_uid(posting("offer", "team-c", "idle", {"V100-NODE": 1}, *window, posted=T0), "uid-o2")
    outcomes = by_id(run([again], [r1], entries=[e1], now=T0 + 10))
    assert outcomes["team-c/idle"].phase == "Invalid" and "spec.window" in outcomes["team-c/idle"].message


def test_a_window_far_in_the_future_is_invalid_naming_the_field_and_the_round_goes_on():
    far = posting("offer", "team-a", "forever", {"V100-NODE": 1}, T0, T0 + HOUR)
    far.obj["spec"]["window"] = {"start": "2027-01-01T00:00:00Z", "end": "9999-12-31T23:59:59Z"}
    late = posting("request", "team-c", "later", {"V100-NODE": 1}, T0, T0 + HOUR)
    late.obj["spec"]["window"] = {"start": "9999-12-31T22:00:00Z", "end": "9999-12-31T23:59:59Z"}
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + HOUR)
    result = run([far, offer], [late, request])
    outcomes = by_id(result)
    assert outcomes["team-a/forever"].phase == "Invalid" and outcomes["team-a/forever"].message.startswith("spec.window.end:")
    assert "9999-12-31T23:59:59Z" in outcomes["team-a/forever"].message
    assert outcomes["team-c/later"].phase == "Invalid" and outcomes["team-c/later"].message.startswith("spec.window.start:")
    assert [(e.offer, e.request) for e in result.new_entries] == [("team-a/idle", "team-b/burst")]


def test_a_ledger_entry_far_in_the_future_still_gives_statuses():
    """An entry written before windows were bounded (or by hand) cannot stop a round."""
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = run([offer], [request]).new_entries
    from dataclasses import replace
    from scheduler.cells.exchange import Window
    far = replace(entry, window=Window(start=entry.window.start, end=1e12))
    outcomes = by_id(run([offer], [request], entries=[far], now=T0 + 1))
    assert outcomes["team-a/idle"].phase == "Active" and "since the epoch" in outcomes["team-a/idle"].message


class _Unreadable(dict):
    """A spec that fails when read (an object no schema checked): it must cost only its own status."""

    def get(self, key, default=None):
        raise RuntimeError("unreadable spec")


def test_an_object_that_cannot_be_read_is_invalid_alone():
    bad = posting("offer", "team-a", "bad", {"V100-NODE": 1}, T0, T0 + HOUR)
    bad.obj["spec"] = _Unreadable()
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + HOUR)
    result = run([bad, offer], [request])
    outcomes = by_id(result)
    assert outcomes["team-a/bad"].phase == "Invalid" and "unreadable spec" in outcomes["team-a/bad"].message
    assert [(e.offer, e.request) for e in result.new_entries] == [("team-a/idle", "team-b/burst")]
    assert any("team-a/bad" in p for p in result.problems)


def test_a_match_long_over_folds_even_while_its_objects_exist_and_they_stay_returned():
    """Nothing deletes Returned objects: were they to keep their entries, the ledger would fill
    its 1 MiB. A day past the grace and the borrower's hour the entry folds regardless; the
    objects keep the Returned status they have (cellfit's status, which tenants cannot write)."""
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "r", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = run([offer], [request]).new_entries
    after = 300 + 3600.0
    objects = {"team-a/idle", "team-b/r"}
    assert ledger.fold([entry], {}, now=T0 + HOUR + after + 3600, objects=objects, after_seconds=after)[0] == []
    later = T0 + HOUR + after + ledger.FOLD_REGARDLESS_SECONDS + 1
    folded, totals = ledger.fold([entry], {}, now=later, objects=objects, after_seconds=after)
    assert folded == [entry] and ledger.surplus([], totals) == pytest.approx(ledger.surplus([entry]))
    returned = {o.posting.id: o for o in run([offer], [request], entries=[entry], now=later).outcomes}
    told = [Posting(kind=p.kind, obj={**p.obj, "status": returned[p.id].status}, posted=p.posted) for p in (offer, request)]
    outcomes = by_id(run(told[:1], told[1:], entries=[], now=later, base=CONFIG.virtual_clusters))
    assert {o.phase for o in outcomes.values()} == {"Returned"}
    assert outcomes["team-a/idle"].status == returned["team-a/idle"].status


def test_an_exchange_under_way_the_configuration_cannot_carry_says_so_in_its_status():
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = run([offer], [request]).new_entries
    outcomes = by_id(exchange_round(offers=[offer], requests=[request], namespaces=NAMESPACES, base=CONFIG.virtual_clusters,
                                    catalog=CATALOG, topology=TOPOLOGY, entries=[entry], now=T0 + 1, grace_seconds=300,
                                    not_applied={entry.key: "virtualClusters.a.cells: lends 1 V100-NODE but its quota holds 0"}))
    for object_id in ("team-a/idle", "team-b/burst"):
        assert outcomes[object_id].phase == "Active" and "not in effect" in outcomes[object_id].message
        assert "virtualClusters.a.cells" in outcomes[object_id].message
    assert "not in effect" not in by_id(run([offer], [request], entries=[entry], now=T0 + 1))["team-a/idle"].message
