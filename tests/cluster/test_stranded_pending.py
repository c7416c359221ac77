"""HiveD's reclaim of stranded guaranteed pods (scheduler/cluster/stranded.py) reading the pending
pods from the term's view of them (scheduler/cluster/pending.py), shared with the requeue nudge,
against a server that lists and watches them as kube-apiserver does
(tests/support/pending_pods_api.py): one list a term, then only the changes, never the whole
list at every round; and its decisions those of a fresh list at every round. On the real
HivedEngine and pod record of tests/cluster/test_stranded.py."""

from __future__ import annotations

import json
import threading
from typing import Any, Iterator

import msgspec
import pytest

from scheduler.cluster.nudge import Nudger, parked, unschedulable_pods
from scheduler.cluster.pending import PendingPods
from scheduler.cluster.stranded import unschedulable as listed_unschedulable
from scheduler.config import NudgeSettings
from scheduler.core.model import PodInfo
from tests.cells.helpers import pod
from tests.cluster.test_reclaim_adversarial import victims_gone
from tests.cluster.test_stranded import AFTER, PROFILE, T0, Cluster, unschedulable
from tests.support.pending_pods_api import WAIT_SECONDS, PendingPodsServer

PENDING = 5_000
ROUNDS_A_MINUTE = 12  # reclaim.periodSeconds 5 s


def written(p: PodInfo, *, reason: str = "Unschedulable", **spec: Any) -> dict[str, Any]:
    """The pod as kube-scheduler leaves it (test_stranded's), with the condition's time the nudge reads."""
    body = unschedulable(p, reason=reason, **spec)
    body["status"]["conditions"][0]["lastTransitionTime"] = "2027-01-15T08:00:00Z"
    return body


@pytest.fixture
def views() -> Iterator[list[tuple[PendingPods, PendingPodsServer]]]:
    """Views to stop and servers to close once the test is done; their watch threads end."""
    made: list[tuple[PendingPods, PendingPodsServer]] = []
    yield made
    for view, server in made:
        view.stop()
        server.close()
    for view, _ in made:
        view.join(10)
    assert not [thread for thread in threading.enumerate() if thread.name == "reflector-pending-pods"]


def watched(views: list[tuple[PendingPods, PendingPodsServer]], server: PendingPodsServer) -> PendingPods:
    """A started view of ``server``'s pending pods, once its first list is in. The list is made on
    the view's own thread: a round, or a read with ``wait=0``, made before it has come finds none
    (and the reclaim skips its round), which on a loaded machine is a round or two into a test."""
    view = PendingPods(api=server, scheduler_name=PROFILE)
    views.append((view, server))
    view.start()
    if view.marked_unschedulable(wait=WAIT_SECONDS) is None:
        raise AssertionError(f"waited {WAIT_SECONDS} s for the view's first list: lists {server.lists}")
    return view


# ------------------------------------------------------------------ what the API server is asked


def test_a_minute_of_rounds_over_5000_pending_pods_lists_them_once(views: Any):
    """Before, each round listed every pending pod of the profile: 12 lists, 60,000 pods a minute
    from the leader for as long as they waited."""
    others = [unschedulable(pod(f"p{i:04}", 4)) for i in range(PENDING - 1)]  # of no concern to this leader's engine
    server = PendingPodsServer([*others, unschedulable(pod("g", 4))])
    cluster = Cluster(pending=watched(views, server))
    deleted = [cluster.look_at(5 * second) for second in range(2 * ROUNDS_A_MINUTE)]
    server.wait_watching(1)  # opened on the view's thread after the list, whenever it runs next
    assert server.lists == 1 and server.listed_objects == PENDING
    assert server.watches >= 1 and server.watch_events == 0  # nothing changed: nothing sent
    # g's cells are booked and their squatter deleted once it has waited AFTER, as from a list
    node = cluster.booked_node()
    assert node is not None and deleted[int(AFTER / 5)] == cluster.on(node) and sum(map(len, deleted)) == 1


