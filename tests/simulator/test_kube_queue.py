"""kube-scheduler's scheduling queue as the simulator models it (``kube_queue.py``), and the
``kube`` policy that drives the served engine through it."""

from __future__ import annotations

import pytest

from scheduler.preemption import FitGppSettings
from scheduler.simulator.kube_queue import QueuedPod, SchedulingQueue, backoff_seconds
from scheduler.simulator.fitgpp.policies import KubeSchedulerPolicy, SimulationView
from scheduler.simulator.policy_registry import PolicyOptions
from scheduler.simulator.fitgpp.simulation import Simulation
from scheduler.simulator.fitgpp.state import BEST_EFFORT_PRIORITY, RESUMED_PRIORITY, TRIAL_PRIORITY, SimJob
from scheduler.simulator.cluster import ClusterSpec

from sim_helpers import SMALL_NODE, job, simulate


def _jobs(*specs: tuple[str, bool]) -> list[SimJob]:
    return [SimJob(i, job(name, trial=trial)) for i, (name, trial) in enumerate(specs)]


def _taken(*jobs: SimJob) -> tuple[SchedulingQueue[SimJob], dict[str, QueuedPod[SimJob]]]:
    """A queue that was given ``jobs`` at 0 and handed them out, and those pods by job id."""
    queue: SchedulingQueue[SimJob] = SchedulingQueue()
    for job_ in jobs:
        queue.add(job_, key=job_.index, now=0.0)
    return queue, {pod.item.uid: pod for pod in queue.take(0.0)}


def _names(queue: SchedulingQueue[SimJob], now: float) -> list[str]:
    return [pod.item.uid for pod in queue.take(now)]


