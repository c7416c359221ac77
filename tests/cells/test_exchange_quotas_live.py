"""The exchange's quota moves on a real HivedEngine (scheduler/cluster/exchange/quotas.py): the
ledger's exchanges under way are applied at the window's edges through ``reconfigure``, and a
live reload of the configuration file applies them on top of the new VCs, or is refused naming
the exchange it would break (and nothing changes). The ledger arrives as the ConfigMap the watch
delivers; no API call is made (the watch is not started)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.config import parse_cells_config
from scheduler.cells.exchange import Match, Offer, Request, Window, cells_of, ledger
from scheduler.cluster.exchange.objects import ConfigMap
from scheduler.cluster.exchange.quotas import ExchangeQuotas
from scheduler.config import ExchangeSettings, Settings
from scheduler.errors import ConfigError
from scheduler.extender.config_changes import reload_settings
from tests.cells.helpers import rack_cluster

HOUR = 3600.0
T0 = 1_800_000_000.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def cells(**vcs: int) -> Any:
    return parse_cells_config(rack_cluster(1, 4, vcs={n: [{"cellType": "V100-NODE", "count": c}] for n, c in vcs.items()}))


def quotas_of(engine: HivedEngine) -> dict[str, int]:
    return {vc["name"]: sum(c["quota"] for c in vc["cells"]) for vc in engine.inspect_virtual_clusters()["virtualClusters"] if vc["configured"]}


def entry(lender: str = "a", borrower: str = "b", start: float = T0, end: float = T0 + HOUR) -> ledger.Entry:
    window = Window(start=start, end=end)
    node = cells_of({"V100-NODE": 1})
    match = Match(request=Request(id="team-b/r", tenant=borrower, cells=node, window=window, posted=T0),
                  offer=Offer(id="team-a/o", tenant=lender, cells=node, window=window, posted=T0),
                  window=window, gpus=8, gpu_hours=8.0, explanation="test")
    return ledger.entry_of(match, matched_at=T0 - 60)


def setup(base: Any) -> tuple[HivedEngine, ExchangeQuotas, Clock]:
    import threading

    engine = HivedEngine.from_config(base)
    clock = Clock(T0 - 10)
    quotas = ExchangeQuotas(api=object(), engine=engine, lock=threading.RLock(), base=base, namespace="cellfit-system",  # type: ignore[arg-type]
                            settings=ExchangeSettings(), clock=clock)
    return engine, quotas, clock


def test_the_quota_moves_at_the_window_edges_and_back():
    engine, quotas, clock = setup(cells(a=2, b=1, c=1))
    e = entry()
    quotas.observe(ConfigMap(data={e.key: ledger.encode(e)}))
    assert quotas.apply() is False and quotas_of(engine) == {"a": 2, "b": 1, "c": 1}  # not open yet
    clock.now = T0
    assert quotas.apply() is True and quotas_of(engine) == {"a": 1, "b": 2, "c": 1}
    assert quotas.apply() is False  # nothing new
    assert quotas.inspect()["exchanges"][0]["state"] == "active" and quotas.inspect()["exchanges"][0]["applied"] is True
    clock.now = T0 + HOUR  # half-open: back at the end
    assert quotas.apply() is True and quotas_of(engine) == {"a": 2, "b": 1, "c": 1}
    assert quotas.metrics()["surplus"] == {"a": 8.0, "b": -8.0}


def with_exchange_under_way(base: Any) -> tuple[HivedEngine, ExchangeQuotas, Settings]:
    """An engine at ``base`` with ``entry()`` (a lends b a node) applied a minute into its window."""
    engine, quotas, clock = setup(base)
    e = entry()
    quotas.observe(ConfigMap(data={e.key: ledger.encode(e)}))
    clock.now = T0 + 60
    quotas.apply()
    return engine, quotas, Settings(cells=base)


def test_a_reload_applies_the_exchanges_under_way_on_top_of_the_new_vcs_or_is_refused():
    engine, quotas, running = with_exchange_under_way(cells(a=2, b=1, c=1))
    grown = running.model_copy(update={"cells": cells(a=2, b=1, c=0)})
    reload = reload_settings(running, grown, cells=engine, rebase=quotas.reconfigure_base)
    assert reload.result == "applied" and quotas_of(engine) == {"a": 1, "b": 2, "c": 0}
    assert quotas.base.virtual_clusters == grown.cells.virtual_clusters
    # a's quota down to what it lends: the exchange under way would need a cell a no longer has.
    shrunk = grown.model_copy(update={"cells": cells(a=0, b=1, c=0)})
    refused = reload_settings(reload.running, shrunk, cells=engine, rebase=quotas.reconfigure_base)
    assert refused.result == "invalid" and "team-a/o -> team-b/r" in refused.reason and "virtualClusters.a.cells" in refused.reason
    assert quotas_of(engine) == {"a": 1, "b": 2, "c": 0} and quotas.base.virtual_clusters == grown.cells.virtual_clusters
    with pytest.raises(ConfigError):
        quotas.reconfigure_base(shrunk.cells)


def named_entry(offer: str, request: str, lender: str, borrower: str, start: float, end: float) -> ledger.Entry:
    window = Window(start=start, end=end)
    node = cells_of({"V100-NODE": 1})
    match = Match(request=Request(id=request, tenant=borrower, cells=node, window=window, posted=T0),
                  offer=Offer(id=offer, tenant=lender, cells=node, window=window, posted=T0),
                  window=window, gpus=8, gpu_hours=8.0, explanation="test")
    return ledger.entry_of(match, matched_at=T0 - 60)


def test_a_reload_that_leaves_an_exchange_not_yet_open_impossible_is_refused():
    base = cells(a=2, b=1, c=1)
    engine, quotas, clock = setup(base)
    now_ex = named_entry("team-c/o", "team-b/r0", "c", "b", T0, T0 + HOUR)
    future = named_entry("team-a/o", "team-b/r1", "a", "b", T0 + HOUR, T0 + 2 * HOUR)
    quotas.observe(ConfigMap(data={e.key: ledger.encode(e) for e in (now_ex, future)}))
    clock.now = T0 + 60
    quotas.apply()
    running = Settings(cells=base)
    cut = running.model_copy(update={"cells": cells(a=0, b=1, c=1)})  # a lends a node from T0 + 1 h
    refused = reload_settings(running, cut, cells=engine, rebase=quotas.reconfigure_base)
    assert refused.result == "invalid" and "team-a/o -> team-b/r1" in refused.reason and "virtualClusters.a.cells" in refused.reason
    assert quotas_of(engine) == {"a": 2, "b": 2, "c": 0} and quotas.base.virtual_clusters == base.virtual_clusters


def test_an_exchange_the_configuration_makes_impossible_is_left_out_and_the_others_apply():
    """A replica started on a file that cuts a lender below what it lends (a reload refused for
    it, then a restart): the other exchanges still move, the impossible one is shown."""
    engine, quotas, clock = setup(cells(a=0, b=1, c=1))
    other = named_entry("team-c/o", "team-b/r0", "c", "b", T0, T0 + 2 * HOUR)
    broken = named_entry("team-a/o", "team-b/r1", "a", "b", T0 + HOUR, T0 + 2 * HOUR)
    quotas.observe(ConfigMap(data={e.key: ledger.encode(e) for e in (other, broken)}))
    clock.now = T0 + HOUR + 1
    assert quotas.apply() is True and quotas_of(engine) == {"a": 0, "b": 2, "c": 0}
    view = {e["offer"]: e for e in quotas.inspect()["exchanges"]}
    assert view["team-c/o"]["applied"] is True and "notApplied" not in view["team-c/o"]
    assert view["team-a/o"]["applied"] is False and "virtualClusters.a.cells" in view["team-a/o"]["notApplied"]
    assert "team-a/o -> team-b/r1" in quotas.inspect()["applyProblem"]
    assert quotas.apply() is False  # nothing new: not tried again
    clock.now = T0 + 2 * HOUR  # both over: the configured quotas
    assert quotas.apply() is True and quotas_of(engine) == {"a": 0, "b": 1, "c": 1}
    assert "applyProblem" not in quotas.inspect()


class LedgerApi:
    """The list and watch of the ledger as the API server answers them: one list, then a watch
    that stays open (nothing changes) until the test ends."""

    def __init__(self, data: dict[str, str]) -> None:
        self.data = data
        self.closed = __import__("threading").Event()

    def list_path(self, path: str) -> bytes:
        import json

        item = {"metadata": {"name": "cellfit-exchange-ledger", "namespace": "cellfit-system", "resourceVersion": "5"}, "data": self.data}
        return json.dumps({"metadata": {"resourceVersion": "5"}, "items": [item]}).encode()

    def watch_path(self, path: str, *, resource_version: str) -> Any:
        self.closed.wait()
        return iter(())


def test_a_restarted_replica_is_ready_only_once_the_ledgers_exchanges_are_applied():
    """The first list of the ledger reaches the quotas before the reflector marks itself synced:
    the quota thread must apply it then, not at its next resync (minutes here), and readiness
    waits for that apply."""
    import threading
    import time

    base = cells(a=2, b=1, c=1)
    engine = HivedEngine.from_config(base)
    e = entry(start=T0 - 60, end=T0 + HOUR)
    api = LedgerApi({e.key: ledger.encode(e)})
    quotas = ExchangeQuotas(api=api, engine=engine, lock=threading.RLock(), base=base, namespace="cellfit-system",  # type: ignore[arg-type]
                            settings=ExchangeSettings(resyncSeconds=600), clock=lambda: T0)
    assert quotas.ready()[0] is False and "ledger" in quotas.ready()[1]
    quotas.start()
    try:
        deadline = time.monotonic() + 30  # a liveness bound on a loaded machine, not a speed check
        while not quotas.ready()[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert quotas.ready()[0] is True
        assert quotas_of(engine) == {"a": 1, "b": 2, "c": 1}  # applied before ready
    finally:
        quotas.stop()
        api.closed.set()


def test_an_over_committed_reload_with_no_exchange_is_blamed_on_the_vcs_not_on_exchanges() -> None:
    base = cells(a=2, b=1, c=1)
    engine, quotas, clock = setup(base)
    running = Settings(cells=base)
    over = running.model_copy(update={"cells": cells(a=2, b=3, c=0)})  # 5 node cells on 4 nodes
    refused = reload_settings(running, over, cells=engine, rebase=quotas.reconfigure_base)
    assert refused.result == "invalid"
    assert refused.reason.startswith("cells.virtualClusters: over-committed at level 'V100-NODE'"), refused.reason
    assert "exchange" not in refused.reason
    assert quotas_of(engine) == {"a": 2, "b": 1, "c": 1} and quotas.base.virtual_clusters == base.virtual_clusters


def test_an_over_committed_reload_is_blamed_on_the_vcs_even_with_an_exchange_under_way() -> None:
    base = cells(a=2, b=1, c=1)
    engine, quotas, running = with_exchange_under_way(base)
    over = running.model_copy(update={"cells": cells(a=3, b=2, c=1)})  # 6 node cells on 4 nodes, exchange or not
    refused = reload_settings(running, over, cells=engine, rebase=quotas.reconfigure_base)
    assert refused.result == "invalid"
    assert refused.reason.startswith("cells.virtualClusters: over-committed at level 'V100-NODE'"), refused.reason
    assert "exchanges matched" not in refused.reason
    assert quotas_of(engine) == {"a": 1, "b": 2, "c": 1} and quotas.base.virtual_clusters == base.virtual_clusters
