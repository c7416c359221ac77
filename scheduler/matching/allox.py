"""AlloX's online scheduler (Algorithm 2, §3.2–3.3, with §4.4's temporary raise of α).

When machines free up, the jobs of the ``ceil(α·n)`` users with the lowest progress are matched
(with each machine's availability ω in the delay matrix) and every free machine starts the job
the matching puts first on it. A free machine the matching leaves empty stays idle: the jobs are
better off waiting for a faster machine, unless fairness is what hid the jobs that would use it.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Callable, Collection, Hashable, Iterator, Mapping, Sequence, TypeVar, Union

import numpy as np
import numpy.typing as npt

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
from scheduler.matching import positions
from scheduler.matching.positions import KindOrder, kind_orders, kind_orders_after
from scheduler.matching.visit_order import visiting_order
from scheduler.matching.solve import (
    FloatArray,
    Fleet,
    IntArray,
    Problem,
    Queues,
    contended_plan,
    contended_plan_of,
    fleet,
    prepare_on,
    rows_on,
    solve,
)

try:
    from scheduler.matching import _solve as _built
except ImportError:  # pragma: no cover - the package was installed without its C extension
    # mypy types _built as the module (_solve.pyi, so its calls are checked); every use tests for None.
    _built = None  # type: ignore[assignment]
if _built is not None and not all(hasattr(_built, name) for name in ("uncontended_plan", "vacancy_needs", "vacancy_empty")):
    _built = None  # type: ignore[assignment]  # built from an older _solve.c (an install not rebuilt since): NumPy's steps, the same decisions

try:
    from scheduler.matching import _walk as _walk_built
except ImportError:  # pragma: no cover - the package was installed without its C extension
    _walk_built = None  # type: ignore[assignment]

native = _built  # the extension in use: None: the uncontended plans and the vacancy bound in NumPy (the tests compare both)
# The walk's bookkeeping in C (_solve.c's class_count, near and rows_of), where the extension
# was built from a source that has it; None: in NumPy, the same answers (the tests compare both).
walk = native if native is not None and all(hasattr(native, name) for name in ("class_count", "near", "rows_of")) else None
# Runs of the walk's visits in C (_walk.c's uncontended_run, :class:`_Run`); None: every visit
# in Python, the same decisions (tests/matching/test_matching_walk_run.py compares both).
runs = _walk_built if _walk_built is not None and hasattr(_walk_built, "uncontended_run") else None


@dataclass(frozen=True, slots=True)
class Matched:
    """Algorithm 2's starts, and — when every user was considered, so that one matching served
    every free machine — that matching (``problem``, ``queues``; None otherwise): admission
    plans the queue from it instead of making the instance's arrays again."""

    started: list[Assignment]
    problem: Problem | None = None
    queues: Queues | None = None
    # At α < 1 (several matchings): every waiting job's arrays on the machines before the
    # starts, which admission takes its queue's rows from.
    every_job: Problem | None = None
    # Free machines the walk left unvisited, ``stop`` having said so (``matched``): decided by
    # none of its starts, which are the whole walk's first ones.
    undecided: int = 0
    # At α < 1: each user's progress after the starts, as the walk ranked by it (the progress
    # given, or ``running``'s, plus each start's value in the order of the starts); None where
    # no ranking was kept (every user considered, or AlloX+).
    progress: Mapping[str, float] | None = None


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
        stop: Callable[[], bool] | None = None,
    ) -> Matched:
        """:meth:`on_machine_free`, with the one matching it made when every user was considered.
        ``machines``: the free machines (in :func:`~scheduler.matching.visit_order.visiting_order`,
        the order they are visited in) then ``busy_until``'s others, already in array form;
        without it the free machines are visited in that order.
        ``holding_users``: users with running jobs beside ``running``'s (admission passes its
        running Jobs so, their progress in ``progress``, rather than as an assignment each).
        ``stop``: asked before each visit once a job has started; True ends the walk there, the
        machines not visited counted in ``Matched.undecided`` (a visit's start depends only on the
        visits before it, so the starts made are the whole walk's first ones)."""
        if machines is None:
            free_machines = visiting_order(free_machines, pending_jobs)
        free_names = {machine.name for machine in free_machines}
        # The free machines, then the busy ones: made only without ``machines`` or ``shares``.
        listed: list[Machine] | None = None
        if machines is None:
            listed = _listed(free_machines, busy_until, free_names)
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
        shares = self.shares if self.shares is not None else MachineShare.of(listed or _listed(free_machines, busy_until, free_names))
        progress = {user: float(value) for user, value in progress.items()} if progress is not None else user_progress(running, shares)
        ranking = rank_users(users, progress)
        # Every waiting job's arrays once (each plan takes the rows of its users' jobs), so that a
        # job no machine may run is named whichever users are considered.
        every_job = _prepared(arrays, waiting, pending_jobs)
        # The waiting jobs as rows of every_job, by user, so that a plan gathers its users' rows
        # without a pass over the Job objects.
        left = _Left(every_job)
        # The user sets the walk asks for, named by their users' places in the ranking (_UserSet).
        named = left.users(users)
        row_of = {job.name: row for row, job in enumerate(every_job.jobs)}
        # Plans by the user set they were solved for; which of them a start leaves valid, see
        # _Plan.kept_after.
        plans: dict[_Set, _Plan | _Deferred] = {}
        delay = arrays.delay.copy()  # the machines' waits now, moved by each start
        # What is known of each user set's optimal matchings without its plan (_Empty), and
        # each start as kept_after asks it (the plans put off replay those since them,
        # _Deferred: a start while none is put off is read by none, and not kept).
        empty: dict[_Set, _Empty] = {}
        starts_seen: list[_Seen] = []
        moved = False  # a start since ``arrays`` was last written
        # The machines' kind_orders as ``arrays`` has them (None: not sorted yet), and the
        # machines started since, which they have yet to take in.
        orders: tuple[KindOrder, ...] | None = arrays.orders
        shifted: list[int] = []
        # With every user considered the ranking cannot change who is matched.
        ranked = base < len(ranking)
        # Per kind, how many waiting jobs each user has that can run on it (§4.4's raise asks
        # for the users with one, once per machine a plan leaves empty).
        runnable = left.runnable()

        # Told without solving: a plan that certainly leaves a machine empty (_Vacancy). A free
        # machine listed twice is two machines of one name to the fleet: not told there.
        vacancy = _Vacancy(every_job, delay, live=left.waiting_flags) if len(free_names) == len(free_machines) and every_job.jobs else None

        started: list[Assignment] = []
        # The last machine visited since the last start, when it started nothing: its kind
        # index, wait and position (see _starts_nothing_after).
        passed: tuple[int, float, int] | None = None
        # The user sets whose plan _Left.uncontended declined since the last start.
        declined: set[_Set] = set()
        # A plan solved ahead of the raise since the last start (_Ahead), and per machine kind
        # the user count whose plan started the last visit's job (_EXHAUSTED: none did).
        ahead: _Ahead | None = None
        ended: dict[str, int] = {}
        # Runs of visits decided in C (_Run, made when first tried), while no plan is put off
        # and nothing is known of an empty plan (_Empty): the visits before ``resume`` were,
        # and ``handed_back`` is the one the last run left to this loop. A run is tried again
        # once this loop has started a job as a run would have (``run_worth``: the considered
        # users' plan, held or uncontended), not at each visit: a run that decides nothing
        # costs ~20 us.
        run: _Run | None = None
        resume, handed_back, run_worth = 0, -1, runs is not None
        undecided = 0
        for at, machine in enumerate(free_machines):
            if at < resume:
                continue
            if stop is not None and started and waiting and stop():
                undecided = len(free_machines) - at
                break
            if run_worth and at > handed_back and not empty and all(isinstance(plan, _Plan) for plan in plans.values()):
                if run is None and runs is not None:
                    run = _Run.of(extension=runs, free_machines=free_machines, machines=arrays, every_job=every_job, left=left,
                                  names=ranking, delay=delay, shares=shares, named=named)
                carried = run.walk(at, delay=delay, machine_kind=arrays.machine_kind, fleet_now=arrays.now, now=now, plans=plans,
                                   ranking=ranking, progress=progress, base=base, ranked=ranked, passed=passed if _SKIP_PASSED else None,
                                   started=started, waiting=waiting, runnable=runnable, vacancy=vacancy, shifted=shifted,
                                   ended=ended) if run is not None else _Carried(at, 0, ranking)
                resume = handed_back = carried.next_visit
                run_worth = carried.starts > 0
                if carried.starts:
                    ranking = carried.ranking
                    moved = True
                    declined.clear()
                    ahead = None
                    passed = None
                if resume > at:
                    continue
            if not waiting:
                break
            position = arrays.position_of[machine.name]
            if _SKIP_PASSED and passed is not None and _starts_nothing_after(passed, position=position, delay=delay, machine_kind=arrays.machine_kind):
                continue
            count = base
            chosen: tuple[_Plan, Job] | None = None
            # The machine's class as the facts read it, asked at most once a visit (_Here).
            here = _Here(position, delay, arrays.machine_kind) if _HERE_KEPT else None
            told = vacancy is None  # whether every waiting job's bound has been asked this visit
            made_uncontended = fresh = False  # whether the plan that starts a job was made, and by _Left.uncontended
            # Whether a set of this visit's raise was declined by _Left.uncontended, and whether
            # its bound did not tell (_Vacancy.empty): the raise's sets nest, and a larger set
            # is declined too (more jobs of each kind, the same jobs' kinds) and its bound only
            # larger, so neither is asked again before a start.
            contended = bounded = False
            while count:
                considered = named.prefix(ranking, count)
                plan = plans.get(considered)
                if isinstance(plan, _Deferred):
                    if plan.leaves_empty(position, starts_seen):
                        count = self._raised_count(ranking, count, runnable.get(machine.kind, {})) if self.raise_alpha_when_idle else 0
                        continue
                    plan = plan.made(left, starts_seen)
                    if plan is None:
                        del plans[considered]
                    else:
                        plans[considered] = plan
                fresh = plan is None
                if plan is None:
                    # Once a smaller set of this visit was declined and its bound did not tell,
                    # neither test is asked of this one (see contended), and a plan put off by
                    # a fact below takes its rows when it is made (_Deferred): read only if solved.
                    rows = None if _ROWS_WHEN_MADE and contended and told and bounded else left.rows(considered)
                    # Asked again before a start (the raise at the next machine): declined again.
                    written = None if considered in declined or contended or rows is None else left.uncontended(rows, delay, arrays)
                    made_uncontended = written is not None
                    if written is None:
                        declined.add(considered)
                        # Without rows: a larger set than the one that set it, with at least its rows.
                        contended = contended if rows is None else _NEST_TESTS and bool(rows.shape[0])
                    if written is None and vacancy is not None and rows is not None and rows.shape[0]:
                        # Before a solve: when every optimal matching leaves the machine empty,
                        # no solve can start a job on it (the plan is made when a machine needs
                        # it). Asked of every waiting job too: the bound only shrinks as jobs
                        # are left out, so then no user set's plan, made or kept (each an
                        # optimal matching), starts one, and the raise is not walked. Asked
                        # first (without _NEST_TESTS), or once this set's bound tells: when it
                        # does not, no larger set's does, every waiting job's included.
                        if not told and not _NEST_TESTS:
                            told = True
                            if vacancy.empty(left.rows(None), position):
                                break
                        if not bounded and vacancy.empty(rows, position):
                            if not told:
                                told = True
                                if vacancy.empty(left.rows(None), position):
                                    break
                            count = self._raised_count(ranking, count, runnable.get(machine.kind, {})) if self.raise_alpha_when_idle else 0
                            continue
                        told, bounded = True, _NEST_TESTS
                    if written is None:
                        if moved:
                            orders = _reordered(orders, shifted, delay, arrays.machine_kind)
                            shifted.clear()
                            arrays = _moved_to(arrays, delay=delay, orders=orders)
                            moved = False
                        known = empty.get(considered) if _CARRY_EMPTY and vacancy is not None else None
                        if known is not None and known.leaves_empty(position, delay, arrays.machine_kind, here):
                            # Every optimal matching leaves the machine empty, as the plan
                            # would: put off until a machine asks for it again, if one does.
                            plans[considered] = _Deferred(rows, arrays, len(starts_seen), known, users=considered)
                            count = self._raised_count(ranking, count, runnable.get(machine.kind, {})) if self.raise_alpha_when_idle else 0
                            continue
                        if rows is None:
                            rows = left.rows(considered)
                        if arrays.orders is None:
                            # Sorted once, then moved a machine per start (_reordered).
                            orders = kind_orders(machine_kind=arrays.machine_kind, available=arrays.delay, kind_count=len(arrays.kinds))
                            arrays = replace(arrays, orders=orders)
                        if ahead is None and _LOOK_AHEAD and _CARRY_EMPTY and vacancy is not None and self.raise_alpha_when_idle and rows.shape[0]:
                            guess = ended.get(machine.kind)
                            if _SEARCH_AHEAD and guess is not None:
                                ahead = _Ahead.searched(named, ranking, count, runnable.get(machine.kind, {}), guess, left, arrays, position,
                                                        delay, vacancy)
                            target = _ahead_count(ranking, count, runnable.get(machine.kind, {}), guess) if ahead is None else 0
                            if target:
                                ahead = _Ahead.solved(named.prefix(ranking, target), left, arrays, position, delay, vacancy)
                        solved_ahead = ahead.plan_for(considered) if ahead is not None else None
                        if solved_ahead is not None:
                            written = solved_ahead  # solved on these machines for these rows: what solving now gives
                        elif ahead is not None and ahead.tells(considered, position, delay, arrays.machine_kind, here):
                            # A larger set's plan at these waits shows that every optimal
                            # matching of this set leaves the machine empty: put off, as above.
                            assert ahead.fact is not None
                            plans[considered] = _Deferred(rows, arrays, len(starts_seen), ahead.fact)
                            empty[considered] = ahead.fact  # as the set's own plan would have shown (at most)
                            count = self._raised_count(ranking, count, runnable.get(machine.kind, {})) if self.raise_alpha_when_idle else 0
                            continue
                        else:
                            written = left.solved(rows, arrays)
                    plan = plans[considered] = written
                head = plan.first(position)
                if head is not None:
                    chosen = (plan, head)
                    break
                if fresh and plan.unique is not None and _CARRY_EMPTY and vacancy is not None and plan.queued is not None and vacancy.positive(plan.queued):
                    fact = _Empty.of(plan, position, delay, vacancy.near)
                    if fact is not None:
                        empty[considered] = fact
                count = self._raised_count(ranking, count, runnable.get(machine.kind, {})) if self.raise_alpha_when_idle else 0
            if chosen is None:
                ended[machine.kind] = _EXHAUSTED
                passed = (int(arrays.machine_kind[position]), float(delay[position]), position)
                continue
            ended[machine.kind] = count
            run_worth = runs is not None and count == base and (not fresh or made_uncontended)
            ahead = None
            passed = None
            source, job = chosen
            assignment = Assignment.starting(job, machine, now)
            started.append(assignment)
            del waiting[job.name]
            left.remove(row_of[job.name])
            declined.clear()
            _no_longer_waiting(runnable, job)
            wait = max(assignment.finish - arrays.now, 0.0)  # as Fleet.with_available writes it
            if empty:
                empty = _Empty.after_start(empty, position=position, wait=wait, delay=delay, machine_kind=arrays.machine_kind)
            if vacancy is not None:
                vacancy.moved(position, float(delay[position]), wait)
            delay[position] = wait
            moved = True
            shifted.append(position)
            if ranked:
                progress[job.user] = progress.get(job.user, 0.0) + job_value(job, machine.kind, shares)
                ranking = _reranked(ranking, job.user, users, progress)
            # The rest of an optimal matching stays optimal once the first job of one machine
            # has started and that machine's ω has moved to the job's finish: every matching
            # that keeps the job there pays the same extra for it, and any better matching of
            # the rest would, with the job put back in front, beat the original. So the plan
            # the job came from needs no re-solve; the others may have placed the job elsewhere.
            source.pop(position)
            kind_index = int(arrays.machine_kind[position])
            # Whether another machine of the kind now waits what this one does: counted once
            # here rather than among each plan's machines (kept_after), as a started job's
            # finish is most often its own (after a burst, at every start).
            shared = not _ALONE_TOLD or _listed_before(len(delay), kind=kind_index, wait=wait, delay=delay,
                                                       machine_kind=arrays.machine_kind) > 1
            plans = {
                considered: plan
                for considered, plan in plans.items()
                if (plan is source or job.user not in considered)
                and (isinstance(plan, _Deferred)
                     or plan.kept_after(source=plan is source, position=position, kind=kind_index, wait=wait, delay=delay, shared=shared))
            }
            if any(isinstance(plan, _Deferred) for plan in plans.values()):
                if not _ALONE_TOLD:
                    shared = _listed_before(len(delay), kind=kind_index, wait=wait, delay=delay, machine_kind=arrays.machine_kind) > 1
                starts_seen.append(_Seen(position, kind_index, wait, delay.copy(), shared))
            # else no plan is put off: a plan put off later reads the starts after it only.
        return Matched(started, every_job=every_job, undecided=undecided, progress=progress if ranked else None)

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


