"""``cellfit serve`` on a cluster without the exchange's CRDs (charts/cellfit/crds/ not applied).
Seen live (user29): two warnings, 'list/watch failed; retrying ... celloffers ... HTTP 404', every
30 s, forever, and nothing saying what to do. Now one warning naming the command that applies
them, the retries at debug level, the inspect view saying what the exchange waits for, and the
exchange running by itself once they are applied.

The controller's and the quotas' real reflectors run on their threads against an API server
that answers 404 for celloffers and cellrequests until the test applies the CRDs."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Iterator

import msgspec
import pytest

from scheduler.cells import HivedEngine
from scheduler.cluster import reflector
from scheduler.cluster.exchange.controller import ExchangeController
from scheduler.cluster.exchange.quotas import ExchangeQuotas
from scheduler.config import ExchangeSettings
from scheduler.constants import CELL_OFFERS_PATH, CELL_REQUESTS_PATH
from scheduler.errors import KubernetesApiError
from tests.cells.test_exchange_controller import T0, Api, Clock, cell_object
from tests.cells.test_exchange_quota import config

NAMESPACES = [{"metadata": {"name": "na", "labels": {"cellfit.io/virtual-cluster": "a"}}},
              {"metadata": {"name": "nb", "labels": {"cellfit.io/virtual-cluster": "b"}}}]
APPLY = "kubectl apply -f charts/cellfit/crds/"


class ApiWithoutCrds(Api):
    """Lists and watches as an API server without the CRDs answers them, until ``apply_crds``."""

    def __init__(self) -> None:
        super().__init__({})
        self.crds = threading.Event()
        self.stopped = threading.Event()
        self.refused_lists = {CELL_OFFERS_PATH: 0, CELL_REQUESTS_PATH: 0}
        self.offers = [cell_object("na", "o", "u1")]
        self.requests = [cell_object("nb", "r", "u2")]

    def list_path(self, path: str) -> bytes:
        if path in self.refused_lists and not self.crds.is_set():
            self.refused_lists[path] += 1
            raise KubernetesApiError(f"list {path}: the server could not find the requested resource (HTTP 404)", status=404)
        items: list[Any]
        if path == CELL_OFFERS_PATH:
            items = [json.loads(msgspec.json.encode(o)) for o in self.offers]
        elif path == CELL_REQUESTS_PATH:
            items = [json.loads(msgspec.json.encode(r)) for r in self.requests]
        elif "configmaps" in path:
            items = [json.loads(self.get_path(path))]
        else:
            items = NAMESPACES
        return json.dumps({"metadata": {"resourceVersion": "1"}, "items": items}).encode()

    def watch_path(self, path: str, *, resource_version: str) -> Iterator[bytes]:
        self.stopped.wait(0.05)  # a quiet watch the server ends
        return iter(())


def _until(condition: Any, what: str) -> None:
    done = threading.Event()
    for _ in range(400):
        if condition():
            return
        done.wait(0.05)
    raise AssertionError(f"never: {what}")


@pytest.fixture
def running(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[tuple[ExchangeController, ApiWithoutCrds]]:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(reflector, "_BACKOFF_INITIAL_SECONDS", 0.001)  # many retries in the test's time
    cfg = config(racks=1, nodes=2, a={"V100-NODE": 1}, b={"V100-NODE": 1})
    engine, lock = HivedEngine.from_config(cfg), threading.RLock()
    api, clock = ApiWithoutCrds(), Clock()
    settings = ExchangeSettings()
    quotas = ExchangeQuotas(api=api, engine=engine, lock=lock, base=cfg, namespace="cellfit", settings=settings,  # type: ignore[arg-type]
                            clock=clock)
    controller = ExchangeController(api=api, quotas=quotas, engine=engine, lock=lock, settings=settings, clock=clock)  # type: ignore[arg-type]
    quotas.start()
    controller.start()
    try:
        yield controller, api
    finally:
        api.stopped.set()
        controller.stop()
        quotas.stop()


def test_missing_crds_are_told_once_and_the_exchange_starts_when_they_are_applied(
    running: tuple[ExchangeController, ApiWithoutCrds], caplog: pytest.LogCaptureFixture,
) -> None:
    controller, api = running

    def logged() -> list[logging.LogRecord]:  # the reflectors started in the fixture
        return [*caplog.get_records("setup"), *caplog.get_records("call")]

    _until(lambda: min(api.refused_lists.values()) >= 6, "six refused lists of each kind")

    warned = [r for r in logged() if r.levelno >= logging.WARNING]
    assert len(warned) == 1, [r.getMessage() for r in warned]
    assert APPLY in warned[0].getMessage() and "CellOffer and CellRequest CRDs" in warned[0].getMessage()
    quiet = [r for r in logged() if r.getMessage() == "list/watch failed; retrying"]
    assert len(quiet) >= 12 and {r.levelno for r in quiet} == {logging.DEBUG}
    waiting = controller.inspect()["waiting"]
    assert APPLY in waiting and "celloffers.cellfit.io, cellrequests.cellfit.io" in waiting
    assert not controller.synced

    api.crds.set()  # kubectl apply -f charts/cellfit/crds/
    _until(lambda: controller.last.at == T0, "an exchange round")
    assert "waiting" not in controller.inspect()
    assert {o["object"] for board in controller.last.board.values() for o in board} == {"na/o", "nb/r"}
    assert api.statuses["o"]["phase"] and api.statuses["r"]["phase"]
    assert [r.getMessage() for r in logged() if r.name.endswith("definitions") and r.levelno == logging.INFO] == [
        "the cell exchange's CRDs are applied: the exchange starts"]
    assert len([r for r in logged() if r.levelno >= logging.WARNING]) == 1
