"""AlloX admission under HiveD (a Job's GPU configuration uses only its virtual cluster's free
guarantee) and Jobs of several pods (gangs holding that many machines at once)."""

from functools import partial

import pytest

from scheduler.matching.admission import RunningJob, WaitingJob, IdleMachines
from scheduler.matching.admission import decide as decide_with
from scheduler.matching.capacity import GuaranteeCell, NodeResources, guaranteed_gpu_machines
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand

CPU, GPU = Demand(cpu=4, memory=8), Demand(gpu=1, cpu=1)
decide = partial(decide_with, capacity=Capacity(cpu=64, gpu=4, memory=256), omega_grid_seconds=0)
# Two 2-GPU nodes (VC a's and VC b's cells) and room for CPU slots of 4 cores.
NODES = [NodeResources(name="n1", cpu=10, gpu=2, memory=128), NodeResources(name="n2", cpu=10, gpu=2, memory=128)]


def waiting(key, user, *, cpu=100.0, gpu=10.0, pool=None, pods=1, arrival=0.0):
    seconds = {k: v for k, v in (("cpu", cpu), ("gpu", gpu)) if v is not None}
    return WaitingJob(key=key, user=user, arrival=arrival, seconds=seconds, demand={"cpu": CPU, "gpu": GPU}, pool=pool, pods=pods)


# ------------------------------------------------------------------ the pure translation


def test_a_vcs_gpu_machines_are_the_free_gpus_of_its_cells_in_pods_of_the_configurations_size():
    guarantees = {
        "a": [GuaranteeCell(gpus=8, free=3), GuaranteeCell(gpus=8, free=8)],  # a bound cell half used, an unbound one
        "b": [GuaranteeCell(gpus=2, free=0)],
        "c": [],
    }
    assert guaranteed_gpu_machines(guarantees, gpus_per_pod={}) == {"a": 11, "b": 0, "c": 0}
    # Pods of 2 GPUs: one fits in the 3 free GPUs of the first cell, four in the second.
    assert guaranteed_gpu_machines(guarantees, gpus_per_pod={"a": 2}) == {"a": 5, "b": 0, "c": 0}


# ------------------------------------------------------------------ virtual clusters


def test_a_job_never_takes_another_vcs_idle_gpu_and_starts_on_cpu_instead():
    # VC a's quota is in use (0 machines), VC b's GPUs are idle (2 machines).
    job = waiting("j", "u1", cpu=30, gpu=5, pool="a")
    without_pools = decide(now=0, waiting=[job], running=[], free_nodes=NODES)
    assert [(s.key, s.kind) for s in without_pools.starts] == [("j", "gpu")]  # any VC's idle GPU
    decision = decide(now=0, waiting=[job], running=[], free_nodes=NODES, gpu_pools={"a": 0, "b": 2})
    assert [(s.key, s.kind, s.pool) for s in decision.starts] == [("j", "cpu", None)]
    assert decision.idle_machines.get("gpu@b") == 2 and "gpu" not in decision.idle_machines


def test_a_job_of_a_vc_with_free_quota_starts_on_its_gpus():
    job = waiting("j", "u1", cpu=30, gpu=5, pool="b")
    decision = decide(now=0, waiting=[job], running=[], free_nodes=NODES, gpu_pools={"a": 0, "b": 2})
    (start,) = decision.starts
    assert (start.kind, start.pool, start.machine) == ("gpu", "b", "vc/b/gpu-0")


def test_a_gpu_only_job_of_a_full_vc_waits_for_its_vc_and_one_outside_every_vc_cannot_run():
    full = waiting("full", "u1", cpu=None, gpu=5, pool="a")
    stray = waiting("stray", "u2", cpu=None, gpu=5, pool=None)  # no VC: HiveD refuses its pods
    decision = decide(now=0, waiting=[full, stray], running=[], free_nodes=NODES, gpu_pools={"a": 0, "b": 2})
    assert decision.starts == ()
    assert decision.waiting_for_pool == ("full",) and decision.unplaceable == ("stray",)


def test_a_running_job_holds_a_machine_of_its_own_vc_and_the_waiting_job_queues_behind_it():
    running = [RunningJob(key="r", user="u2", kind="gpu", started=0, seconds={"gpu": 50, "cpu": 400},
                          demand={"cpu": CPU, "gpu": GPU}, pool="a")]
    # VC a has one GPU machine in all (its running Job's included); b has two idle.
    job = waiting("j", "u1", cpu=1000, gpu=10, pool="a")
    decision = decide(now=10, waiting=[job], running=running, free_nodes=NODES, gpu_pools={"a": 1, "b": 2})
    assert decision.starts == ()
    (queued,) = decision.queue
    assert (queued.kind, queued.pool, queued.position) == ("gpu", "a", 1)
    assert queued.expected_start_seconds == pytest.approx(40)  # r ends at 50
    assert decision.busy_machines == {"gpu@a": 1} and decision.idle_machines.get("gpu@a", 0) == 0


