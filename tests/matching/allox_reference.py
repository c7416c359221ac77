"""Independent references for the AlloX tests: brute force over every assignment and every order,
schedule evaluation and validity checks, and random instances. Deliberately naive: nothing here
shares code with scheduler.matching beyond its value types."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from scheduler.matching.model import Assignment, Job, Machine


def completion_of_order(order: Sequence[Job], machine: Machine, *, start: float) -> float:
    """Σ (finish − arrival) of ``order`` run back to back on ``machine`` from ``start``."""
    clock = start
    total = 0.0
    for job in order:
        clock += job.processing_time[machine.kind]
        total += clock - job.arrival
    return total


def brute_force_total(
    jobs: Sequence[Job],
    machines: Sequence[Machine],
    *,
    now: float = 0.0,
    busy_until: Mapping[str, float] | None = None,
) -> float:
    """The minimum total completion time over every assignment of jobs to machines and every
    order on every machine (jobs all arrived by ``now``)."""
    busy = busy_until or {}
    start = {m.name: max(busy.get(m.name, now), now) for m in machines}
    best = math.inf
    for choice in itertools.product(range(len(machines)), repeat=len(jobs)):
        if any(machines[i].kind not in job.processing_time for job, i in zip(jobs, choice)):
            continue
        total = 0.0
        for index, machine in enumerate(machines):
            mine = [job for job, i in zip(jobs, choice) if i == index]
            total += min(
                completion_of_order(order, machine, start=start[machine.name])
                for order in itertools.permutations(mine)
            )
            if total >= best:
                break
        best = min(best, total)
    return best


def total_completion(schedule: Sequence[Assignment]) -> float:
    return math.fsum(a.finish - a.job.arrival for a in schedule)


def check_valid(
    schedule: Sequence[Assignment],
    jobs: Sequence[Job],
    machines: Sequence[Machine],
    *,
    now: float = 0.0,
    busy_until: Mapping[str, float] | None = None,
) -> None:
    """Every job exactly once, on a kind it can use, for its processing time, not before it
    arrives, ``now`` or its machine is free, with no overlap on a machine."""
    busy = busy_until or {}
    assert sorted(a.job.name for a in schedule) == sorted(job.name for job in jobs)
    names = {m.name for m in machines}
    by_machine: dict[str, list[Assignment]] = {}
    for a in schedule:
        assert a.machine.name in names
        assert a.kind in a.job.processing_time
        assert math.isclose(a.finish - a.start, a.job.processing_time[a.kind], rel_tol=1e-9, abs_tol=1e-9)
        assert a.start >= max(now, a.job.arrival, busy.get(a.machine.name, now)) - 1e-9
        by_machine.setdefault(a.machine.name, []).append(a)
    for items in by_machine.values():
        items.sort(key=lambda a: (a.start, a.finish))
        for before, after in zip(items, items[1:]):
            assert after.start >= before.finish - 1e-9


@dataclass(frozen=True)
class Instance:
    jobs: list[Job]
    machines: list[Machine]
    now: float
    busy_until: dict[str, float]


def random_instance(
    rng: random.Random,
    *,
    max_jobs: int,
    max_machines: int,
    kinds: Sequence[str] = ("gpu", "cpu"),
    integer_times: bool = False,
    busy: bool = False,
    forbid: float = 0.2,
    users: int = 3,
) -> Instance:
    """A random instance in which every job can run on some machine present."""
    machine_count = rng.randint(1, max_machines)
    machines = [Machine(name=f"m{i}", kind=rng.choice(kinds)) for i in range(machine_count)]
    present = sorted({m.kind for m in machines})
    now = float(rng.randint(0, 5)) if busy else 0.0
    jobs = []
    for j in range(rng.randint(1, max_jobs)):
        times: dict[str, float] = {}
        for kind in kinds:
            if rng.random() < forbid:
                continue
            times[kind] = float(rng.randint(1, 9)) if integer_times else rng.uniform(0.5, 20.0)
        if not any(kind in times for kind in present):
            kind = rng.choice(present)
            times[kind] = float(rng.randint(1, 9)) if integer_times else rng.uniform(0.5, 20.0)
        arrival = float(rng.randint(0, int(now))) if busy else 0.0
        jobs.append(Job(name=f"j{j}", user=f"u{rng.randrange(users)}", arrival=arrival, processing_time=times))
    busy_until: dict[str, float] = {}
    if busy:
        for machine in machines:
            if rng.random() < 0.5:
                busy_until[machine.name] = now + (float(rng.randint(0, 6)) if integer_times else rng.uniform(-2.0, 15.0))
    return Instance(jobs=jobs, machines=machines, now=now, busy_until=busy_until)
