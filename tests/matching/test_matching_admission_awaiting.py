"""A Job its user unsuspended by hand whose pods are not bound yet (user26's session): it holds no
machine, so AlloX's busy machines are never more than the GPUs it has, and its pending pod takes
the first machine of its kind to free, ahead of every waiting Job (kube-scheduler binds it as soon
as one frees), its estimate counted from then, not from when it was unsuspended."""

from functools import partial

from scheduler.matching.admission import RunningJob, WaitingJob, claimed_first
from scheduler.matching.admission import decide as decide_with
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand

CPU, GPU = Demand(cpu=4, memory=8), Demand(gpu=1, cpu=1)
SECONDS = {"gpu": 120.0, "cpu": 600.0}
NOW = 1000.0
decide = partial(decide_with, capacity=Capacity(cpu=6, gpu=2, memory=64))
# One node of 2 GPUs, both held by running Jobs (their pods count free), and no CPU slot beside.
NODE = NodeResources(name="n1", cpu=2, gpu=2, memory=64)


def running(key: str, started: float, *, awaiting: bool = False) -> RunningJob:
    return RunningJob(key=key, user="u", kind="gpu", started=started, seconds=SECONDS, demand={"cpu": CPU, "gpu": GPU}, awaiting=awaiting)


def waiting(key: str, arrival: float) -> WaitingJob:
    return WaitingJob(key=key, user="u", arrival=arrival, seconds=SECONDS, demand={"cpu": CPU, "gpu": GPU})


def test_a_hand_started_job_whose_pod_waits_holds_no_machine_and_goes_first_on_the_first_to_free() -> None:
    """h-1, h-2 run since 30 s ago on the 2 GPUs (they free in 90 s); h-5 was unsuspended by hand
    10 s ago, its pod Pending. Before: 3 busy GPUs on 2, and h-3 and h-4 told they start when
    h-1 and h-2 free, one of those GPUs being h-5's. Now h-5 takes the first GPU to free: h-3
    starts on the other, h-4 after h-3 or h-5 (whichever frees first)."""
    decision = decide(now=NOW, waiting=[waiting("h-3", 1), waiting("h-4", 2)],
                      running=[running("h-1", NOW - 30), running("h-2", NOW - 30), running("h-5", NOW - 10, awaiting=True)],
                      free_nodes=[NODE], omega_grid_seconds=0)
    assert decision.busy_machines == {"gpu": 2}
    assert decision.starts == ()
    queue = {queued.key: (queued.kind, queued.position, queued.expected_start_seconds) for queued in decision.queue}
    # h-1 and h-2 free at +90: h-5 takes one (to +210), h-3 the other (to +210); h-4 at +210.
    assert queue == {"h-3": ("gpu", 1, 90.0), "h-4": ("gpu", 2, 210.0)}


def test_its_estimate_runs_from_the_machine_it_takes_not_from_its_unsuspend() -> None:
    """Unsuspended 200 s ago (past its 120 s estimate, its pod never bound): it has no phantom
    end. Before, its machine was counted as freeing any moment and h-3 was told it starts now."""
    decision = decide(now=NOW, waiting=[waiting("h-3", 1)],
                      running=[running("h-1", NOW - 30), running("h-2", NOW - 30), running("h-5", NOW - 200, awaiting=True)],
                      free_nodes=[NODE], omega_grid_seconds=0)
    assert decision.busy_machines == {"gpu": 2}
    assert [(q.key, q.expected_start_seconds) for q in decision.queue] == [("h-3", 90.0)]


def test_with_a_gpu_idle_it_takes_that_one() -> None:
    """One GPU idle (its pod not bound yet): no waiting Job starts on it."""
    decision = decide(now=NOW, waiting=[waiting("h-3", 1)],
                      running=[running("h-1", NOW - 30), running("h-5", NOW - 5, awaiting=True)],
                      free_nodes=[NODE], omega_grid_seconds=0)
    assert decision.starts == ()
    assert decision.idle_machines.get("gpu", 0) == 0 and decision.busy_machines == {"gpu": 2}
    assert [(q.key, q.expected_start_seconds) for q in decision.queue] == [("h-3", 90.0)]


def test_claimed_first_takes_an_idle_machine_then_the_first_to_free() -> None:
    assert claimed_first([90.0, 30.0], [120.0]) == (0, [90.0, 150.0])
    assert claimed_first([90.0], [120.0], idle=1) == (0, [90.0, 120.0])
    assert claimed_first([-5.0, 40.0], [120.0, 120.0]) == (0, [120.0, 160.0])



def test_a_job_taking_an_idle_machine_is_listed() -> None:
    """Its pod unbound beside an idle GPU: the caller judges how long (a pod that fits no node
    must not keep a GPU from the queue for ever)."""
    decision = decide(now=NOW, waiting=[waiting("h-3", 1)], running=[running("h-1", NOW - 30), running("h-5", NOW - 900, awaiting=True)],
                      free_nodes=[NODE], omega_grid_seconds=0)
    assert decision.awaiting_on_idle == ("h-5",)
    decision = decide(now=NOW, waiting=[waiting("h-3", 1)],
                      running=[running("h-1", NOW - 30), running("h-2", NOW - 30), running("h-5", NOW - 900, awaiting=True)],
                      free_nodes=[NODE], omega_grid_seconds=0)
    assert decision.awaiting_on_idle == ()