def test_fairness_weighs_a_vcs_gpu_as_a_gpu():
    running = [RunningJob(key="r", user="u1", kind="gpu", started=0, seconds={"gpu": 50, "cpu": 400},
                          demand={"cpu": CPU, "gpu": GPU}, pool="a")]
    pooled = decide(now=10, waiting=[waiting("j", "u2", pool="a")], running=running, free_nodes=NODES, gpu_pools={"a": 1, "b": 0})
    plain = decide(now=10, waiting=[waiting("j", "u2")], running=[RunningJob(
        key="r", user="u1", kind="gpu", started=0, seconds={"gpu": 50, "cpu": 400}, demand={"cpu": CPU, "gpu": GPU})],
        free_nodes=NODES)
    assert pooled.progress["u1"] == pytest.approx(plain.progress["u1"]) and pooled.progress["u1"] > 0


def test_idle_machines_take_a_running_jobs_pods_from_its_vcs_pool():
    running = [RunningJob(key="r", user="u", kind="gpu", started=0, seconds={"gpu": 5}, pool="b", pods=2)]
    machines = IdleMachines(free_nodes=NODES, running=running, cpu_slot=CPU, reserved_cpu_per_gpu=1, gpu_pools={"a": 1, "b": 3}).laid_out()
    assert [m.name for m in machines if m.kind.startswith("gpu")] == ["vc/a/gpu-0", "vc/b/gpu-0"]


# ------------------------------------------------------------------ gangs


def test_a_gang_starts_on_as_many_idle_machines_as_it_has_pods():
    gang = waiting("g", "u1", cpu=300, gpu=20, pods=2)
    decision = decide(now=0, waiting=[gang], running=[], free_nodes=NODES)
    (start,) = decision.starts
    assert start.kind == "gpu" and len(start.machines) == 2 and len(set(start.machines)) == 2
    assert start.seconds == 20
    # Its fairness counts both pods: twice one pod's dominant share (1 GPU of 4).
    assert decision.progress["u1"] == pytest.approx(2 * 0.25)


def test_a_gang_holds_idle_machines_until_enough_free_and_single_jobs_do_not_take_them():
    node = [NodeResources(name="n1", cpu=4, gpu=2, memory=128)]  # two GPUs, no CPU slot of 4 cores beside them
    running = [RunningJob(key="r", user="u2", kind="gpu", started=0, seconds={"gpu": 100}, demand={"gpu": GPU})]
    gang = waiting("g", "u1", cpu=None, gpu=20, pods=2, arrival=0)
    small = waiting("s", "u3", cpu=None, gpu=5, arrival=1)  # would fit on the idle GPU now
    decision = decide(now=10, waiting=[gang, small], running=running, free_nodes=node)
    assert decision.starts == ()  # the idle GPU is held for the gang
    queued = {q.key: q for q in decision.queue}
    assert queued["g"].expected_start_seconds == pytest.approx(90)  # when r's GPU frees
    assert queued["s"].expected_start_seconds == pytest.approx(110)  # after the gang
    assert [queued["g"].position, queued["s"].position] == [1, 2]


def test_a_gang_takes_the_kind_that_finishes_it_first_and_needs_enough_machines_of_it():
    three_gpus = [NodeResources(name="n1", cpu=40, gpu=3, memory=128)]
    # Four pods: no kind but cpu has four machines (9 slots of 4 cores beside 3 GPUs).
    wide = waiting("wide", "u1", cpu=300, gpu=20, pods=4)
    (start,) = decide(now=0, waiting=[wide], running=[], free_nodes=three_gpus).starts
    assert start.kind == "cpu" and len(start.machines) == 4
    too_wide = waiting("x", "u1", cpu=None, gpu=20, pods=4)
    assert decide(now=0, waiting=[too_wide], running=[], free_nodes=three_gpus).unplaceable == ("x",)


def test_gangs_go_oldest_first_and_a_later_gang_queues_behind_the_machines_an_older_one_holds():
    node = [NodeResources(name="n1", cpu=2, gpu=2, memory=128)]
    first = waiting("first", "u1", cpu=None, gpu=30, pods=2, arrival=0)
    second = waiting("second", "u2", cpu=None, gpu=10, pods=2, arrival=1)
    decision = decide(now=5, waiting=[second, first], running=[], free_nodes=node)
    assert [s.key for s in decision.starts] == ["first"]
    (queued,) = decision.queue
    assert queued.key == "second" and queued.expected_start_seconds == pytest.approx(30)


def test_a_running_gang_holds_all_its_machines_until_its_end():
    node = [NodeResources(name="n1", cpu=3, gpu=3, memory=128)]
    running = [RunningJob(key="g", user="u1", kind="gpu", started=0, seconds={"gpu": 100}, pods=2)]
    decision = decide(now=10, waiting=[waiting("s", "u2", cpu=None, gpu=5)], running=running, free_nodes=node)
    assert decision.busy_machines == {"gpu": 2} and decision.idle_machines == {"gpu": 1}
    assert [s.key for s in decision.starts] == ["s"]


def test_a_gang_in_a_vc_uses_that_vcs_machines_only():
    gang = waiting("g", "u1", cpu=1000, gpu=20, pods=2, pool="a")
    decision = decide(now=0, waiting=[gang], running=[], free_nodes=NODES, gpu_pools={"a": 2, "b": 4})
    (start,) = decision.starts
    assert start.pool == "a" and start.machines == ("vc/a/gpu-0", "vc/a/gpu-1")
