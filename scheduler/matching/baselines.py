"""The paper's baselines (§2.2, §5.1.1) as pure policies with AlloX's interface, for the
simulator: BF, JSQ+, SJF+, ES, DRFF, DRFS, DRFA; and SRPT's preemptive allocation.

Where the paper's one-paragraph definitions leave a choice open, the reading is stated on the
class. Common to all: jobs that have not arrived by ``now`` or that no machine present can run
are ignored; "a job's preferred kind" is its fastest kind among those present (ties by name).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Iterable, Literal, Mapping, Sequence

from scheduler.matching.fairness import MachineShare, ShareModel
from scheduler.matching.model import KIND_GPU, Assignment, Job, Machine


class _Pool:
    """Free machines by kind, handed out in the caller's order."""

    def __init__(self, free_machines: Sequence[Machine]) -> None:
        self._free: dict[str, list[Machine]] = {}
        for machine in reversed(free_machines):
            self._free.setdefault(machine.kind, []).append(machine)

    def has(self, kind: str) -> bool:
        return bool(self._free.get(kind))

    def __bool__(self) -> bool:
        return any(self._free.values())

    def kinds(self) -> list[str]:
        return sorted(kind for kind, machines in self._free.items() if machines)

    def take(self, kind: str) -> Machine:
        return self._free[kind].pop()


def _present_kinds(free_machines: Sequence[Machine], busy_until: Mapping[Machine, float]) -> set[str]:
    return {machine.kind for machine in free_machines} | {machine.kind for machine in busy_until}


def _waiting(pending: Sequence[Job], *, now: float, kinds: set[str]) -> list[Job]:
    """Arrived, runnable jobs in arrival order (stable: equal arrivals keep the caller's order)."""
    return sorted(
        (job for job in pending if job.arrival <= now and not kinds.isdisjoint(job.processing_time)),
        key=lambda job: job.arrival,
    )


def _preferred(job: Job, kinds: set[str]) -> str:
    return min((kind for kind in job.processing_time if kind in kinds), key=lambda k: (job.processing_time[k], k))


@dataclass(frozen=True, slots=True, kw_only=True)
class BestFitScheduler:
    """BF (§2.2): every job runs on its preferred kind only, first come first served per kind."""

    def on_machine_free(
        self,
        *,
        now: float,
        free_machines: Sequence[Machine],
        pending_jobs: Sequence[Job],
        busy_until: Mapping[Machine, float],
        running: Sequence[Assignment] = (),
    ) -> list[Assignment]:
        kinds = _present_kinds(free_machines, busy_until)
        pool = _Pool(free_machines)
        started = []
        for job in _waiting(pending_jobs, now=now, kinds=kinds):
            kind = _preferred(job, kinds)
            if pool.has(kind):
                started.append(Assignment.starting(job, pool.take(kind), now))
        return started


@dataclass(frozen=True, slots=True, kw_only=True)
class JsqPlusScheduler:
    """JSQ+ (§2.2): first come first served, each job joins the machine where it would finish
    earliest, counting the work already queued there; it starts when that machine is free now.

    The queues are not remembered between calls: each call rebuilds them from the machines'
    availability and the waiting jobs in arrival order. Note: on §2.2's counter-example this
    reading gives Jobs 3 and 4 the GPUs after Jobs 1 and 2 (40 + 40 < 160, AJCT 60), whereas the
    paper's Figure 4a sends them to the CPUs (AJCT 100), which its own definition does not.
    """

    def on_machine_free(
        self,
        *,
        now: float,
        free_machines: Sequence[Machine],
        pending_jobs: Sequence[Job],
        busy_until: Mapping[Machine, float],
        running: Sequence[Assignment] = (),
    ) -> list[Assignment]:
        machines = _all_machines(free_machines, busy_until)
        free_names = {machine.name for machine in free_machines}
        queues: dict[str, list[tuple[float, int]]] = {}
        for order, machine in enumerate(machines):
            ready = now if machine.name in free_names else max(busy_until[machine], now)
            queues.setdefault(machine.kind, []).append((ready, order))
        for heap in queues.values():
            heapq.heapify(heap)
        untouched = set(free_names)
        started = []
        for job in _waiting(pending_jobs, now=now, kinds=set(queues)):
            options = [
                (queues[kind][0][0] + time, queues[kind][0][0], kind)
                for kind, time in job.processing_time.items()
                if kind in queues
            ]
            finish, ready, kind = min(options)
            _, order = heapq.heapreplace(queues[kind], (finish, queues[kind][0][1]))
            machine = machines[order]
            if ready <= now and machine.name in untouched:
                untouched.discard(machine.name)
                started.append(Assignment.starting(job, machine, now))
        return started


