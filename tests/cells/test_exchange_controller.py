"""The exchange's controller (scheduler/cluster/exchange/controller.py) on a real HivedEngine,
against an API that keeps the ledger ConfigMap and the objects' status patches in memory as the
API server would, and can be told to refuse a write (409, 422, 500): what each failure leaves
told, preempted and retried. The watches are not started; the stores are filled as they would."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

from scheduler.cells import HivedEngine
from scheduler.cells.exchange import Match, Offer, Request, Window, cells_of, ledger, reconfiguration, window_plan
from scheduler.cluster.exchange.controller import ExchangeController
from scheduler.cluster.exchange.objects import CellObject, ConfigMap, Meta, Namespace
from scheduler.cluster.exchange.quotas import ExchangeQuotas
from scheduler.config import ExchangeSettings
from scheduler.errors import KubernetesApiError
from tests.cells.helpers import node_names, pod, schedule
from tests.cells.test_exchange_quota import HOUR, config

T0 = 1_800_000_000.0
LEDGER = "cellfit-exchange-ledger"


class Api:
    """The API server's side the controller uses: one ConfigMap with optimistic concurrency,
    status patches, pod deletions and Events. ``refuse``: the status of the next ledger writes'
    error (None: they succeed); ``refuse_status``: object names whose status patch fails."""

    def __init__(self, data: dict[str, str]) -> None:
        self.data, self.version = dict(data), 7
        self.refuse: int | None = None
        self.refuse_status: set[str] = set()
        self.ledger_writes = 0
        self.statuses: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.events: list[tuple[str, str]] = []
        self.writes: list[tuple[str, str]] = []  # ("status" or "delete", object), in order

    def get_path(self, path: str) -> bytes:
        return json.dumps({"metadata": {"name": LEDGER, "resourceVersion": str(self.version)}, "data": self.data}).encode()

    def write_path(self, method: str, path: str, body: Any, content_type: str | None = None) -> bytes:
        if "configmaps" in path:
            self.ledger_writes += 1
            if self.refuse is not None:
                raise KubernetesApiError(f"refused with {self.refuse}", status=self.refuse)
            self.data, self.version = dict(body["data"]), self.version + 1
            return json.dumps({**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}).encode()
        name = path.split("/")[-2]
        if name in self.refuse_status:
            raise KubernetesApiError("the API server is unavailable", status=503)
        self.statuses[name] = body["status"]
        self.writes.append(("status", name))
        return b"{}"

    def delete_pod(self, *, namespace: str, name: str, **_: Any) -> None:
        self.deleted.append(f"{namespace}/{name}")
        self.writes.append(("delete", name))

    def create_event(self, *, pod_name: str, reason: str, **_: Any) -> None:
        self.events.append((pod_name, reason))

    def create_pod(self, **_: Any) -> None:
        pass


def old_entry() -> ledger.Entry:
    """a lent b a node from T0 - 2 h to T0 - 1 h: b's pod left on the returned cell is due. Its
    charge was decided by the leader's round after its end (``charges.settle``)."""
    window, node = Window(start=T0 - 2 * HOUR, end=T0 - HOUR), cells_of({"V100-NODE": 1})
    entry = ledger.entry_of(Match(request=Request(id="nb/r", tenant="b", cells=node, window=window, posted=0),
                                  offer=Offer(id="na/o", tenant="a", cells=node, window=window, posted=0),
                                  window=window, gpus=8, gpu_hours=8.0, explanation=""), matched_at=0)
    return replace(entry, charged=True)


