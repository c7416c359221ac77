"""What the requeue nudge asks of the API server (scheduler/cluster/nudge.py), counted against a
server of pending pods that lists and watches them as kube-apiserver does
(tests/support/pending_pods_api.py): a list of the profile's pending pods once, then only the
changes, never the whole list at every pass; and its choices the same as a fresh list's."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from scheduler.cluster.nudge import Nudger, Parked, parked, unschedulable_pods
from scheduler.cluster.pending import PendingPods
from scheduler.config import NudgeSettings
from tests.support import kube_objects as k
from tests.support.pending_pods_api import WAIT_SECONDS, PendingPodsServer
from tests.unit.test_nudge import NO_ROOM, REFUSED, T0

PENDING = 5_000
PASSES_A_MINUTE = 12  # nudge.periodSeconds 5 s


def unschedulable(name: str, *, message: str = NO_ROOM, at: str = "2026-11-25T17:00:30Z") -> dict[str, Any]:
    """A pending pod of a Job as the API server lists it, kube-scheduler's PodScheduled=False on it."""
    body = k.pod(name, gpus=1)
    body["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                                     "lastTransitionTime": at, "reason": "Unschedulable", "message": message}]
    return body


def condition(message: str, at: str) -> Any:
    def change(pod: dict[str, Any]) -> None:
        pod["status"]["conditions"][0].update(message=message, lastTransitionTime=at)
    return change


@pytest.fixture
def clock() -> list[float]:
    return [T0 + 60]  # the term begins a minute after the pods' conditions were written (T0 + 30)


def nudger(server: PendingPodsServer, clock: list[float], *, pending: PendingPods | None = None) -> Nudger:
    return Nudger(api=server, settings=NudgeSettings(), namespace="cellfit-system", ready=lambda: True,
                  clock=lambda: clock[0], pending=pending)


def listed_and_watching(server: PendingPodsServer) -> PendingPods:
    """A started view of ``server``'s pending pods (as the nudge keeps its own), once its first
    list is in and its watch open. Both are made on the view's own thread: a pass made before the
    list has come waits a period (5 s) for it and finds nothing after, and a count of the watches
    made before the thread has opened one finds none, which on a loaded machine with 5,000 pods
    to list is what happens."""
    view = PendingPods(api=server, scheduler_name=NudgeSettings().scheduler_name, constrained=False)
    view.start()
    if view.unschedulable(wait=WAIT_SECONDS) is None:
        view.stop()
        raise AssertionError(f"waited {WAIT_SECONDS} s for the view's first list: lists {server.lists}")
    server.wait_watching(1)
    return view


@pytest.fixture
def running() -> Iterator[list[tuple[Nudger | PendingPods, PendingPodsServer]]]:
    """Nudgers and views to stop and servers to close once the test is done (their watch threads end)."""
    started: list[tuple[Nudger | PendingPods, PendingPodsServer]] = []
    yield started
    for made, server in started:
        made.stop()
        server.close()


def minute_of_passes(nudge: Nudger, clock: list[float]) -> list[Parked]:
    found = []
    for _ in range(PASSES_A_MINUTE):
        found.append(nudge.pass_once())
        clock[0] += NudgeSettings().period_seconds
    return found


def test_minutes_of_passes_over_5000_pending_pods_list_them_once(running: Any, clock: list[float]) -> None:
    """Before, each pass listed every pending pod: 12 lists, 60,000 pods (~13 MB here) a minute
    from the leader for as long as they waited."""
    server = PendingPodsServer(unschedulable(f"burst-{i}") for i in range(PENDING))
    view = listed_and_watching(server)
    running.append((view, server))
    nudge = nudger(server, clock, pending=view)
    running.append((nudge, server))
    found = minute_of_passes(nudge, clock) + minute_of_passes(nudge, clock)
    assert server.lists == 1 and server.listed_objects == PENDING
    assert server.watches >= 1 and server.watch_events == 0  # nothing changed: nothing sent
    # Parked by the cluster's own want of GPUs since before the term: one signal, then none.
    assert found[0] == Parked(stale=tuple(sorted(f"ml/burst-{i}" for i in range(PENDING))))
    assert len(server.signals) == 1


def test_each_pass_chooses_what_a_fresh_list_would(running: Any, clock: list[float]) -> None:
    """The watch's view, pass after pass while the cluster changes, against the choice made on a
    list of the moment (what the nudge did before at every pass)."""
    server = PendingPodsServer([unschedulable("a-0"), unschedulable("b-0"), unschedulable("c-0")])
    nudge = nudger(server, clock)
    running.append((nudge, server))
    term_began = clock[0]

    def agrees() -> Parked:
        found = nudge.pass_once()
        assert found == parked(unschedulable_pods(server.pod_list()), term_began=term_began)
        return found

    assert agrees().stale == ("ml/a-0", "ml/b-0", "ml/c-0")
    sent = len(server.signals)
    server.wait_watching(1)
    steps = [
        # cellfit away when kube-scheduler tried a-0 again: failed, whatever its age
        lambda: server.update("ml/a-0", condition(REFUSED, "2026-11-25T17:01:10Z")),
        # b-0 bound: the watch tells it gone (DELETED, it left the selector)
        lambda: server.bind("ml/b-0", "node-1"),
        # c-0 being deleted: not looked at any more
        lambda: server.update("ml/c-0", lambda pod: pod["metadata"].update(deletionTimestamp="2026-11-25T17:01:15Z")),
        # a new pod, not tried yet, then tried and refused by cellfit away
        lambda: server.add(k.pod("d-0", gpus=1) | {"status": {"phase": "Pending"}}),
        lambda: server.update("ml/d-0", lambda pod: pod["status"].update(conditions=[{
            "type": "PodScheduled", "status": "False", "lastTransitionTime": "2026-11-25T17:01:20Z", "message": REFUSED}])),
        # a-0 now scheduled as far as kube-scheduler is concerned (binding under way)
        lambda: server.update("ml/a-0", lambda pod: pod["status"]["conditions"][0].update(status="True")),
    ]
    for count, step in enumerate(steps, start=1):
        step()
        server.wait_read(count)
        clock[0] += NudgeSettings().period_seconds
        agrees()
    found_failed = nudge.pass_once()
    assert found_failed == Parked(failed=("ml/d-0",))
    assert len(server.signals) > sent  # the failed pods got their signals, as before
    assert server.lists == 1


def test_a_watch_that_lost_its_place_is_relisted_once_and_the_choice_follows(running: Any, clock: list[float]) -> None:
    server = PendingPodsServer([unschedulable("a-0", at="2026-11-25T17:02:00Z")])  # after the term began: not stale
    nudge = nudger(server, clock)
    running.append((nudge, server))
    assert not nudge.pass_once()
    server.wait_watching(1)
    server.change_unseen("ml/a-0", condition(REFUSED, "2026-11-25T17:02:10Z"))
    server.compact()
    server.end_watches()  # the server ends the watch; the next, from a compacted version, is 410 Gone
    server.wait_watching(3)  # the 410's, then the relist's
    assert server.lists == 2
    assert nudge.pass_once() == Parked(failed=("ml/a-0",))
