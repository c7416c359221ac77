"""Each term's one view of the profile's pending pods (scheduler/cluster/pending.py), read by both
the requeue nudge and HiveD's reclaim: the leader lists them once a term and holds one watch of
them, not a list per reader at every round."""

from __future__ import annotations

from typing import Any, Iterator

from scheduler.cluster.nudge import Nudger
from scheduler.cluster.pending import PendingPods
from scheduler.cluster.reclaim import ReclaimController
from scheduler.config import parse_settings
from scheduler.extender.runtime import build_runtime
from tests.support.api_double import ListingApi
from tests.support.hived import CONFIG, NODES
from tests.support.pending_pods_api import PendingPodsServer

BOTH = CONFIG + "estimator: {enabled: false}\nexchange: {enabled: false}\nleaderElection: {enabled: false}\n"


class PendingListingApi(ListingApi):
    """The canned lists, and the profile's pending pods served as kube-apiserver serves them."""

    def __init__(self, pending: PendingPodsServer) -> None:
        super().__init__(nodes=NODES)
        self.pending = pending

    def list_pending_pods(self, scheduler_name: str, *, resource_version: str = "0") -> bytes:
        return self.pending.list_pending_pods(scheduler_name, resource_version=resource_version)

    def watch_pending_pods(self, scheduler_name: str, *, resource_version: str) -> Iterator[bytes]:
        return self.pending.watch_pending_pods(scheduler_name, resource_version=resource_version)

    def create_pod(self, **pod: Any) -> None: ...

    def delete_pod(self, **pod: Any) -> None: ...


def test_a_term_lists_the_pending_pods_once_for_the_nudge_and_the_reclaim():
    server = PendingPodsServer([])
    runtime = build_runtime(parse_settings(BOTH), api=PendingListingApi(server))  # type: ignore[arg-type]
    assert runtime.terms is not None
    runtime.terms.begin()
    try:
        drivers = runtime.terms.drivers
        assert [type(driver) for driver in drivers if isinstance(driver, (PendingPods, Nudger, ReclaimController))] == [
            PendingPods, Nudger, ReclaimController]
        (nudge,) = [driver for driver in drivers if isinstance(driver, Nudger)]
        (reclaim,) = [driver for driver in drivers if isinstance(driver, ReclaimController)]
        for _ in range(12):  # a minute of passes and rounds
            nudge.pass_once()
            reclaim.reconcile()
        server.wait_watching(1)
        assert server.lists == 1 and server.watches == 1
    finally:
        runtime.terms.end()
        server.close()
