"""The bind verb's bookkeeping: a reservation is made before the API call and handed back when
the API refuses, so a failed bind never leaks capacity. The gateway here is a recording
implementation of the ClusterGateway protocol (the real one is exercised in e2e/)."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.resources import Resources
from scheduler.errors import KubernetesApiError
from scheduler.extender.metrics import ExtenderMetrics
from scheduler.extender.service import AlwaysReady, ExtenderService


@dataclass
class RecordingGateway:
    pods: dict[str, PodInfo]
    refuse_with: Exception | None = None
    bindings: list[tuple[str, str]] = field(default_factory=list)

    async def find_pod(self, namespace: str, name: str) -> PodInfo | None:
        return self.pods.get(f"{namespace}/{name}")

    async def bind(self, *, namespace, name, uid, node_name, annotations) -> None:
        if self.refuse_with is not None:
            raise self.refuse_with
        self.bindings.append((f"{namespace}/{name}", node_name))


def make(gateway):
    engine = ResourceFitEngine()
    engine.apply_node(NodeInfo(name="gpu-a", allocatable=Resources(64000, 512 * 2**30, 8)))
    service = ExtenderService(
        engine=engine, lock=threading.RLock(), metrics=ExtenderMetrics(), gpu_resource="nvidia.com/gpu",
        cluster=gateway, readiness=AlwaysReady(),
    )
    return engine, service


def bind_body(name: str, uid: str, node: str = "gpu-a") -> bytes:
    return json.dumps({"PodName": name, "PodNamespace": "ml", "PodUID": uid, "Node": node}).encode()


def bind(service: ExtenderService, body: bytes):
    return asyncio.run(service.bind(body))


def pending(name: str, gpus: int) -> PodInfo:
    return PodInfo(uid=f"uid-{name}", namespace="ml", name=name, requests=Resources(1000, 2**30, gpus))


def test_successful_bind_books_the_pod():
    gateway = RecordingGateway(pods={"ml/a": pending("a", 6)})
    engine, service = make(gateway)
    answer = bind(service, bind_body("a", "uid-a"))
    assert json.loads(answer.body) == {"Error": ""}
    assert gateway.bindings == [("ml/a", "gpu-a")] and engine.free_on("gpu-a").gpus == 2


def test_api_refusal_hands_the_reservation_back():
    gateway = RecordingGateway(pods={"ml/a": pending("a", 6)}, refuse_with=KubernetesApiError("bind pod ml/a: pod already assigned (HTTP 409)", status=409))
    engine, service = make(gateway)
    answer = bind(service, bind_body("a", "uid-a"))
    assert "HTTP 409" in json.loads(answer.body)["Error"]
    assert engine.free_on("gpu-a").gpus == 8 and engine.stats()["pods"] == 0


def test_conflicts_are_reported_without_calling_the_api():
    gateway = RecordingGateway(pods={"ml/a": pending("a", 6), "ml/b": pending("b", 6)})
    engine, service = make(gateway)
    bind(service, bind_body("a", "uid-a"))
    errors = {
        "full": json.loads(bind(service, bind_body("b", "uid-b")).body)["Error"],
        "gone": json.loads(bind(service, bind_body("zz", "uid-zz")).body)["Error"],
        "recreated": json.loads(bind(service, bind_body("b", "some-old-uid")).body)["Error"],
        "unknown node": json.loads(bind(service, bind_body("b", "uid-b", node="nowhere")).body)["Error"],
    }
    assert "no longer has room" in errors["full"]
    assert "no longer exists" in errors["gone"]
    assert "recreated" in errors["recreated"]
    assert "unknown to cellfit" in errors["unknown node"]
    assert gateway.bindings == [("ml/a", "gpu-a")] and engine.free_on("gpu-a").gpus == 2
