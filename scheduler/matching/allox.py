"""AlloX's online scheduler (Algorithm 2, §3.2–3.3, with §4.4's temporary raise of α).

When machines free up, the jobs of the ``ceil(α·n)`` users with the lowest progress are matched
(with each machine's availability ω in the delay matrix) and every free machine starts the job
the matching puts first on it. A free machine the matching leaves empty stays idle: the jobs are
better off waiting for a faster machine, unless fairness is what hid the jobs that would use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Collection, Mapping, Sequence

import numpy as np

from scheduler.matching.errors import InvalidInstance
from scheduler.matching.fairness import (
    MachineShare,
    ShareModel,
    considered_count,
    job_value,
    rank_users,
    user_progress,
)
from scheduler.matching.model import Assignment, Job, Machine
from scheduler.matching.solve import FloatArray, Fleet, Problem, Queues, fleet, prepare_on, rows_on, solve


@dataclass(frozen=True, slots=True)
class Matched:
    """Algorithm 2's starts, and — when every user was considered, so that one matching served
    every free machine — that matching (``problem``, ``queues``; None otherwise): admission
    plans the queue from it instead of making the instance's arrays again."""

    started: list[Assignment]
    problem: Problem | None = None
    queues: Queues | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxScheduler:
    """Algorithm 2 as a pure policy.

    ``alpha`` is the fairness knob in [0, 1] (1: every user, pure performance). ``shares``
    measures progress; by default one machine of a kind is ``1/count`` of that kind.
    ``raise_alpha_when_idle`` enables §4.4's fix for low utilisation at small α: a free machine
    that would stay idle brings in the next users (by progress) with a waiting job it can run.
    """

    alpha: float = 1.0
    shares: ShareModel | None = None
    raise_alpha_when_idle: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")

    def on_machine_free(
        self,
        *,
        now: float,
        free_machines: Sequence[Machine],
        pending_jobs: Sequence[Job],
        busy_until: Mapping[Machine, float],
        running: Sequence[Assignment] = (),
        progress: Mapping[str, float] | None = None,
    ) -> list[Assignment]:
        """``progress``: the users' progress from ``running``, when the caller has it already
        (``user_progress(running, shares)``; admission needs it for its own answer too)."""
        return self.matched(now=now, free_machines=free_machines, pending_jobs=pending_jobs, busy_until=busy_until,
                            running=running, progress=progress).started

    def matched(
        self,
        *,
        now: float,
        free_machines: Sequence[Machine],
        pending_jobs: Sequence[Job],
        busy_until: Mapping[Machine, float],
        running: Sequence[Assignment] = (),
        progress: Mapping[str, float] | None = None,
        machines: Fleet | None = None,
        holding_users: Collection[str] = (),
    ) -> Matched:
        """:meth:`on_machine_free`, with the one matching it made when every user was considered.
        ``machines``: the free machines then ``busy_until``'s others, already in array form.
        ``holding_users``: users with running jobs beside ``running``'s (admission passes its
        running Jobs so, their progress in ``progress``, rather than as an assignment each)."""
        free_names = {machine.name for machine in free_machines}
        listed = [*free_machines, *(m for m in busy_until if m.name not in free_names)]
        if machines is None:
            available = {m.name: until for m, until in busy_until.items() if m.name not in free_names}
            arrays = fleet(machines=listed, now=now, busy_until=available)
        else:
            arrays = machines
        kinds = set(arrays.kinds)
        # Keyed by name (unique among pending jobs) and insertion-ordered, so candidates keep
        # the caller's order and removal is O(1).
        waiting = {
            job.name: job
            for job in pending_jobs
            if job.arrival <= now and not kinds.isdisjoint(job.processing_time)
        }
        users = {job.user for job in waiting.values()} | {assignment.job.user for assignment in running} | set(holding_users)
        base = considered_count(alpha=self.alpha, users=len(users))
        if base >= len(users):
            return self._every_user(now=now, free_machines=free_machines, waiting=waiting, machines=arrays, pending_jobs=pending_jobs)
        shares = self.shares if self.shares is not None else MachineShare.of(listed)
        progress = dict(progress) if progress is not None else user_progress(running, shares)
        ranking = rank_users(users, progress)
        # Every waiting job's arrays once (each plan takes the rows of its users' jobs), so that a
        # job no machine may run is named whichever users are considered.
        every_job = _prepared(arrays, waiting, pending_jobs)
        # Each user's waiting jobs as rows of every_job (ascending: the waiting order), so that a
        # plan gathers its users' rows without a pass over every waiting job.
        rows_of: dict[str, list[int]] = {}
        for row, job in enumerate(every_job.jobs):
            rows_of.setdefault(job.user, []).append(row)
        row_of = {job.name: row for row, job in enumerate(every_job.jobs)}
        # Plans by the user set they were solved for; which of them a start leaves valid, see
        # _Plan.kept_after.
        plans: dict[frozenset[str], _Plan] = {}
        delay = arrays.delay.copy()  # the machines' waits now, moved by each start
        moved = False  # a start since ``arrays`` was last written
        # With every user considered the ranking cannot change who is matched.
        ranked = base < len(ranking)
        # Per kind, how many waiting jobs each user has that can run on it (§4.4's raise asks
        # for the users with one, once per machine a plan leaves empty).
        runnable: dict[str, dict[str, int]] = {kind: {} for kind in arrays.kinds}
        for job in waiting.values():
            for kind in job.processing_time:
                counts = runnable.get(kind)
                if counts is not None:
                    counts[job.user] = counts.get(job.user, 0) + 1

        started: list[Assignment] = []
        for machine in free_machines:
            if not waiting:
                break
            position = arrays.position_of[machine.name]
            count = base
            chosen: tuple[_Plan, Job] | None = None
            while count:
                considered = frozenset(ranking[:count])
                plan = plans.get(considered)
                if plan is None:
                    if moved:
                        arrays = replace(arrays, delay=delay.copy())
                        moved = False
                    plan = _Plan.solved(considered, rows_of, every_job, arrays)
                    plans[considered] = plan
                head = plan.first(position)
                if head is not None:
                    chosen = (plan, head)
                    break
                count = self._raised_count(ranking, count, runnable.get(machine.kind, {})) if self.raise_alpha_when_idle else 0
            if chosen is None:
                continue
            source, job = chosen
            assignment = Assignment.starting(job, machine, now)
            started.append(assignment)
            del waiting[job.name]
            rows_of[job.user].remove(row_of[job.name])
            for kind in job.processing_time:
                counts = runnable.get(kind)
                if counts is not None:
                    counts[job.user] -= 1
                    if not counts[job.user]:
                        del counts[job.user]
            wait = max(assignment.finish - arrays.now, 0.0)  # as Fleet.with_available writes it
            delay[position] = wait
            moved = True
            if ranked:
                progress[job.user] = progress.get(job.user, 0.0) + job_value(job, machine.kind, shares)
                ranking = rank_users(users, progress)
            # The rest of an optimal matching stays optimal once the first job of one machine
            # has started and that machine's ω has moved to the job's finish: every matching
            # that keeps the job there pays the same extra for it, and any better matching of
            # the rest would, with the job put back in front, beat the original. So the plan
            # the job came from needs no re-solve; the others may have placed the job elsewhere.
            source.pop(position)
            kind_index = int(arrays.machine_kind[position])
            plans = {
                considered: plan
                for considered, plan in plans.items()
                if (plan is source or job.user not in considered)
                and plan.kept_after(source=plan is source, position=position, kind=kind_index, wait=wait, delay=delay)
            }
        return Matched(started)

    @staticmethod
    def _every_user(*, now: float, free_machines: Sequence[Machine], waiting: Mapping[str, Job], machines: Fleet,
                    pending_jobs: Sequence[Job]) -> Matched:
        """Every user considered (α = 1, or as few users as ``ceil(α·n)``): one matching serves
        every free machine (the plan stays optimal after each start, see the loop), the ranking
        never changes who is matched and no machine can raise α, so the starts are each free
        machine's first job in that one matching, read off its arrays."""
        if not waiting:
            return Matched([])
        problem = _prepared(machines, waiting, pending_jobs)
        queues = solve(problem)
        started: list[Assignment] = []
        jobs, position_of = problem.jobs, machines.position_of
        indices = [position_of[machine.name] for machine in free_machines]
        if len(set(indices)) == len(indices):
            # Each free machine once (the usual case): those with a queue, found in one pass.
            first = queues.bounds[indices]
            with_queue = np.flatnonzero(first < queues.bounds[np.asarray(indices, dtype=np.int64) + 1]).tolist()
            heads = queues.job[first[with_queue]].tolist()
            for at, head in zip(with_queue, heads):
                machine, job = free_machines[at], jobs[head]
                started.append(Assignment.starting(job, machine, now))
            return Matched(started, problem, queues)
        taken: dict[str, int] = {}  # a machine listed twice starts the next job of its queue
        bounds, queued = queues.bounds.tolist(), queues.job.tolist()
        for machine, index in zip(free_machines, indices):
            at = bounds[index] + taken.get(machine.name, 0)
            if at < bounds[index + 1]:
                taken[machine.name] = taken.get(machine.name, 0) + 1
                job = jobs[queued[at]]
                started.append(Assignment.starting(job, machine, now))
        return Matched(started, problem, queues)

    @staticmethod
    def _raised_count(ranking: list[str], count: int, runnable: Mapping[str, int]) -> int:
        """§4.4: how many users to consider so that the next user (by progress) with a waiting
        job the machine can run (``runnable``: such jobs by user) is included; 0 when there is none."""
        for index in range(count, len(ranking)):
            if ranking[index] in runnable:
                return index + 1
        return 0