def cell_object(namespace: str, name: str, uid: str, start: str = "2027-01-15T09:00:00Z", end: str = "2027-01-15T10:00:00Z") -> CellObject:
    return CellObject(metadata=Meta(name=name, namespace=namespace, uid=uid, creationTimestamp="2027-01-15T08:00:00Z"),
                      spec={"cells": [{"cellType": "V100-NODE", "count": 1}], "window": {"start": start, "end": end}})


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def setup(*, offers: list[CellObject], requests: list[CellObject]) -> tuple[ExchangeController, Api]:
    cfg = config(racks=1, nodes=2, a={"V100-NODE": 1}, b={"V100-NODE": 1})
    engine, lock = HivedEngine.from_config(cfg), threading.RLock()
    old = old_entry()
    plan = window_plan(base=cfg.virtual_clusters, others=(), match=old.match())
    engine.reconfigure(reconfiguration(cfg, plan.during))
    for i in range(2):  # b runs two pods during the window; one is left on the returned cell
        schedule(engine, pod(f"b{i}", 8, "b"), node_names(1, 2))
    engine.reconfigure(reconfiguration(cfg, plan.after))
    api = Api({old.key: ledger.encode(old)})
    clock = Clock()
    quotas = ExchangeQuotas(api=api, engine=engine, lock=lock, base=cfg, namespace="cellfit",  # type: ignore[arg-type]
                            settings=ExchangeSettings(), clock=clock)
    controller = ExchangeController(api=api, quotas=quotas, engine=engine, lock=lock, settings=ExchangeSettings(), clock=clock)  # type: ignore[arg-type]
    quotas.observe(ConfigMap(data=api.data))
    controller._stores["namespace"].replace([Namespace(metadata=Meta(name="na", labels={"cellfit.io/virtual-cluster": "a"})),
                                             Namespace(metadata=Meta(name="nb", labels={"cellfit.io/virtual-cluster": "b"}))])
    controller._stores["offer"].replace(offers)
    controller._stores["request"].replace(requests)
    controller._wake.clear()  # the stores' fill woke it; the tests call reconcile themselves
    controller.clock = clock  # type: ignore[attr-defined]  # the tests move it
    return controller, api


def test_a_round_matches_records_tells_and_preempts():
    controller, api = setup(offers=[cell_object("na", "o2", "u1")], requests=[cell_object("nb", "r2", "u2")])
    controller.reconcile()
    assert api.ledger_writes == 1 and len(ledger.read(api.data)[0]) == 2
    assert api.statuses["o2"]["phase"] == api.statuses["r2"]["phase"] == "Matched"
    assert len(api.deleted) == 1  # b's pod on the returned cell


def test_a_preempted_pod_is_marked_a_disruption_target_before_it_is_deleted():
    # As kube-scheduler marks its own preemption's victims: a Job whose podFailurePolicy ignores
    # DisruptionTarget resumes instead of counting a failure.
    controller, api = setup(offers=[cell_object("na", "o2", "u1")], requests=[cell_object("nb", "r2", "u2")])
    controller.reconcile()
    [deleted] = api.deleted
    name = deleted.split("/")[1]
    [condition] = api.statuses[name]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("DisruptionTarget", "True", "PreemptionByScheduler")
    assert condition["message"].startswith("cellfit: ")
    assert api.writes.index(("status", name)) < api.writes.index(("delete", name))


def test_a_disruption_condition_the_api_refuses_leaves_the_preemption_to_go_on():
    controller, api = setup(offers=[cell_object("na", "o2", "u1")], requests=[cell_object("nb", "r2", "u2")])
    api.refuse_status.update({"b0", "b1"})  # b's pods: the condition cannot be written
    controller.reconcile()
    [deleted] = api.deleted  # the cells are returned all the same
    assert deleted.split("/")[1] in {"b0", "b1"} and not {"b0", "b1"} & api.statuses.keys()


def test_a_ledger_write_refused_keeps_telling_and_preempting_from_what_is_recorded_and_backs_off():
    controller, api = setup(offers=[cell_object("na", "o2", "u1")],
                            requests=[cell_object("nb", "r2", "u2"), cell_object("nb", "late", "u3", "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z")])
    api.refuse = 422  # the ConfigMap is full, say
    controller.reconcile()
    assert api.ledger_writes == 1
    assert len(api.deleted) == 1  # the recorded exchange's due pod is preempted all the same
    assert "o2" not in api.statuses and "r2" not in api.statuses  # a match not recorded is told to nobody
    assert api.statuses["late"]["phase"] == "Invalid"  # the others are told (its window passed before it was posted)
    assert not controller._wake.is_set()  # no retry every 0.5 s
    assert 0 < controller._next_wait() <= ExchangeSettings().resync_seconds
    api.refuse = None
    controller.reconcile()  # woken early (another object changed, say): no write before the back-off
    assert api.ledger_writes == 1 and "o2" not in api.statuses
    controller.clock.now = T0 + 1.5  # type: ignore[attr-defined]
    controller.reconcile()
    assert api.ledger_writes == 2 and api.statuses["o2"]["phase"] == "Matched"


