"""Gangs: all pods of a Job are booked together or not at all."""

from __future__ import annotations

import json
import random

from msgspec import structs
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cells import HivedEngine
from tests.cells.helpers import node_names, pod, rack_cluster, schedule, snapshot
from scheduler.kube.names import filter_offered

NODES = node_names()


def make() -> HivedEngine:
    return HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 4}], "b": [{"cellType": "V100-RACK", "count": 1}]}))


def member(job: str, i: int, size: int, gpus: int = 8, vc: str = "a", **kw):
    return pod(f"{job}-{i}", gpus, vc, gang=(job, size), **kw)


def test_first_pod_books_the_whole_gang():
    engine = make()
    placed = schedule(engine, member("job", 0, 3), NODES)
    assert placed is not None
    info = json.loads(placed.annotations["cellfit.io/bind-info"])
    assert info["gang"]["size"] == 3 and len(info["gang"]["placements"]) == 3
    slots = {p["node"] for p in info["gang"]["placements"]}
    assert len(slots) == 3
    # The VC's fourth node is all that is left for anybody else in a.
    assert schedule(engine, pod("other", 8, "a"), NODES) is not None
    assert not filter_offered(engine, pod("other2", 8, "a"), NODES).feasible
    # The siblings land on their booked slots.
    rest = [schedule(engine, member("job", i, 3), NODES) for i in (1, 2)]
    assert {placed.node_name, *(p.node_name for p in rest)} == slots


def test_gang_that_does_not_fit_books_nothing():
    engine = make()
    schedule(engine, pod("x", 8, "a"), NODES)
    schedule(engine, pod("y", 8, "a"), NODES)
    before = snapshot(engine)
    decision = filter_offered(engine, member("job", 0, 3), NODES)
    assert not decision.feasible
    reason = decision.unresolvable["r0n0"]
    assert reason.startswith("gang ns/job (3 pods x 8 GPUs) cannot be placed all at once: virtual cluster 'a' quota exhausted")
    assert snapshot(engine) == before


def test_gang_larger_than_the_vc():
    engine = make()
    decision = filter_offered(engine, member("big", 0, 5), NODES)
    assert "gang ns/big needs 5 pods x 8 GPUs but virtual cluster 'a' can hold at most 4 such pods" in decision.unresolvable["r0n0"]
    # 2-GPU pods: 4 nodes x 4 per node = 16 fit, 17 do not.
    assert filter_offered(engine, member("many", 0, 16, gpus=2), NODES).feasible
    assert "can hold at most 16" in filter_offered(engine, member("more", 0, 17, gpus=2), NODES).unresolvable["r0n0"]


def test_gang_capacity_follows_quota_changes():
    engine = make()
    assert "can hold at most 4" in filter_offered(engine, member("big", 0, 5), NODES).unresolvable["r0n0"]
    engine.reconfigure(rack_cluster(vcs={"a": [{"cellType": "V100-NODE", "count": 2}], "b": [{"cellType": "V100-RACK", "count": 1}]}))
    assert "can hold at most 2" in filter_offered(engine, member("big2", 0, 3), NODES).unresolvable["r0n0"]


def test_gang_without_size_or_owner():
    engine = make()
    p = pod("lonely", 1, "a", annotations={"cellfit.io/gang": "true"})
    assert "a gang pod must be owned by a Job" in filter_offered(engine, p, NODES).unresolvable["r0n0"]
    p = member("job", 0, 2)
    p = structs.replace(p, annotations={k: v for k, v in p.annotations.items() if k != "cellfit.io/gang-size"})
    assert "annotation cellfit.io/gang-size: is required" in filter_offered(engine, p, NODES).unresolvable["r0n0"]


def test_gang_released_when_all_pods_are_gone_and_slot_reused():
    engine = make()
    initial = snapshot(engine)
    pods = [schedule(engine, member("job", i, 2), NODES) for i in range(2)]
    # A pod that fails is replaced by a new pod of the same Job: it gets the freed slot.
    engine.delete_pod(pods[0].uid)
    replacement = schedule(engine, member("job", 7, 2), NODES)
    assert replacement.node_name == pods[0].node_name
    engine.delete_pod(replacement.uid)
    engine.delete_pod(pods[1].uid)
    assert snapshot(engine) == initial


def test_extra_pod_beyond_gang_size():
    engine = make()
    for i in range(2):
        schedule(engine, member("job", i, 2), NODES)
    decision = filter_offered(engine, member("job", 2, 2), NODES)
    assert "already has all 2 slots taken" in decision.unresolvable["r0n0"]


def test_opportunistic_gang_is_all_or_nothing_too():
    engine = make()
    for i in range(6):
        schedule(engine, pod(f"o{i}", 8, "b", priority="opportunistic"), NODES)
    before = snapshot(engine)
    decision = filter_offered(engine, member("og", 0, 3, vc="b", priority="opportunistic"), NODES)
    assert not decision.feasible and snapshot(engine) == before
    assert filter_offered(engine, member("og2", 0, 2, vc="b", priority="opportunistic"), NODES).feasible


def test_slot_moves_when_its_node_is_no_longer_offered():
    engine = make()
    first = schedule(engine, member("job", 0, 2), NODES)
    info = json.loads(first.annotations["cellfit.io/bind-info"])
    other_slot = next(p["node"] for p in info["gang"]["placements"] if p["node"] != first.node_name)
    offered = [n for n in NODES if n not in (other_slot, first.node_name)]
    decision = filter_offered(engine, member("job", 1, 2), offered)
    assert decision.feasible and decision.feasible[0] in offered


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(0, 10_000))
def test_gang_slots_are_exactly_where_slot_by_slot_search_puts_them(seed: int) -> None:
    """plan_group's shortcuts (the previous slot's VC cell first; the next cell of the free list
    a fresh VC cell came off) place every slot exactly where a full search per slot would."""
    rng = random.Random(seed)
    config = rack_cluster(
        racks=3,
        nodes_per_rack=4,
        vcs={
            "a": [{"cellType": "V100-NODE", "count": 5}, {"cellType": "V100-SOCKET", "count": 4}],
            "b": [{"cellType": "V100-RACK", "count": 1}, {"cellType": "V100-NODE", "count": 1}],
        },
    )
    names = node_names(racks=3, nodes_per_rack=4)
    fast, slow = HivedEngine.from_config(config), HivedEngine.from_config(config)
    slow.allocator.gangs._plan_in_last_root = lambda *args: None  # type: ignore[method-assign]
    slow.allocator.gangs._plan_next_listed = lambda *args: None  # type: ignore[method-assign]
    for step in range(40):
        vc = rng.choice(["a", "b"])
        gpus = rng.choice([1, 2, 4, 8])
        if rng.random() < 0.4:
            size = rng.randint(2, 5)
            members = [pod(f"g{step}-{i}", gpus, vc, gang=(f"job{step}", size), priority=rng.choice([None, "opportunistic"])) for i in range(size)]
        else:
            members = [pod(f"p{step}", gpus, vc, priority=rng.choice([None, None, "opportunistic"]))]
        if rng.random() < 0.2:
            names_offered = rng.sample(names, rng.randint(1, len(names)))
        else:
            names_offered = names
        for engine in (fast, slow):
            for m in members:
                placed = schedule(engine, m, names_offered)
                if placed is not None:
                    engine.apply_pod(placed)
        assert snapshot(fast) == snapshot(slow)
        if rng.random() < 0.3:
            running = sorted(fast.allocator.by_pod)
            for uid in rng.sample(running, min(len(running), rng.randint(1, 3))):
                fast.delete_pod(uid)
                slow.delete_pod(uid)