def _reranked(ranking: list[str], user: str, users: Collection[str], progress: Mapping[str, float]) -> list[str]:
    """``rank_users(users, progress)`` once ``user``'s progress alone has changed, ``ranking``
    being its answer before: ``user`` moved to its place, a search, where every progress is a
    number (then (progress, name) orders the users strictly, and the sort's answer is the one
    order); a sort otherwise (a NaN compares as nothing does). A new list (the walk's user sets
    know a ranking by its identity): the ranking is asked at every start (a sort of 1,000
    users ~2 ms)."""
    value = progress.get(user, 0.0)
    if math.isnan(sum(progress.values(), value)):  # a NaN (or infinities of both signs: sorted, as ever)
        return rank_users(users, progress)
    moved = ranking.copy()
    moved.remove(user)
    moved.insert(bisect.bisect_left(moved, (value, user), key=lambda other: (progress.get(other, 0.0), other)), user)
    return moved


def _no_longer_waiting(runnable: dict[str, dict[str, int]], job: Job) -> None:
    """``job`` has started: one waiting job fewer of its user on each kind it can run on
    (``runnable``, per kind: users left out when they have none)."""
    for kind in job.processing_time:
        counts = runnable.get(kind)
        if counts is not None:
            counts[job.user] -= 1
            if not counts[job.user]:
                del counts[job.user]


def _starts_nothing_after(passed: tuple[int, float, int], *, position: int, delay: FloatArray, machine_kind: IntArray) -> bool:
    """Whether machine ``position`` certainly starts nothing, its visit coming after one to the
    machine ``passed`` (kind index, wait, position) that started nothing, with no start since.

    It does when it is of the same kind and waits as long, listed after it. Between two starts
    nothing Algorithm 2's walk reads changes but the plans it makes and keeps, and every test
    of a visit that tells a machine empty holds for a machine listed later in its class (kind
    and wait; neither machine has started, so both have had their waits throughout, and were of
    one class whenever a plan was made): a plan's queues on a class are longest on the machines
    listed first (:func:`~scheduler.matching.solve.canonical`; an uncontended plan takes each
    kind's free machines as listed), and since only started machines have taken a job off
    their queue; ``_Vacancy.empty``, ``_Empty.beyond`` and ``_Deferred.leaves_empty`` count the
    machines of the class listed before it, which only grow. So the later visit asks for the
    plans the first one asked for, finds each one it made (or told, or put off) as it left it,
    stops where it stopped or sooner, and makes nothing the first did not: skipping it leaves
    the walk as visiting it would."""
    kind, wait, at = passed
    return position > at and int(machine_kind[position]) == kind and float(delay[position]) == wait