@dataclass(frozen=True, slots=True, kw_only=True)
class SjfPlusScheduler:
    """SJF+ (§2.2): per kind a queue of the jobs by their time on that kind; a free machine takes
    the head of its kind's queue, and when several are free the shortest (job, kind) goes first."""

    def on_machine_free(
        self,
        *,
        now: float,
        free_machines: Sequence[Machine],
        pending_jobs: Sequence[Job],
        busy_until: Mapping[Machine, float],
        running: Sequence[Assignment] = (),
    ) -> list[Assignment]:
        kinds = _present_kinds(free_machines, busy_until)
        pool = _Pool(free_machines)
        choices = sorted(
            (time, job.arrival, job.name, kind, index)
            for index, job in enumerate(_waiting(pending_jobs, now=now, kinds=kinds))
            for kind, time in job.processing_time.items()
            if pool.has(kind)
        )
        jobs = _waiting(pending_jobs, now=now, kinds=kinds)
        started: list[Assignment] = []
        taken: set[int] = set()
        for _, _, _, kind, index in choices:
            if index not in taken and pool.has(kind):
                taken.add(index)
                started.append(Assignment.starting(jobs[index], pool.take(kind), now))
        return started


@dataclass(frozen=True, slots=True, kw_only=True)
class EqualShareScheduler:
    """ES (§5.1.1): every kind's machines are split equally and statically among the users with
    waiting or running jobs (a user may hold a machine of a kind while she holds fewer than
    ``machines of the kind / users``); on a free machine, the user furthest below her share of it
    runs her job with the shortest time on that kind. Kinds most waiting jobs prefer fill first
    ("ES first fills up all available GPUs … then fills available CPUs")."""

    def on_machine_free(
        self,
        *,
        now: float,
        free_machines: Sequence[Machine],
        pending_jobs: Sequence[Job],
        busy_until: Mapping[Machine, float],
        running: Sequence[Assignment] = (),
    ) -> list[Assignment]:
        kinds = _present_kinds(free_machines, busy_until)
        waiting = _waiting(pending_jobs, now=now, kinds=kinds)
        users = sorted({job.user for job in waiting} | {a.job.user for a in running})
        if not users:
            return []
        free_names = {machine.name for machine in free_machines}
        counts: dict[str, int] = {}
        for machine in [*free_machines, *(m for m in busy_until if m.name not in free_names)]:
            counts[machine.kind] = counts.get(machine.kind, 0) + 1
        held: dict[tuple[str, str], int] = {}
        for assignment in running:
            key = (assignment.job.user, assignment.kind)
            held[key] = held.get(key, 0) + 1
        preferring: dict[str, int] = {}
        for job in waiting:
            kind = _preferred(job, kinds)
            preferring[kind] = preferring.get(kind, 0) + 1
        ordered = sorted(free_machines, key=lambda m: -preferring.get(m.kind, 0))  # stable
        started = []
        for machine in ordered:
            quota = counts[machine.kind] / len(users)
            eligible = [
                user
                for user in users
                if held.get((user, machine.kind), 0) < quota
                and any(job.user == user and job.can_run_on(machine.kind) for job in waiting)
            ]
            if not eligible:
                continue
            user = min(eligible, key=lambda u: (held.get((u, machine.kind), 0), u))
            job = min(
                (job for job in waiting if job.user == user and job.can_run_on(machine.kind)),
                key=lambda job: (job.processing_time[machine.kind], job.arrival, job.name),
            )
            waiting.remove(job)
            held[(user, machine.kind)] = held.get((user, machine.kind), 0) + 1
            started.append(Assignment.starting(job, machine, now))
        return started


def _dominant(usage: Mapping[str, float]) -> float:
    return max(usage.values(), default=0.0)


def _add(usage: dict[str, float], more: Mapping[str, float]) -> None:
    for resource, amount in more.items():
        usage[resource] = usage.get(resource, 0.0) + amount


