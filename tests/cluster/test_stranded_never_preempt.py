"""A guaranteed pod whose ``preemptionPolicy`` is Never (an AlloX GPU sampling pod) is told
"cellfit does not reclaim ... its preemptionPolicy is Never" (a CellsNotReclaimed Warning Event,
and the leader's log) only when reclaiming opportunistic pods is what would place it: not when
it waits behind its VC's guaranteed use alone, opportunistic pods nowhere or only where its VC
has no cells (strand23; the Event on every waiting sampling pod under HiveD was false)."""

from __future__ import annotations

import logging

import pytest

from tests.cells.helpers import pod, schedule
from tests.cluster.test_stranded import AFTER, NODES, Cluster, unschedulable


def vc_a_full_of_guarantees(cluster: Cluster, *, opportunistic_left: bool) -> None:
    """VC a's whole quota (a rack) bound by its own guaranteed pods; VC b's opportunistic pods
    are gone (``opportunistic_left`` False) or kept on the nodes a's pods did not take."""
    for p in list(cluster.pods.pods()):
        if p.uid.startswith("o"):
            cluster.engine.delete_pod(p.uid)
            cluster.pods.forget(p.uid)
    taken = []
    for i in range(4):
        placed = schedule(cluster.engine, cluster.cellfits(pod(f"a{i}", 8, "a"), cores=1), NODES)
        assert placed is not None
        cluster.pods.record(cluster.cellfits(placed, cores=1))
        taken.append(placed.node_name)
    if opportunistic_left:
        for i, node in enumerate(n for n in NODES if n not in taken):
            placed = schedule(cluster.engine, cluster.cellfits(pod(f"o{i}", 8, "b", priority="opportunistic"), cores=1), [node])
            assert placed is not None
            cluster.pods.record(cluster.cellfits(placed, cores=1))


@pytest.mark.parametrize("opportunistic_left", [False, True], ids=["no opportunistic pod", "opportunistic pods outside its VC"])
def test_a_never_pod_waiting_behind_its_vcs_guaranteed_use_gets_no_event(opportunistic_left: bool,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster()
    vc_a_full_of_guarantees(cluster, opportunistic_left=opportunistic_left)
    cluster.api.pending = [unschedulable(cluster.g, preemptionPolicy="Never")]
    cluster.look_at(0)
    with caplog.at_level(logging.WARNING, logger="scheduler.cluster.stranded"):
        for seconds in (AFTER, 2 * AFTER, 3 * AFTER):
            assert cluster.look_at(seconds) == []
    assert cluster.api.events == [] and cluster.api.writes == [] and not cluster.engine.has_booking(cluster.g)
    assert not [r for r in caplog.records if "preemptionPolicy" in r.getMessage()]


def test_a_never_pod_opportunistic_pods_block_is_told_once_and_nothing_is_booked(caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster()  # VC b's opportunistic pods fill VC a's rack too
    cluster.api.pending = [unschedulable(cluster.g, preemptionPolicy="Never")]
    cluster.look_at(0)
    with caplog.at_level(logging.WARNING, logger="scheduler.cluster.stranded"):
        for seconds in (AFTER, 2 * AFTER, 3 * AFTER):
            assert cluster.look_at(seconds) == []
    assert cluster.api.writes == [] and not cluster.engine.has_booking(cluster.g)
    (event,) = cluster.api.events
    assert (event["pod_name"], event["reason"], event["warning"]) == ("g", "CellsNotReclaimed", True)
    assert "preemptionPolicy is Never" in event["message"], event["message"]
    assert len([r for r in caplog.records if "opportunistic pods hold" in r.getMessage()]) == 1
