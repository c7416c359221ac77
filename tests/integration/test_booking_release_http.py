"""Over real HTTP, connected to a cluster (watch cache): a filter call for a gang pod that exists
nowhere books its cells only for ``cells.unseenPodGraceSeconds``; then the periodic sweep gives
them back, with a Warning Event ``BookingReleased`` on the pod. A gang pod the watch has shown
keeps its booking.

The Kubernetes API is a double serving canned lists and recording Events
(tests/support/api_double.py); the watch cache, the engine, the sweep thread, the service and
HTTP are real.
"""

from __future__ import annotations

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

GRACE_SECONDS = 0.4
SETTINGS = (
    CONFIG
    + f"  unseenPodGraceSeconds: {GRACE_SECONDS}\n  gangBookingTimeoutSeconds: 60\n"
    + "estimator: {enabled: false}\n"
)
VISION = {"cellfit.io/virtual-cluster": "vision"}
JOB_UID = "6a0e7c2d-0d44-4f1e-a3b8-2c5d9e0f1b77"


def gang_pod(name: str, uid: str) -> dict[str, Any]:
    """A pod of a gang of two 8-GPU pods: together they fill vision's two nodes."""
    return k.pod(
        name, uid=uid, gpus=8, labels=VISION, job_uid=JOB_UID,
        annotations={"cellfit.io/gang": "true", "cellfit.io/gang-size": "2"},
    )


@pytest.fixture
def connected(request: pytest.FixtureRequest) -> Iterator[tuple[EventRecordingApi, httpx.Client]]:
    api = EventRecordingApi(nodes=NODES, pods=getattr(request, "param", []))
    runtime = build_runtime(parse_settings(SETTINGS), api=api)  # type: ignore[arg-type]
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        yield api, client


def filtered(client: httpx.Client, pod: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/extender/filter", content=k.dumps(k.extender_args(pod, NODES, node_cache_capable=True)))
    assert response.status_code == 200
    return response.json()


def test_a_phantom_gang_books_vision_only_until_the_grace_ends(connected):
    api, client = connected
    booked_at = time.monotonic()
    assert len(filtered(client, gang_pod("ghost-0", "uid-ghost-0"))["NodeNames"]) == 1
    # Both of vision's nodes are held for the phantom's gang: a real pod of vision waits.
    real = k.pod("real-0", uid="uid-real-0", gpus=8, labels=VISION)
    refused = filtered(client, real)
    assert refused["NodeNames"] == [] and "quota exhausted" in next(iter(refused["FailedAndUnresolvableNodes"].values()))
    deadline = booked_at + 10
    while not filtered(client, real)["NodeNames"]:
        assert time.monotonic() < deadline, "the phantom's booking was never released"
        time.sleep(0.05)
    assert time.monotonic() - booked_at >= GRACE_SECONDS
    (event,) = [e for e in api.events if e["reason"] == "BookingReleased"]
    assert (event["kind"], event["namespace"], event["pod_name"], event["pod_uid"], event["warning"]) == (
        "Pod", "ml", "ghost-0", "uid-ghost-0", True,
    )
    assert "the cluster showed no such pod within 0.4 s of the booking (cells.unseenPodGraceSeconds)" in event["message"]
    assert "and with it the gang's other 1 slots" in event["message"]


@pytest.mark.parametrize("connected", [[gang_pod("train-0", "uid-train-0"), gang_pod("train-1", "uid-train-1")]], indirect=True)
def test_a_gang_pod_the_watch_has_shown_keeps_its_booking(connected):
    api, client = connected
    assert len(filtered(client, gang_pod("train-0", "uid-train-0"))["NodeNames"]) == 1
    time.sleep(GRACE_SECONDS * 4)
    # Still booked: the gang's second pod gets the other slot, a pod outside it gets nothing.
    assert len(filtered(client, gang_pod("train-1", "uid-train-1"))["NodeNames"]) == 1
    assert filtered(client, k.pod("real-0", uid="uid-real-0", gpus=8, labels=VISION))["NodeNames"] == []
    assert api.events == []
