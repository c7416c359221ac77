"""Restart recovery: bound pods' bind-info re-creates exactly the same state, in any order, and
nothing is ever double-allocated."""

from __future__ import annotations

import json
import random

from msgspec import structs
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cells import HivedEngine
from scheduler.core.model import PodInfo
from tests.cells.helpers import node, node_names, pod, rack_cluster, schedule, snapshot

NODES = node_names()
CONFIG = rack_cluster(
    vcs={
        "a": [{"cellType": "V100-NODE", "count": 3}, {"cellType": "V100-SWITCH", "count": 2}],
        "b": [{"cellType": "V100-RACK", "count": 1}],
    }
)


def workload(engine: HivedEngine, rng: random.Random, steps: int) -> dict[str, PodInfo]:
    """Random guaranteed, opportunistic and gang pods, with deletions and preemptions, driven
    like kube-scheduler would. Returns the pods bound at the end."""
    running: dict[str, PodInfo] = {}
    counter = 0
    for _ in range(steps):
        action = rng.random()
        if action < 0.3 and running:
            uid = rng.choice(sorted(running))
            engine.delete_pod(uid)
            del running[uid]
            continue
        counter += 1
        vc = rng.choice(["a", "b"])
        gpus = rng.choice([1, 1, 2, 4, 8])
        if action < 0.45:
            size = rng.randint(2, 3)
            members = [pod(f"g{counter}-{i}", gpus, vc, gang=(f"job{counter}", size)) for i in range(size)]
        elif action < 0.7:
            members = [pod(f"o{counter}", gpus, vc, priority="opportunistic")]
        else:
            members = [pod(f"p{counter}", gpus, vc)]
        for member in members:
            placed = schedule(engine, member, NODES)
            if placed is None:
                # Play kube-scheduler's preemption: delete the victims HiveD names, retry once.
                victims = engine.pending_preemptions().get(member.uid, [])
                for victim in victims:
                    engine.delete_pod(victim)
                    running.pop(victim, None)
                placed = schedule(engine, member, NODES) if victims else None
            if placed is None:
                engine.delete_pod(member.uid)  # gives up (e.g. Job deleted)
                for sibling in members:
                    if sibling.uid in running:
                        engine.delete_pod(sibling.uid)
                        del running[sibling.uid]
                break
            running[placed.uid] = placed
    return running


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.integers(10, 80))
def test_recovery_rebuilds_identical_state(seed, steps):
    rng = random.Random(seed)
    first = HivedEngine.from_config(CONFIG)
    running = workload(first, rng, steps)
    expected = snapshot(first)
    # The watch echoes every bound pod to the running engine: no double allocation.
    for p in running.values():
        first.apply_pod(p)
    assert snapshot(first) == expected
    # A restarted engine sees the same pods, in whatever order the list returns them.
    second = HivedEngine.from_config(CONFIG, nodes=[node(n) for n in NODES])
    pods = list(running.values())
    rng.shuffle(pods)
    for p in pods:
        second.apply_pod(p)
    assert snapshot(second) == expected
    assert not second.allocator.anomalies
    for mine, theirs in zip(second.topology.used_chains, first.topology.used_chains):
        assert second.allocator.invariant(mine) == first.allocator.invariant(theirs)


def test_bound_pod_without_bind_info_gets_a_consistent_allocation():
    engine = HivedEngine.from_config(CONFIG)
    a = schedule(engine, pod("a", 4, "a"), NODES)
    stray = structs.replace(pod("stray", 4, "a"), node_name=a.node_name, phase="Running")
    engine.apply_pod(stray)
    booking = engine.allocator.by_pod["stray"]
    mine = set(engine.allocator.by_pod["a"].gpu_indices)
    assert booking.node == a.node_name and not mine & set(booking.gpu_indices)
    # The node is now full: a third pod claiming the node gets no GPUs, and is reported.
    full = structs.replace(pod("third", 1, "a"), node_name=a.node_name, phase="Running")
    engine.apply_pod(full)
    assert "third" not in engine.allocator.by_pod
    assert any("third" in note for note in engine.allocator.anomalies)


def test_conflicting_bind_info_is_never_double_allocated():
    engine = HivedEngine.from_config(CONFIG)
    a = schedule(engine, pod("a", 2, "a"), NODES)
    clone = structs.replace(pod("clone", 2, "a"), node_name=a.node_name, phase="Running", annotations=dict(a.annotations))
    engine.apply_pod(clone)
    assert set(engine.allocator.by_pod["clone"].gpu_indices).isdisjoint(engine.allocator.by_pod["a"].gpu_indices)
    assert any("no longer fits" in note for note in engine.allocator.anomalies)


def test_malformed_bind_info_is_tolerated():
    engine = HivedEngine.from_config(CONFIG)
    broken = structs.replace(
        pod("x", 1, "a"), node_name="r0n0", phase="Running", annotations={"cellfit.io/bind-info": "{not json"}
    )
    engine.apply_pod(broken)
    assert engine.allocator.by_pod["x"].node == "r0n0"
    assert any("is not JSON" in note for note in engine.allocator.anomalies)


def test_recovered_pod_of_a_vc_that_shrank_meanwhile():
    engine = HivedEngine.from_config(CONFIG)
    pods = [schedule(engine, pod(f"p{i}", 8, "a"), NODES) for i in range(3)]
    shrunk = rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 1}], "b": [{"cellType": "V100-RACK", "count": 1}]})
    restarted = HivedEngine.from_config(shrunk)
    for p in pods:
        restarted.apply_pod(p)
    assert len({restarted.allocator.by_pod[p.uid].node for p in pods}) == 3
    assert restarted.inspect_virtual_cluster("a")["cells"][0]["draining"] == 2
    assert not restarted.allocator.anomalies


def test_gang_recovered_from_one_member_reserves_its_siblings():
    engine = HivedEngine.from_config(CONFIG)
    first = schedule(engine, pod("j-0", 8, "a", gang=("j", 3)), NODES)
    slots = json.loads(first.annotations["cellfit.io/bind-info"])["gang"]["placements"]
    restarted = HivedEngine.from_config(CONFIG)
    restarted.apply_pod(first)
    assert len(restarted.allocator.groups["uid-j"].slots) == 3
    # The siblings, still pending at restart, go to the recorded slots.
    others = {schedule(restarted, pod(f"j-{i}", 8, "a", gang=("j", 3)), NODES).node_name for i in (1, 2)}
    assert others | {first.node_name} == {s["node"] for s in slots}