def test_backoff_doubles_from_one_second_up_to_ten() -> None:
    assert [backoff_seconds(n) for n in range(7)] == [0.0, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff_seconds(10_000) == 10.0  # no overflow however often a pod failed


def test_priority_first_then_the_time_a_pod_was_queued() -> None:
    be_early, te_late, be_late = _jobs(("be-early", False), ("te-late", True), ("be-late", False))
    queue: SchedulingQueue[SimJob] = SchedulingQueue()
    queue.add(be_early, key=be_early.index, now=0.0)
    queue.add(be_late, key=be_late.index, now=5.0)
    queue.add(te_late, key=te_late.index, now=5.0)
    assert _names(queue, 5.0) == ["te-late", "be-early", "be-late"]
    assert len(queue) == 0  # taken means out of the queue until it fails or is added again


def test_a_failed_pod_waits_for_an_event_and_goes_behind_those_queued_before_its_failure() -> None:
    first, second, third = _jobs(("first", False), ("second", False), ("third", False))
    queue: SchedulingQueue[SimJob] = SchedulingQueue()
    queue.add(first, key=first.index, now=0.0)
    queue.add(second, key=second.index, now=1.0)
    pods = queue.take(2.0)
    for pod in pods:
        queue.failed(pod, now=2.0, by_extender=False, events=0)
    queue.add(third, key=third.index, now=3.0)
    assert _names(queue, 3.0) == ["third"]  # the failed ones are parked
    assert queue.unschedulable == 2
    queue.pod_deleted()
    # 20 s later their backoff (1 s) is over: priority, then the failure time (kept in order).
    assert _names(queue, 20.0) == ["first", "second"]


def test_backing_off_pods_go_after_ready_ones_ordered_by_when_their_backoff_ends() -> None:
    te, be_once, be_thrice, be_new = _jobs(("te", True), ("be-once", False), ("be-thrice", False), ("be-new", False))
    queue, pods = _taken(te, be_once, be_thrice)
    queue.failed(pods["te"], now=10.0, by_extender=False, events=0)
    queue.failed(pods["be-once"], now=10.0, by_extender=False, events=0)
    for _ in range(3):
        queue.failed(pods["be-thrice"], now=10.0, by_extender=False, events=0)
    queue.pod_deleted()
    queue.add(be_new, key=be_new.index, now=10.5)
    # At 10.5 every failed pod still backs off: the new pod first (activeQ), then backoffQ by
    # the end of each backoff (11 s for one failure, 14 s for three), then priority.
    assert _names(queue, 10.5) == ["be-new", "te", "be-once", "be-thrice"]


def test_a_backoff_ending_within_the_current_second_still_counts() -> None:
    (pod_job,) = _jobs(("p", False))
    queue: SchedulingQueue[SimJob] = SchedulingQueue()
    queue.add(pod_job, key=pod_job.index, now=0.0)
    (pod,) = queue.take(0.0)
    queue.failed(pod, now=10.2, by_extender=False, events=0)
    assert pod.backoff_ends() == 11.0  # 11.2 cut to the whole second
    assert pod.backing_off(11.9) and not pod.backing_off(12.0)


def test_an_assigned_pod_event_moves_only_the_pods_the_extender_rejected_before_it() -> None:
    queue, pods = _taken(*_jobs(("by-extender", False), ("by-fit", False), ("later", False)))
    queue.failed(pods["by-extender"], now=0.0, by_extender=True, events=0)
    queue.failed(pods["by-fit"], now=0.0, by_extender=False, events=0)
    queue.failed(pods["later"], now=0.0, by_extender=True, events=1)  # after event 1
    assert queue.assigned_pod_changed(1)  # a bind, or a victim marked for deletion
    assert _names(queue, 0.0) == ["by-extender"]
    assert not queue.assigned_pod_changed(1)  # nothing left that event 1 concerns
    queue.pod_deleted()  # a deletion moves every parked pod
    assert sorted(_names(queue, 30.0)) == ["by-fit", "later"]


def test_the_periodic_flush_moves_pods_parked_longer_than_five_minutes() -> None:
    assert SchedulingQueue().next_flush() is None
    queue, pods = _taken(*_jobs(("early", False), ("late", False)))
    assert queue.next_flush() is None  # handed out, none parked
    queue.failed(pods["early"], now=0.0, by_extender=False, events=0)
    queue.failed(pods["late"], now=40.0, by_extender=False, events=0)
    # Parked longer than 300 s, at the flush every 30 s: 330 for the pod parked at 0.
    assert queue.next_flush() == 330.0
    queue.flush_leftover(300.0)
    assert queue.unschedulable == 2
    queue.flush_leftover(330.0)
    assert _names(queue, 330.0) == ["early"]
    assert queue.next_flush() == 360.0  # parked at 40: due after 340, the flush at 360


# ---------------------------------------------------------------------- the kube policy


def test_no_head_of_line_blocking_a_pod_that_fits_starts_past_one_that_does_not() -> None:
    jobs = [
        job("a", at=0, gpus=6, duration=100),
        job("big", at=1, gpus=4, duration=100),  # 2 GPUs free: waits
        job("small", at=2, gpus=2, duration=10),
    ]
    kube, _ = simulate(jobs, policy="kube")
    assert kube.first_start.tolist() == [0.0, 100.0, 2.0]
    fifo, _ = simulate(jobs, policy="fifo")  # the paper's FIFO: small waits behind big
    assert fifo.first_start.tolist() == [0.0, 100.0, 100.0]


def test_trial_pods_go_first_at_one_instant_whatever_their_arrival() -> None:
    jobs = [
        job("a", at=0, gpus=8, duration=100),
        job("be", at=1, gpus=8, duration=10),
        job("te", at=2, gpus=8, duration=10, trial=True),
    ]
    # P = 0: te cannot preempt; both wait for a, and te goes first when a ends.
    result, _ = simulate(jobs, policy="kube", settings=FitGppSettings(max_preemptions=0))
    assert result.first_start.tolist() == [0.0, 110.0, 100.0]


def test_a_trial_pod_preempts_through_the_engine_and_the_resumed_pod_goes_before_best_effort() -> None:
    jobs = [
        job("b1", at=0, gpus=8, duration=1000, grace=10),
        job("b2", at=105, gpus=8, duration=100),
        job("t", at=100, gpus=4, duration=50, trial=True),
    ]
    result, sim = simulate(jobs, policy="kube")
    b1, b2, t = sim.jobs
    assert result.preemptions.tolist() == [1, 0, 0] and result.rules == {"fitgpp": 1}
    assert t.first_start == 110.0  # after b1's grace period, on the node it was nominated to
    assert b1.pod.priority == RESUMED_PRIORITY and b2.pod.priority == BEST_EFFORT_PRIORITY
    assert t.pod.priority == TRIAL_PRIORITY
    # b1's next pod (resumed) and b2 both wait for t; b1 goes first though b2 was queued earlier.
    assert b1.finished_at == 160.0 + 900.0
    assert b2.first_start == b1.finished_at


def test_a_run_under_kube_ends_with_nothing_queued_and_p_respected() -> None:
    jobs = [job(f"b{i}", at=i, gpus=3, duration=300, grace=20) for i in range(6)]
    jobs += [job(f"t{i}", at=50 + 40 * i, gpus=2, duration=30, trial=True) for i in range(6)]
    result, sim = simulate(jobs, policy="kube", nodes=2)
    assert len(sim.policy.inner.queue) == 0  # type: ignore[attr-defined]
    assert (result.preemptions <= 1).all()
    assert (result.finish > 0).all()


@pytest.mark.parametrize("limit", [1, None])
def test_kube_and_fitgpp_preempt_the_same_victim_for_a_lone_trial_job(limit: int | None) -> None:
    jobs = [
        job("long", at=0, gpus=4, duration=1000, grace=600),
        job("cheap", at=0, gpus=4, duration=1000, grace=5),
        job("t", at=100, gpus=4, duration=60, trial=True),
    ]
    settings = FitGppSettings(max_preemptions=limit)
    kube, _ = simulate(jobs, policy="kube", settings=settings)
    fitgpp, _ = simulate(jobs, policy="fitgpp", settings=settings)
    assert kube.preemptions.tolist() == fitgpp.preemptions.tolist() == [0, 1, 0]
    assert kube.first_start.tolist() == fitgpp.first_start.tolist()


def test_a_bind_that_ends_a_resume_hold_lets_the_pod_it_turned_away_start_at_once() -> None:
    """Found by comparing runs with and without the move on binds (random traces on three
    nodes). At 102 the trial job j5 ends on node-01, which FitGpp's resume hold keeps for j8's
    next pod (j8 was preempted there). j0 (queued since 95) is tried first, as j8-run1 is still
    backing off, and the engine turns it away from the held node; then j8-run1 binds on
    node-00, which ends the hold. The extender's rejection waits for any event, the bind
    included: j0 is tried again and starts on node-01 at 102, not at the next completion."""
    spec = [  # id, arrival, class, GPUs, duration, grace period
        ("j0", 95, False, 8, 100, 5), ("j1", 75, False, 1, 300, 5), ("j2", 2, False, 2, 100, 20),
        ("j3", 67, False, 4, 100, 20), ("j4", 71, False, 4, 30, 0), ("j5", 72, True, 8, 30, 5),
        ("j6", 67, False, 4, 100, 0), ("j7", 58, False, 1, 60, 20), ("j8", 46, False, 6, 30, 0),
        ("j9", 183, False, 6, 100, 0), ("j10", 8, True, 4, 60, 0), ("j11", 123, False, 2, 100, 5),
        ("j12", 20, True, 1, 60, 20), ("j13", 160, False, 6, 30, 5),
    ]
    jobs = [job(name, at=at, trial=trial, gpus=gpus, duration=duration, grace=grace) for name, at, trial, gpus, duration, grace in spec]
    _, sim = simulate(jobs, policy="kube", nodes=3)
    j8 = sim.jobs[8]
    assert j8.preemptions == 1 and j8.intervals == [30.0]  # preempted at 72 for j5, resumed at 102
    assert sim.jobs[0].first_start == 102.0


def test_parked_pods_get_the_periodic_flush_until_a_day_of_flushes_placed_nothing() -> None:
    """b cannot fit beside a and nothing happens until a ends: kube-scheduler still retries it
    at its 5-minute flush (330 s: parked at 10, due after 310, the flush every 30 s), then every
    330 s. Flushes that place nothing, with nothing else happening, for a day are the last (time
    alone changes the engine only as its holds lapse), so a run whose pods can never fit still
    ends (or stalls) rather than flushing for ever."""
    passes: list[float] = []

    class Recording(KubeSchedulerPolicy):
        def schedule(self, sim: SimulationView) -> None:
            passes.append(sim.now)
            super().schedule(sim)

    long = 2 * 86_400.0
    jobs = [job("a", at=0, gpus=8, duration=long), job("b", at=10, gpus=1, duration=10)]
    settings = FitGppSettings()
    sim = Simulation(cluster=ClusterSpec(nodes=1, node=SMALL_NODE), jobs=jobs, policy=Recording(PolicyOptions(settings=settings)), settings=settings)
    result = sim.run()
    flushes = passes[2:-2]
    assert passes[:2] == [0.0, 10.0] and passes[-2:] == [long, long + 10]
    assert flushes[:3] == [330.0, 660.0, 990.0] and all(later - earlier == 330.0 for earlier, later in zip(flushes, flushes[1:]))
    assert 330.0 + 86_400.0 <= flushes[-1] < 330.0 + 86_400.0 + 330.0  # a day of futile flushes, then none
    assert result.first_start.tolist() == [0.0, long]


def test_a_nominated_trial_pod_takes_room_elsewhere_before_its_victims_are_gone() -> None:
    """kube-scheduler keeps a preemptor in its queue, nominated, and retries it on every pod
    deletion: its nominated node first, then every node. te-new preempts be-a (grace period
    90 s) at 1; te-b ends at 10 on the other node, and te-new starts there at once. be-a still
    checkpoints and resumes; under the paper's FIFO policy te-new waits for its victim."""
    jobs = [
        job("be-a", at=0, gpus=8, duration=1000, grace=90),
        job("te-b", at=0, gpus=8, duration=10, trial=True),
        job("te-new", at=1, gpus=8, duration=100, trial=True),
    ]
    kube, sim = simulate(jobs, policy="kube", nodes=2)
    assert kube.first_start.tolist() == [0.0, 0.0, 10.0]
    assert kube.preemptions.tolist() == [1, 0, 0]
    assert sim.jobs[0].intervals == [90.0]  # signalled at 1, resumed at 91 when its grace period ended
    fitgpp, _ = simulate(jobs, policy="fitgpp", nodes=2)
    assert fitgpp.first_start.tolist() == [0.0, 0.0, 91.0]
