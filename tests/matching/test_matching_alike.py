"""Alike Jobs (one user's, of the same estimates, demand and pods) are settled by arrival in the
decision itself, so the simulator and ``cellfit allox`` (which call :func:`decide`) start and queue
the same Jobs as the live controller (which calls :func:`decide_starts` and the plan's queue)."""

from __future__ import annotations

import random

import pytest

from scheduler.matching.admission import Start, WaitingJob, _alike, _alike_classes, _oldest_alike_started, decide, decide_starts
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity
from scheduler.matching.model import Demand

CAPACITY = Capacity(cpu=40, gpu=4, memory=256)
DEMAND = {"cpu": Demand(cpu=4, memory=8), "gpu": Demand(gpu=1, cpu=1)}
NODES = [NodeResources(name=f"n{i}", cpu=10, gpu=2, memory=128) for i in range(2)]  # 4 GPUs, 4 CPU slots


def sweep(rng: random.Random, *, count: int) -> list[WaitingJob]:
    """``count`` alike Jobs of one user whose names do not follow their arrival, and one other
    user's Job, listed in a random order."""
    names = [f"job-{rng.randrange(10**6):06d}-{index}" for index in range(count)]
    jobs = [WaitingJob(key=name, user="ana", arrival=float(index), seconds={"cpu": 600.0, "gpu": 120.0}, demand=DEMAND)
            for index, name in enumerate(names)]
    jobs.append(WaitingJob(key="other", user="bo", arrival=0.5, seconds={"cpu": 300.0, "gpu": 200.0}, demand=DEMAND))
    rng.shuffle(jobs)
    return jobs


def arrival_rank(jobs: list[WaitingJob]) -> dict[str, int]:
    alike = sorted((job for job in jobs if job.user == "ana"), key=lambda job: job.arrival)
    return {job.key: rank for rank, job in enumerate(alike)}


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("alpha", [1.0, 0.1])
def test_of_alike_jobs_the_oldest_start_and_the_rest_queue_in_the_order_they_arrived(seed: int, alpha: float) -> None:
    rng = random.Random(seed)
    jobs = sweep(rng, count=12)
    rank = arrival_rank(jobs)
    decision = decide(now=100.0, waiting=jobs, running=[], free_nodes=NODES, capacity=CAPACITY, alpha=alpha)
    started = sorted(rank[start.key] for start in decision.starts if start.key in rank)
    assert started == list(range(len(started))), "the oldest alike Jobs start"
    for kind in ("cpu", "gpu"):
        queued = sorted((q for q in decision.queue if q.key in rank and q.kind == kind), key=lambda q: q.position)
        ranks = [rank[q.key] for q in queued]
        assert ranks == sorted(ranks), f"alike Jobs queue on {kind} in the order they arrived"
    assert sorted([s.key for s in decision.starts] + [q.key for q in decision.queue]) == sorted(job.key for job in jobs)


def test_the_live_pass_and_the_simulator_decide_alike_jobs_the_same() -> None:
    jobs = sweep(random.Random(5), count=12)
    inputs = dict(now=100.0, waiting=jobs, running=[], free_nodes=NODES, capacity=CAPACITY, alpha=0.1)
    starts, plan = decide_starts(**inputs)  # type: ignore[arg-type]
    whole = decide(**inputs)  # type: ignore[arg-type]
    assert starts.starts == whole.starts
    assert plan.queue() == whole.queue


def test_alike_is_decided_on_the_estimates_by_kind_whatever_order_they_were_read_in() -> None:
    """The cheap first grouping (the estimates' values, sorted) only narrows the search: Jobs whose
    estimates were read in another order are alike, and Jobs with the same values on swapped kinds
    are not."""
    def job(key: str, arrival: float, seconds: dict[str, float]) -> WaitingJob:
        return WaitingJob(key=key, user="ana", arrival=arrival, seconds=seconds, demand=DEMAND)

    older = job("z-older", 0.0, {"cpu": 600.0, "gpu": 120.0})
    reordered = job("a-newer", 1.0, {"gpu": 120.0, "cpu": 600.0})
    swapped = job("b-swapped", 2.0, {"cpu": 120.0, "gpu": 600.0})
    instead = _oldest_alike_started([Start(key="a-newer", kind="gpu", machine="n0/gpu-0", seconds=120.0)],
                                    [swapped, reordered, older])
    assert instead == {"a-newer": "z-older"}
    instead = _oldest_alike_started([Start(key="b-swapped", kind="cpu", machine="n0/cpu-0", seconds=120.0)],
                                    [swapped, reordered, older])
    assert instead == {}


def _alike_classes_reference(items: list[WaitingJob], kinds: list[str] | None = None) -> list[list[int]]:
    """``admission._alike_classes`` as it was before its two-estimate key and its lists only for
    keys met again: one dict of lists by ``sorted``'s key, then split exactly."""
    def rough(item: WaitingJob) -> tuple[object, ...]:
        return item.pool, item.user, item.pods, *sorted(item.seconds.values())

    grouped: dict[tuple[object, ...], list[int]] = {}
    for index, item in enumerate(items):
        key = rough(item) if kinds is None else (kinds[index], *rough(item))
        grouped.setdefault(key, []).append(index)
    classes: list[list[int]] = []
    for indices in grouped.values():
        if len(indices) < 2:
            continue
        exact: dict[tuple[object, ...], list[int]] = {}
        for index in indices:
            exact.setdefault(_alike(items[index]), []).append(index)
        classes.extend(members for members in exact.values() if len(members) > 1)
    return classes


@pytest.mark.parametrize("seed", range(40))
def test_alike_classes_are_those_of_sorted_estimates(seed: int) -> None:
    """Random Jobs of one to three estimates drawn from few values (ties, both orders of the same
    two, -0.0 beside 0.0, a NaN read from one object or from two), few users, pools, pods and
    demands: the same classes, in the same order, as the reference; with kinds too."""
    rng = random.Random(seed)
    nan = float("nan")
    values = [0.0, -0.0, 1.0, 2.5, 7.0, nan, float("nan"), float("inf")]
    kinds = ["cpu", "gpu", "tpu"]
    items: list[WaitingJob] = []
    for index in range(rng.randrange(1, 80)):
        chosen = rng.sample(kinds, rng.randrange(1, 4))
        if rng.random() < 0.3 and items:  # the same estimates as an earlier Job, read in another order
            earlier = list(rng.choice(items).seconds.items())
            rng.shuffle(earlier)
            seconds = dict(earlier)
        else:
            seconds = {kind: rng.choice(values) for kind in chosen}
        items.append(WaitingJob(key=f"j{index}", user=rng.choice(["ana", "bo"]), arrival=float(rng.randrange(5)), seconds=seconds,
                                demand=rng.choice([DEMAND, {"cpu": Demand(cpu=2, memory=8)}]), pods=rng.choice([1, 1, 2]),
                                pool=rng.choice([None, None, "vc"])))
    assert _alike_classes(items) == _alike_classes_reference(items)
    queued_on = [rng.choice(["cpu", "gpu"]) for _ in items]
    assert _alike_classes(items, queued_on) == _alike_classes_reference(items, queued_on)
    if seed == 0:
        assert any(len(members) > 1 for members in _alike_classes(items)), "the instance has alike Jobs"
