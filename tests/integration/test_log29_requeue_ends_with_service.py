"""The requeue signal's thread (scheduler/cluster/nudge.py VictimRequeue) ends with the service
(log29): before, the runtime's shutdown stopped it without waiting, so a signal in flight went on
sending, and logging, after the service had stopped; and the API double answered no create_pod,
so a test's due signal failed on an AttributeError, logged and retried every second for as long
as the test's service ran (seen in the full run as '--- Logging error ---' from nudge.py _run).

Over real HTTP with the watch cache; the Kubernetes API is tests/support/api_double.py's."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from scheduler.config import parse_settings
from scheduler.constants import REQUEUE_SIGNAL_NODE
from scheduler.extender.runtime import build_runtime
from tests.support.api_double import EventRecordingApi
from tests.support.hived import CONFIG, NODES
from tests.support.server import running_server, wait_until_ready

SETTINGS = CONFIG + "estimator: {enabled: false}\n"
WAIT_SECONDS = 10.0  # a bound on a hang, never a measure
# How long a signal's create_pod is held once the service is stopping: a shutdown that waits for
# the thread waits this long; one that does not has returned by then.
HOLD_SECONDS = 1.0


class HeldSignalApi(EventRecordingApi):
    """Holds the signal pod's creation until the test has looked at the thread after shutdown
    (or for :data:`HOLD_SECONDS`)."""

    def __init__(self, **lists: Any) -> None:
        super().__init__(**lists)
        self.sending = threading.Event()
        self.looked = threading.Event()

    def create_pod(self, *, namespace: str, pod: dict[str, Any]) -> None:
        self.sending.set()
        self.looked.wait(HOLD_SECONDS)
        super().create_pod(namespace=namespace, pod=pod)


def requeue_threads(started_after: set[threading.Thread]) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "victim-requeue" and thread not in started_after]


def test_a_victim_gone_sends_the_signal_pod_to_the_api_double() -> None:
    api = EventRecordingApi(nodes=NODES)
    runtime = build_runtime(parse_settings(SETTINGS), api=api)  # type: ignore[arg-type]
    assert runtime.cache is not None
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        assert runtime.cache.on_victims_gone is not None
        runtime.cache.on_victims_gone()  # what the watch calls once a preemption victim has gone
        deadline = time.monotonic() + WAIT_SECONDS
        while not api.pods_deleted:
            assert time.monotonic() < deadline, "no requeue signal was sent"
            time.sleep(0.02)
    (created,) = api.pods_created
    assert created["spec"]["nodeName"] == REQUEUE_SIGNAL_NODE
    assert api.pods_deleted == [f"{created['metadata']['namespace']}/{created['metadata']['name']}"]


def test_a_signal_in_flight_at_shutdown_has_ended_when_the_service_has_stopped() -> None:
    api = HeldSignalApi(nodes=NODES)
    runtime = build_runtime(parse_settings(SETTINGS), api=api)  # type: ignore[arg-type]
    assert runtime.cache is not None
    before = set(threading.enumerate())
    with running_server(runtime.app) as url, httpx.Client(base_url=url, timeout=10) as client:
        wait_until_ready(client)
        (requeue,) = requeue_threads(before)
        assert runtime.cache.on_victims_gone is not None
        runtime.cache.on_victims_gone()
        assert api.sending.wait(WAIT_SECONDS), "no requeue signal was sent"
    alive_after_shutdown = requeue.is_alive()
    api.looked.set()
    requeue.join(WAIT_SECONDS)
    assert not alive_after_shutdown, "the requeue thread was still sending after the service stopped"
    assert len(api.pods_created) == 1  # the signal in flight was sent whole, and no other
