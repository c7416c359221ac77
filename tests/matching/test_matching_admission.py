"""AlloX admission over live state: machines from free capacity and running Jobs, Algorithm 2's
starts, and the queue positions and expected starts of the Jobs left waiting."""

import pytest

from functools import partial

from scheduler.matching.admission import RunningJob, WaitingJob, cpu_slot_for
from scheduler.matching.admission import decide as decide_with
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand, Job, Machine
from scheduler.matching.solve import schedule

CPU, GPU = Demand(cpu=4, memory=8), Demand(gpu=1, cpu=1)
# What fairness divides demands by (a cluster of 16 cores, 2 GPUs, 64 GiB), where the test does not say.
decide = partial(decide_with, capacity=Capacity(cpu=16, gpu=2, memory=64))


def running_job(key, user, kind, started, seconds, *, other=None):
    """A running Job with its estimate on ``kind`` (and ``other``: {kind: seconds} it could also run on)."""
    return RunningJob(key=key, user=user, kind=kind, started=started, seconds={kind: seconds, **(other or {})},
                      demand={"cpu": CPU, "gpu": GPU})


def waiting(key, user, arrival, cpu, gpu):
    return WaitingJob(key=key, user=user, arrival=arrival, seconds={"cpu": cpu, "gpu": gpu}, demand={"cpu": CPU, "gpu": GPU})


JOBS = [waiting("a", "u1", 0, 100, 10), waiting("b", "u2", 1, 50, 40), waiting("c", "u1", 2, 300, 20), waiting("d", "u2", 3, 60, 30)]
NODE = NodeResources(name="n1", cpu=5, gpu=1, memory=64)  # one GPU and one 4-core slot beside its core


def test_starts_and_queue_follow_the_optimal_schedule_of_the_same_instance():
    decision = decide(now=10, waiting=JOBS, running=[], free_nodes=[NODE], omega_grid_seconds=0)  # exact, as offline
    machines = [Machine(name="n1/gpu-0", kind="gpu"), Machine(name="n1/cpu-0", kind="cpu")]
    offline = schedule(jobs=[Job(name=j.key, user=j.user, arrival=j.arrival, processing_time=j.seconds) for j in JOBS],
                       machines=machines, now=10)
    first_on = {}
    for assignment in sorted(offline, key=lambda a: a.start):
        first_on.setdefault(assignment.machine.name, assignment.job.name)
    assert {(s.machine, s.key) for s in decision.starts} == set(first_on.items())
    # Every job either starts or is queued, once.
    keys = [s.key for s in decision.starts] + [q.key for q in decision.queue]
    assert sorted(keys) == ["a", "b", "c", "d"]
    # The queue is the rest of that optimal plan: same kinds and start times.
    offline_rest = {a.job.name: a for a in offline if a.job.name not in first_on.values()}
    for queued in decision.queue:
        assert queued.kind == offline_rest[queued.key].kind
        assert queued.expected_start_seconds == pytest.approx(offline_rest[queued.key].start - 10)
    positions = {}
    for queued in decision.queue:
        positions.setdefault(queued.kind, []).append(queued.position)
    assert all(p == list(range(1, len(p) + 1)) for p in positions.values())


def test_a_running_job_keeps_its_machine_until_its_estimate_ends():
    running = [running_job("r", "u3", "gpu", 0, 100)]
    # Free capacity leaves running interchangeable Jobs in: r's GPU is the node's one GPU.
    node = NodeResources(name="n1", cpu=6, gpu=1, memory=64)
    decision = decide(now=10, waiting=[waiting("a", "u1", 0, 1000, 10)], running=running, free_nodes=[node], omega_grid_seconds=0)
    assert decision.busy_machines == {"gpu": 1} and decision.idle_machines == {"cpu": 1}
    # Waiting 90 s for the GPU (done at 110) beats 1000 s on the idle CPU slot.
    assert decision.starts == ()
    (queued,) = decision.queue
    assert (queued.kind, queued.position, queued.expected_start_seconds) == ("gpu", 1, pytest.approx(90))
    # An overdue running Job is taken to end now.
    late = [running_job("r", "u3", "gpu", 0, 5)]
    assert decide(now=10, waiting=[waiting("a", "u1", 0, 1000, 10)], running=late, free_nodes=[node]).queue[0].expected_start_seconds == 0