def test_given_no_view_each_round_lists_the_pending_pods():
    cluster = Cluster()
    lists = []

    def listing(scheduler_name: str) -> bytes:
        lists.append(scheduler_name)
        return json.dumps({"items": cluster.api.pending}).encode()

    cluster.api.list_pending_pods = listing  # type: ignore[method-assign]
    for second in range(ROUNDS_A_MINUTE):
        cluster.look_at(5 * second)
    assert len(lists) == ROUNDS_A_MINUTE


def test_the_nudge_and_the_reclaim_share_one_list_and_one_watch(views: Any):
    server = PendingPodsServer([written(pod("g", 4))])
    view = watched(views, server)
    cluster = Cluster(pending=view)
    clock = [T0]
    nudge = Nudger(api=server, settings=NudgeSettings(), namespace="cellfit-system", ready=lambda: True,
                   clock=lambda: clock[0], pending=view)
    term_began = clock[0]
    for second in range(0, 2 * int(AFTER), 5):
        clock[0] = T0 + second
        assert nudge.pass_once() == parked(unschedulable_pods(server.pod_list()), term_began=term_began)
        cluster.look_at(second)
    assert cluster.booked_node() is not None
    server.wait_watching(1)
    assert server.lists == 1 and server.watches == 1
    nudge.stop()
    nudge.join(10)
    # The view is the term's, not the nudge's: it still follows the pods for the reclaim.
    server.update("ns/g", condition_reason("SchedulerError"))
    server.wait_read(1)
    assert view.marked_unschedulable(wait=0) == []


# ------------------------------------------------------------------ the same decisions as a fresh list


class Twins:
    """Two leaders' reclaims over the same cluster: one reading the view of a server's pending
    pods, the other a fresh list of that server's at every round (as stranded.py did, in the
    API server's order: by namespace, then name). Every change is made to both."""

    def __init__(self, views: list[tuple[PendingPods, PendingPodsServer]], *, waiting: int) -> None:
        self.members = [guaranteed(f"w{i}") for i in range(waiting)]
        self.server = PendingPodsServer([written(pod("g", 4))] + [written(member) for member in self.members])
        self.view = watched(views, self.server)
        self.watching = Cluster(per_node=2, pending=self.view)
        self.listing = Cluster(per_node=2)
        self.listing.api.list_pending_pods = lambda name: in_key_order(self.server.pod_list())  # type: ignore[method-assign]
        for member in self.members:
            self.record(member)
        self.changes = 0

    def record(self, p: PodInfo) -> None:
        """The process's pod watch shows ``p`` on both."""
        for cluster in (self.watching, self.listing):
            cluster.pods.record(p)

    def change(self, make: Any) -> None:
        """A change of the server's pending pods, once the view has read it."""
        make(self.server)
        self.changes += 1
        self.server.wait_read(self.changes)

    def look_at(self, seconds: float) -> list[str]:
        """A round on both, at ``seconds``: what the view shows, what is deleted, written,
        booked, the same."""
        shown = self.view.marked_unschedulable(wait=0)
        assert shown is not None and shown == listed_unschedulable(in_key_order(self.server.pod_list()))
        deleted = self.watching.look_at(seconds)
        assert deleted == self.listing.look_at(seconds)
        assert self.watching.api.calls == self.listing.api.calls and self.watching.api.events == self.listing.api.events
        assert booked(self.watching) == booked(self.listing)
        return deleted


def guaranteed(name: str) -> PodInfo:
    """A pod of VC a like g."""
    return Cluster.cellfits(pod(name, 4), cores=1)


def booked(cluster: Cluster) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    return {w.pod_uid: (w.node, tuple(sorted(w.victims))) for w in cluster.engine.waiting_guarantees()}


def in_key_order(raw: bytes) -> bytes:
    listing = json.loads(raw)
    listing["items"].sort(key=lambda item: (item["metadata"]["namespace"], item["metadata"]["name"]))
    return json.dumps(listing).encode()


