"""HiveD's ``reclaim_candidate`` and ``book_reclaim`` (the leader's reclaim of cells for a
guaranteed pod kube-scheduler cannot bring to the filter) on a pod whose request never resolves:
they raise :class:`Unplaceable` with the reason, on purpose. The leader's round
(scheduler/cluster/stranded.py, tests/cluster/test_stranded_unplaceable.py) names such a pod once
in its log from that reason and goes on with the other pods; an engine that answered "no
candidate" instead would leave it out without a word. A pod whose cellfit annotation does not
read is no candidate (its owner hears the annotation's mistake from the filter)."""

from __future__ import annotations

import pytest

from scheduler.cells import HivedEngine
from scheduler.cells.planning import Unplaceable
from tests.cells.helpers import node_names, pod, rack_cluster

NODES = node_names()


@pytest.fixture
def engine() -> HivedEngine:
    return HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 1}]}))


@pytest.mark.parametrize(("vc", "reason"), [("nope", "unknown virtual cluster 'nope'"),
                                            (None, "the pod has no cellfit.io/virtual-cluster label")])
def test_a_pod_whose_vc_never_resolves_raises_its_reason_for_the_caller_to_name(engine: HivedEngine, vc: str | None,
                                                                               reason: str) -> None:
    never = pod("x", 8, vc=vc)
    with pytest.raises(Unplaceable, match=reason):
        engine.reclaim_candidate(never)
    with pytest.raises(Unplaceable, match=reason):
        engine.book_reclaim(never, among=NODES)
    assert "x" not in engine.allocator.by_pod


def test_an_unreadable_annotation_is_no_candidate(engine: HivedEngine) -> None:
    unread = pod("x", 8, vc="a", annotations={"cellfit.io/gang": "maybe"})
    assert engine.reclaim_candidate(unread) is False
    assert engine.book_reclaim(unread, among=NODES) is None


def test_a_guaranteed_pod_of_its_vc_is_one(engine: HivedEngine) -> None:
    assert engine.reclaim_candidate(pod("g", 8, vc="a")) is True