def _listed(free_machines: Sequence[Machine], busy_until: Mapping[Machine, float], free_names: Collection[str]) -> list[Machine]:
    """The free machines, then ``busy_until``'s others, as the fleet lists them."""
    return [*free_machines, *(m for m in busy_until if m.name not in free_names)]


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
    """Lines 3–7 of Algorithm 2 for one user set: the matching of the set's waiting jobs (each
    machine's queue, ``queued[bounds[i]:bounds[i+1]]``, indices of ``jobs``), and how many jobs
    each machine has started from its queue since."""

    jobs: Sequence[Job]
    machine_kind: IntArray
    bounds: IntArray | None  # None: no job
    queued: IntArray | None
    taken: dict[int, int]
    used: IntArray | None = None  # the machines with a queue, ascending (None: not worked out yet)
    # Solved plans: whether the matching is certainly the only optimal one (asked if needed).
    unique: Callable[[], bool] | None = None

    def first(self, position: int) -> Job | None:
        """The job the plan starts next on machine ``position``; None if its queue is empty."""
        if self.bounds is None or self.queued is None:
            return None
        bounds = self.bounds
        at = int(bounds[position]) + self.taken.get(position, 0)
        return self.jobs[int(self.queued[at])] if at < int(bounds[position + 1]) else None

    def pop(self, position: int) -> None:
        self.taken[position] = self.taken.get(position, 0) + 1

    def kept_after(self, *, source: bool, position: int, kind: int, wait: float, delay: FloatArray, shared: bool = True) -> bool:
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
        kind that waits as long as it now does. ``shared`` False: the caller has counted the
        machines of the kind that wait ``wait``, and no other than ``position`` does.
        """
        if self.bounds is None:
            return True
        bounds = self.bounds
        if not source and int(bounds[position + 1]) - int(bounds[position]) > self.taken.get(position, 0):
            return False
        if not shared:
            return True  # no other machine of the kind waits ``wait``: the plan has a queue on none
        used = self.used
        if used is None:
            used = self.used = np.flatnonzero(np.diff(bounds))
        return not _in_class(used, kind=kind, wait=wait, delay=delay, machine_kind=self.machine_kind, leaving_out=position)


# Off: every plan Algorithm 2 needs is solved when it is needed (what _Empty saves; the tests
# compare both ways).
_CARRY_EMPTY = True

# Off: every free machine is visited, also those _starts_nothing_after tells (the tests compare
# both ways).
_SKIP_PASSED = True

# Off: no plan is solved ahead of §4.4's raise (_Ahead; the tests compare both ways).
_LOOK_AHEAD = True

# Off: each set of a visit's raise is asked _Left.uncontended and _Vacancy.empty, also after a
# smaller one's answer tells theirs (the tests compare both ways).
_NEST_TESTS = True

# Off: each fact the raise reads at a visit counts the machine's class again (_Here; the tests
# compare both ways).
_HERE_KEPT = True

# Off: _Vacancy sums every start's move into N, also those of machines waiting too long to count
# for any row (_Vacancy._reach_of; the tests compare both ways).
_SKIP_UNREACHED = True

# Off: kept_after counts each plan's machines of the started one's kind and wait, also where no
# other machine of the kind waits that (the tests compare both ways).
_ALONE_TOLD = True

# _Users names the walk's user sets by the ranking (_UserSet) from more users than this;
# up to it, frozensets of the users, as cheap there (the tests set it to 0 and 10**9).
_NAMED_FROM = 64

# Off: _Ahead solves the one set below its guess, never searches (the tests compare both ways).
_SEARCH_AHEAD = True

# _Ahead.searched searches only a raise of more than this many sets (fewer: the one set below
# the guess, as ever).
_SEARCH_FROM = 16

# Off: every new set of the raise reads its waiting rows, also one a fact puts off once the nested
# tests have answered (_Deferred then reads them when made; the tests compare both ways).
_ROWS_WHEN_MADE = True

# _Ahead's guess when the raise at the last visit of a kind started nothing: every user it
# can bring in.
_EXHAUSTED = 1 << 62


@dataclass(slots=True)
class _Empty:
    """A user set's plan that left a free machine empty: at most ``count`` machines of kind
    ``kind`` that wait ``wait`` have a queue in it. Once the plan is certainly the only optimal
    matching (the test :func:`~scheduler.matching.solve.contended_plan` hands back, asked the
    first time this is used), that holds for every optimal matching of the set's jobs,
    and it stays true across a start on one of those machines (:meth:`after_start`): a later
    plan of the set certainly leaves such a machine empty when at least ``count`` of them are
    listed before it, and need not be solved for it (Algorithm 2 starts nothing there from it).

    A start on machine ``M`` of the group (kind ``kind``, wait ``wait``), while at most
    ``count`` of its ``m > count`` machines have a queue in every optimal matching: (i) ``M``
    now waits longer. Some optimal matching leaves ``M`` empty (the group's machines are
    interchangeable and one is always empty), so the optimum is what it was, and every
    matching costs at least what it did: each optimal matching now was one before, with at
    most ``count`` queues on the group, ``M`` no longer in it. (ii) The started job leaves the
    set's jobs (if it was one of them). Any optimal matching of the jobs without it becomes an
    optimal matching of the jobs with it by one augmenting path (successive shortest paths,
    over the transport of ``transport.py``): the path moves jobs between (kind, position)
    groups and ends in one group, which gains a job; no group loses one. An optimal matching
    fills a group's cheapest slots, so the machines of the group (kind, wait) with a queue do
    not fall either: without the job there are at most as many as with it, at most
    ``count``. Jobs that take no time on a kind may leave gaps in a queue (a machine with a
    queue but no first position): such sets are not kept. The argument is in exact
    arithmetic, as the solver's is: the certificate refuses a plan when another matching is
    within rounding of it, and after (ii) a matching worse than the optimum comes within
    rounding of it only if two sums of jobs' times and waits agree to ~1e-12 of the total
    (never with whole-number times, whose sums are exact). The certificate is about kinds and
    positions, not about which machines of a position the solver filled: a machine of the kind
    whose wait is within rounding of the group's (``tolerance``, :attr:`_Vacancy.near`) costs
    what one of the group costs in floating point, and the solver may fill either (a CPU slot
    busy for 4e-16 s taken before a free one: the plan then shows no free slot used, which the
    exact optimum does not). So nothing is kept, or told, while the kind has such a machine."""

    kind: int
    wait: float
    count: int
    unique: Callable[[], bool] | None  # the plan's test, until asked (certain)
    tolerance: float  # how near another wait of the kind may come to ``wait`` (see the class)
    certain: bool | None = None

    @staticmethod
    def of(plan: _Plan, position: int, delay: FloatArray, tolerance: float) -> _Empty | None:
        """What ``plan`` (just solved, with the machines waiting ``delay``) shows of the group
        of machine ``position``, which it leaves empty; None where a machine of its kind waits
        within ``tolerance`` of it (the plan may not show the exact optimum's count)."""
        assert plan.bounds is not None and plan.unique is not None
        kind, wait = int(plan.machine_kind[position]), float(delay[position])
        if _near(kind, wait, delay, plan.machine_kind, tolerance):
            return None
        used = plan.used if plan.used is not None else np.flatnonzero(np.diff(plan.bounds))
        count = _in_class(used, kind=kind, wait=wait, delay=delay, machine_kind=plan.machine_kind, leaving_out=-1)
        return _Empty(kind, wait, count, plan.unique, tolerance)

    def leaves_empty(self, position: int, delay: FloatArray, machine_kind: IntArray, here: _Here | None = None) -> bool:
        """Whether every optimal matching of the set's waiting jobs, on the machines waiting
        ``delay``, leaves machine ``position`` empty (False: not certain). ``here``: what is
        known of ``position``'s class on these machines (see :class:`_Here`)."""
        if not self.beyond(position, delay, machine_kind, here):
            return False
        if self.certain is None:
            assert self.unique is not None
            self.certain = self.unique()
            self.unique = None
        return self.certain

    def beyond(self, position: int, delay: FloatArray, machine_kind: IntArray, here: _Here | None = None) -> bool:
        """Whether machine ``position`` is of the group, with at least ``count`` of it listed
        before it: canonical gives a group's queues to its machines listed first."""
        if here is not None and here.of(position, delay, machine_kind):
            if here.kind != self.kind or here.wait != self.wait or here.near(self.tolerance):
                return False
            return self.count <= here.before()
        kind, wait = int(machine_kind[position]), float(delay[position])
        if kind != self.kind or wait != self.wait or _near(kind, wait, delay, machine_kind, self.tolerance):
            return False
        return self.count <= _listed_before(position, kind=kind, wait=wait, delay=delay, machine_kind=machine_kind)

    @staticmethod
    def after_start(known: dict[_Key, _Empty], *, position: int, wait: float, delay: FloatArray,
                    machine_kind: IntArray) -> dict[_Key, _Empty]:
        """What stays known once a job has started on machine ``position``, which waited
        ``delay[position]`` and now waits ``wait`` (see the class)."""
        kind, old = int(machine_kind[position]), float(delay[position])
        if wait < old:
            return {}
        group = _listed_before(len(delay), kind=kind, wait=old, delay=delay, machine_kind=machine_kind)
        if all(fact.kind == kind and fact.wait == old and fact.count < group for fact in known.values()):
            return known  # every fact stays (after a burst, at nearly every start: thousands with as many users)
        return {users: fact for users, fact in known.items() if fact.kind == kind and fact.wait == old and fact.count < group}


class _Here:
    """The visited machine's class on the machines as the walk has them (the walk's own waits,
    which nothing moves between a visit's first test and its start): its kind and wait, whether
    a machine of its kind waits within a tolerance of it, and how many of its class are listed
    before it, each worked out when first asked. :meth:`_Empty.beyond` asks the same of every
    fact the raise reads at a visit (~150 a burst's pass, two scans of the machines each)."""

    __slots__ = ("_position", "_delay", "_machine_kind", "kind", "wait", "_near", "_before")

    def __init__(self, position: int, delay: FloatArray, machine_kind: IntArray) -> None:
        self._position, self._delay, self._machine_kind = position, delay, machine_kind
        self.kind, self.wait = int(machine_kind[position]), float(delay[position])
        self._near: dict[float, bool] = {}
        self._before: int | None = None

    def of(self, position: int, delay: FloatArray, machine_kind: IntArray) -> bool:
        """Whether this is machine ``position``'s class on these very buffers."""
        return position == self._position and delay is self._delay and machine_kind is self._machine_kind

    def near(self, tolerance: float) -> bool:
        """:func:`_near` of the class."""
        found = self._near.get(tolerance)
        if found is None:
            found = self._near[tolerance] = _near(self.kind, self.wait, self._delay, self._machine_kind, tolerance)
        return found

    def before(self) -> int:
        """:func:`_listed_before` the machine, of its class."""
        if self._before is None:
            self._before = _listed_before(self._position, kind=self.kind, wait=self.wait, delay=self._delay, machine_kind=self._machine_kind)
        return self._before


# _reordered sorts every kind again from this many machines moved (each move in NumPy ~27 us, a
# sort of every kind ~67 us), or from this many where _positions.c moves them (~3 us a move).
_RESORT = 3
_RESORT_NATIVE = 16


def _reordered(orders: tuple[KindOrder, ...] | None, shifted: Sequence[int], delay: FloatArray,
               machine_kind: IntArray) -> tuple[KindOrder, ...] | None:
    """``orders`` once each machine of ``shifted`` waits what ``delay`` now says (None stays
    None: nothing sorted yet): each machine moved in its kind's order, or, for as many as
    ``_RESORT`` or more (``_RESORT_NATIVE`` where the moves are C's), every kind sorted again (what moving them gives,
    tests/matching/test_matching_kind_orders.py; after a burst the uncontended starts between
    two solves move several machines, each move costing a third of a sort)."""
    if orders is None:
        return None
    if len(shifted) >= (_RESORT if positions.moving is None else _RESORT_NATIVE):
        return kind_orders(machine_kind=machine_kind, available=delay, kind_count=len(orders))
    for position in shifted:
        orders = kind_orders_after(orders, machine=position, kind=int(machine_kind[position]), omega=float(delay[position]))
    return orders


def _moved_to(machines: Fleet, *, delay: FloatArray, orders: tuple[KindOrder, ...] | None) -> Fleet:
    """``machines`` waiting a copy of ``delay``, with ``orders``: ``dataclasses.replace``'s
    Fleet, made directly (half its ~7 us, once a visit after a start)."""
    return Fleet(machines=machines.machines, kinds=machines.kinds, machine_kind=machines.machine_kind, delay=delay.copy(), now=machines.now,
                 position_of=machines.position_of, orders=orders)


def _near(kind: int, wait: float, delay: FloatArray, machine_kind: IntArray, tolerance: float) -> bool:
    """Whether a machine of kind ``kind`` waits other than ``wait`` but within ``tolerance`` of it."""
    if walk is not None and _plain_machines(machine_kind, delay):
        return bool(walk.near(machine_kind, delay, kind, wait, tolerance))
    gap = np.abs(delay[machine_kind == kind] - wait)
    return bool(((gap > 0) & (gap <= tolerance)).any())


def _plain_machines(machine_kind: IntArray, delay: FloatArray) -> bool:
    """Whether the machines' kinds and waits are the buffers ``_solve.c`` reads: int64 and
    float64, each one contiguous row."""
    return (machine_kind.dtype == np.int64 and delay.dtype == np.float64 and machine_kind.ndim == 1 and delay.ndim == 1
            and machine_kind.flags.c_contiguous and delay.flags.c_contiguous)


def _listed_before(end: int, *, kind: int, wait: float, delay: FloatArray, machine_kind: IntArray) -> int:
    """How many machines listed before ``end`` are of kind ``kind`` and wait ``wait``."""
    if walk is not None and _plain_machines(machine_kind, delay):
        return int(walk.class_count(None, machine_kind, delay, kind, wait, end))
    return int(((machine_kind[:end] == kind) & (delay[:end] == wait)).sum())


def _in_class(machines: IntArray, *, kind: int, wait: float, delay: FloatArray, machine_kind: IntArray, leaving_out: int) -> int:
    """How many of ``machines`` (indices), ``leaving_out`` left out, are of kind ``kind`` and wait ``wait``."""
    if walk is not None and _plain_machines(machine_kind, delay) and machines.dtype == np.int64 and machines.flags.c_contiguous:
        return int(walk.class_count(machines, machine_kind, delay, kind, wait, leaving_out))
    return int(((machine_kind[machines] == kind) & (delay[machines] == wait) & (machines != leaving_out)).sum())


def _ahead_count(ranking: Sequence[str], count: int, runnable: Mapping[str, int], guess: int | None) -> int:
    """How many users the plan :class:`_Ahead` solves has, asked at a visit whose raise is at
    ``count`` users: the largest count the raise would come to (each next user with a job the
    machine can run, ``runnable``) that is below ``guess``, the count whose plan started the
    last visit's job on a machine of the kind (``_EXHAUSTED``: none did; None: no visit yet,
    nothing solved ahead); 0 when there is none."""
    if guess is None:
        return 0
    target = 0
    for index in range(count, len(ranking)):
        if ranking[index] in runnable:
            if index + 1 >= guess:
                break
            target = index + 1
    return target


@dataclass(frozen=True, slots=True)
class _Ahead:
    """A plan solved ahead of §4.4's raise (beyond the paper, deciding exactly as solving every
    plan does): the set of ``users`` that the raise would come to last before the count whose
    plan started a job at the last visit of the machine's kind, solved when the raise first
    needs a solve at a visit, on the machines as they are.

    The raise's user sets nest (each adds the next user). When the larger set's plan is
    certainly the only optimal matching and leaves the machine empty, at most ``fact.count``
    machines of its class (kind, wait) have a queue in every optimal matching of it, and so in
    every optimal matching of each smaller set: an optimal matching of the smaller set's jobs
    becomes one of the larger set's by one augmenting path per job added, each raising one
    (kind, position) group's load and lowering none, and an optimal matching fills a group's
    cheapest slots, so the class's machines with a queue never fall (:class:`_Empty`'s (ii),
    job by job; jobs that take no time are never told). A smaller set's plan is then put off
    as :class:`_Empty` puts one off (:class:`_Deferred`, with this fact), instead of solved
    only to leave the machine empty; the larger set's plan is the one the raise's own solve
    would give (the same rows on the same machines: no start since), and is used as that.
    What the guess gets wrong costs a solve, never a decision. Dropped at every start."""

    users: _Set
    plan: _Plan
    fact: _Empty | None  # what the plan shows of the asking machine's class, when it leaves it empty
    # Other sets of the raise solved on the way (searched), each what the raise's own solve gives.
    more: Mapping[_Set, _Plan] = field(default_factory=dict)

    def plan_for(self, considered: _Set) -> _Plan | None:
        """``considered``'s plan, when it was solved here (on the machines as they are)."""
        if self.users == considered:
            return self.plan
        return self.more.get(considered)

    @staticmethod
    def searched(named: _Users, ranking: list[str], count: int, runnable: Mapping[str, int], guess: int, left: _Left, machines: Fleet,
                 position: int, delay: FloatArray, vacancy: _Vacancy) -> _Ahead | None:
        """With many users, the raise's sets from ``count`` on searched for the boundary between
        those whose plan certainly leaves machine ``position`` empty (and, by the nesting
        argument above, every smaller set's) and the first whose plan has a job on it: the set
        below ``guess`` (as :func:`_ahead_count` takes it, or ``count``'s own) solved first,
        then, while its plan leaves the machine empty with a certificate, sets further up at
        doubling strides, and between the last such and the first with a job, halves; a plan
        that leaves it empty without a certificate (or :meth:`_Empty.of` declines) stops the
        search where it stands. O(log sets) solves instead of one a set, where one guess was
        wrong by hundreds of sets (2,000 Jobs of 2,000 users: ~150 solves a start). Each plan
        is the one the raise's own solve of its set gives (the same rows, on the same machines,
        no start since), used if the raise comes to it; the largest set told empty tells the
        smaller ones as :meth:`solved`'s does. None for a raise of at most ``_SEARCH_FROM``
        sets (then :meth:`solved`, as ever)."""
        if len(ranking) - count < _SEARCH_FROM:
            return None  # at most one set a user after ``count``'s: not searched (asked at nearly every visit that solves)
        # The raise's counts, as _raised_count takes them one after another.
        counts = [count, *(index + 1 for index in range(count, len(ranking)) if ranking[index] in runnable)]
        if len(counts) <= _SEARCH_FROM:
            return None
        solved: dict[_Set, _Plan] = {}
        told: list[tuple[int, _Set, _Empty]] = []

        def probe(at: int) -> int:
            """Solves set ``at``: 1 a job on the machine, -1 certainly empty, 0 neither known."""
            users = named.prefix(ranking, counts[at])
            plan = solved[users] = left.solved(left.rows(users), machines)
            if plan.first(position) is not None:
                return 1
            if plan.unique is None or plan.queued is None or not vacancy.positive(plan.queued):
                return 0
            fact = _Empty.of(plan, position, delay, vacancy.near)
            if fact is None:
                return 0
            told.append((at, users, fact))
            return -1

        start = max((at for at, value in enumerate(counts) if value < guess), default=0)
        low, high = -1, len(counts)  # the last set known empty, the first known to have a job
        found = probe(start)
        if found < 0:
            low, stride = start, 1
            while found < 0 and low + stride < len(counts):
                found = probe(low + stride)
                if found < 0:
                    low, stride = low + stride, stride * 2
                elif found > 0:
                    high = low + stride
        elif found > 0:
            high = start
        while found and high - low > 1:
            middle = (low + high) // 2
            found = probe(middle)
            if found < 0:
                low = middle
            elif found > 0:
                high = middle
        if told:
            _, users, fact = max(told, key=lambda entry: entry[0])
            return _Ahead(users, solved.pop(users), fact, solved)
        users = next(iter(solved))
        return _Ahead(users, solved.pop(users), None, solved)

    @staticmethod
    def solved(users: _Set, left: _Left, machines: Fleet, position: int, delay: FloatArray,
               vacancy: _Vacancy) -> _Ahead:
        """``users``' plan on ``machines`` (waiting ``delay``), and what it shows of machine
        ``position``'s class."""
        plan = left.solved(left.rows(users), machines)
        fact = None
        if plan.first(position) is None and plan.unique is not None and plan.queued is not None and vacancy.positive(plan.queued):
            fact = _Empty.of(plan, position, delay, vacancy.near)
        return _Ahead(users, plan, fact)

    def tells(self, considered: _Set, position: int, delay: FloatArray, machine_kind: IntArray, here: _Here | None = None) -> bool:
        """Whether every optimal matching of ``considered``, a smaller set than ``users``, on
        the machines as they are leaves machine ``position`` empty (False: not certain)."""
        return self.fact is not None and _smaller(considered, self.users) and self.fact.leaves_empty(position, delay, machine_kind, here)


def _smaller(small: _Set, large: _Set) -> bool:
    """Whether ``small`` is a proper subset of ``large``."""
    if isinstance(small, _UserSet) and isinstance(large, _UserSet):
        return small < large
    return frozenset(small) < frozenset(large)


def _once(test: Callable[[], bool]) -> Callable[[], bool]:
    """``test``, worked out the first time it is asked and kept: a plan's certificate, which
    each fact read off the plan may ask."""
    answer: list[bool] = []

    def asked() -> bool:
        if not answer:
            answer.append(test())
        return answer[0]

    return asked


@dataclass(frozen=True, slots=True)
class _Carried:
    """What a run of visits in C did (:meth:`_Run.walk`): the visit the walk goes on from (the
    run did not decide it), how many jobs it started, and the ranking after them."""

    next_visit: int
    starts: int
    ranking: list[str]


class _Run:
    """Runs of Algorithm 2's visits decided in C (``_walk.c``'s ``uncontended_run``): each visit
    whose plan is held or is the matching where no two jobs contend (:meth:`_Left.uncontended`)
    and starts a job on the machine, with that start's bookkeeping (the machine's wait, the
    user's progress and the ranking, the plans a start keeps, :meth:`_Plan.kept_after`), and
    the machines :func:`_starts_nothing_after` passes by. A run stops at the first visit it
    cannot decide alone (a plan that leaves the machine empty: §4.4's raise; a set whose jobs
    contend: a solve), which the walk in Python takes, and what it started is carried into the
    walk's state here, as the walk's own starts would have left it. After a burst at small α
    those are the ~400 GPU visits (~30 µs each in Python, ~3 µs here)."""

    def __init__(self, *, extension: ModuleType, free_machines: Sequence[Machine], machines: Fleet, every_job: Problem, left: _Left,
                 names: Sequence[str], shares: ShareModel, named: _Users) -> None:
        self._extension = extension
        self._free_machines = free_machines
        self._jobs = every_job.jobs
        self._times = every_job.times
        self._left = left
        self._names = sorted(names)  # users numbered in name order, the ranking's tie-break
        self._number = {user: index for index, user in enumerate(self._names)}
        # The walk's user sets (numbered by ``named``) as the run numbers their users, and back.
        self._named = named
        self._renumbered = np.fromiter((self._number[user] for user in named.names), dtype=np.int64, count=len(named.names))
        self._renamed = np.fromiter((named.number[user] for user in self._names), dtype=np.int64, count=len(self._names))
        self._visits = np.fromiter((machines.position_of[machine.name] for machine in free_machines), dtype=np.int64,
                                   count=len(free_machines))
        self._row_user = np.fromiter((self._number[job.user] for job in self._jobs), dtype=np.int64, count=len(self._jobs))
        self._out_rows = np.empty(len(free_machines), dtype=np.int64)
        self._out_visits = np.empty(len(free_machines), dtype=np.int64)
        self._out_waits = np.empty(len(free_machines))
        self._out_old = np.empty(len(free_machines))
        self._members: dict[_Set, IntArray] = {}
        jobs = self._jobs

        def value(row: int, visit: int) -> float:
            return job_value(jobs[row], free_machines[visit].kind, shares)

        self._value = value

    @staticmethod
    def of(*, extension: ModuleType, free_machines: Sequence[Machine], machines: Fleet, every_job: Problem, left: _Left, names: Sequence[str],
           delay: FloatArray, shares: ShareModel, named: _Users) -> _Run | None:
        """A run over these buffers, where ``_walk.c`` can read them as they are; None otherwise."""
        times = every_job.times
        if not (_plain_machines(machines.machine_kind, delay) and times.dtype == np.float64 and times.ndim == 2 and times.flags.c_contiguous
                and left.fastest.dtype == np.int64 and every_job.jobs):
            return None
        return _Run(extension=extension, free_machines=free_machines, machines=machines, every_job=every_job, left=left, names=names,
                    shares=shares, named=named)

    def walk(self, at: int, *, delay: FloatArray, machine_kind: IntArray, fleet_now: float, now: float,
             plans: dict[_Set, _Plan | _Deferred], ranking: list[str], progress: dict[str, float], base: int, ranked: bool,
             passed: tuple[int, float, int] | None, started: list[Assignment], waiting: dict[str, Job], runnable: dict[str, dict[str, int]],
             vacancy: _Vacancy | None, shifted: list[int], ended: dict[str, int]) -> _Carried:
        """The run from visit ``at``, its starts carried into the walk's state (each argument as
        :meth:`AlloxScheduler.matched` holds it; ``plans`` holds no :class:`_Deferred`)."""
        held = [(users, plan) for users, plan in plans.items() if isinstance(plan, _Plan)]
        order = np.fromiter((self._number[user] for user in ranking), dtype=np.int64, count=len(ranking))
        progressed = np.fromiter((progress.get(user, 0.0) for user in self._names), dtype=np.float64, count=len(self._names))
        next_visit, count, dropped, pops, made = self._extension.uncontended_run(
            self._visits, machine_kind, delay, self._times, self._left.fastest, self._row_user, self._left.waiting_flags, order, progressed,
            self._out_rows, self._out_visits, self._out_waits, self._out_old, [self._given(users, plan, len(delay)) for users, plan in held],
            self._value if ranked else None, at, base, now, fleet_now, passed)
        if not count:
            return _Carried(next_visit, 0, ranking)
        rows = self._out_rows[:count].tolist()
        for row, visit in zip(rows, self._out_visits[:count].tolist()):
            machine, job = self._free_machines[visit], self._jobs[row]
            started.append(Assignment.starting(job, machine, now))
            del waiting[job.name]
            _no_longer_waiting(runnable, job)
            ended[machine.kind] = base
        positions = self._visits[self._out_visits[:count]].tolist()
        if vacancy is not None:
            vacancy.moved_all(positions, self._out_old[:count].tolist(), self._out_waits[:count].tolist())
        shifted.extend(positions)
        if ranked:
            for user in dict.fromkeys(self._jobs[row].user for row in rows):  # each user's progress after its last start
                progress[user] = float(progressed[self._number[user]])
        self._left.removed(rows)
        for index, position in pops:
            held[index][1].pop(position)
        for index in dropped:
            del plans[held[index][0]]
        for members, used, queued, taken in made:
            machines_used = np.array(used, dtype=np.int64)
            bounds = np.zeros(len(delay) + 1, dtype=np.int64)
            bounds[machines_used + 1] = 1
            np.cumsum(bounds, out=bounds)
            users = (frozenset(self._names[user] for user in members) if self._named.plain
                     else self._named.of(self._renamed[np.array(members, dtype=np.int64)]))
            plans[users] = _Plan(self._jobs, machine_kind, bounds, np.array(queued, dtype=np.int64),
                                                                           dict.fromkeys(taken, 1), machines_used)
        return _Carried(next_visit, count, [self._names[user] for user in order.tolist()] if ranked else ranking)

    def _given(self, users: _Set, plan: _Plan,
               machines: int) -> tuple[IntArray, IntArray | None, IntArray | None, IntArray, IntArray | None]:
        """``plan`` as ``uncontended_run`` reads a held plan."""
        members = self._members.get(users)
        if members is None:
            members = self._members[users] = np.zeros(len(self._names), dtype=np.int64)
            if isinstance(users, _UserSet):
                members[self._renumbered[users.members]] = 1
            else:
                members[[self._number[user] for user in users]] = 1
        taken = np.zeros(machines, dtype=np.int64)
        for position, count in plan.taken.items():
            taken[position] = count
        if plan.bounds is None or plan.queued is None:
            return members, None, None, taken, None
        bounds = np.ascontiguousarray(plan.bounds, dtype=np.int64)
        if plan.used is None:
            plan.used = np.flatnonzero(np.diff(bounds))  # as kept_after works it out
        return (members, bounds, np.ascontiguousarray(plan.queued, dtype=np.int64), taken,
                np.ascontiguousarray(plan.used, dtype=np.int64))


class _Users:
    """Every user of a walk, numbered, and the user sets it asks for (:class:`_UserSet`): a
    set of the first users of a ranking (what Algorithm 2 considers, and each set §4.4's raise
    brings in) named in O(1) from the ranking's places and running hashes, worked out once a
    ranking (O(users)), where a ``frozenset`` of the users cost O(set) to make, hash and
    compare: with as many users as jobs the raise asks for hundreds of sets a start, each one
    user more than the last (1,000 Jobs of 1,000 users: ~43,000 sets, ~4 s)."""

    def __init__(self, names: Sequence[str], *, plain: bool = False) -> None:
        self.names = list(names)
        self.number = {user: index for index, user in enumerate(self.names)}
        # Few users: each set a frozenset of its users, cheaper to make at that size than the
        # ranking's arrays, and read by _Left.rows and _Run as ever.
        self.plain = plain
        # A fixed random mark per user (the walk stays deterministic): a set's hash is the
        # exclusive or of its users' marks, so equal sets hash alike; equality is then tested
        # on the members (_UserSet.__eq__), so a shared hash never makes two sets one.
        self._marks = np.random.default_rng(0x51A7).integers(0, 1 << 62, size=len(self.names), dtype=np.int64)
        self._ranked: tuple[list[str], IntArray, IntArray, list[int], list[_UserSet | None]] | None = None
        self._rows_placed: tuple[IntArray, IntArray, IntArray] | None = None  # see places_of

    def prefix(self, ranking: list[str], count: int) -> _Set:
        """The first ``count`` users of ``ranking`` (every user, each once). The same object
        for a set asked again, also after the ranking changed where the set is the first
        ``count`` users of both (after a start: every set but those between the started user's
        old and new place), so the walk's dictionaries find it by identity, not by comparing
        members."""
        if self.plain:
            return frozenset(ranking[:count])
        kept = self._ranked
        if kept is None or kept[0] is not ranking:
            order = np.fromiter((self.number[user] for user in ranking), dtype=np.int64, count=len(ranking))
            places = np.empty(len(self.names), dtype=np.int64)
            places[order] = np.arange(order.shape[0])
            running = np.zeros(order.shape[0] + 1, dtype=np.int64)
            np.bitwise_xor.accumulate(self._marks[order], out=running[1:])
            made: list[_UserSet | None]
            if kept is None or kept[1].shape[0] != order.shape[0]:
                made = [None] * (order.shape[0] + 1)
            else:
                # The first c users are one set in both rankings where the largest of their
                # places in the last one is c - 1.
                same = np.maximum.accumulate(kept[2][order]) == np.arange(order.shape[0])
                made = [kept[4][0], *(old if alike else None for old, alike in zip(kept[4][1:], same.tolist()))]
            kept = self._ranked = (ranking, order, places, running.tolist(), made)
        _, order, places, hashes, made = kept
        found = made[count]
        if found is None:
            found = made[count] = _UserSet(hashes[count], count, order[:count], places, self)
        return found

    def places_of(self, places: IntArray, user: IntArray) -> IntArray:
        """``places[user]``, kept for the last ``places`` asked about (a ranking's, shared by
        its sets)."""
        kept = self._rows_placed
        if kept is None or kept[0] is not places or kept[1] is not user:
            kept = self._rows_placed = (places, user, places[user])
        return kept[2]

    def of(self, members: IntArray) -> _Set:
        """The set of users numbered ``members`` (distinct)."""
        if self.plain:
            return frozenset(self.names[member] for member in members.tolist())
        places = np.full(len(self.names), len(self.names), dtype=np.int64)
        places[members] = 0
        return _UserSet(int(np.bitwise_xor.reduce(self._marks[members])) if members.shape[0] else 0, int(members.shape[0]),
                        members, places, self)


class _UserSet:
    """A set of users, of :class:`_Users`: those ``members``, each with ``places`` below
    ``count`` (a ranking's places for the ranking's first ``count``), hashed as the exclusive
    or of their marks. A key of the walk's plans and facts that costs O(1) to make and hash;
    two sets are equal when they have the same users (O(set) in NumPy when they come from two
    rankings, once their counts and hashes agree)."""

    __slots__ = ("_hash", "count", "members", "_places", "_users")

    def __init__(self, hashed: int, count: int, members: IntArray, places: IntArray, users: _Users) -> None:
        self._hash, self.count, self.members, self._places, self._users = hashed, count, members, places, users

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, _UserSet):
            return NotImplemented
        if self.count != other.count or self._hash != other._hash:
            return False
        return self._places is other._places or self._holds(other.members)

    def __lt__(self, other: _UserSet) -> bool:
        """Whether this is a proper subset of ``other``."""
        return self.count < other.count and (self._places is other._places or other._holds(self.members))

    def __contains__(self, user: object) -> bool:
        number = self._users.number.get(user) if isinstance(user, str) else None
        return number is not None and int(self._places[number]) < self.count

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[str]:
        names = self._users.names
        return (names[number] for number in self.members.tolist())

    def _holds(self, numbers: IntArray) -> bool:
        """Whether every user numbered ``numbers`` is in the set."""
        return not numbers.shape[0] or int(self._places[numbers].max()) < self.count

    def rows_within(self, user: IntArray) -> npt.NDArray[np.bool_]:
        """Whether each row's user (numbered ``user``) is in the set: its place read once per
        ranking (:meth:`_Users.places_of`)."""
        return np.asarray(self._users.places_of(self._places, user) < self.count)


