"""helper-85's adversarial review of the cell exchange: what tenants and a cluster admin can make
it do wrong, each on the real engine, ledger and controller."""

from __future__ import annotations

import sys
import threading


from scheduler.cells import HivedEngine
from scheduler.cells.exchange import Match, Offer, Request, Window, cells_of, due_preemptions, exchange_round, ledger
from scheduler.cluster.exchange.controller import ExchangeController
from scheduler.cluster.exchange.objects import ConfigMap, Meta, Namespace
from scheduler.cluster.exchange.quotas import ExchangeQuotas
from scheduler.config import ExchangeSettings
from tests.cells.helpers import node_names, pod, schedule
from tests.cells.test_exchange_board import CATALOG, CONFIG as BOARD, NAMESPACES, TOPOLOGY, posting
from tests.cells.test_exchange_board import cells_config as board_config
from tests.cells.test_exchange_controller import Api, Clock
from tests.cells.test_exchange_quota import HOUR, config

T0 = 1_800_000_000.0
GRACE = ExchangeSettings().return_grace_seconds or 0.0


def node_exchange(*, start: float, end: float, lender: str = "a", borrower: str = "b") -> ledger.Entry:
    window, node = Window(start=start, end=end), cells_of({"V100-NODE": 1})
    match = Match(request=Request(id=f"n{borrower}/r", tenant=borrower, cells=node, window=window, posted=0),
                  offer=Offer(id=f"n{lender}/o", tenant=lender, cells=node, window=window, posted=0),
                  window=window, gpus=8, gpu_hours=8.0 * window.hours, explanation="")
    return ledger.entry_of(match, matched_at=start - 60)


def controller_on(engine: HivedEngine, base, entries: list[ledger.Entry], clock: Clock) -> tuple[ExchangeController, ExchangeQuotas, Api]:
    api = Api({e.key: ledger.encode(e) for e in entries})
    lock = threading.RLock()
    quotas = ExchangeQuotas(api=api, engine=engine, lock=lock, base=base, namespace="cellfit",  # type: ignore[arg-type]
                            settings=ExchangeSettings(), clock=clock)
    controller = ExchangeController(api=api, quotas=quotas, engine=engine, lock=lock, settings=ExchangeSettings(), clock=clock)  # type: ignore[arg-type]
    quotas.observe(ConfigMap(data=api.data))
    controller._stores["namespace"].replace([Namespace(metadata=Meta(name=f"n{vc}", labels={"cellfit.io/virtual-cluster": vc}))
                                             for vc in ("a", "b")])
    controller._wake.clear()
    return controller, quotas, api


def preempted_by_a_replica_on_a_cut_file(*, cut: dict[str, int], running: str, now: float) -> list[str]:
    """Both VCs held a node; ``running``'s pod runs on its node; the exchange a -> b of a node for
    [T0, T0 + 1 h) is in the ledger, and the replica's file gives the VCs ``cut`` nodes: what one
    round at ``now`` preempts."""
    before = config(racks=1, nodes=2, a={"V100-NODE": 1}, b={"V100-NODE": 1})
    file = config(racks=1, nodes=2, **{vc: {"V100-NODE": n} for vc, n in cut.items()})
    engine = HivedEngine.from_config(before)
    assert schedule(engine, pod(f"{running}-job", 8, running), node_names(1, 2)) is not None
    engine.reconfigure(file)  # the restarted replica's engine: the file's VCs, the pods recovered
    clock = Clock()
    clock.now = now
    exchange = node_exchange(start=T0, end=T0 + HOUR)
    controller, quotas, api = controller_on(engine, file, [exchange], clock)
    controller.reconcile()
    assert exchange.key not in quotas.applied
    return api.deleted


def test_an_exchange_not_in_effect_preempts_none_of_the_lenders_pods():
    # a lent b a node for an hour; a replica (re)started on a file that cut a to no node while the
    # exchange runs: the exchange is left out (b gets nothing), and a's node cell drains because
    # of the file, a pure drain. The grace's end preempted a's pod all the same, "for the cell
    # exchange" that moved nothing: a lost a running job and b gained no cell.
    assert preempted_by_a_replica_on_a_cut_file(cut={"a": 0, "b": 1}, running="a", now=T0 + GRACE + 1) == []


def test_an_exchange_that_was_not_in_effect_preempts_none_of_the_borrowers_pods_at_its_end():
    # The same file cut both a and b to no node: b's node cell drains because of the file. The
    # exchange a -> b, not carried, ended: its grace's end preempted b's pod "for the cells it
    # returned", though b never had them.
    assert preempted_by_a_replica_on_a_cut_file(cut={"a": 0, "b": 0}, running="b", now=T0 + HOUR + GRACE + 1) == []


