"""Engines see node slots only: drivers turn offered names into the slots of the composition's
one node index (the placement engine's, which FitGpp reads through it) and names come back from
the positions engines answer with (scheduler/kube/names.py)."""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from scheduler.cells import HivedEngine
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo
from scheduler.core.nodeindex import UNKNOWN
from scheduler.core.resources import Resources
from scheduler.kube import names as kube_names
from scheduler.kube.names import NamedDecision, filter_offered, prioritize_offered
from scheduler.preemption import FitGppSettings
from scheduler.preemption.engine import FitGppEngine
from tests.preemption.test_engine import GI, running, te
from tests.cells.helpers import pod as hived_pod
from tests.cells.test_reclaim_minimal import one_node
from tests.preemption.test_holds import RESUMED_PRIORITY, TRIAL_PRIORITY, VC, hived_engine, pending


def test_resource_fit_answers_by_position_and_leaves_unknown_names_to_the_driver():
    engine = ResourceFitEngine()
    engine.apply_node(NodeInfo(name="a", allocatable=Resources(64000, 512 * GI, 8)))
    engine.apply_node(NodeInfo(name="b", allocatable=Resources(64000, 512 * GI, 2)))
    index = engine.node_index
    offered = np.array([index.get("b"), UNKNOWN, index.get("a")], dtype=np.int64)
    decision = engine.filter(pending("p", job="j", gpus=4), offered)
    assert decision.feasible.tolist() == [2]
    assert {reason: at.tolist() for reason, at in decision.unresolvable.items()} == {
        "node has fewer than the 4 GPUs the pod requests, even when empty.": [0]
    }
    assert decision.named_at.tolist() == [1]
    assert decision.failed_count == 0 and decision.unresolvable_count == 2
    named = NamedDecision(decision, ["b", "ghost", "a"])
    assert list(named.feasible) == ["a"]
    assert named.unresolvable == {
        "b": "node has fewer than the 4 GPUs the pod requests, even when empty.",
        "ghost": "cellfit has not seen this node yet (no Node object).",
    }


def test_hived_holds_the_nodes_without_cells_so_a_hold_there_keeps_pods_off_them():
    """A resume hold on a CPU node under HiveD: the CPU node has no cells, but the one node
    index holds it (every Node applied), so FitGpp finds it among the offered slots."""
    gpu = NodeInfo(name="g0", allocatable=Resources(64000, 512 * GI, 8), labels={"nvidia.com/gpu.product": "A100"})
    cpu = NodeInfo(name="c1", allocatable=Resources(8000, 64 * GI, 0))
    hived = HivedEngine.from_config({"virtualClusters": {"default": [{"cellType": "A100-NODE", "count": 1}]}}, nodes=[gpu])
    engine = FitGppEngine(hived, settings=FitGppSettings())
    engine.apply_node(gpu)
    engine.apply_node(cpu)
    engine.apply_pod(running("be-long", job="a", gpus=0, grace=600, node="c1"))
    engine.apply_pod(running("be-short", job="b", gpus=0, grace=30, node="c1"))
    trial = te(gpus=0)
    assert engine.select_victims(trial, {"c1": ["be-long", "be-short"]}, {}) == {"c1": ["be-short"]}
    engine.delete_pod("be-short")
    engine.reserve(trial, "c1")
    engine.apply_pod(pending("be-short-2", job="b", gpus=0, priority=RESUMED_PRIORITY))
    engine.apply_pod(replace(trial, node_name="c1", phase="Succeeded"))
    decision = filter_offered(engine, pending("waiter", job="w", gpus=0), ["g0", "c1"])
    assert list(decision.feasible) == ["g0"]
    assert decision.unresolvable_count == 1 and "kept for ml/be-short-2" in decision.unresolvable["c1"]


# Reasons by name keep the order the answers had when engines took names: kube-scheduler gets
# FailedAndUnresolvableNodes byte for byte as before (its JSON object's key order, and cellfit's
# no-fit log, follow the dict's).


def test_resource_fit_names_the_unknown_nodes_first_as_it_did():
    engine = ResourceFitEngine()
    for name in ("a", "b"):
        engine.apply_node(NodeInfo(name=name, allocatable=Resources(64000, 512 * GI, 2)))
    named = filter_offered(engine, pending("p", job="j", gpus=4), ["b", "ghost", "a", "ghost-2"])
    assert not named.feasible
    assert list(named.unresolvable) == ["ghost", "ghost-2", "b", "a"]