@dataclass(frozen=True, slots=True)
class _Seen:
    """A start, as :meth:`_Plan.kept_after` asks about it: machine ``position`` of kind index
    ``kind`` now waits ``wait`` (``delay``: every machine's waits then); ``shared``: another
    machine of the kind waited as long then (or not worked out)."""

    position: int
    kind: int
    wait: float
    delay: FloatArray
    shared: bool


@dataclass(frozen=True, slots=True)
class _Deferred:
    """A user set's plan not solved yet, which would have left the free machine that asked for
    it empty (``known``): solved when a machine asks for it again, on the machines as they
    were then (``machines``), and kept as :meth:`_Plan.kept_after` would have kept it across
    the starts since (``since``: the first of them) — unless ``known`` tells that it leaves
    that machine empty too and that those starts kept it.

    ``rows`` None: the waiting rows of ``users`` when it is made, which are those of when it
    was put off: a start of one of their jobs drops it (the walk keeps no plan but the started
    one's that holds the started job's user), and no run in C (which removes rows of its own)
    is made while a plan is put off. The raise puts off most plans so, and their rows were
    read only to be kept (~6 us a set, ~100 sets after a burst)."""

    rows: IntArray | None
    machines: Fleet
    since: int
    known: _Empty
    users: _Set | None = None

    def leaves_empty(self, position: int, starts_seen: Sequence[_Seen]) -> bool:
        """Whether the plan, as the machines were then and kept since, certainly has no queue
        on machine ``position``: every optimal matching then left it empty (``known``), and
        each start since kept the plan (kept_after: the plan had no queue on its machine, and
        no other machine of the kind waits what the started one now does)."""
        delay, kinds = self.machines.delay, self.machines.machine_kind
        if not self.known.beyond(position, delay, kinds):
            return False
        return all(not seen.shared and self.known.beyond(seen.position, delay, kinds) for seen in starts_seen[self.since :])

    def made(self, left: _Left, starts_seen: Sequence[_Seen]) -> _Plan | None:
        """The plan, as it would be now had it been solved then; None if a start since would
        have dropped it."""
        rows = self.rows
        if rows is None:
            assert self.users is not None, "a plan put off without its rows names its users"
            rows = left.rows(self.users)
        plan = left.solved(rows, self.machines)
        for seen in starts_seen[self.since :]:
            if not plan.kept_after(source=False, position=seen.position, kind=seen.kind, wait=seen.wait, delay=seen.delay,
                                   shared=seen.shared or not _ALONE_TOLD):
                return None
        return plan


