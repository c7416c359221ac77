"""The bind verb when the cluster gateway fails in a way it does not expect (a defect below it,
not an API error): the reservation it made goes back before the failure reaches the dispatch
(HTTP 500), so a defect costs one bind, not the node's GPUs until cellfit restarts."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import PodInfo
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import AlwaysReady, ExtenderService
from scheduler.kube import translate, wire
from tests.support import kube_objects as k

POD = k.pod("train-0", uid="uid-train-0", gpus=8)


class DefectiveGateway:
    """Finds the pod; its binding fails with an error no caller handles."""

    async def find_pod(self, namespace: str, name: str) -> PodInfo | None:
        return translate.pod_info(wire.POD_DECODER.decode(json.dumps(POD)), gpu_resource="nvidia.com/gpu")

    async def bind(self, **binding: Any) -> None:
        raise RuntimeError("a defect in the gateway")


def test_a_binding_that_fails_unexpectedly_hands_its_reservation_back() -> None:
    engine = ResourceFitEngine()
    engine.apply_node(translate.node_info(wire.NODE_DECODER.decode(json.dumps(k.node("gpu-a", gpus=8, cpu="64"))),
                                          gpu_resource="nvidia.com/gpu"))
    service = ExtenderService(engine=engine, lock=threading.RLock(), metrics=ExtenderMetrics(), gpu_resource="nvidia.com/gpu",
                              cluster=DefectiveGateway(), readiness=AlwaysReady())  # type: ignore[arg-type]
    body = json.dumps({"PodName": "train-0", "PodNamespace": "ml", "PodUID": "uid-train-0", "Node": "gpu-a"}).encode()
    with pytest.raises(RuntimeError):
        asyncio.run(service.bind(body))
    assert engine.free_on("gpu-a").gpus == 8
    # And the pod may be bound again: nothing says its binding is still in flight.
    with pytest.raises(RuntimeError):
        asyncio.run(service.bind(body))