def test_an_exchange_the_configuration_cannot_carry_blocks_no_other_tenants_match():
    # The file cut a to no node while a lends b a node: that exchange is left out (the replicas
    # apply the others). The quota proof still counted it at every moment of its window, found a
    # lending more than it holds, and refused every other match then: c could lend b nothing for
    # the hour, though the configured VCs carry c's exchange.
    cut = board_config(a={"V100-NODE": 0}, b={"V100-NODE": 1}, c={"V100-NODE": 1})
    stuck = node_exchange(start=T0, end=T0 + HOUR)
    offer = posting("offer", "team-c", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + HOUR)
    result = exchange_round(offers=[offer], requests=[request], namespaces=NAMESPACES, base=cut.virtual_clusters, catalog=CATALOG,
                            topology=TOPOLOGY, entries=[stuck], now=T0 + 60, grace_seconds=GRACE)
    assert [(e.lender, e.borrower) for e in result.new_entries] == [("c", "b")], [o.message for o in result.outcomes]


def test_the_status_of_an_exchange_not_in_effect_promises_no_preemption():
    # The controller preempts nobody for an exchange the configured VCs cannot carry; its objects'
    # status still said that the lender's pods on draining cells "are preempted at" the grace's
    # end, and the borrower's at the end, with preemptAt set: a tenant planned for a preemption
    # that never comes (and the lender's pods were the file's drain).
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    request = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = exchange_round(offers=[offer], requests=[request], namespaces=NAMESPACES, base=BOARD.virtual_clusters, catalog=CATALOG,
                              topology=TOPOLOGY, entries=[], now=T0, grace_seconds=GRACE).new_entries
    result = exchange_round(offers=[offer], requests=[request], namespaces=NAMESPACES, base=BOARD.virtual_clusters, catalog=CATALOG,
                            topology=TOPOLOGY, entries=[entry], now=T0 + 1, grace_seconds=GRACE, draining={"a": 1},
                            not_applied={entry.key: "virtualClusters.a.cells: lends 1 V100-NODE but its quota holds 0"})
    for outcome in result.outcomes:
        assert outcome.phase == "Active" and "not in effect" in outcome.message
        assert "are preempted" not in outcome.message and outcome.status["preemptAt"] is None, outcome.status


class RacingClock:
    """The clock of two threads applying the quotas at a window's end: the first read (thread A's)
    is just before the end; while A holds it, thread B (the quota thread woken by the edge) reads
    the time after the end and applies. A is then let on."""

    def __init__(self, quotas_apply: list, *, before: float, after: float) -> None:
        self.before, self.after, self.apply = before, after, quotas_apply
        self.armed = False
        self.other: threading.Thread | None = None

    def __call__(self) -> float:
        if not self.armed:
            return self.before if self.other is None else self.after
        self.armed = False
        self.other = threading.Thread(target=self.apply[0])
        self.other.start()
        self.other.join(timeout=1.0)  # B runs to its end unless the engine lock holds it back
        return self.before


def test_a_quota_move_read_before_an_edge_never_undoes_one_applied_after_it():
    # Two threads apply the ledger's quota moves: the controller's round and the quota thread,
    # both woken at a window's edge. Each read the time and the ledger before taking the engine
    # lock: one that read just before the end, and took the lock after the other had returned the
    # cells, lent them again (its keys differed from those last applied) until the next wake, up
    # to exchange.resyncSeconds later: the borrower kept the lender's node past the window.
    base = config(racks=1, nodes=4, a={"V100-NODE": 2}, b={"V100-NODE": 1})
    engine = HivedEngine.from_config(base)
    exchange = node_exchange(start=T0, end=T0 + HOUR)
    apply: list = []
    clock = RacingClock(apply, before=T0 + HOUR - 0.001, after=T0 + HOUR)
    quotas = ExchangeQuotas(api=object(), engine=engine, lock=threading.RLock(), base=base, namespace="cellfit",  # type: ignore[arg-type]
                            settings=ExchangeSettings(), clock=clock)
    apply.append(quotas.apply)
    quotas.observe(ConfigMap(data={exchange.key: ledger.encode(exchange)}))
    assert quotas.apply() and quotas.applied == frozenset({exchange.key})  # under way, just before its end
    clock.armed = True
    quotas.apply()
    assert clock.other is not None
    clock.other.join()
    assert quotas.applied == frozenset()
    assert quotas.guarantees() == {"a": {"V100-NODE": 2}, "b": {"V100-NODE": 1}}