def condition_reason(reason: str) -> Any:
    def change(body: dict[str, Any]) -> None:
        body["status"]["conditions"][0]["reason"] = reason
    return change


def test_each_round_decides_what_a_fresh_list_would(views: Any):
    twins = Twins(views, waiting=3)
    w0, w1, w2 = twins.members
    twins.look_at(0)
    twins.change(lambda server: server.update("ns/w0", condition_reason("SchedulerError")))  # no longer the reclaim's
    twins.look_at(10)
    late = guaranteed("a-late")  # listed before g: the view keeps the list's order
    twins.record(late)
    twins.change(lambda server: server.add(written(late)))  # a new pod: its wait begins now
    twins.look_at(20)
    twins.change(lambda server: server.update("ns/w0", condition_reason("Unschedulable")))  # back: it waits again
    first = twins.look_at(AFTER)  # g, w1 and w2 have waited: their cells are booked, their squatters deleted
    assert first and set(booked(twins.watching)) == {"g", "w1", "w2"}
    # w1 bound after all: it leaves the list (DELETED on the watch), and the pod watch shows its node
    twins.change(lambda server: server.bind("ns/w1", "r1n0"))
    twins.record(msgspec.structs.replace(w1, node_name="r1n0", phase="Running"))
    twins.look_at(AFTER + 5)
    twins.change(lambda server: server.update("ns/w2", lambda body: body["metadata"].update(
        deletionTimestamp="2027-01-15T08:01:00Z")))  # being deleted: no longer looked at
    for seconds in range(int(AFTER) + 10, 3 * int(AFTER) + 5, 5):
        twins.look_at(seconds)
    for cluster in (twins.watching, twins.listing):
        victims_gone(cluster, first)
    for seconds in range(3 * int(AFTER) + 5, 3 * int(AFTER) + 400, 5):  # past the give-back of cells kube-scheduler will not use
        twins.look_at(seconds)
    assert [event["pod_name"] for event in twins.watching.api.events if event["reason"] == "BookingReleased"]
    assert twins.server.lists == 1


def test_a_watch_that_lost_its_place_is_relisted_once_and_the_rounds_follow(views: Any):
    twins = Twins(views, waiting=1)
    twins.look_at(0)
    twins.server.wait_watching(1)
    twins.server.change_unseen("ns/w0", condition_reason("SchedulerError"))
    twins.server.compact()
    twins.server.end_watches()  # the next watch, from a compacted version, is 410 Gone
    twins.server.wait_watching(3)  # the 410's, then the relist's
    assert twins.server.lists == 2
    for seconds in range(5, 2 * int(AFTER), 5):
        twins.look_at(seconds)
    assert set(booked(twins.watching)) == {"g"}


def test_the_nudge_s_own_view_keeps_no_specs_and_the_reclaim_refuses_it(views: Any):
    server = PendingPodsServer([written(pod("g", 4))])
    view = PendingPods(api=server, scheduler_name=PROFILE, constrained=False)
    views.append((view, server))
    nudged = view.unschedulable(wait=10)
    assert nudged is not None and [found.key for found in nudged] == ["ns/g"]
    with pytest.raises(ValueError, match="constrained"):
        view.marked_unschedulable(wait=0)
    with pytest.raises(ValueError, match="constrained"):
        Cluster(pending=view)


def test_a_round_before_the_first_list_books_nothing_and_says_so(caplog: pytest.LogCaptureFixture):
    view = PendingPods(api=PendingPodsServer([]), scheduler_name=PROFILE)
    view.stop()  # stopped before it began: it never lists
    cluster = Cluster(pending=view)
    with caplog.at_level("WARNING", logger="scheduler.cluster.reclaim"):
        assert cluster.look_at(0) == [] and cluster.look_at(AFTER) == []
    assert not cluster.engine.has_booking(cluster.g) and cluster.api.calls == []
    assert any("not listed yet" in str(getattr(record, "reason", "")) for record in caplog.records)
