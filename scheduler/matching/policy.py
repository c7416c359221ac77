"""The interface every AlloX-style policy offers its drivers (the planner of the ``allox`` tool,
the simulator, and later the live path): one pure call per scheduling event."""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from scheduler.matching.model import Assignment, Job, Machine


class Policy(Protocol):
    def on_machine_free(
        self,
        *,
        now: float,
        free_machines: Sequence[Machine],
        pending_jobs: Sequence[Job],
        busy_until: Mapping[Machine, float],
        running: Sequence[Assignment] = (),
    ) -> list[Assignment]:
        """Which waiting jobs start now, and where.

        ``free_machines`` are idle at ``now`` (in the caller's preferred order);
        ``busy_until`` maps every other machine to when its current work is expected to end;
        ``running`` are the jobs on them (fairness counts their users' progress). Jobs that
        have not arrived by ``now`` are ignored. Every returned assignment starts at ``now`` on a
        distinct free machine; a job may also be left waiting for a better machine.
        """
        ...