def _prepared(machines: Fleet, waiting: Mapping[str, Job], pending_jobs: Sequence[Job]) -> Problem:
    """The waiting jobs' arrays (:func:`prepare_on`); a bad job named by its place among the
    caller's ``pending_jobs``, whichever users are considered."""
    jobs = list(waiting.values())
    try:
        return prepare_on(machines, jobs)
    except InvalidInstance as error:
        found = re.fullmatch(r"jobs\[(\d+)\](.*)", error.field or "")
        if found is None or error.field is None:
            raise
        bad = jobs[int(found.group(1))]
        at = next(index for index, job in enumerate(pending_jobs) if job is bad)
        raise InvalidInstance(str(error)[len(error.field) + 2 :], field=f"pending_jobs[{at}]{found.group(2)}") from None


@dataclass(slots=True)
class _Plan:
    """Lines 3–7 of Algorithm 2 for one user set: the matching of the set's waiting jobs, and
    how many jobs each machine has started from its queue since."""

    problem: Problem | None
    queues: Queues | None
    taken: dict[int, int]

    @classmethod
    def solved(cls, considered: frozenset[str], rows_of: Mapping[str, Sequence[int]], every_job: Problem, machines: Fleet) -> _Plan:
        """The plan of ``considered``'s waiting jobs (each user's rows of ``every_job``, in the
        waiting order: ``rows_of``) on ``machines`` as they are now."""
        gathered = [rows_of[user] for user in considered if rows_of.get(user)]
        if not gathered:
            return cls(None, None, {})
        rows = gathered[0] if len(gathered) == 1 else sorted(row for user_rows in gathered for row in user_rows)
        problem = rows_on(every_job, rows, machines)
        return cls(problem, solve(problem), {})

    def first(self, position: int) -> Job | None:
        """The job the plan starts next on machine ``position``; None if its queue is empty."""
        if self.problem is None or self.queues is None:
            return None
        bounds = self.queues.bounds
        at = int(bounds[position]) + self.taken.get(position, 0)
        return self.problem.jobs[int(self.queues.job[at])] if at < int(bounds[position + 1]) else None

    def pop(self, position: int) -> None:
        self.taken[position] = self.taken.get(position, 0) + 1

    def kept_after(self, *, source: bool, position: int, kind: int, wait: float, delay: FloatArray) -> bool:
        """Whether the plan is still the one a re-solve would make after a job started on
        machine ``position`` (of kind index ``kind``), which now waits ``wait``: from this plan
        (``source``), or from another plan for a user this one does not consider.

        The plan the job came from stays optimal (see :meth:`AlloxScheduler.matched`), and
        canonical: a slot's start does not move (:func:`~scheduler.matching.solve.canonical`),
        unless the machine is now one of a group of equal kind and wait where the plan has
        another queue (a job that takes no time leaves it in its group with a shorter queue
        than machines listed after it). A plan that holds another plan's job does not stay
        optimal. Any other plan that leaves the machine empty stays optimal: it pays what it
        paid, and every other matching pays at least as much as before, the machine having
        become no better.
        It also stays canonical (:func:`~scheduler.matching.solve.canonical`): the machine's old
        group (its kind, free now) had only empty machines after it, so the others keep their
        names, unless the machine joins a group the plan uses, where it may take a queue's
        name. So a plan is dropped when it has a queue on the machine or on a machine of its
        kind that waits as long as it now does.
        """
        if self.problem is None or self.queues is None:
            return True
        bounds = self.queues.bounds
        if not source and int(bounds[position + 1]) - int(bounds[position]) > self.taken.get(position, 0):
            return False
        used = np.flatnonzero(np.diff(bounds))
        return not bool(np.any((self.problem.machine_kind[used] == kind) & (delay[used] == wait) & (used != position)))