class _Left:
    """Algorithm 2's waiting jobs as rows of ``every_job`` (each plan's jobs are the rows of its
    users left waiting, in the waiting order), and their plans."""

    def __init__(self, every_job: Problem) -> None:
        self._every_job = every_job
        ids: dict[str, int] = {}
        self._user = np.fromiter((ids.setdefault(job.user, len(ids)) for job in every_job.jobs), dtype=np.int64,
                                 count=len(every_job.jobs))
        self._ids = ids
        self._waiting = np.ones(len(every_job.jobs), dtype=bool)
        self._waiting_flags = np.ones(len(every_job.jobs), dtype=np.int64)  # the same, as _solve.c's rows_of reads it
        self._members: dict[Collection[str] | None, IntArray] = {}  # per user set, 1 for each of its users' ids
        self._rows: dict[Collection[str] | None, IntArray] = {}  # see rows
        self._free: tuple[IntArray, bytes, tuple[IntArray, IntArray, IntArray]] | None = None  # see _free_machines
        # Each row's strictly fastest kind, or -1 (two kinds tie, or it takes no time there):
        # what solve's _uncontended asks of a job.
        times = every_job.times
        fastest = np.argmin(times, axis=1) if times.shape[1] else np.zeros(times.shape[0], dtype=np.int64)
        best = times[np.arange(times.shape[0]), fastest] if times.shape[1] else np.zeros(times.shape[0])
        alone = (times == best[:, np.newaxis]).sum(axis=1) == 1
        self._fastest = np.where(alone & (best > 0), fastest, -1).astype(np.int64)

    def runnable(self) -> dict[str, dict[str, int]]:
        """Per kind of ``every_job``, how many waiting rows each user has that can run on it
        (the users with none left out)."""
        names = list(self._ids)
        can_run = np.isfinite(self._every_job.times)
        by_kind: dict[str, dict[str, int]] = {}
        for column, kind in enumerate(self._every_job.kinds):
            counts = np.bincount(self._user[can_run[:, column] & self._waiting], minlength=len(names)).tolist()
            by_kind[kind] = {name: count for name, count in zip(names, counts) if count}
        return by_kind

    def rows(self, considered: Collection[str] | None) -> IntArray:
        """``considered``'s waiting rows (None: every user's), ascending (read-only: kept until
        a row is removed, as the raise asks for the same sets at machine after machine). A
        :class:`_UserSet` (numbered as :meth:`users` numbers them) has its members read off
        its ranks, not gathered user by user: with as many users as jobs §4.4's raise asks
        for hundreds of sets a start, each one user more than the last."""
        kept = self._rows.get(considered)
        if kept is not None:
            return kept
        if isinstance(considered, _UserSet):
            rows = (considered.rows_within(self._user) & self._waiting).nonzero()[0]
        elif walk is not None and self._user.dtype == np.int64:
            rows = self._rows_in_c(considered, walk)
        elif considered is None:
            rows = np.flatnonzero(self._waiting)
        else:
            member = np.zeros(len(self._ids), dtype=bool)
            member[[self._ids[user] for user in considered if user in self._ids]] = True
            rows = np.flatnonzero(member[self._user] & self._waiting)
        rows.flags.writeable = False
        self._rows[considered] = rows
        return rows

    def users(self, others: Collection[str]) -> _Users:
        """Every user numbered: the waiting jobs' users first, as :attr:`_ids` numbers them
        (:meth:`rows` reads a :class:`_UserSet`'s flags so), then ``others`` by name."""
        names = [*self._ids, *sorted(set(others).difference(self._ids))]
        return _Users(names, plain=len(names) <= _NAMED_FROM)

    def _rows_in_c(self, considered: Collection[str] | None, extension: ModuleType) -> IntArray:
        """:meth:`rows`'s rows in one call of ``_solve.c`` (``rows_of``) instead of four NumPy
        steps: it is asked at nearly every start after a burst, each start changing the ranking."""
        member = self._members.get(considered)
        if member is None:
            # A set's members do not change as its rows do: kept for the sets asked after a start.
            member = np.ones(len(self._ids), dtype=np.int64) if considered is None else np.zeros(len(self._ids), dtype=np.int64)
            if considered is not None:
                member[[self._ids[user] for user in considered if user in self._ids]] = 1
            self._members[considered] = member
        out = np.empty(self._user.shape[0], dtype=np.int64)
        return out[: extension.rows_of(member, self._user, self._waiting_flags, out)]

    @property
    def fastest(self) -> IntArray:
        """Each row's strictly fastest kind, or -1 (see uncontended)."""
        return self._fastest

    def removed(self, rows: Sequence[int]) -> None:
        """``rows`` were removed where :attr:`waiting_flags` was written (``_walk.c``)."""
        self._waiting[rows] = False
        self._rows.clear()

    @property
    def waiting_flags(self) -> IntArray:
        """Each row of ``every_job``: 1 while it waits, 0 once removed (kept up to date: read,
        not copied, by :class:`_Vacancy`)."""
        return self._waiting_flags

    def remove(self, row: int) -> None:
        self._waiting[row] = False
        self._waiting_flags[row] = 0
        self._rows.clear()

    def uncontended(self, rows: IntArray, delay: FloatArray, machines: Fleet) -> _Plan | None:
        """The plan of ``rows`` on ``machines`` waiting ``delay`` when :func:`~scheduler.
        matching.solve.solve` takes its first way out, the matching where no two jobs contend
        (``_uncontended``: each job on a free machine of its strictly fastest kind, of each kind
        the first listed, taken in row order), written as it writes it; None when it would not
        (or no row). That is what Algorithm 2 asks for again and again at small α after a
        burst, and a Problem and Queues for it cost more than the matching."""
        if not rows.shape[0]:
            return None
        kinds = machines.machine_kind
        if (native is not None and kinds.dtype == np.int64 and bool(kinds.flags.c_contiguous) and delay.dtype == np.float64
                and bool(delay.flags.c_contiguous)):
            return self._uncontended_in_c(rows, delay, machines, native)
        fastest = self._fastest[rows]
        if bool((fastest < 0).any()):
            return None
        kind_count = len(machines.kinds)
        free_per_kind, free_by_kind, first_of_kind = self._free_machines(delay, machines)
        if bool((np.bincount(fastest, minlength=kind_count) > free_per_kind).any()):
            return None
        order = fastest.argsort(kind="stable")
        kinds = fastest[order]
        rank = np.arange(order.shape[0]) - kinds.searchsorted(kinds, side="left")
        machine = free_by_kind[first_of_kind[kinds] + rank]
        by_machine = machine.argsort()  # one job a machine
        bounds = np.zeros(len(machines.machines) + 1, dtype=np.int64)
        bounds[machine + 1] = 1
        np.cumsum(bounds, out=bounds)
        return _Plan(self._every_job.jobs, machines.machine_kind, bounds, rows[order[by_machine]].astype(np.int64), {},
                     machine[by_machine])  # queued: rows of every_job

    def _uncontended_in_c(self, rows: IntArray, delay: FloatArray, machines: Fleet, extension: ModuleType) -> _Plan | None:
        """:meth:`uncontended` in C (``_solve.c``): the same free machines, tests and rows on the
        same machines, one call instead of a dozen NumPy steps (it is asked at every start after
        a burst, each start freeing one machine fewer)."""
        bounds = np.empty(len(machines.machines) + 1, dtype=np.int64)
        queued = np.empty(rows.shape[0], dtype=np.int64)
        used = np.empty(rows.shape[0], dtype=np.int64)
        if not extension.uncontended_plan(rows, self._fastest, machines.machine_kind, delay, len(machines.kinds), bounds, queued, used):
            return None
        return _Plan(self._every_job.jobs, machines.machine_kind, bounds, queued, {}, used)  # queued: rows of every_job

    def _free_machines(self, delay: FloatArray, machines: Fleet) -> tuple[IntArray, IntArray, IntArray]:
        """The free machines (waiting 0) of ``machines`` waiting ``delay``: how many of each
        kind, their indices by kind then as listed, and where each kind's begin among them.
        Kept for the waits last asked about: between two starts the raise asks for several
        user sets' plans on the same waits."""
        waits = delay.tobytes()
        kept = self._free
        if kept is not None and kept[0] is machines.machine_kind and kept[1] == waits:
            return kept[2]
        free = (delay == 0).nonzero()[0]
        free_kind = machines.machine_kind[free]
        free_per_kind = np.bincount(free_kind, minlength=len(machines.kinds))
        first_of_kind = np.zeros(len(machines.kinds) + 1, dtype=np.int64)
        np.cumsum(free_per_kind, out=first_of_kind[1:])
        found = (free_per_kind, free[free_kind.argsort(kind="stable")], first_of_kind)
        self._free = (machines.machine_kind, waits, found)
        return found

    def solved(self, rows: IntArray, machines: Fleet) -> _Plan:
        """The plan of ``rows`` on ``machines`` as they are now: :func:`~scheduler.matching.
        solve.solve`'s. Asked only where :meth:`uncontended` declined (so does ``solve``'s
        ``_uncontended``: the same test), so straight to the matching, and its order alone
        (Algorithm 2 reads each machine's next job, not the starts and finishes)."""
        if not rows.shape[0]:
            return _Plan((), machines.machine_kind, None, None, {})
        planned = contended_plan_of(self._every_job, rows, machines)
        if planned is None:
            planned = contended_plan(rows_on(self._every_job, rows, machines))
        job, bounds, unique = planned
        return _Plan(self._every_job.jobs, machines.machine_kind, bounds, rows[job], {}, unique=_once(unique))  # queued: rows of every_job