def calls_during(run_round, *names: str) -> dict[str, int]:
    """How many times each function or property of ``names`` (``Window.holds``, ``Posting.id``)
    was called while ``run_round()`` ran: a count of the work, not a timing."""
    counts = dict.fromkeys(names, 0)

    def count(frame, event: str, _arg) -> None:
        if event == "call":
            code = frame.f_code
            name = f"{code.co_qualname}"
            if name in counts:
                counts[name] += 1

    sys.setprofile(count)
    try:
        run_round()
    finally:
        sys.setprofile(None)
    return counts


def test_a_tenants_many_offers_cost_a_round_no_square_of_their_number():
    # A VC holding one node may post an offer of it for every hour of the year (8,784 objects,
    # all valid), and then longer ones (refused: the node is offered then). Each of those was
    # checked at every start of the hourly offers inside it, each time walking them all (n
    # squared per offer), and every object's status looked its offer up by walking the board:
    # 1,500 hourly offers and 50 long ones held the leader's round 8 s (6,000: a minute), every
    # resync, delaying every tenant's matches. Counted here as calls, not timed.
    hours = 200
    offers = [posting("offer", "team-b", f"hour-{i}", {"V100-NODE": 1}, T0 + i * HOUR, T0 + (i + 1) * HOUR, posted=T0 - 100)
              for i in range(hours)]
    offers += [posting("offer", "team-b", f"long-{i}", {"V100-NODE": 1}, T0, T0 + hours * HOUR, posted=T0 - 50) for i in range(3)]

    def run_round() -> None:
        result = exchange_round(offers=offers, requests=[], namespaces=NAMESPACES, base=BOARD.virtual_clusters, catalog=CATALOG,
                                topology=TOPOLOGY, entries=[], now=T0, grace_seconds=GRACE)
        assert sorted(o.posting.name for o in result.outcomes if o.phase == "Invalid") == ["long-0", "long-1", "long-2"]

    counts = calls_during(run_round, "Window.holds", "Posting.id")
    assert counts["Window.holds"] <= 10 * hours and counts["Posting.id"] <= 10 * hours, counts


def board_round(offers, requests, entries=(), now=T0):
    return {o.posting.id: o for o in exchange_round(offers=offers, requests=requests, namespaces=NAMESPACES, base=BOARD.virtual_clusters,
                                                    catalog=CATALOG, topology=TOPOLOGY, entries=list(entries), now=now,
                                                    grace_seconds=GRACE).outcomes}


def board_entries(offers, requests, *, entries, now, unread=()):
    return exchange_round(offers=offers, requests=requests, namespaces=NAMESPACES, base=BOARD.virtual_clusters, catalog=CATALOG,
                          topology=TOPOLOGY, entries=list(entries), now=now, grace_seconds=GRACE, unread=unread).new_entries


def test_an_offer_matched_for_part_of_its_window_says_the_rest_left_the_board():
    # a offered its node for four hours; b asked for one of them. Algorithm 2 takes the offer off
    # the board whole, so the other three hours are lent to nobody and offered to nobody, but
    # the offer's status said only "matched: ... lent to b from 11:00 to 12:00": a believed the
    # rest still on offer, and nobody could ask for it.
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + 4 * HOUR)
    request = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0 + HOUR, T0 + 2 * HOUR)
    message = board_round([offer], [request])["team-a/idle"].message
    assert "the rest of its window" in message and "post a new offer" in message, message
    whole = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + 4 * HOUR)
    assert "the rest of its window" not in board_round([offer], [whole])["team-a/idle"].message


def test_a_matched_object_edited_afterwards_says_the_edit_changes_nothing():
    # b's request was matched for a node; b then edited it to ask for two nodes for longer. The
    # status went on saying "matched" with observedGeneration the new generation, as if the edit
    # had been taken: b waited for cells nobody would give it.
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + 4 * HOUR)
    request = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + HOUR)
    (entry,) = board_entries([offer], [request], entries=[], now=T0 - 30)
    edited = posting("request", "team-b", "burst", {"V100-NODE": 2}, T0, T0 + 3 * HOUR)
    message = board_round([offer], [edited], entries=[entry], now=T0 + 60)["team-b/burst"].message
    assert "spec changed since the match" in message, message
    assert "spec changed" not in board_round([offer], [request], entries=[entry], now=T0 + 60)["team-b/burst"].message


