"""HiveD's booking expiry while the API server does not take Events: over real HTTP, connected
(watch cache), the sweep that gives back the cells of a gang the cluster never showed must go on
on time whatever happens to the ``BookingReleased`` Event it writes.

The Kubernetes API is tests/support/api_double.py's, whose Event writes here hang until the test
ends (an API server that stopped answering: each write would take the client's 10 s timeout);
the watch cache, the engine, the sweep thread, the service and HTTP are real."""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import httpx
import pytest

from scheduler.config import parse_settings
from scheduler.extender.runtime import build_runtime
from tests.support import kube_objects as k
from tests.support.api_double import EventRecordingApi
from tests.support.hived import CONFIG, NODES
from tests.support.server import running_server, wait_until_ready

GRACE_SECONDS = 0.3
SETTINGS = CONFIG + f"  unseenPodGraceSeconds: {GRACE_SECONDS}\n  gangBookingTimeoutSeconds: 60\nestimator: {{enabled: false}}\n"
VISION = {"cellfit.io/virtual-cluster": "vision"}
REAL = k.pod("real-0", uid="uid-real-0", gpus=8, labels=VISION)


class EventsHang(EventRecordingApi):
    """Every Event write waits until :attr:`answering` is set (the test's end)."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.answering = threading.Event()
        self.waiting = 0

    def create_event(self, **event: Any) -> None:
        self.waiting += 1
        self.answering.wait(60)
        super().create_event(**event)


@pytest.fixture
def connected() -> Iterator[tuple[EventsHang, httpx.Client]]:
    api = EventsHang(nodes=NODES)
    runtime = build_runtime(parse_settings(SETTINGS), api=api)  # type: ignore[arg-type]
    try:
        with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
            wait_until_ready(client)
            yield api, client
    finally:
        api.answering.set()


def phantom_gang(job: str) -> dict[str, Any]:
    """The first pod of a gang of two 8-GPU pods that exists nowhere: it books both of vision's nodes."""
    return k.pod(f"{job}-0", uid=f"uid-{job}-0", gpus=8, labels=VISION, job_uid=f"uid-job-{job}",
                 annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"})


def nodes_for(client: httpx.Client, pod: dict[str, Any]) -> list[str]:
    answer = client.post("/v1/extender/filter", content=k.dumps(k.extender_args(pod, NODES, node_cache_capable=True)))
    return list(answer.json()["NodeNames"] or [])


def released_within(client: httpx.Client, seconds: float) -> bool:
    """Whether vision's nodes come free for a real pod within ``seconds`` (a bound for a failing
    run, far above the grace; not a measurement)."""
    deadline = time.monotonic() + seconds
    while not nodes_for(client, REAL):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_bookings_are_released_on_time_while_the_release_events_hang(connected: tuple[EventsHang, httpx.Client]) -> None:
    """The sweep wrote each release's Event itself before its next round: with the API server
    not answering, the first Event held the sweep for the client's timeout, and every release
    after waited behind it (ten releases, 100 s), the cells booked for pods that never came."""
    api, client = connected
    assert len(nodes_for(client, phantom_gang("ghost-a"))) == 1
    assert released_within(client, 10)
    assert len(nodes_for(client, phantom_gang("ghost-b"))) == 1  # books vision again
    assert nodes_for(client, REAL) == []
    assert released_within(client, 10), "the second phantom's booking waited behind the first one's Event"
    assert api.waiting >= 1