def test_a_job_whose_kinds_the_cluster_lacks_is_unplaceable():
    gpu_only = WaitingJob(key="g", user="u", arrival=0, seconds={"gpu": 10}, demand={"gpu": GPU})
    decision = decide(now=0, waiting=[gpu_only], running=[], free_nodes=[NodeResources(name="c", cpu=8, gpu=0, memory=32)])
    assert decision.unplaceable == ("g",) and decision.starts == () and decision.queue == ()


def test_small_alpha_serves_the_user_with_the_least_progress_first():
    running = [running_job("r1", "u1", "gpu", 0, 1000)]
    jobs = [waiting("x1", "u1", 0, 100, 5), waiting("y1", "u2", 0, 100, 50)]
    two_gpus = NodeResources(name="n", cpu=2, gpu=2, memory=64)  # r1 holds one GPU: one idle, no CPU slot
    fair = decide(now=1, waiting=jobs, running=running, free_nodes=[two_gpus], alpha=0.1)
    assert [s.key for s in fair.starts] == ["y1"]  # u1 already holds a GPU
    fast = decide(now=1, waiting=jobs, running=running, free_nodes=[two_gpus], alpha=1.0)
    assert [s.key for s in fast.starts] == ["x1"]  # pure performance: the shorter job


def test_cpu_slots_are_sized_for_the_largest_queued_cpu_configuration():
    jobs = [WaitingJob(key="k", user="u", arrival=0, seconds={"cpu": 1}, demand={"cpu": Demand(cpu=16, memory=32)}),
            WaitingJob(key="l", user="u", arrival=0, seconds={"cpu": 1, "gpu": 1}, demand={"cpu": Demand(cpu=4, memory=8)})]
    assert cpu_slot_for(jobs) == Demand(cpu=16, memory=32)
    decision = decide(now=0, waiting=jobs, running=[], free_nodes=[NodeResources(name="n", cpu=40, gpu=0, memory=512)])
    assert decision.idle_machines == {"cpu": 2}


def test_allox_plus_is_selectable():
    decision = decide(now=10, waiting=JOBS, running=[], free_nodes=[NODE], policy="allox+")
    assert len(decision.starts) == 2 and len(decision.queue) == 2


def test_busy_machines_free_on_a_grid_so_that_they_fold_into_few_classes():
    from scheduler.matching.admission import _on_grid

    for delay in (0.5, 59, 60, 61, 599, 601, 3000, 36000):
        rounded = _on_grid(delay, step=60, ratio=1.25)
        assert delay <= rounded <= max(delay + 60, delay * 1.25) + 1e-9
    assert len({_on_grid(d, step=60, ratio=1.25) for d in range(1, 36000, 7)}) < 40
    node = NodeResources(name="n1", cpu=6, gpu=1, memory=64)
    running = [running_job("r", "u3", "gpu", 0, 100)]
    (queued,) = decide(now=10, waiting=[waiting("a", "u1", 0, 1000, 10)], running=running, free_nodes=[node]).queue
    assert queued.expected_start_seconds == 120  # 90 s rounded up to the minute grid


