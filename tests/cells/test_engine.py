"""HivedEngine's verbs: filter / prioritize / reserve, reasons, bad input, packing."""

from __future__ import annotations

import json

import pytest
from msgspec import structs

from scheduler.cells import HivedEngine
from scheduler.core.engine import SchedulingEngine
from scheduler.errors import SchedulingConflict, UnknownNode
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule, snapshot
from scheduler.kube.names import filter_offered, prioritize_offered

NODES = node_names()


@pytest.fixture
def engine() -> HivedEngine:
    return HivedEngine.from_config(
        rack_cluster(
            vcs={
                "a": [{"cellType": "V100-NODE", "count": 2}, {"cellType": "V100-SWITCH", "count": 2}],
                "b": [{"cellType": "V100-RACK", "count": 1}],
            }
        )
    )


def test_engine_satisfies_the_protocol(engine):
    assert isinstance(engine, HivedEngine)
    protocol: SchedulingEngine = engine  # type-checked structurally
    assert protocol.knows_node("r0n0") and not protocol.knows_node("nope")


def test_filter_returns_only_the_chosen_node(engine):
    decision = filter_offered(engine, pod("p", 2), NODES)
    assert len(decision.feasible) == 1
    chosen = decision.feasible[0]
    assert not decision.failed
    assert set(decision.unresolvable) == set(NODES) - {chosen}
    assert all(reason == f"HiveD placed this pod's GPUs on node {chosen}" for reason in decision.unresolvable.values())
    scores = dict(zip(NODES, prioritize_offered(engine, pod("p", 2), NODES)))
    assert scores[chosen] == 10 and all(0 <= s <= 9 for n, s in scores.items() if n != chosen)


def test_reserve_writes_bind_info_and_gpu_indices(engine):
    p = pod("p", 2)
    node = filter_offered(engine, p, NODES).feasible[0]
    placement = engine.reserve(p, node)
    assert placement.node_name == node
    info = json.loads(placement.annotations["cellfit.io/bind-info"])
    assert info["node"] == node and info["vc"] == "a" and info["priority"] == "guaranteed"
    assert info["cellType"] == "V100-SWITCH"
    assert info["gpuIndices"] == [0, 1]
    assert info["vcCell"] is not None and len(info["cells"]) == 2
    assert placement.annotations["cellfit.io/gpu-indices"] == "0,1"


def test_small_pods_are_packed(engine):
    placed = [schedule(engine, pod(f"p{i}", 1), NODES) for i in range(4)]
    assert all(p is not None for p in placed)
    # Four 1-GPU pods fill the VC's two switch cells (2 GPUs each) before touching its nodes.
    roots = {json.loads(p.annotations["cellfit.io/bind-info"])["vcCell"] for p in placed}
    assert len(roots) == 2 and all("SWITCH" in r for r in roots)
    assert len({p.node_name for p in placed}) == 1  # both switches come from one split node


def test_cell_type_annotation_chooses_the_level(engine):
    p = schedule(engine, pod("p", 2, cell_type="V100-NODE"), NODES)
    info = json.loads(p.annotations["cellfit.io/bind-info"])
    assert info["cellType"] == "V100-NODE" and info["vcCell"] == p.node_name


def test_quota_exhausted_reason(engine):
    for i in range(2):
        assert schedule(engine, pod(f"n{i}", 8), NODES) is not None
    decision = filter_offered(engine, pod("late", 8), NODES)
    assert not decision.feasible and not decision.failed
    reason = decision.unresolvable["r0n0"]
    assert reason.startswith("virtual cluster 'a' quota exhausted at level 'V100-NODE'")


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"vc": "zzz"}, "unknown virtual cluster 'zzz' (known: a, b)"),
        ({"vc": None}, "the pod has no cellfit.io/virtual-cluster label"),
        ({"gpus": 16}, "more than any node-level cell holds"),
        ({"cell_type": "V100-RACK"}, "is above the node level"),
        ({"cell_type": "NOPE"}, "unknown cell type 'NOPE'"),
        ({"vc": "a", "gpus": 2, "cell_type": "V100-NODE", "priority": "bogus"}, "label cellfit.io/priority: 'bogus'"),
        ({"gpus": 4, "cell_type": "V100-SWITCH"}, "requests 4 GPUs but a 'V100-SWITCH' cell holds 2"),
    ],
)
def test_bad_input_gets_one_line_reason_and_changes_nothing(engine, kwargs, needle):
    schedule(engine, pod("existing", 1), NODES)
    before = snapshot(engine)
    args = {"gpus": 2, "vc": "a"} | kwargs
    p = pod("bad", args.pop("gpus"), args.pop("vc"), **args)
    decision = filter_offered(engine, p, NODES)
    assert not decision.feasible and not decision.failed
    assert set(decision.unresolvable) == set(NODES)
    reason = decision.unresolvable["r0n0"]
    assert needle in reason and "\n" not in reason
    assert snapshot(engine) == before
    with pytest.raises(SchedulingConflict):
        engine.reserve(p, "r0n0")
    assert snapshot(engine) == before


