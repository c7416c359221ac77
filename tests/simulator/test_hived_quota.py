"""The quota-only baseline's parts: the per-tenant GPU count, kube-scheduler's LeastAllocated
choice, and gangs all-or-nothing on the resource-fit engine."""

from __future__ import annotations

import pytest

from scheduler.core.fit import ResourceFitEngine
from scheduler.errors import InvalidRequest
from scheduler.simulator.hived.cluster import gpu_nodes
from scheduler.simulator.hived.quota import QuotaGate, least_allocated
from scheduler.simulator.hived.simulation import (
    ClusterScheduler,
    job_pods,
    spread_choice,
)
from tests.simulator.hived_helpers import gang


def test_quota_counts_gpus_per_tenant_wherever_they_are() -> None:
    gate = QuotaGate({"a": 8, "b": 16})
    assert gate.admits("a", 8) and not gate.admits("a", 9)
    gate.take("a", 6)
    assert gate.admits("a", 2) and not gate.admits("a", 3)
    assert gate.admits("b", 16)  # a's use is a's alone
    gate.give_back("a", 6)
    assert gate.admits("a", 8)


def test_quota_refuses_to_overdraw_or_overreturn() -> None:
    gate = QuotaGate({"a": 4})
    with pytest.raises(AssertionError, match="quota 4"):
        gate.take("a", 5)
    with pytest.raises(AssertionError, match="holds 0"):
        gate.give_back("a", 1)
    with pytest.raises(InvalidRequest, match="quota b"):
        QuotaGate({"b": -1})


def test_least_allocated_spreads_and_breaks_ties_by_offer_order() -> None:
    # free GPUs after a 1-GPU pod: 2, 7, 7, 0 -> the first of the two emptiest nodes
    assert least_allocated(requested=1, free=[3, 8, 8, 1], allocatable=[8, 8, 8, 8]) == 1
    # a node short of the request is skipped even if it would score
    assert least_allocated(requested=4, free=[3, 2, 4], allocatable=[8, 8, 8]) == 2
    with pytest.raises(ValueError, match="no node has 9 free GPUs"):
        least_allocated(requested=9, free=[8], allocatable=[8])


def test_packing_and_spreading_place_one_gpu_pods_differently() -> None:
    nodes = gpu_nodes(["n0", "n1", "n2"], 8)
    packed = ClusterScheduler(engine=ResourceFitEngine(), nodes=nodes)
    spread_engine = ResourceFitEngine()
    spread = ClusterScheduler(engine=spread_engine, nodes=nodes, choice=spread_choice(spread_engine, 8))
    jobs = [gang(f"j{i}", "a", 1) for i in range(3)]
    assert [packed.try_start(job) for job in jobs] == [["n0"], ["n0"], ["n0"]]  # most-allocated
    assert [spread.try_start(job) for job in jobs] == [["n0"], ["n1"], ["n2"]]  # least-allocated


def test_a_gang_that_does_not_fit_whole_leaves_nothing_booked() -> None:
    engine = ResourceFitEngine()
    scheduler = ClusterScheduler(engine=engine, nodes=gpu_nodes(["n0", "n1"], 8), quota=QuotaGate({"a": 32, "b": 8}))
    assert scheduler.try_start(gang("small", "b", 1)) == ["n0"]
    # two whole nodes wanted, one free: the first pod is reserved on n1, then given back
    assert scheduler.try_start(gang("big", "a", 16)) is None
    assert engine.free_on("n0").gpus == 7 and engine.free_on("n1").gpus == 8
    assert scheduler.quota is not None and scheduler.quota.used == {"a": 0, "b": 1}
    scheduler.finish(gang("small", "b", 1))
    assert scheduler.try_start(gang("big", "a", 16)) == ["n0", "n1"]
    assert scheduler.quota.used == {"a": 16, "b": 0}


def test_quota_holds_a_job_back_even_with_free_nodes() -> None:
    scheduler = ClusterScheduler(engine=ResourceFitEngine(), nodes=gpu_nodes(["n0", "n1"], 8), quota=QuotaGate({"a": 8, "b": 8}))
    assert scheduler.try_start(gang("one", "a", 4)) == ["n0"]
    assert scheduler.try_start(gang("two", "a", 8)) is None  # 12 > 8 GPUs of quota; n1 is free


def test_gang_pods_carry_the_virtual_cluster_and_gang_annotations() -> None:
    pods = job_pods(gang("j", "prod-a", 32))
    assert [p.requests.gpus for p in pods] == [8, 8, 8, 8]
    assert {p.labels["cellfit.io/virtual-cluster"] for p in pods} == {"prod-a"}
    assert {p.annotations["cellfit.io/gang-size"] for p in pods} == {"4"}
    assert {p.owner.uid for p in pods if p.owner} == {"uid-j"}
    assert job_pods(gang("k", "prod-a", 2))[0].annotations == {}  # one pod: no gang