def test_a_ledger_entry_edited_to_lend_a_negative_count_is_refused_naming_the_field():
    # The ledger's entries are checked for their types, not their values: an entry edited (or
    # corrupted) to lend -1 node read, and its quota move gave the "lender" a node more than its
    # quota, with nothing refusing it (no count went below zero). Counts below 1, a window that
    # ends before it starts, and negative GPUs or GPU-hours now refuse the entry, naming the field.
    good = node_exchange(start=T0, end=T0 + HOUR)
    text = ledger.encode(good)
    edits = {
        "offerCells": text.replace('"offerCells":[["V100-NODE",1]]', '"offerCells":[["V100-NODE",-1]]'),
        "requestCells": text.replace('"requestCells":[["V100-NODE",1]]', '"requestCells":[]'),
        "end": text.replace(f'"end":{T0 + HOUR}', f'"end":{T0 - HOUR}'),
        "gpus": text.replace('"gpus":8', '"gpus":-8'),
        "gpuHours": text.replace('"gpuHours":8.0', '"gpuHours":-8.0'),
    }
    for field, edited in edits.items():
        assert edited != text, field
        entries, problems = ledger.read({good.key: edited})
        assert entries == [] and len(problems) == 1 and f"data.{good.key}: {field}" in problems[0], (field, problems)
    assert ledger.read({good.key: text}) == ([good], [])


def test_a_borrower_lending_later_keeps_its_own_lenders_grace():
    # b borrowed a node from a until T0 + 1 h; an hour later b lends its own node to a for an
    # hour, while b's pod runs on it: that node cell drains for b's lending, whose lender grace
    # ends 5 minutes after it opens. The first exchange looks at b's draining node cells for a
    # day after its end (to retry a deletion that failed), took this one for its own, and
    # preempted b's pod the moment the second window opened, without its grace.
    borrowed = node_exchange(start=T0, end=T0 + HOUR, lender="a", borrower="b")
    lent = node_exchange(start=T0 + 2 * HOUR, end=T0 + 3 * HOUR, lender="b", borrower="a")
    views = {"b": {"name": "b", "vcCells": [{"id": "n1", "cellType": "V100-NODE", "state": "draining", "pods": ["team-b/job"]}],
                   "placements": [{"pod": "team-b/job", "uid": "uid-job"}]}}
    opened = T0 + 2 * HOUR + 1
    assert due_preemptions(entries=[borrowed, lent], now=opened, grace_seconds=GRACE, views=views) == []
    (due,) = due_preemptions(entries=[borrowed, lent], now=T0 + 2 * HOUR + GRACE, grace_seconds=GRACE, views=views)
    assert due.pod == "team-b/job" and "lent" in due.reason
    # Before b lends, b's pod left on a cell it returned is still the first exchange's to preempt.
    (due,) = due_preemptions(entries=[borrowed, lent], now=T0 + HOUR + GRACE, grace_seconds=GRACE, views=views)
    assert due.pod == "team-b/job" and "returned" in due.reason
    # b lending from the moment it returns: two node cells drain, each exchange empties one then.
    views["b"]["vcCells"].append({"id": "n2", "cellType": "V100-NODE", "state": "draining", "pods": ["team-b/other"]})
    views["b"]["placements"].append({"pod": "team-b/other", "uid": "uid-other"})
    at_once = node_exchange(start=T0 + HOUR, end=T0 + 3 * HOUR, lender="b", borrower="a")
    due_both = due_preemptions(entries=[borrowed, at_once], now=T0 + HOUR + GRACE, grace_seconds=GRACE, views=views)
    assert sorted(p.pod for p in due_both) == ["team-b/job", "team-b/other"]


def test_an_offer_whose_ledger_entry_does_not_read_is_never_lent_again():
    offer = posting("offer", "team-a", "idle", {"V100-NODE": 1}, T0, T0 + HOUR)
    to_b = posting("request", "team-b", "burst", {"V100-NODE": 1}, T0, T0 + HOUR, posted=T0 - 100)
    (entry,) = board_entries([offer], [to_b], entries=[], now=T0 - 30)
    broken = ledger.encode(entry).replace('"gpus":8', '"gpus":"eight"')
    entries, unread = ledger.read_all({entry.key: broken})
    assert entries == [] and [u.problem for u in unread] == [f"data.{entry.key}: gpus: must be a whole number >= 1"]
    # c lent before (its surplus is the highest), so its request comes first, and takes the offer.
    earlier = node_exchange(start=T0 - 3 * HOUR, end=T0 - 2 * HOUR, lender="c", borrower="b")
    to_c = posting("request", "team-c", "burst", {"V100-NODE": 1}, T0, T0 + HOUR, posted=T0 - 50)
    again = board_entries([offer], [to_b, to_c], entries=[earlier], now=T0 + 60, unread=unread)
    assert [e for e in again if e.offer == "team-a/idle"] == []