@dataclass(frozen=True, slots=True, kw_only=True)
class DrfScheduler:
    """Online DRF over the preferred configuration (§5.1.1): while a machine is free, the user
    with the lowest dominant share starts her first job (``order="fcfs"``: DRFF; ``"sjf"``:
    DRFS, shortest on its preferred kind) among those whose preferred kind has a free machine.
    A job never falls back to its other kind, so CPUs idle when every job prefers GPUs.
    ``shares`` measures usage; by default one machine of a kind is ``1/count`` of that kind."""

    order: Literal["fcfs", "sjf"] = "fcfs"
    shares: ShareModel | None = None

    def on_machine_free(
        self,
        *,
        now: float,
        free_machines: Sequence[Machine],
        pending_jobs: Sequence[Job],
        busy_until: Mapping[Machine, float],
        running: Sequence[Assignment] = (),
    ) -> list[Assignment]:
        kinds = _present_kinds(free_machines, busy_until)
        shares = self.shares or MachineShare.of(_all_machines(free_machines, busy_until))
        waiting = _waiting(pending_jobs, now=now, kinds=kinds)
        usage: dict[str, dict[str, float]] = {}
        for assignment in running:
            _add(usage.setdefault(assignment.job.user, {}), shares.usage(assignment.job, assignment.kind))
        pool = _Pool(free_machines)
        started = []
        while pool and waiting:
            users = sorted({job.user for job in waiting}, key=lambda u: (_dominant(usage.get(u, {})), u))
            for user in users:
                fitting = [job for job in waiting if job.user == user and pool.has(_preferred(job, kinds))]
                if not fitting:
                    continue
                job = fitting[0] if self.order == "fcfs" else min(
                    fitting, key=lambda j: (j.processing_time[_preferred(j, kinds)], j.arrival, j.name)
                )
                kind = _preferred(job, kinds)
                started.append(Assignment.starting(job, pool.take(kind), now))
                waiting.remove(job)
                _add(usage.setdefault(user, {}), shares.usage(job, kind))
                break
            else:
                break
        return started


def _all_machines(free_machines: Sequence[Machine], busy_until: Mapping[Machine, float]) -> list[Machine]:
    free_names = {machine.name for machine in free_machines}
    return [*free_machines, *(m for m in busy_until if m.name not in free_names)]


@dataclass(frozen=True, slots=True, kw_only=True)
class DrfaScheduler:
    """DRFA (§5.1.1): a GPU counts as ``average_speedup`` CPUs, making compute one resource; online
    DRF on it, shortest job first within a user. A free machine goes to the user with the lowest
    share of compute who has a job it can run, and runs her job shortest on its kind.
    ``average_speedup=None`` uses the mean CPU/GPU time ratio of the jobs in the call (an oracle:
    the paper notes the true average is not practical to know)."""

    average_speedup: float | None = None

    def on_machine_free(
        self,
        *,
        now: float,
        free_machines: Sequence[Machine],
        pending_jobs: Sequence[Job],
        busy_until: Mapping[Machine, float],
        running: Sequence[Assignment] = (),
    ) -> list[Assignment]:
        kinds = _present_kinds(free_machines, busy_until)
        waiting = _waiting(pending_jobs, now=now, kinds=kinds)
        speedup = self.average_speedup or _mean_speedup([*waiting, *(a.job for a in running)])

        def units(kind: str) -> float:
            return speedup if kind == KIND_GPU else 1.0

        total = sum(units(machine.kind) for machine in _all_machines(free_machines, busy_until))
        share: dict[str, float] = {}
        for assignment in running:
            share[assignment.job.user] = share.get(assignment.job.user, 0.0) + units(assignment.kind) / total
        started = []
        for machine in sorted(free_machines, key=lambda m: -units(m.kind)):  # stable: GPUs first
            users = {job.user for job in waiting if job.can_run_on(machine.kind)}
            if not users:
                continue
            user = min(users, key=lambda u: (share.get(u, 0.0), u))
            job = min(
                (job for job in waiting if job.user == user and job.can_run_on(machine.kind)),
                key=lambda job: (job.processing_time[machine.kind], job.arrival, job.name),
            )
            waiting.remove(job)
            share[user] = share.get(user, 0.0) + units(machine.kind) / total
            started.append(Assignment.starting(job, machine, now))
        return started


def _mean_speedup(jobs: Iterable[Job]) -> float:
    ratios = [
        job.processing_time["cpu"] / job.processing_time[KIND_GPU]
        for job in jobs
        if job.processing_time.get(KIND_GPU) and "cpu" in job.processing_time
    ]
    return sum(ratios) / len(ratios) if ratios else 1.0


def srpt_allocation(*, machines: Sequence[Machine], remaining: Sequence[tuple[Job, float]]) -> list[tuple[Job, Machine]]:
    """SRPT (§5.1.1), the preemptive lower bound: which jobs run *now* and where, given each job's
    remaining fraction of work (1 for a fresh job). Preemption and migration are free: the
    simulator calls this at every arrival and completion and reassigns everything. The (job,
    kind) pairs with the shortest remaining time go first; a job runs on one machine at most.
    Not a :class:`~scheduler.matching.policy.Policy`: it needs preemption, which the others don't."""
    pool = _Pool(machines)
    kinds = {machine.kind for machine in machines}
    pairs = sorted(
        (fraction * job.processing_time[kind], job.arrival, job.name, kind, index)
        for index, (job, fraction) in enumerate(remaining)
        for kind in job.processing_time
        if kind in kinds
    )
    placed: set[int] = set()
    result = []
    for _, _, _, kind, index in pairs:
        if index not in placed and pool.has(kind):
            placed.add(index)
            result.append((remaining[index][0], pool.take(kind)))
    return result