_Key = TypeVar("_Key", bound=Hashable)

# A user set of the walk: its users, or named by a ranking (_Users.prefix).
_Set = Union[frozenset[str], "_UserSet"]

# _Vacancy sums a row's need over n (each a search among the machines' waits) up to this many
# terms, over the machines beyond.
_TERMS = 64
# ... compared with each of so few waits at once (a start moves two).
_FEW_WAITS = 8


class _Vacancy:
    """Which user sets' plans certainly leave a free machine empty, told without solving them.

    §4.4's raise asks, for a free machine the plan leaves empty, for the plan of one more user,
    then another, up to every user; after a burst nearly every CPU slot is such a machine, and
    each of those plans was a solve (at 1,000 Jobs, ~1,300 solves for ~460 starts). Most of them
    cannot put a job on the machine, which this tells from a bound:

    Let ``M`` be a machine of kind ``k`` that waits ``d`` (its *class*: machines of ``k`` that
    wait ``d``), and ``r`` the machines of its class listed before it. :func:`~scheduler.
    matching.solve.canonical` gives a class's longer queues to the machines listed first, so
    ``M``'s queue is empty unless more than ``r`` of its class's machines have a job, which
    takes more than ``r`` jobs in the class. A job ``j`` placed ``q``-th from the end of a
    machine of the class costs at least ``c_j = p_k(j) + d``. If some machine ``g`` outside the
    class, of kind ``h`` and wait ``d_g`` with ``n`` jobs, had ``(n+1)·p_h(j) + d_g < c_j``,
    moving ``j`` to the front of ``g`` would lower the total: the jobs behind ``j`` keep their
    positions from the end, the jobs ahead of it drop one (a cost of ``Q`` never rises when
    a job leaves), and the jobs of ``g`` keep theirs. So in every optimal matching where ``j``
    is in the class, each such ``g`` has at least ``need_g(j)`` jobs: the number of ``n >= 1``
    with ``n·p_h(j) + d_g < c_j``; outside the class there are at least ``N(j) = Σ_g need_g(j)``
    jobs. If the jobs in the class are ``J`` and ``t`` is their largest ``N``, ``|J| <=
    |S| - t`` (``S``: every job matched) and ``J`` holds only jobs with ``N(j) <= t``: ``|J| <=
    max_t min(#{j: N(j) <= t}, |S| - t)``. When that is at most ``r``, every optimal matching
    leaves ``M`` empty, whichever the solver finds: Algorithm 2 starts nothing on it from that
    plan, and the plan is made later, when a machine needs it. (That the later plan is the one
    solving it now would give is measured, not proved: under ties a kept plan and a fresh solve
    may differ, and the shortcuts only drop plans that supplied no start; a review found 0
    mismatches in ~13,800 such uses, and identical decisions in ~96,000 comparisons.) ``N``
    is the machines', not the set's, so a subset's bound is at most the set's: when every
    waiting job's bound says so, no user set's plan, made or kept (each an optimal matching of
    the machines as they are), starts a job on ``M``, and §4.4's raise is not walked at all.

    Strict inequalities hold only beyond rounding: ``need`` counts a move only when it gains
    more than a tolerance far above what a solver's floating-point total can be off by. With a
    job that takes no time on some kind (a queue may then have a gap, and a move gain nothing)
    the bound is not told. ``N`` is kept per class and brought up to date with the starts
    since it was last asked for (each moves one machine's wait: O(jobs) a start), not remade.
    """

    def __init__(self, every_job: Problem, delay: FloatArray, *, live: IntArray | None = None) -> None:
        times = every_job.times
        finite = np.isfinite(times)
        self._times = times
        # times as _solve.c's vacancy_needs reads them: float64, one contiguous row a job.
        self._plain = times.dtype == np.float64 and times.ndim == 2 and bool(times.flags.c_contiguous)
        self._runnable = finite
        self._machine_kind = every_job.machine_kind
        self._delay = delay  # Algorithm 2's, moved by each start (see moved)
        # No job with a zero time on a kind it can run on: a gap-free optimum (see above).
        self._positive: npt.NDArray[np.bool_] = np.asarray((~finite | (times > 0)).all(axis=1))
        # The same as _solve.c's vacancy_empty reads them (int64, 0 or 1), and whether it can
        # read the machines' kinds and waits.
        self._positive_flags = self._positive.astype(np.int64)
        self._runnable_flags = np.ascontiguousarray(finite, dtype=np.int64)
        self._machines_plain = (self._machine_kind.dtype == np.int64 and bool(self._machine_kind.flags.c_contiguous)
                                and delay.dtype == np.float64 and bool(delay.flags.c_contiguous))
        longest = float(times.max(where=finite, initial=0.0))
        # A machine waits at most its wait now or a started job's time; a cost is at most
        # rows·longest plus that.
        scale = (times.shape[0] + 1) * longest + float(delay.max(initial=0.0)) + longest + 1.0
        self._tolerance: float = 1e-9 * scale * max(1, times.shape[0])
        self._near: float = 1e-9 * scale  # see near
        self._need: dict[tuple[int, float], tuple[FloatArray, int]] = {}  # N per class, and the moves taken in
        self._reach: dict[tuple[int, float, int], float] = {}  # see _reach_of
        self._moves: list[tuple[int, float, float]] = []  # (machine kind, old wait, new wait) of each start
        # The rows still waiting (1) as Algorithm 2 removes them (_Left's flags, kept up to date
        # there): only their N is ever read, so _solve.c's vacancy_needs sums theirs alone.
        self._live = live if live is not None and live.dtype == np.int64 and live.shape == (times.shape[0],) else None

    def empty(self, rows: IntArray, position: int) -> bool:
        """Whether every optimal matching of ``rows`` (of ``every_job``) on the machines as they
        are leaves machine ``position`` empty. In C once the need is known where ``_solve.c``
        was built (``vacancy_empty``: the same steps and comparisons)."""
        if native is not None and self._machines_plain and rows.dtype == np.int64:
            need = self._needed(int(self._machine_kind[position]), float(self._delay[position]))
            return bool(native.vacancy_empty(rows, self._positive_flags, self._runnable_flags, need, self._machine_kind, self._delay,
                                             position))
        if not bool(self._positive[rows].all()):
            return False
        kind, wait = int(self._machine_kind[position]), float(self._delay[position])
        outside = self._needed(kind, wait)[rows[self._runnable[rows, kind]]]
        before = int(((self._machine_kind[:position] == kind) & (self._delay[:position] == wait)).sum())
        if outside.shape[0] <= before:
            return True  # too few jobs can run on the machine's kind
        jobs = rows.shape[0]
        least = float(outside.min())
        if jobs - least <= before:
            return True  # |S| - t <= r for every t
        if int((outside <= least).sum()) > before:
            return False  # t = the least N already bounds above r
        outside.sort()
        # At each job's N as t (ties: its last one counts them all; an earlier one bounds less).
        return float(np.minimum(np.arange(1, outside.shape[0] + 1), jobs - outside).max()) <= before

    @property
    def tolerance(self) -> float:
        """How far apart two costs must be to be told apart beyond rounding (see the class)."""
        return self._tolerance

    @property
    def near(self) -> float:
        """How far apart two waits of a kind must be for a solver to tell their machines apart
        (:class:`_Empty`): 1e-9 of a cost's scale, the margin the certificate
        (:func:`~scheduler.matching.transport.certified`) refuses ties within, far above an
        entry's rounding (~1e-16 of it) and above any sum's over the few hundred groups a path
        crosses; :attr:`tolerance`, which bounds a total over every row, is ``rows`` times it
        (~144 s at 2,000 rows: every CPU slot that started a short CPU job was "near" the free
        ones, and every fact refused)."""
        return self._near

    def positive(self, rows: IntArray) -> bool:
        """Whether ``rows`` take some time on every kind they can run on."""
        return bool(self._positive[rows].all())

    def moved(self, position: int, old: float, new: float) -> None:
        """Machine ``position`` waited ``old`` and now waits ``new`` (a job started on it); the
        kept ``N`` take it in when next asked for (:meth:`_needed`), a few starts at once."""
        self._moves.append((int(self._machine_kind[position]), old, new))

    def moved_all(self, positions: Sequence[int], old: Sequence[float], new: Sequence[float]) -> None:
        """:meth:`moved` of each start in turn."""
        self._moves.extend(zip(self._machine_kind[positions].tolist(), old, new))

    def _needed(self, kind: int, wait: float) -> FloatArray:
        """``N`` of every row for the class of ``kind`` machines that wait ``wait``."""
        key = (kind, wait)
        kept = self._need.get(key)
        if kept is None:
            need = np.zeros(self._times.shape[0])
            member = (self._machine_kind == kind) & (self._delay == wait)
            for other in np.unique(self._machine_kind).tolist():
                waits, counts = np.unique(self._delay[(self._machine_kind == other) & ~member], return_counts=True)
                if waits.shape[0]:
                    need += self._needs(kind, wait, int(other), waits, counts.astype(np.float64))
            self._need[key] = (need, len(self._moves))
            return need
        need, applied = kept
        if applied < len(self._moves):
            # Each move takes its machine's old wait out and puts its new one in (neither when
            # the machine is in the class then: N counts the machines outside it).
            by_kind: dict[int, tuple[list[float], list[float]]] = {}
            for other, old, new in self._moves[applied:]:
                moved_waits, moved_weights = by_kind.setdefault(other, ([], []))
                moved_waits += (old, new)
                moved_weights += (0.0 if other == kind and old == wait else -1.0, 0.0 if other == kind and new == wait else 1.0)
            for other, (moved_waits, moved_weights) in by_kind.items():
                if _SKIP_UNREACHED:
                    reach = self._reach_of(kind, wait, other)
                    if all(moved >= reach or not weight for moved, weight in zip(moved_waits, moved_weights)):
                        continue  # every row's sum over these moves is 0 (see _reach_of): N as it was
                need += self._needs(kind, wait, other, np.array(moved_waits), np.array(moved_weights))
            self._need[key] = (need, len(self._moves))
        return need

    def _reach_of(self, kind: int, wait: float, other: int) -> float:
        """The least wait of a machine of kind ``other`` that no row's ``need_g`` counts, for
        the class of ``kind`` machines that wait ``wait`` (NaN: none known): the largest of the
        rows' first reach ``limit - step`` (``n = 1``, as :meth:`_needs` works it out, the same
        floating-point operations), below which a wait must be to count. A larger ``n`` reaches
        less (each rounding is monotone), so a machine waiting at least this adds 0 to every row,
        and moves of such machines leave ``N`` as it is (after a burst a start moves a CPU slot,
        which counts for no row at a CPU slot's class, nor a GPU at a GPU's: ~10 us a start
        otherwise). NaN where some row sums more than ``_TERMS`` terms (summed over the machines
        another way, see :meth:`_needs`), or no row can be told (no finite reach)."""
        key = (kind, wait, other)
        reach = self._reach.get(key)
        if reach is None:
            own = self._times[:, kind]
            time = self._times[:, other]
            usable = np.isfinite(own) & np.isfinite(time) & (time > 0)
            limit = np.where(usable, own + (wait - self._tolerance), 0.0)
            step = np.where(usable, time, 1.0)
            beyond = bool((np.floor(np.maximum(limit, 0.0) / step) > _TERMS).any())
            first = limit - step
            reach = math.nan if beyond or not first.shape[0] else float(first.max())
            if not math.isfinite(reach):
                reach = math.nan
            self._reach[key] = reach
        return reach

    def _needs(self, kind: int, wait: float, other: int, waits: FloatArray, counts: FloatArray) -> FloatArray:
        """Σ over machines of kind ``other`` (``counts`` of each of ``waits``; a count may be
        negative, taking a machine out) of each row's ``need_g``, for the class of ``kind``
        machines that wait ``wait``: the ``n >= 1`` with ``n·p_other + d_g < p_kind + wait -
        tolerance``. 0 for rows that cannot run on either kind, or that take no time on
        ``other`` (such rows are never told, see empty).

        Summed over ``n`` rather than over the machines: ``Σ_n #{g: d_g < limit - n·p}``, a
        search among the sorted waits per ``n``, so that thousands of machines each freeing at
        its own time cost a few searches per row, not a row × machines matrix. A row needs
        ``floor(limit / p)`` terms (a job's slowdown on the class's kind over ``other``); the
        rare row with more than ``_TERMS`` is summed over the machines. In C where ``_solve.c``
        was built (``vacancy_needs``: the same comparisons, each sum of whole numbers exact),
        unless a row has more terms than that."""
        if native is not None and self._plain and waits.dtype == np.float64 and counts.dtype == np.float64:
            summed = np.empty(self._times.shape[0])
            if not native.vacancy_needs(self._times, kind, other, wait - self._tolerance, np.ascontiguousarray(waits),
                                        np.ascontiguousarray(counts), summed, self._live):
                return summed
        own = self._times[:, kind]
        time = self._times[:, other]
        usable = np.isfinite(own) & np.isfinite(time) & (time > 0)
        limit = np.where(usable, own + (wait - self._tolerance), 0.0)
        step = np.where(usable, time, 1.0)
        order = waits.argsort(kind="stable")
        sorted_waits = waits[order]
        below = np.zeros(waits.shape[0] + 1)  # below[i]: the count of the i smallest waits
        np.cumsum(counts[order], out=below[1:])
        terms = np.floor(np.maximum(limit, 0.0) / step)
        count = min(int(terms.max(initial=0.0)), _TERMS)
        if waits.shape[0] <= _FEW_WAITS:
            # A start's two waits: the same comparisons, all at once.
            reach = limit[:, np.newaxis] - step[:, np.newaxis] * np.arange(1, count + 1)
            total: FloatArray = (waits < reach[:, :, np.newaxis]).sum(axis=1) @ counts
        else:
            total = np.zeros(own.shape[0])
            for n in range(1, count + 1):
                total += below[sorted_waits.searchsorted(limit - n * step, side="left")]
        many = np.flatnonzero(terms > _TERMS)
        if many.shape[0]:
            moves = np.ceil((limit[many, np.newaxis] - waits[np.newaxis, :]) / step[many, np.newaxis]) - 1.0
            np.maximum(moves, 0.0, out=moves)
            total[many] = moves @ counts
        return total
