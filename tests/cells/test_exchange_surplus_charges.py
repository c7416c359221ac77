"""Which matches count in a tenant's surplus (``charges``): a match the configured VCs cannot
carry moved no cell and charges nobody; one carried, or matched for later, charges as Algorithm 2
does, at once."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.exchange import exchange_round, ledger
from scheduler.cells.exchange.charges import charged
from scheduler.cluster.exchange.objects import ConfigMap
from scheduler.cluster.exchange.quotas import ExchangeQuotas
from scheduler.config import ExchangeSettings
from tests.cells.test_exchange_board import CATALOG, NAMESPACES, TOPOLOGY, posting
from tests.cells.test_exchange_board import cells_config as board_config
from tests.cells.test_exchange_controller import Api, Clock
from tests.cells.test_exchange_ledger_safety import controller_on
from tests.cells.test_exchange_quota import HOUR, config
from tests.cells.test_review_85_exchange import GRACE, T0, node_exchange

NAMESPACES_D = {**NAMESPACES, "team-d": {"cellfit.io/virtual-cluster": "d"}}
# A file that cut a to no node while a lends b a node (a replica started on it): that exchange is left out.
CUT = board_config(a={"V100-NODE": 0}, b={"V100-NODE": 1}, c={"V100-NODE": 1}, d={"V100-NODE": 1})
WHOLE = board_config(a={"V100-NODE": 1}, b={"V100-NODE": 1}, c={"V100-NODE": 1}, d={"V100-NODE": 1})


def round_with(entry: ledger.Entry, *, base, now: float):
    """d offers a node for [T0 + 2 h, T0 + 3 h); b and c each ask for it (b first on a tie: by name)."""
    offer = posting("offer", "team-d", "idle", {"V100-NODE": 1}, T0 + 2 * HOUR, T0 + 3 * HOUR)
    requests = [posting("request", f"team-{vc}", "burst", {"V100-NODE": 1}, T0 + 2 * HOUR, T0 + 3 * HOUR) for vc in "bc"]
    return exchange_round(offers=[offer], requests=requests, namespaces=NAMESPACES_D, base=base.virtual_clusters, catalog=CATALOG,
                          topology=TOPOLOGY, entries=[entry], now=now, grace_seconds=GRACE)


@pytest.mark.parametrize("when", ["under way", "not open yet", "over"])
def test_a_match_the_configured_vcs_cannot_carry_charges_nobody(when: str):
    # a -> b of a node, never carried (a holds no node in the file): b got nothing, yet its
    # surplus was -8 GPU-hours, so c's request came before b's and took d's offer.
    start = {"under way": T0 - 60, "not open yet": T0 + 60, "over": T0 - 2 * HOUR}[when]
    stuck = node_exchange(start=start, end=start + HOUR)
    result = round_with(stuck, base=CUT, now=T0)
    assert result.surplus.get("a", 0.0) == 0.0
    assert [e.borrower for e in result.new_entries] == ["b"], [o.message for o in result.outcomes]
    # Carried, the same match charges b, whose request then comes after c's.
    carried = round_with(stuck, base=WHOLE, now=T0)
    assert carried.surplus["a"] == pytest.approx(8.0) and [e.borrower for e in carried.new_entries] == ["c"]


def test_charged_keeps_the_matches_in_effect_and_those_for_later():
    later = node_exchange(start=T0 + HOUR, end=T0 + 2 * HOUR, lender="c", borrower="b")
    stuck = node_exchange(start=T0 - 60, end=T0 + HOUR)
    assert charged(entries=[stuck, later], topology=TOPOLOGY, base=CUT.virtual_clusters, now=T0) == [later]
    assert charged(entries=[stuck, later], topology=TOPOLOGY, base=WHOLE.virtual_clusters, now=T0) == [stuck, later]


def test_a_match_never_carried_folds_into_the_settled_totals_as_nothing():
    stuck = node_exchange(start=T0 - 3 * 86400, end=T0 - 3 * 86400 + HOUR)
    lent = node_exchange(start=T0 - 3 * 86400, end=T0 - 3 * 86400 + HOUR, lender="c", borrower="d")
    counted = {e.key for e in charged(entries=[stuck, lent], topology=TOPOLOGY, base=CUT.virtual_clusters, now=T0)}
    folded, settled = ledger.fold([stuck, lent], {}, now=T0, objects=set(), after_seconds=GRACE, charged=counted)
    assert len(folded) == 2 and settled == {"c": {"lent": 8.0, "borrowed": 0.0}, "d": {"lent": 0.0, "borrowed": 8.0}}


def test_a_replicas_metrics_count_only_the_matches_in_effect():
    file = config(racks=1, nodes=2, a={"V100-NODE": 0}, b={"V100-NODE": 1})
    stuck = node_exchange(start=T0 - 60, end=T0 + HOUR)
    clock = Clock()
    quotas = ExchangeQuotas(api=object(), engine=HivedEngine.from_config(file), lock=threading.RLock(), base=file,  # type: ignore[arg-type]
                            namespace="cellfit", settings=ExchangeSettings(), clock=clock)
    quotas.observe(ConfigMap(data={stuck.key: ledger.encode(stuck)}))
    quotas.apply()
    assert stuck.key in quotas.not_applied
    metrics = quotas.metrics()
    assert metrics["surplus"] == {} and metrics["exchanged"] == {}
    (shown,) = quotas.inspect()["exchanges"]
    assert shown["charged"] is False and quotas.inspect()["surplus"] == {}


def test_a_charge_decided_after_its_window_is_kept_whatever_the_file_says_later():
    # a lent b a node for an hour, carried; the next day the file cuts a to no node. Judged again
    # on that file, the match "was not carried as it ended": a lost its credit and b got its
    # GPU-hours back for a node b had used. The leader's first round after the end writes the
    # charge into the entry; a later file changes nothing.
    whole = config(racks=1, nodes=4, a={"V100-NODE": 1}, b={"V100-NODE": 1})
    cut = config(racks=1, nodes=4, a={"V100-NODE": 0}, b={"V100-NODE": 1})
    lent = node_exchange(start=T0 - 2 * HOUR, end=T0 - HOUR)
    api = Api({lent.key: ledger.encode(lent)})
    controller, _ = controller_on(api, offers=[], requests=[], now=T0, base=whole)
    controller.reconcile()
    (decided,) = ledger.read(api.data)[0]
    assert decided.charged is True and decided == replace(lent, charged=True)
    _, quotas = controller_on(api, offers=[], requests=[], now=T0 + 86400, base=cut)
    assert quotas.metrics()["surplus"] == {"a": pytest.approx(8.0), "b": pytest.approx(-8.0)}
    # Never carried (the file cut a before the window), decided so: a later file restoring a's
    # node does not charge it either.
    stuck = node_exchange(start=T0 - 2 * HOUR, end=T0 - HOUR, lender="a", borrower="b")
    api = Api({stuck.key: ledger.encode(stuck)})
    controller, _ = controller_on(api, offers=[], requests=[], now=T0, base=cut)
    controller.reconcile()
    assert ledger.read(api.data)[0][0].charged is False
    _, quotas = controller_on(api, offers=[], requests=[], now=T0 + 86400, base=whole)
    assert quotas.metrics()["surplus"] == {}


def test_a_charge_that_does_not_read_is_named():
    text = ledger.encode(replace(node_exchange(start=T0, end=T0 + HOUR), charged=False))
    assert '"charged":false' in text
    key = node_exchange(start=T0, end=T0 + HOUR).key
    assert ledger.read({key: text})[0][0].charged is False
    assert ledger.read({key: text.replace('"charged":false', '"charged":"no"')})[1] == [f"data.{key}: charged: must be true or false when present"]
