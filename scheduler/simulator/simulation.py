"""The discrete-event simulation: a virtual clock that jumps from event to event (arrivals,
completions, grace-period ends; no minute ticks), a cluster booked through the same
:class:`~scheduler.core.fit.ResourceFitEngine` the extender uses, and a
:class:`~scheduler.preemption.table.PreemptionIndex` kept beside it for the preemption core.

After all events at one instant are applied, the policy gets one scheduling pass
(:meth:`Policy.schedule`); it starts jobs with :meth:`Simulation.try_place` and suspends jobs
with :meth:`Simulation.preempt`. The loop is deterministic: events at the same instant are
ordered by kind (completions and grace-period ends free resources before arrivals ask for
them) and then by the order they were scheduled.

Two arrival modes:

* ``trace`` — every job arrives at its ``submit_time``;
* ``load`` — closed loop: after each instant, jobs are submitted (in order) while the demand
  of all jobs in the system, running and waiting, is below ``load`` times the cluster's
  capacity (the largest of the CPU, memory and GPU ratios). Run under FIFO this is the paper's
  "load 2.0" (§4.2); the submit times it records are then replayed under every policy.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Final, Literal, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.resources import Resources
from scheduler.preemption.model import Candidate, FitGppSettings, JobClass
from scheduler.preemption.table import PreemptionIndex
from scheduler.simulator.errors import InvalidWorkload, SimulationStalled
from scheduler.simulator.kernel import EventKernel
from scheduler.simulator.state import JobState, PreemptionPlan, SimJob
from scheduler.simulator.workload import ClusterSpec, JobSpec

if TYPE_CHECKING:
    from scheduler.simulator.policies import Policy

ArrivalMode = Literal["trace", "load"]

# Event kinds, in the order they are applied at one instant.
_COMPLETE: Final = 0
_GRACE_END: Final = 1
_TICK: Final = 2

ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """Everything a run measured, as arrays indexed like the input jobs.

    Times in seconds. ``intervals`` holds every re-scheduling interval (from the preemption
    signal to the job's next start, so it includes the grace period, as in the paper's
    Table 2). ``rules`` counts preemption decisions by how they were made.
    """

    policy: str
    seed: int
    trial: npt.NDArray[np.bool_]
    submit: npt.NDArray[np.float64]
    first_start: npt.NDArray[np.float64]
    finish: npt.NDArray[np.float64]
    duration: npt.NDArray[np.float64]
    work_done: npt.NDArray[np.float64]
    preemptions: npt.NDArray[np.int64]
    intervals: npt.NDArray[np.float64]
    events: int
    preemption_decisions: int
    rules: dict[str, int]
    makespan: float
    max_load: float

    @property
    def jobs(self) -> int:
        return len(self.trial)

    @property
    def slowdown(self) -> npt.NDArray[np.float64]:
        """Eq. 5: ``1 + WaitingTime / ExecutionTime`` with waiting = everything that is not work
        (queueing, grace periods, waiting again after a preemption)."""
        waiting = self.finish - self.submit - self.duration
        result: npt.NDArray[np.float64] = 1.0 + np.maximum(waiting, 0.0) / self.duration
        return result


class Simulation:
    """One run of ``jobs`` on ``cluster`` under ``policy``; call :meth:`run` once."""

    def __init__(
        self,
        *,
        cluster: ClusterSpec,
        jobs: Sequence[JobSpec],
        policy: Policy,
        settings: FitGppSettings,
        seed: int = 0,
        arrivals: ArrivalMode = "trace",
        load: float = 2.0,
        on_progress: ProgressCallback | None = None,
        progress_every: int = 2048,
        tick: float = 0.0,
    ) -> None:
        if arrivals == "load" and not load > 0:
            raise InvalidWorkload(f"{load!r} is not a positive load", field="load")
        if not tick >= 0 or tick == float("inf"):
            raise InvalidWorkload(f"{tick!r} is not a non-negative number of seconds", field="tick")
        self.cluster = cluster
        self.policy = policy
        self.settings = settings
        self.seed = seed
        self.now = 0.0
        # Bumped whenever resources are released: a policy that found its queue head blocked
        # at version v need not look again until something was freed.
        self.version = 0
        self.engine = ResourceFitEngine(initial_capacity=max(64, cluster.nodes))
        self.index = PreemptionIndex(initial_capacity=max(64, cluster.nodes))
        self.node_names = cluster.node_names()
        for name in self.node_names:
            node = NodeInfo(name=name, allocatable=cluster.node)
            self.engine.apply_node(node)
            self.index.apply_node(node)
        self.jobs = [SimJob(i, spec) for i, spec in enumerate(jobs)]
        self.by_uid: dict[str, SimJob] = {}
        for job in self.jobs:
            if job.uid in self.by_uid:
                raise InvalidWorkload(f"job id {job.uid!r} appears twice", field=job.spec.origin or "job_id")
            if not job.demand.fits_in(cluster.node):
                raise InvalidWorkload(
                    f"demand ({job.demand.describe()}) does not fit on a node "
                    f"({cluster.node.describe()}), so the job could never run",
                    field=job.spec.origin or f"job {job.uid}",
                )
            self.by_uid[job.uid] = job
        self.te_queue: deque[SimJob] = deque()
        self.be_queue: deque[SimJob] = deque()
        # Running (not terminating) BE jobs in start order, for policies that scan them.
        self.running_be: dict[int, SimJob] = {}
        self._arrivals_mode = arrivals
        self._load = load
        self._capacity = [float(x) for x in cluster.capacity.as_tuple()]
        self._in_system = [0, 0, 0]
        self._max_load = 0.0
        # Events: (kind, job index, the job's epoch when scheduled).
        self._kernel: EventKernel[tuple[int, int, int]] = EventKernel()
        self._arrival_seq = 0
        self._done = 0
        self._events = 0
        self._decisions = 0
        self._rules: dict[str, int] = {}
        self._on_progress = on_progress
        self._progress_every = max(1, progress_every)
        self._ran = False
        # 0: the policy decides at every event. > 0: only at multiples of ``tick`` seconds, as
        # the paper's simulator does every simulated minute (a sensitivity option, README).
        self._tick = tick
        self._tick_pushed = -1.0

    # ------------------------------------------------------------------ the loop

    def run(self) -> RunResult:
        if self._ran:
            raise RuntimeError("a Simulation runs once")
        self._ran = True
        trace_mode = self._arrivals_mode == "trace"
        pending = sorted(self.jobs, key=lambda j: (j.spec.submit_time, j.index)) if trace_mode else self.jobs
        total = len(pending)
        kernel = self._kernel
        cursor = 0

        def next_arrival() -> float | None:
            if cursor >= total:
                return None
            if trace_mode:
                return pending[cursor].spec.submit_time
            # Closed loop: the first instant, or jobs waiting for load room with nothing running.
            return None if kernel.pending else self.now

        def advance(now: float) -> None:
            self.now = now

        def instant(now: float) -> None:
            nonlocal cursor
            if trace_mode:
                while cursor < total and pending[cursor].spec.submit_time <= now:
                    self._submit(pending[cursor])
                    cursor += 1
            if self._tick and not (now / self._tick).is_integer():
                self._push_tick(now)
                return  # jobs wait for the next decision instant
            if not trace_mode:
                submitted = cursor
                while cursor < total and self.load() < self._load:
                    self._submit(pending[cursor])
                    cursor += 1
                if cursor == submitted and not kernel.pending and cursor < total:
                    raise SimulationStalled("the closed loop cannot submit more jobs and nothing runs")
            self.policy.schedule(self)

        kernel.run(next_arrival=next_arrival, on_event=self._on_event, instant=instant, advance=advance)
        if self._done != len(self.jobs):
            waiting = len(self.jobs) - self._done
            raise SimulationStalled(
                f"{waiting} jobs never finished under policy {self.policy.name!r} (the cluster went idle with "
                "work queued)"
            )
        return self._result()

    def _on_event(self, event: tuple[int, int, int]) -> None:
        kind, index, epoch = event
        if kind == _TICK:
            return
        job = self.jobs[index]
        if job.epoch != epoch:
            return  # a completion of a run that was preempted
        self._events += 1
        if kind == _COMPLETE:
            self._complete(job)
        else:
            self._grace_end(job)

    def load(self) -> float:
        """Demand of all jobs in the system (running, waiting, suspended) over capacity, taking
        the largest ratio of the three resources."""
        cpu, memory, gpus = self._in_system
        c_cpu, c_memory, c_gpus = self._capacity
        return max(cpu / c_cpu if c_cpu else 0.0, memory / c_memory if c_memory else 0.0, gpus / c_gpus if c_gpus else 0.0)

    # ------------------------------------------------------------------ what policies call

    def try_place(self, job: SimJob) -> bool:
        """Start ``job`` on the node the resource-fit engine scores best (kube-scheduler's
        filter then prioritize; ties go to the first node), or return False if none fits."""
        feasible = self.engine.filter(job.pod, self.node_names).feasible
        if not feasible:
            return False
        if len(feasible) == 1:
            node = feasible[0]
        else:
            scores = self.engine.prioritize(job.pod, feasible)
            node = feasible[int(np.argmax(scores))]  # the first best, as kube-scheduler's order
        self._start(job, node)
        return True

    def preempt(self, job: SimJob, plan: PreemptionPlan) -> None:
        """Signal ``plan.victims`` (they stop working now and release their resources when their
        GP ends) and reserve ``plan.node`` for the TE ``job``, which starts there when the last
        victim on that node is gone."""
        if not job.trial or job.state is not JobState.QUEUED:
            raise AssertionError(f"only a queued TE job preempts, not {job.uid} ({job.state.name})")
        if not plan.victims:
            raise AssertionError("a preemption plan without victims")
        self._decisions += 1
        self._rules[plan.rule] = self._rules.get(plan.rule, 0) + 1
        now = self.now
        on_target = 0
        limit = self.settings.max_preemptions
        for victim in plan.victims:
            if victim.trial or victim.state is not JobState.RUNNING:
                raise AssertionError(f"victim {victim.uid} is not a running BE job")
            if limit is not None and victim.preemptions >= limit:
                raise AssertionError(f"victim {victim.uid} was already preempted P = {limit} times")
            victim.work_done += now - victim.started_at
            victim.epoch += 1
            victim.state = JobState.TERMINATING
            victim.signalled_at = now
            victim.preemptions += 1
            self.index.set_terminating(victim.uid)
            del self.running_be[victim.index]
            if victim.node == plan.node:
                victim.preempted_for = job
                on_target += 1
            self._push(now + victim.spec.grace_period, _GRACE_END, victim)
        if not on_target:
            raise AssertionError(f"no victim of {job.uid} runs on its node {plan.node}")
        job.state = JobState.RESERVED
        job.reserved_node = plan.node
        job.pending_victims = on_target
        self._hold(job)

    # ------------------------------------------------------------------ events

    def _push_tick(self, now: float) -> None:
        at = math.ceil(now / self._tick) * self._tick
        if at > self._tick_pushed:
            self._tick_pushed = at
            self._kernel.schedule(at, (_TICK, -1, 0), kind=_TICK)

    def _push(self, time: float, kind: int, job: SimJob) -> None:
        self._kernel.schedule(time, (kind, job.index, job.epoch), kind=kind)

    def _submit(self, spec_or_job: SimJob) -> None:
        job = spec_or_job
        self._events += 1
        job.state = JobState.QUEUED
        job.submitted_at = self.now
        job.arrival_seq = self._arrival_seq
        self._arrival_seq += 1
        cpu, memory, gpus = job.demand.as_tuple()
        in_system = self._in_system
        in_system[0] += cpu
        in_system[1] += memory
        in_system[2] += gpus
        load = self.load()
        if load > self._max_load:
            self._max_load = load
        (self.te_queue if job.trial else self.be_queue).append(job)

    def _start(self, job: SimJob, node: str) -> None:
        self.engine.reserve(job.pod, node)
        self.index.add(job.candidate(), node_name=node)
        now = self.now
        job.state = JobState.RUNNING
        job.node = node
        job.started_at = now
        if job.first_start < 0:
            job.first_start = now
        if job.signalled_at >= 0:
            job.intervals.append(now - job.signalled_at)
            job.signalled_at = -1.0
        if not job.trial:
            self.running_be[job.index] = job
        self._push(now + (job.spec.duration - job.work_done), _COMPLETE, job)

    def _release(self, job: SimJob) -> None:
        self.engine.delete_pod(job.uid)
        self.index.delete_pod(job.uid)
        self.version += 1

    def _complete(self, job: SimJob) -> None:
        self._release(job)
        job.work_done += self.now - job.started_at
        job.state = JobState.DONE
        job.finished_at = self.now
        job.node = None
        job.epoch += 1
        self.running_be.pop(job.index, None)
        cpu, memory, gpus = job.demand.as_tuple()
        self._in_system[0] -= cpu
        self._in_system[1] -= memory
        self._in_system[2] -= gpus
        self._done += 1
        if self._on_progress is not None and self._done % self._progress_every == 0:
            self._on_progress(self._done, len(self.jobs))

    def _grace_end(self, victim: SimJob) -> None:
        """The victim is suspended: its resources go back (first to the TE job it was preempted
        for) and it goes to the head of the BE queue (§2) to resume later."""
        self._release(victim)
        victim.state = JobState.QUEUED
        victim.node = None
        victim.epoch += 1
        self.be_queue.appendleft(victim)
        job = victim.preempted_for
        victim.preempted_for = None
        if job is None:
            return
        job.pending_victims -= 1
        node = job.reserved_node
        assert node is not None
        self._drop_hold(job)
        if job.pending_victims:
            self._hold(job)  # what this victim released stays with the TE job
            return
        job.reserved_node = None
        self._start(job, node)  # SchedulingConflict here would be a bookkeeping bug

    def _hold(self, job: SimJob) -> None:
        """Hold what is free on the TE job's node (up to its demand) until its victims are
        gone, as kube-scheduler's nominated node does: neither the N of eq. 2 nor what an
        earlier victim released may go to another pod meanwhile."""
        node = job.reserved_node
        assert node is not None
        hold = _elementwise_min(job.demand, self.engine.free_on(node))
        if hold == Resources():
            return
        placeholder = _placeholder(job, hold)
        self.engine.reserve(placeholder, node)
        self.index.add(
            Candidate(
                uid=placeholder.uid,
                key=placeholder.key,
                job_class=JobClass.TRIAL,
                requests=hold,
                grace_period_seconds=0.0,
            ),
            node_name=node,
        )

    def _drop_hold(self, job: SimJob) -> None:
        placeholder_uid = _placeholder_uid(job)
        self.engine.delete_pod(placeholder_uid)
        self.index.delete_pod(placeholder_uid)

    # ------------------------------------------------------------------ results

    def _result(self) -> RunResult:
        jobs = self.jobs
        intervals = [value for job in jobs for value in job.intervals]
        return RunResult(
            policy=self.policy.name,
            seed=self.seed,
            trial=np.array([job.trial for job in jobs], dtype=np.bool_),
            submit=np.array([job.submitted_at for job in jobs], dtype=np.float64),
            first_start=np.array([job.first_start for job in jobs], dtype=np.float64),
            finish=np.array([job.finished_at for job in jobs], dtype=np.float64),
            duration=np.array([job.spec.duration for job in jobs], dtype=np.float64),
            work_done=np.array([job.work_done for job in jobs], dtype=np.float64),
            preemptions=np.array([job.preemptions for job in jobs], dtype=np.int64),
            intervals=np.array(intervals, dtype=np.float64),
            events=self._events,
            preemption_decisions=self._decisions,
            rules=dict(self._rules),
            makespan=self.now,
            max_load=self._max_load,
        )

    def submitted_specs(self) -> list[JobSpec]:
        """The input jobs with the submit times this run gave them (the closed loop's arrivals,
        to replay under other policies)."""
        return [replace(job.spec, submit_time=job.submitted_at) for job in self.jobs]


def _elementwise_min(a: Resources, b: Resources) -> Resources:
    return Resources(min(a.cpu_millis, b.cpu_millis), min(a.memory_bytes, b.memory_bytes), min(a.gpus, b.gpus))


def _placeholder_uid(job: SimJob) -> str:
    return f"{job.uid}/reservation"


def _placeholder(job: SimJob, hold: Resources) -> PodInfo:
    return PodInfo(uid=_placeholder_uid(job), namespace="sim", name=f"{job.uid}-reservation", requests=hold)