def test_a_trial_job_starts_where_it_finishes_first():
    from scheduler.matching.admission import choose_for_trial

    seconds = {"cpu": 14 * 60, "gpu": 4 * 60}
    # A GPU is idle: there.
    assert choose_for_trial(seconds=seconds, idle={"gpu": 1, "cpu": 1}, gpu_free_in=None, preemption_seconds=None).kind == "gpu"
    # No GPU: FitGpp's victim checkpoints for 15 min, so the GPU run would end in 19 min: CPU it is.
    choice = choose_for_trial(seconds=seconds, idle={"cpu": 1}, gpu_free_in=None, preemption_seconds=15 * 60)
    assert choice.kind == "cpu"
    assert choice.reason == "done in ~14 min; on gpu it would be done in ~19 min, after a best-effort Job checkpoints"
    # A victim that checkpoints in a minute: the GPU run ends in 5 min; preempt.
    choice = choose_for_trial(seconds=seconds, idle={"cpu": 1}, gpu_free_in=None, preemption_seconds=60)
    assert choice.kind == "gpu" and choice.reason.endswith("; on cpu it would be done in ~14 min")
    # A busy GPU freeing sooner than any checkpoint counts too.
    assert choose_for_trial(seconds=seconds, idle={"cpu": 1}, gpu_free_in=120, preemption_seconds=3600).kind == "gpu"
    # No CPU slot free: the GPU configuration, whatever the wait.
    assert choose_for_trial(seconds=seconds, idle={}, gpu_free_in=None, preemption_seconds=3600).kind == "gpu"
    # Nothing to preempt and no GPU will free: the CPU.
    assert choose_for_trial(seconds=seconds, idle={"cpu": 1}, gpu_free_in=None, preemption_seconds=None).kind == "cpu"
    assert choose_for_trial(seconds={"cpu": 10}, idle={}, gpu_free_in=None, preemption_seconds=None) is None


def test_progress_is_the_dominant_share_of_the_faster_configuration_discounted_on_the_slower_kind():
    # §3.3.2 with capacity (16 cores, 2 GPUs, 64 GiB): a GPU configuration's dominant share is
    # 1/2 (one of two GPUs), a CPU configuration's 1/4 (4 of 16 cores). User a runs a Job on
    # the GPU, its faster kind: 0.5. User b runs a Job ten times faster on a GPU on a CPU slot:
    # the GPU share discounted by 100/1000, 0.05. Counting each running Job at one machine of
    # its kind (1/2 GPUs, 1/1 CPU slots) would put a behind b instead.
    running = [running_job("ra", "a", "gpu", 0, 1000, other={"cpu": 1100}), running_job("rb", "b", "cpu", 0, 1000, other={"gpu": 100})]
    node = NodeResources(name="n", cpu=6, gpu=2, memory=64)  # 2 GPUs (a's and an idle one), one 4-core slot (b's)
    jobs = [waiting("a2", "a", 0, 500, 50), waiting("b2", "b", 0, 500, 50)]
    decision = decide(now=1, waiting=jobs, running=running, free_nodes=[node], alpha=0.1)
    assert decision.idle_machines == {"gpu": 1}
    assert [(s.key, s.kind) for s in decision.starts] == [("b2", "gpu")]  # b has least progress
    assert decision.progress == pytest.approx({"a": 0.5, "b": 0.05 + 0.5})
    assert decision.progress_spread == pytest.approx(0.025)
    # The capacity is what shares are measured against: with 8 GPUs a GPU Job is 1/8 of them.
    wider = decide_with(now=1, waiting=jobs, running=running, free_nodes=[node], alpha=0.1, capacity=Capacity(cpu=16, gpu=8, memory=64))
    assert wider.progress == pytest.approx({"a": 0.125, "b": 0.0125 + 0.125})


def test_a_running_job_needs_the_estimate_of_its_own_kind():
    with pytest.raises(ValueError, match="no estimate for the kind it runs on"):
        RunningJob(key="r", user="u", kind="gpu", started=0, seconds={"cpu": 10})


def test_queued_rows_made_without_the_dataclass_init_are_equal_to_its_own() -> None:
    from scheduler.matching.admission import Queued, _queued

    for row in (("ns/a", "gpu", 1, 0.0, None), ("ns/b", "cpu", 12, 90.5, "vision")):
        made, plain = _queued(*row), Queued(*row)
        assert made == plain and hash(made) == hash(plain) and repr(made) == repr(plain)
