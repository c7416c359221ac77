"""The leader's watch of pending pods (scheduler/cluster/pending.py) sees every binding as a
deletion (the pod stops matching its selector): a deleted pod is read for its name and version
alone, not decoded as the nudge and the reclaim read the pods they keep (issue 15: that decode
was the watch's largest step per scheduled pod)."""

from __future__ import annotations

import json
import threading
from typing import Any, Iterator

from scheduler.cluster import pending
from scheduler.cluster.pending import PendingPods

PROFILE = "cellfit"
WAIT_SECONDS = 30


def _unschedulable(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}", "resourceVersion": "5"},
        "spec": {"schedulerName": PROFILE, "containers": [{"name": "main", "image": "trainer"}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/4 nodes are available",
                    "lastTransitionTime": "2027-01-15T08:00:00Z",
                }
            ],
        },
    }


class OneDeletion:
    """Lists one unschedulable pod; the first watch shows it deleted as ``gone`` (the object the
    API server sends), every later watch waits until the test ends."""

    def __init__(self, gone: dict[str, Any]) -> None:
        self._gone = gone
        self.lists = 0
        self.watches = 0
        self.settled = threading.Event()  # a second watch began: the first one's lines are applied
        self.ended = threading.Event()

    def list_pending_pods(self, scheduler_name: str, *, resource_version: str = "0") -> bytes:
        self.lists += 1
        return json.dumps({"metadata": {"resourceVersion": "5"}, "items": [_unschedulable("train-0")]}).encode()

    def watch_pending_pods(self, scheduler_name: str, *, resource_version: str) -> Iterator[bytes]:
        self.watches += 1
        if self.watches == 1:
            yield json.dumps({"type": "DELETED", "object": self._gone}).encode()
            return
        self.settled.set()
        self.ended.wait(WAIT_SECONDS)


def _watched(api: OneDeletion) -> PendingPods:
    view = PendingPods(api=api, scheduler_name=PROFILE)
    view.start()
    assert api.settled.wait(WAIT_SECONDS), "the view never watched a second time"
    return view


def _stop(view: PendingPods, api: OneDeletion) -> None:
    view.stop()
    api.ended.set()
    view.join(WAIT_SECONDS)


def test_a_pod_bound_meanwhile_leaves_both_readers_without_a_relist() -> None:
    bound = _unschedulable("train-0")
    bound["metadata"]["resourceVersion"] = "9"
    bound["spec"]["nodeName"] = "node-3"
    api = OneDeletion(bound)
    view = _watched(api)
    try:
        assert view.unschedulable(wait=0) == [] and view.marked_unschedulable(wait=0) == []
        assert api.lists == 1
    finally:
        _stop(view, api)


def test_a_deleted_pod_is_gone_even_where_the_readers_could_not_read_it() -> None:
    # What the readers read of a kept pod (its conditions, its spec as the node rules read it)
    # is not read of a deleted one: a deletion the readers' structs would refuse does not fail
    # the watch and cost a list of every pending pod.
    unreadable = _unschedulable("train-0")
    unreadable["metadata"]["resourceVersion"] = "9"
    unreadable["status"]["conditions"] = "not a list"
    unreadable["spec"]["affinity"] = ["not an object"]
    api = OneDeletion(unreadable)
    view = _watched(api)
    try:
        assert view.unschedulable(wait=0) == []
        assert api.lists == 1
    finally:
        _stop(view, api)


def test_a_gone_pod_is_read_for_its_name_and_version() -> None:
    gone = pending.gone_pod(json.dumps(_unschedulable("train-7")).encode())
    assert (gone.key, gone.resource_version, gone.wanted) == ("team-a/train-7", "5", False)
