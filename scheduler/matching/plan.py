"""Play a policy forward over one instance, assuming the estimates are exact, to get every job's
start and finish: what the ``allox`` tool prints.

This is not the simulator (no trace, no estimation error, no metrics): it reveals each job at its
arrival, calls the policy whenever a machine is free and a job waits, and jumps to the next
arrival or finish. Policies never see the future.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from scheduler.matching.errors import PolicyViolation, StalledSchedule
from scheduler.matching.model import Assignment, Job, Machine
from scheduler.matching.policy import Policy


def plan(
    *,
    policy: Policy,
    jobs: Sequence[Job],
    machines: Sequence[Machine],
    now: float = 0.0,
    busy_until: Mapping[str, float] | None = None,
) -> list[Assignment]:
    """Every job's assignment, ordered by start then machine name."""
    available = {machine.name: max((busy_until or {}).get(machine.name, now), now) for machine in machines}
    future = sorted(jobs, key=lambda job: job.arrival)  # stable: equal arrivals keep input order
    pending: list[Job] = []
    done: list[Assignment] = []
    clock = now
    next_arrival = 0
    while next_arrival < len(future) or pending:
        while next_arrival < len(future) and future[next_arrival].arrival <= clock:
            pending.append(future[next_arrival])
            next_arrival += 1
        free = [machine for machine in machines if available[machine.name] <= clock]
        if free and pending:
            busy = {machine: available[machine.name] for machine in machines if available[machine.name] > clock}
            running = [assignment for assignment in done if assignment.finish > clock]
            decisions = policy.on_machine_free(
                now=clock, free_machines=free, pending_jobs=pending, busy_until=busy, running=running
            )
            _check(decisions, clock=clock, free=free, pending=pending)
            started = {assignment.job.name for assignment in decisions}
            pending = [job for job in pending if job.name not in started]
            for assignment in decisions:
                available[assignment.machine.name] = assignment.finish
            done.extend(decisions)
        upcoming = [time for time in available.values() if time > clock]
        if next_arrival < len(future):
            upcoming.append(future[next_arrival].arrival)
        if not upcoming:
            if pending:
                names = ", ".join(repr(job.name) for job in pending[:5])
                raise StalledSchedule(f"the policy leaves {names} waiting with every machine idle")
            break
        clock = min(upcoming)
    done.sort(key=lambda a: (a.start, a.machine.name, a.job.name))
    return done


def _check(decisions: Sequence[Assignment], *, clock: float, free: Sequence[Machine], pending: Sequence[Job]) -> None:
    # A policy bug must not turn into a silently impossible schedule.
    free_names = {machine.name for machine in free}
    pending_names = {job.name for job in pending}
    machines_used: set[str] = set()
    for assignment in decisions:
        problem = None
        if assignment.machine.name not in free_names or assignment.machine.name in machines_used:
            problem = f"machine {assignment.machine.name!r} is not free"
        elif assignment.job.name not in pending_names:
            problem = f"job {assignment.job.name!r} is not waiting"
        elif assignment.start != clock:
            problem = f"job {assignment.job.name!r} starts at {assignment.start}, not now ({clock})"
        if problem:
            raise PolicyViolation(f"policy decision rejected: {problem}")
        machines_used.add(assignment.machine.name)
        pending_names.discard(assignment.job.name)
