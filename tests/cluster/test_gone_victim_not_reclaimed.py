"""A victim already gone when cellfit preempts it itself (404: it finished and was deleted, the
watch not showing it yet; 409: another pod took its name) is not preempted by cellfit: HiveD's
leader reclaim (scheduler/cluster/reclaim.py) and the cell exchange's controller count no
reclaim, write no Preempted Event on it and no ReclaimingCells on the waiting pod, and record no
victim whose failed pod never comes. Only the gang path (cache.py) takes gone as done.

Since 3996e19 preempt_pod took 404/409 as success for every caller, so both counted a pod they
never touched as reclaimed (review25 #6); preempt_pod now says what it did
(scheduler/cluster/disruption.py Preempted)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.errors import KubernetesApiError
from tests.cells.test_exchange_controller import Api as ExchangeApi
from tests.cells.test_exchange_controller import cell_object, setup
from tests.cluster.test_reclaim import AFTER, Api, Cluster


class GoneApi(Api):
    """The victim is gone (``status`` 404) or replaced (409): its mark and its deletion fail so."""

    def __init__(self, status: int) -> None:
        super().__init__()
        self.status = status

    def write_path(self, method: str, path: str, body: Any, *, content_type: str = "application/json") -> bytes:
        if "status" in body:
            raise KubernetesApiError("pods not found", status=self.status)
        return super().write_path(method, path, body, content_type=content_type)

    def delete_pod(self, *, namespace: str, name: str, uid: str | None = None, grace_period_seconds: int | None = None) -> None:
        raise KubernetesApiError("pods not found", status=self.status)


@pytest.mark.parametrize("status", [404, 409])
def test_a_reclaim_victim_already_gone_is_not_told_preempted_nor_counted_reclaimed(status: int) -> None:
    cluster = Cluster(opportunistic_priority=1000)
    api = GoneApi(status)
    cluster.api = api
    cluster.controller._api = api
    cluster.look_at(0)
    done = cluster.look_at(AFTER)
    assert done == [], done
    assert [e["reason"] for e in api.events] == []


class GoneExchangeApi(ExchangeApi):
    """The exchange's API, whose pods are gone: each deletion answers 404."""

    def delete_pod(self, *, namespace: str, name: str, **_: Any) -> None:
        raise KubernetesApiError("pods not found", status=404)


def test_an_exchange_victim_already_gone_is_not_told_preempted() -> None:
    controller, _ = setup(offers=[cell_object("na", "o2", "u1")], requests=[cell_object("nb", "r2", "u2")])
    api = GoneExchangeApi({})
    api.data, api.version = controller._api.data, controller._api.version  # type: ignore[attr-defined]
    controller._api = api  # type: ignore[assignment]
    controller.reconcile()
    assert "Preempted" not in [reason for _, reason in api.events], api.events