def test_after_a_refused_write_with_nothing_left_to_write_the_controller_waits_as_usual():
    controller, api = setup(offers=[cell_object("na", "o2", "u1")], requests=[cell_object("nb", "r2", "u2")])
    api.refuse = 500
    controller.reconcile()
    controller._stores["offer"].replace([])  # the offer deleted: no match to write any more
    controller.clock.now = T0 + 5  # type: ignore[attr-defined]
    controller.reconcile()
    # No retry pending (a round every 0.5 s otherwise); the preempted pod's leaving paces it at 1 s.
    assert api.ledger_writes == 1 and controller._retry_at is None and controller._next_wait() >= 1.0


def test_a_ledger_write_conflict_decides_again_at_once():
    controller, api = setup(offers=[cell_object("na", "o2", "u1")], requests=[cell_object("nb", "r2", "u2")])
    api.refuse = 409
    controller.reconcile()
    assert controller._wake.is_set() and "o2" not in api.statuses


def test_one_status_patch_failing_leaves_the_others_told():
    controller, api = setup(offers=[cell_object("na", "o2", "u1")], requests=[cell_object("nb", "r2", "u2")])
    api.refuse_status = {"o2"}
    controller.reconcile()
    assert "o2" not in api.statuses and api.statuses["r2"]["phase"] == "Matched" and len(api.deleted) == 1
    api.refuse_status = set()
    controller.reconcile()  # told at the next round
    assert api.statuses["o2"]["phase"] == "Matched" and api.ledger_writes == 1


def test_one_object_whose_report_raises_leaves_the_others_told():
    controller, api = setup(offers=[cell_object("na", "o2", "u1")], requests=[cell_object("nb", "r2", "u2")])
    events = api.create_event

    def create_event(*, pod_name: str, **kwargs: Any) -> None:
        if pod_name == "o2":
            raise RuntimeError("a defect in telling o2")
        events(pod_name=pod_name, **kwargs)

    api.create_event = create_event  # type: ignore[method-assign]
    controller.reconcile()
    assert api.statuses["r2"]["phase"] == "Matched" and ("r2", "Matched") in api.events and len(api.deleted) == 1


def test_the_round_runs_outside_the_engine_lock():
    """The verbs take the engine lock; the matching and its quota proofs (seconds at hundreds of
    requests and offers) must not hold it. The offer's spec records, each time the round reads
    it, whether another thread could take the lock then."""
    free: list[bool] = []

    class Probe(dict):
        def get(self, key: str, default: Any = None) -> Any:
            def try_lock() -> None:
                taken = controller._lock.acquire(timeout=0.5)
                if taken:
                    controller._lock.release()
                free.append(taken)

            thread = threading.Thread(target=try_lock)
            thread.start()
            thread.join()
            return super().get(key, default)

    offer = cell_object("na", "o2", "u1")
    probed = CellObject(metadata=offer.metadata, spec=Probe(offer.spec))
    controller, api = setup(offers=[probed], requests=[cell_object("nb", "r2", "u2")])
    controller.reconcile()
    assert free and all(free) and api.statuses["o2"]["phase"] == "Matched"


def test_a_value_that_does_not_read_is_never_written_over():
    """An entry that does not read (an operator's edit, an older format) under the key of the
    match the round would make: naming no offer or lender, it stops every new match (its match
    may be in force), each object says why; the value stays for its owner."""
    controller, api = setup(offers=[cell_object("na", "o2", "u1")], requests=[cell_object("nb", "r2", "u2")])
    key = ledger.entry_key(offer="na/o2", request="nb/r2", offer_uid="u1", request_uid="u2")
    api.data[key] = "edited by hand"
    controller.reconcile()
    assert api.data[key] == "edited by hand" and api.ledger_writes == 0
    assert api.statuses["o2"]["phase"] == api.statuses["r2"]["phase"] == "Posted"
    assert f"data.{key}" in api.statuses["o2"]["message"] and f"data.{key}" in api.statuses["r2"]["message"]
    assert len(api.deleted) == 1 and controller.inspect()["lastRound"]["matched"] == []
