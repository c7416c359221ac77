"""What decide keeps between a live controller's passes (reuse.py) changes no decision: a queue
that gains, loses and changes Jobs, Jobs that start and end, capacity, the clock and the virtual
clusters moving between passes, decided with the kept state and from scratch, gives the same
decision every pass."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Iterator

import pytest

from scheduler.matching.admission import DecideReuse, RunningJob, WaitingJob, decide
from scheduler.matching.capacity import NodeResources
from scheduler.matching.errors import InvalidInstance
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand
from scheduler.matching.reuse import Reuse

DEMAND = {"cpu": Demand(cpu=8, memory=8), "gpu": Demand(gpu=1, cpu=1, memory=4)}


def test_an_entry_is_found_for_the_same_object_in_the_same_context_only() -> None:
    reuse: Reuse[str] = Reuse()
    source, twin = ["a"], ["a"]  # equal, not the same object
    reuse.put(source, ("ctx",), "made")
    reuse.end_pass()
    assert reuse.get(source, ("ctx",)) == "made"  # the next pass
    assert reuse.get(twin, ("ctx",)) is None
    assert reuse.get(source, ("other",)) is None
    reuse.end_pass()  # asked for last pass: kept
    assert len(reuse) == 1
    reuse.end_pass()  # not asked for: dropped
    assert len(reuse) == 0 and reuse.get(source, ("ctx",)) is None


def test_an_equal_context_is_handed_back_so_that_entries_compare_by_identity() -> None:
    reuse: Reuse[str] = Reuse()
    first = reuse.context((frozenset({"cpu", "gpu"}), None))
    again = reuse.context((frozenset({"gpu", "cpu"}), None))
    assert again is first
    assert reuse.context((frozenset({"cpu"}), None)) is not first


def waiting_job(rng: random.Random, index: int, *, now: float, users: list[str], pools: bool) -> WaitingJob:
    gpu = rng.uniform(60, 900)
    seconds = {"gpu": gpu, "cpu": gpu * rng.uniform(1.5, 6)}
    if rng.random() < 0.15:
        del seconds[rng.choice(["gpu", "cpu"])]
    if rng.random() < 0.05:
        seconds["tpu"] = 30.0  # a kind no node offers
    return WaitingJob(key=f"w{index}", user=rng.choice(users), arrival=now - rng.uniform(-30, 600), seconds=seconds, demand=DEMAND,
                      pods=rng.choice([1] * 8 + [2]), pool=rng.choice([None, "a", "b"]) if pools else None)


def running_job(rng: random.Random, index: int, *, now: float, users: list[str], pools: bool) -> RunningJob:
    gpu = rng.uniform(60, 900)
    return RunningJob(key=f"r{index}", user=rng.choice(users), kind=rng.choice(["gpu", "cpu"]), started=now - rng.uniform(-30, 900),
                      seconds={"gpu": gpu, "cpu": gpu * rng.uniform(1.5, 6)}, demand=DEMAND, pods=rng.choice([1, 1, 1, 2]),
                      pool=rng.choice([None, "a", "b"]) if pools else None)


def live_state(
    rng: random.Random, *, now: float, pools: bool, most_waiting: int, most_running: int
) -> tuple[list[str], Iterator[int], list[WaitingJob], list[RunningJob], list[NodeResources]]:
    """A random live state: users, waiting and running Jobs, three nodes, and the counter that
    names the Jobs made after them."""
    users = [f"u{i}" for i in range(rng.randint(1, 4))]
    counter = iter(range(10**6))
    waiting = [waiting_job(rng, next(counter), now=now, users=users, pools=pools) for _ in range(rng.randint(5, most_waiting))]
    running = [running_job(rng, next(counter), now=now, users=users, pools=pools) for _ in range(rng.randint(0, most_running))]
    nodes = [NodeResources(name=f"n{i}", cpu=rng.choice([9.0, 17.0, 33.0]), gpu=rng.randint(0, 3), memory=64.0) for i in range(3)]
    return users, counter, waiting, running, nodes


@pytest.mark.parametrize("pools", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_decisions_with_the_kept_state_equal_decisions_from_scratch_pass_after_pass(seed: int, pools: bool) -> None:
    rng = random.Random(4200 + seed)
    now = 50_000.0
    users, counter, waiting, running, nodes = live_state(rng, now=now, pools=pools, most_waiting=30, most_running=6)
    reuse = DecideReuse()
    kept_for = 0
    for _ in range(12):
        alpha = rng.choice([1.0, 1.0, 0.5])
        gpu_pools = {"a": rng.randint(0, 3), "b": rng.randint(0, 2)} if pools else None
        capacity = Capacity(cpu=sum(n.cpu for n in nodes), gpu=max(1, sum(n.gpu for n in nodes)), memory=64.0 * len(nodes))

        def decided(kept: DecideReuse | None) -> object:
            return decide(now=now, waiting=waiting, running=running, free_nodes=nodes, capacity=capacity, alpha=alpha,
                          gpu_pools=gpu_pools, reuse=kept)

        with_state = decided(reuse)
        assert with_state == decided(None)
        kept_for += len(reuse.waiting) + len(reuse.running)
        # The watch moves on: Jobs arrive, change (a new object with another estimate), leave,
        # start (running from now on) and end; a node joins or leaves; the clock advances.
        waiting += [waiting_job(rng, next(counter), now=now, users=users, pools=pools) for _ in range(rng.randint(0, 4))]
        for index in rng.sample(range(len(waiting)), k=min(len(waiting), rng.randint(0, 3))):
            waiting[index] = replace(waiting[index], seconds={kind: value * rng.uniform(0.5, 2) for kind, value in waiting[index].seconds.items()})
        for _ in range(min(len(waiting), rng.randint(0, 3))):
            gone = waiting.pop(rng.randrange(len(waiting)))
            if rng.random() < 0.6 and "tpu" not in gone.seconds:
                running.append(RunningJob(key=gone.key, user=gone.user, kind=rng.choice(sorted(gone.seconds)), started=now,
                                          seconds=gone.seconds, demand=gone.demand, pods=gone.pods, pool=gone.pool))
        if running and rng.random() < 0.4:
            running.pop(rng.randrange(len(running)))
        if rng.random() < 0.2:
            nodes = [*nodes[1:], NodeResources(name=f"n{next(counter)}", cpu=17.0, gpu=rng.randint(0, 4), memory=64.0)]
        now += rng.choice([0.0, 1.0, 45.0])
    assert kept_for > 0  # the kept state was used, not only made


def test_a_clock_that_steps_back_gets_the_decision_a_fresh_pass_makes() -> None:
    # The controller's clock is the wall clock: a kept Job that arrived after "now" arrives at
    # "now", as a fresh decide makes it (the kept one would be filtered out, or make α < 1 raise).
    nodes = [NodeResources(name="n1", cpu=5.0, gpu=1, memory=64.0)]
    capacity = Capacity(cpu=5.0, gpu=1, memory=64.0)
    running = [RunningJob(key="r", user="u1", kind="gpu", started=900.0, seconds={"gpu": 600.0, "cpu": 2000.0})]
    waiting = [WaitingJob(key="a", user="u1", arrival=990.0, seconds={"gpu": 100.0, "cpu": 5000.0}),
               WaitingJob(key="b", user="u2", arrival=500.0, seconds={"gpu": 100.0, "cpu": 5000.0})]
    for alpha in (1.0, 0.5):
        reuse = DecideReuse()
        decide(now=1000.0, waiting=waiting, running=running, free_nodes=nodes, capacity=capacity, alpha=alpha, reuse=reuse)
        fresh = decide(now=980.0, waiting=waiting, running=running, free_nodes=nodes, capacity=capacity, alpha=alpha)
        kept = decide(now=980.0, waiting=waiting, running=running, free_nodes=nodes, capacity=capacity, alpha=alpha, reuse=reuse)
        assert [(q.key, q.kind, q.position) for q in kept.queue] == [(q.key, q.kind, q.position) for q in fresh.queue]
        assert len(fresh.queue) == 2


def test_a_pass_that_raises_keeps_nothing_for_the_next() -> None:
    reuse = DecideReuse()
    running = [RunningJob(key=f"r{i}", user="u1", kind="gpu", started=900.0, seconds={"gpu": 600.0}) for i in range(20)]
    for _ in range(5):  # passes that raise midway (a bad input), each with new objects
        running = [replace(job) for job in running]
        with pytest.raises(InvalidInstance, match="processing_time.gpu"):
            decide(now=1000.0, waiting=[WaitingJob(key="bad", user="u2", arrival=500.0, seconds={"gpu": -1.0})],
                   running=running, free_nodes=[NodeResources(name="n1", cpu=5.0, gpu=1, memory=64.0)],
                   capacity=Capacity(cpu=5.0, gpu=1, memory=64.0), alpha=1.0, reuse=reuse)
    assert len(reuse.running._this_pass) <= len(running)