def test_cell_type_the_vc_does_not_own():
    engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-SWITCH", "count": 2}], "b": [{"cellType": "V100-RACK", "count": 1}]}))
    decision = filter_offered(engine, pod("p", 2, "a", cell_type="V100-NODE"), NODES)
    assert "virtual cluster 'a' owns no cell of type 'V100-NODE' or larger" in decision.unresolvable["r0n0"]
    decision = filter_offered(engine, pod("q", 8, "a"), NODES)
    assert "more than any cell virtual cluster 'a' owns (largest: 'V100-SWITCH' with 2 GPUs)" in decision.unresolvable["r0n0"]


def test_cpu_only_pods_pass_through(engine):
    p = pod("cpu", 0)
    assert filter_offered(engine, p, NODES).feasible == NODES
    assert engine.reserve(p, "r0n0").annotations == {}
    assert prioritize_offered(engine, p, NODES).tolist() == [0] * len(NODES)


def test_nodes_outside_the_topology(engine):
    decision = filter_offered(engine, pod("p", 1), [*NODES, "cpu-node"])
    assert decision.unresolvable["cpu-node"] == "node cpu-node has no HiveD GPU cells"
    with pytest.raises(UnknownNode):
        engine.reserve(pod("p", 1), "never-seen")


def test_filter_respects_offered_nodes(engine):
    decision = filter_offered(engine, pod("p", 8), ["r1n3"])
    assert decision.feasible == ["r1n3"]
    decision = filter_offered(engine, pod("q", 8, "b"), ["r0n0", "r0n1"])
    assert decision.feasible in (["r0n0"], ["r0n1"])


def test_reserve_on_another_node_than_filter_chose(engine):
    p = pod("p", 1)
    placement = engine.reserve(p, "r1n2")  # e.g. kube-scheduler's own choice among filter's
    assert placement.node_name == "r1n2"
    assert json.loads(placement.annotations["cellfit.io/bind-info"])["node"] == "r1n2"


def test_unreserve_and_delete_release(engine):
    initial = snapshot(engine)
    p = pod("p", 8)
    engine.reserve(p, filter_offered(engine, p, NODES).feasible[0])
    assert snapshot(engine) != initial
    engine.unreserve("p")
    assert snapshot(engine) == initial
    placed = schedule(engine, p, NODES)
    after_bind = snapshot(engine)
    engine.apply_pod(placed)  # the watch echoes the bound pod: no second allocation
    assert snapshot(engine) == after_bind
    engine.delete_pod("p")
    assert snapshot(engine) == initial


def test_terminal_phase_releases(engine):
    initial = snapshot(engine)
    placed = schedule(engine, pod("p", 4), NODES)
    engine.apply_pod(structs.replace(placed, phase="Succeeded"))
    assert snapshot(engine) == initial


def test_stats(engine):
    schedule(engine, pod("p", 1), NODES)
    stats = engine.stats()
    assert stats["nodes"] == 8 and stats["gpus"] == 64 and stats["pods"] == 1 and stats["virtualClusters"] == 2


def test_gpu_node_outside_the_topology_is_reported_once(engine):
    for _ in range(3):
        engine.apply_node(node("stray", 8))
    assert [n for n in engine.allocator.anomalies if "stray" in n] == [
        "node stray has 8 GPUs but is in no HiveD cell (add it to the topology, or restart to rediscover)"
    ]
    assert engine.knows_node("stray")
    with pytest.raises(SchedulingConflict, match="node stray has no HiveD GPU cells"):
        engine.reserve(pod("p", 1), "stray")