def test_fitgpp_over_hived_names_a_node_without_cells_before_the_kept_ones_as_it_did():
    """The placement engine's reasons first (HiveD's node without cells among them), FitGpp's
    kept nodes after them."""
    engine, hived = hived_engine(2)
    first = pending("a-1", job="a", labels=VC)
    engine.reserve(first, filter_offered(engine, first, ["g0", "g1"]).feasible[0])
    second = pending("b-1", job="b", labels=VC)
    home = filter_offered(engine, second, ["g0", "g1"]).feasible[0]
    engine.reserve(second, home)
    trial = replace(te(gpus=4, vc="default"), priority=TRIAL_PRIORITY)
    (victim,) = engine.select_victims(trial, {home: ["a-1", "b-1"]}, {})[home]
    engine.delete_pod(victim)
    job = "a" if victim == "a-1" else "b"
    engine.apply_pod(pending(f"{job}-2", job=job, priority=RESUMED_PRIORITY, labels=VC))
    named = filter_offered(engine, pending("waiter", job="w", labels=VC), [home, "ghost"])
    assert not named.feasible
    assert list(named.unresolvable) == ["ghost", home]
    assert named.unresolvable["ghost"] == "node ghost has no HiveD GPU cells"


def test_hived_leaves_its_chosen_node_offered_twice_out_of_the_unresolvable_ones():
    """The node HiveD reclaims cells on is failed (preemption helps there), not also
    unresolvable, however often it is offered."""
    engine = one_node("V100-SOCKET", {f"o-{i}": [i] for i in range(8)})
    named = filter_offered(engine, hived_pod("g", 4, "a"), ["r0n0", "r0n0"])
    assert not named.feasible
    assert list(named.failed) == ["r0n0"] and named.unresolvable == {}


# A by-name reference: resource fit judges each node on its own, so the answer over many offered
# names must be, name by name, its answer over that name alone, whatever slots the names hold
# after nodes came and went (slots are reused) and whichever form the names come in.

POOL = [f"n{i}" for i in range(10)]


def raw_or_list(names: list[str], raw: bool) -> Sequence[str]:
    """``names`` as the extender's fast path holds them (``raw``, where the C extension is
    built), else the plain list."""
    if not raw or kube_names.native is None:
        return names
    text = json.dumps(names).encode()
    spans = kube_names.native.scan(text)
    assert spans is not None
    return kube_names.RawNames(text, np.frombuffer(spans, dtype=np.int32).reshape(-1, 2))


@settings(max_examples=60, deadline=None)
@given(
    events=st.lists(
        st.tuples(st.sampled_from(["add", "delete", "pod"]), st.sampled_from(POOL), st.integers(0, 8)), max_size=30
    ),
    offered=st.lists(st.sampled_from([*POOL, "ghost", "ghost-2"]), max_size=14),
    gpus=st.integers(0, 9),
    raw=st.booleans(),
)
def test_resource_fit_over_many_names_is_its_answer_over_each_name_alone(
    events: list[tuple[str, str, int]], offered: list[str], gpus: int, raw: bool
) -> None:
    engine = ResourceFitEngine()
    for n, (event, name, amount) in enumerate(events):
        if event == "add":
            engine.apply_node(NodeInfo(name=name, allocatable=Resources(64000, 512 * GI, amount)))
        elif event == "delete":
            engine.delete_node(name)
        elif name in engine.node_index:
            engine.apply_pod(running(f"busy-{n}", job=f"b{n}", gpus=amount, node=name))
    pod = pending("p", job="j", gpus=gpus)
    named = filter_offered(engine, pod, raw_or_list(offered, raw))
    alone = {name: filter_offered(engine, pod, [name]) for name in offered}
    assert list(named.feasible) == [name for name in offered if alone[name].feasible]
    assert named.failed == {name: reason for name in offered for reason in alone[name].failed.values()}
    assert named.unresolvable == {name: reason for name in offered for reason in alone[name].unresolvable.values()}
    unknown = [name for name in named.unresolvable if name not in engine.node_index]
    assert list(named.unresolvable)[: len(unknown)] == unknown  # unknown nodes first, as always
    scores = prioritize_offered(engine, pod, raw_or_list(offered, raw))
    assert scores.tolist() == [int(prioritize_offered(engine, pod, [name])[0]) for name in offered]
