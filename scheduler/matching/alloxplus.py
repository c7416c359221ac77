"""AlloX+ (§4.4): the heuristic for when the matching is too slow — shortest job first across
CPU and GPU, with a waiting timeout against starvation. O(n log n + n·k·log m) per call.

The paper gives AlloX+ in two sentences; the reading implemented here:

* jobs whose wait reached ``timeout`` go first, oldest first, each onto the free machine that
  runs it fastest (they never wait longer for a better one);
* the others go shortest first, a job's length being its shortest processing time on any kind
  present. Each takes the machine that finishes it earliest, counting a busy machine at the time
  it frees up; if that is a busy machine, the job waits for it (and later jobs see that machine
  taken for as long as the job will hold it). This is what lets a long GPU-friendly job wait
  for a GPU instead of being pushed onto a slow CPU, the failure of SJF+ in §2.2.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from scheduler.matching.model import Assignment, Job, Machine


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxPlusScheduler:
    """``timeout``: how long (in the caller's time unit) a job may wait before it is placed
    ahead of shorter jobs; infinite disables the rule."""

    timeout: float = math.inf

    def __post_init__(self) -> None:
        if not self.timeout >= 0:
            raise ValueError(f"timeout must be >= 0, got {self.timeout}")

    def on_machine_free(
        self,
        *,
        now: float,
        free_machines: Sequence[Machine],
        pending_jobs: Sequence[Job],
        busy_until: Mapping[Machine, float],
        running: Sequence[Assignment] = (),
    ) -> list[Assignment]:
        free_names = {machine.name for machine in free_machines}
        free: dict[str, list[Machine]] = {}
        for machine in reversed(free_machines):
            free.setdefault(machine.kind, []).append(machine)  # reversed: pop() yields input order
        # Per kind, the busy machines by when they free up (ties by name): where a job that
        # prefers to wait will go.
        busy: dict[str, list[tuple[float, str]]] = {}
        for machine, until in busy_until.items():
            if machine.name not in free_names:
                busy.setdefault(machine.kind, []).append((max(until, now), machine.name))
        for heap in busy.values():
            heapq.heapify(heap)
        kinds = set(free) | set(busy)

        arrived = [job for job in pending_jobs if job.arrival <= now and any(k in kinds for k in job.processing_time)]
        starving = sorted(
            (job for job in arrived if now - job.arrival >= self.timeout),
            key=lambda job: (job.arrival, job.name),
        )
        starving_names = {job.name for job in starving}
        others = sorted(
            (job for job in arrived if job.name not in starving_names),
            key=lambda job: (min(job.processing_time[k] for k in job.processing_time if k in kinds), job.arrival, job.name),
        )

        started: list[Assignment] = []

        def start(job: Job, kind: str) -> None:
            machine = free[kind].pop()
            if not free[kind]:
                del free[kind]
            finish = now + job.processing_time[kind]
            started.append(Assignment(job=job, machine=machine, start=now, finish=finish))
            heapq.heappush(busy.setdefault(kind, []), (finish, machine.name))

        for job in starving:
            if not free:
                return started
            options = [(job.processing_time[kind], kind) for kind in free if kind in job.processing_time]
            if options:
                start(job, min(options)[1])

        for job in others:
            if not free:
                break
            best: tuple[float, int, str] | None = None
            for kind, time in job.processing_time.items():
                if kind in free:
                    option = (now + time, 0, kind)
                elif busy.get(kind):
                    option = (busy[kind][0][0] + time, 1, kind)
                else:
                    continue
                if best is None or option < best:
                    best = option
            if best is None:
                continue
            finish, waits, kind = best
            if waits:
                # Hold the machine it waits for, so that later (longer) jobs do not count on it.
                heapq.heapreplace(busy[kind], (finish, busy[kind][0][1]))
            else:
                start(job, kind)
        return started
