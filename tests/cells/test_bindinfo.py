"""The bind-info annotation codec."""

from __future__ import annotations

import json

import pytest

from scheduler.cells import HivedEngine, bindinfo
from scheduler.cells.request import Priority
from scheduler.errors import InvalidAnnotation
from tests.cells.helpers import node_names, pod, rack_cluster, schedule
from scheduler.kube.names import filter_offered, prioritize_offered

NODES = node_names()


def test_round_trip_of_a_gang_member():
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 4}], "b": [{"cellType": "V100-RACK", "count": 1}]}))
    placed = schedule(engine, pod("j-0", 4, "a", gang=("j", 2)), NODES)
    text = placed.annotations["cellfit.io/bind-info"]
    info = bindinfo.decode(text)
    assert info.node == placed.node_name and info.vc == "a" and info.priority is Priority.GUARANTEED
    assert info.gang is not None and info.gang.size == 2 and len(info.gang.slots) == 2
    assert info.gpu_indices == (0, 1, 2, 3) and info.cell_type == "V100-SOCKET"
    # Stable bytes: compact JSON with sorted keys.
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("nope", "is not JSON"),
        ("[]", "must be a JSON object"),
        ('{"version": 2}', "unsupported version 2"),
        ('{"version": 1, "priority": "high"}', "unknown priority 'high'"),
        ('{"version": 1, "priority": "guaranteed", "node": "n", "vc": "a", "cellType": "X", "gpuIndices": [-1]}', "'gpuIndices' must be a list"),
        ('{"version": 1, "priority": "guaranteed", "node": "", "vc": "a", "cellType": "X", "gpuIndices": [0]}', "'node' must be a non-empty string"),
        ('{"version": 1, "priority": "guaranteed", "node": "n", "vc": "a", "cellType": "X", "gpuIndices": [0], "gang": {"placements": [], "size": 0}}', "'gang.size' must be a positive integer"),
    ],
)
def test_malformed(text, needle):
    with pytest.raises(InvalidAnnotation, match="annotation cellfit.io/bind-info") as info:
        bindinfo.decode(text)
    assert needle in str(info.value)


def test_select_victims_follows_the_candidates():
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]}))
    for i in range(8):
        schedule(engine, pod(f"o{i}", 8, "b", priority="opportunistic"), NODES)
    g = pod("g", 8, "a")
    waiting = next(iter(filter_offered(engine, g, NODES).failed))
    # Candidates without it (kube-scheduler cannot preempt there) while no victim is leaving yet:
    # HiveD moves its hold to a candidate node, still naming only opportunistic pods of a's own cells.
    others = {n: ["x"] for n in NODES if n != waiting}
    moved = engine.select_victims(g, others, {})
    (node, victims), = moved.items()
    assert node in others and victims == engine.pending_preemptions()["g"]
    # kube-scheduler's candidates include HiveD's node: only that node, only HiveD's victim.
    chosen = engine.select_victims(g, {n: ["x"] for n in NODES}, {})
    assert chosen == {node: victims}
    # Those victims are leaving now: candidates without their node take no more, the hold stays.
    assert engine.select_victims(g, {n: ["x"] for n in NODES if n != node}, {}) == {}
    assert engine.booked_nodes()["g"] == node
    assert engine.select_victims(g, {}, {}) == {}


def test_prioritize_prefers_busy_nodes_for_packing():
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 8}]}))
    schedule(engine, pod("p", 4, "a"), NODES)
    busy = engine.allocator.by_pod["p"].node
    q = pod("q", 2, "a")
    scores = dict(zip(NODES, prioritize_offered(engine, q, NODES)))
    assert scores[busy] == 10  # HiveD's own choice: packed next to p
    idle_scores = {n: s for n, s in scores.items() if n != busy}
    same_rack = [n for n in idle_scores if n[:2] == busy[:2]]
    other_rack = [n for n in idle_scores if n[:2] != busy[:2]]
    assert min(idle_scores[n] for n in same_rack) > max(idle_scores[n] for n in other_rack)
