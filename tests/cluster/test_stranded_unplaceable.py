"""One pending pod HiveD can never place as written (a virtual cluster that does not exist, or
that a live reload removed; no VC label; more GPUs than any cell holds; a cell type its VC owns
none of) must not stop the leader's reclaim for every other tenant: its round books and
reclaims for the others, and the pod is named in the log once, not every round.

On the real HivedEngine, pod record, StrandedGuarantees and ReclaimController of
tests/cluster/test_stranded.py: VC b's opportunistic pods fill every node, VC a's guaranteed pod
``g`` is stranded behind them, and the bad pod is listed unschedulable before it."""

from __future__ import annotations

import logging

import pytest

from scheduler.cells import HivedEngine
from scheduler.core.model import PodInfo
from tests.cells.helpers import pod
from tests.cluster.test_stranded import AFTER, Cluster, unschedulable

BAD_PODS = {
    "unknown virtual cluster": lambda: pod("bad", 4, "speech"),
    "no virtual-cluster label": lambda: pod("bad", 4, None),
    "more GPUs than any node-level cell": lambda: pod("bad", 16, "b"),
    "a cell type above the node level": lambda: pod("bad", 4, "b", cell_type="V100-RACK"),
}


def _with_bad_pod(cluster: Cluster, bad: PodInfo) -> PodInfo:
    """The bad pod recorded and listed unschedulable before ``g``: the round meets it first."""
    bad = Cluster.cellfits(bad, cores=1)
    cluster.pods.record(bad)
    cluster.api.pending = [unschedulable(bad), unschedulable(cluster.g)]
    return bad


def _named(caplog: pytest.LogCaptureFixture, uid: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "scheduler.cluster.stranded" and getattr(r, "pod", None) == f"ns/{uid}"]


@pytest.mark.parametrize("case", list(BAD_PODS))
def test_a_pod_hived_can_never_place_costs_the_round_nothing_but_itself(case: str, caplog: pytest.LogCaptureFixture):
    cluster = Cluster()
    bad = _with_bad_pod(cluster, BAD_PODS[case]())
    with caplog.at_level(logging.INFO, logger="scheduler.cluster.stranded"):
        cluster.look_at(0)
        deleted = cluster.look_at(AFTER)
        node = cluster.booked_node()
        assert node is not None and deleted == cluster.on(node) and len(deleted) == 1
        assert not cluster.engine.has_booking(bad)
        for round_ in range(2, 8):  # the rounds go on; the bad pod is named once
            cluster.look_at(round_ * AFTER)
    (named,) = _named(caplog, "bad")
    assert named.levelno == logging.WARNING and getattr(named, "reason", "")


WITH_C = {"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-NODE", "count": 3}],
          "c": [{"cellType": "V100-NODE", "count": 1}]}
WITHOUT_C = {"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]}


def test_a_pod_whose_virtual_cluster_a_reload_removed_costs_the_round_nothing_but_itself(caplog: pytest.LogCaptureFixture):
    cluster = Cluster()
    cluster.engine.reconfigure({"virtualClusters": WITH_C})
    bad = _with_bad_pod(cluster, pod("bad", 4, "c"))
    cluster.engine.reconfigure({"virtualClusters": WITHOUT_C})
    with caplog.at_level(logging.INFO, logger="scheduler.cluster.stranded"):
        cluster.look_at(0)
        deleted = cluster.look_at(AFTER)
        assert len(deleted) == 1 and cluster.booked_node() is not None and not cluster.engine.has_booking(bad)
        cluster.look_at(3 * AFTER)
    (named,) = _named(caplog, "bad")
    assert "unknown virtual cluster 'c'" in named.reason  # type: ignore[attr-defined]


def test_a_reload_between_the_look_and_the_booking_skips_that_pod_only(caplog: pytest.LogCaptureFixture):
    # The candidate check and the booking each take the engine lock on their own: a reload that
    # removes the pod's VC in between makes the booking refuse it, and that skips it too.
    cluster = Cluster()
    engine: HivedEngine = cluster.engine
    engine.reconfigure({"virtualClusters": WITH_C})
    _with_bad_pod(cluster, pod("bad", 4, "c"))
    candidate = engine.reclaim_candidate

    def reload_after_answering(p: PodInfo) -> bool:
        answer = candidate(p)
        if p.uid == "bad":
            engine.reconfigure({"virtualClusters": WITHOUT_C})
        return answer

    engine.reclaim_candidate = reload_after_answering  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="scheduler.cluster.stranded"):
        cluster.look_at(0)
        deleted = cluster.look_at(AFTER)
        assert len(deleted) == 1 and cluster.booked_node() is not None
        cluster.look_at(3 * AFTER)
    (named,) = _named(caplog, "bad")
    assert "unknown virtual cluster 'c'" in named.reason  # type: ignore[attr-defined]
