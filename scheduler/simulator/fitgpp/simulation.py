"""The ``fitgpp`` workload's simulation: events on the simulator's kernel
(:mod:`~scheduler.simulator.kernel`: arrivals, completions, grace-period ends; no minute ticks),
and a cluster whose every decision is taken by the engine ``cellfit serve`` composes
(:mod:`scheduler.composition`), driven as kube-scheduler drives it
(:mod:`~scheduler.simulator.kube_model`: its own resource fit and nominated nodes, the engine's
filter, prioritize and bind, its preemption dry run offering candidate nodes to the engine's
preemption, victims deleted and gone after their grace period, a preempted Job's next pod).

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
from msgspec import structs

from scheduler.config import Settings, load_settings
from scheduler.core.engine import SchedulingEngine
from scheduler.core.model import NodeInfo
from scheduler.core.resources import Resources
from scheduler.preemption.model import FitGppSettings
from scheduler.simulator.errors import InvalidWorkload, SimulationStalled
from scheduler.simulator.kernel import EventKernel
from scheduler.simulator.kube_model import KubeSchedulerCycle
from scheduler.simulator.served import compose_served
from scheduler.simulator.fitgpp.state import JobState, PreemptionPlan, SimJob
from scheduler.simulator.cluster import ClusterSpec
from scheduler.simulator.fitgpp.workload import JobSpec

if TYPE_CHECKING:
    from scheduler.simulator.fitgpp.policies import DecidesPreemption, Policy

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
        configuration: Settings | None = None,
        engine: SchedulingEngine | None = None,
        preemption: DecidesPreemption | None = None,
        record_decisions: bool = False,
    ) -> None:
        """The engine is the one ``cellfit serve`` composes from ``configuration`` (default: its
        embedded default configuration; standalone, so resource fit unless the configuration
        asks for HiveD with a topology), its ``preemption`` section given the run's s, P and
        seed (:func:`served_settings`), on the virtual clock, with FitGpp's preemption capability
        from the same composition. ``engine`` replaces it (the parity test passes the live
        service), with ``preemption`` (None: victims come from ``engine.select_victims``,
        unexplained).
        ``record_decisions``: keep every bind and preemption in :attr:`decisions`."""
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
        # The engine ``cellfit serve`` composes (standalone, no HiveD topology: resource fit
        # inside FitGpp with its resume holds), on the virtual clock.
        self.engine: SchedulingEngine
        self.preemption: DecidesPreemption | None
        self.node_names = cluster.node_names()
        nodes = [NodeInfo(name=name, allocatable=cluster.node) for name in self.node_names]
        if engine is None:
            served = served_settings(settings, seed=seed, configuration=configuration)
            composition = compose_served(served, nodes=nodes, clock=lambda: self.now)
            self.engine, self.preemption = composition.engine, composition.preemption
        else:
            self.engine, self.preemption = engine, preemption
        for node in nodes:
            self.engine.apply_node(node)
        self.jobs = [SimJob(i, spec) for i, spec in enumerate(jobs)]
        self.by_uid: dict[str, SimJob] = {}
        self.by_pod: dict[str, SimJob] = {}  # the current pod of each job, by pod UID
        # kube-scheduler's side: its cycle around the engine, with its cache of the nodes, the
        # pods nominated to a node while their victims terminate and the bound pods of each
        # node as its preemption dry run reads them.
        self.kube = KubeSchedulerCycle(self.engine, [(name, cluster.node) for name in self.node_names])
        self._wakes: set[float] = set()
        self.requeues = 0  # TE jobs whose nominated node had no room once their victims were gone
        # (time, "bind", pod UID, node, ()) and (time, "preempt", preemptor UID, node, victim
        # UIDs), in the order they were made; None unless asked for.
        self.decisions: list[tuple[float, str, str, str, tuple[str, ...]]] | None = [] if record_decisions else None
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
            self.by_pod[job.pod.uid] = job
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
            # The instant a tick was pushed for is a decision instant even where floats make it
            # no exact multiple (0.30000000000000004 is 3.0000000000000004 ticks of 0.1).
            if self._tick and not ((now / self._tick).is_integer() or now == self._tick_pushed):
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
        """kube-scheduler's cycle for ``job``'s pod: its own filter (room kept for nominated
        pods), then the engine's filter and prioritize (ties go to the first node, as in
        kube-scheduler's order), then bind; False if no node is feasible."""
        node = self.kube.schedule(job.pod)
        if node is None:
            return False
        self._start(job, node)
        return True

    @property
    def rejected_by_extender(self) -> bool:
        """Whether the last failed :meth:`try_place` was the engine's refusal (kube-scheduler
        called the extender) rather than its own filter leaving no node to offer."""
        return self.kube.rejected_by_extender

    def try_nominated(self, job: SimJob) -> bool:
        """kube-scheduler's cycle for a TE job nominated to a node whose victims are still
        leaving (the ``kube`` policy retries it on every pod deletion, as NodeResourcesFit's
        queueing hint moves it): its nominated node first, then every node, with its own
        nomination not counted against it. Placed, it is nominated no more and its victims
        leave for nobody; else it stays nominated."""
        if job.state is not JobState.RESERVED or job.reserved_node is None:
            raise AssertionError(f"{job.uid} is not nominated ({job.state.name})")
        # Cleared while it is tried, so that the room it is owed counts for it (and the memo
        # of kube's filter, recorded with the nomination in place, is not read for it).
        node = self._unnominate(job)
        pod = job.pod
        chosen = node if self.kube.fits_nominated(pod, node) else self.kube.schedule(pod)
        if chosen is None:
            job.state = JobState.RESERVED
            job.reserved_node = node
            self.kube.nominate(pod, node)
            return False
        for running in self.kube.running_on(node):
            victim = self.by_pod.get(running.pod.uid)
            if victim is not None and victim.preempted_for is job:
                victim.preempted_for = None  # it still checkpoints, for nobody now
        job.pending_victims = 0
        self._start(job, chosen)
        return True

    def _unnominate(self, job: SimJob) -> str:
        """The node ``job`` was nominated to, the nomination cleared (room it kept may go to
        others, so the memo of kube's filter is too) and the job queued again."""
        node = job.reserved_node
        assert node is not None
        job.reserved_node = None
        self.kube.unnominate(job.pod, node)
        job.state = JobState.QUEUED
        return node

    def wake_at(self, at: float) -> None:
        """Give the policy a scheduling pass at ``at`` (later than now) even if nothing happens
        then: kube-scheduler's periodic flushes."""
        if not at > self.now:
            raise ValueError(f"wake_at({at!r}) is not after now ({self.now!r})")
        if at not in self._wakes:
            self._wakes.add(at)
            self._kernel.schedule(at, (_TICK, -1, 0), kind=_TICK)

    def preemption_candidates(self, job: SimJob) -> dict[str, list[str]]:
        """The candidate nodes and victims kube-scheduler would offer the extender's preempt
        verb for ``job``'s pod (its dry run, :mod:`~scheduler.simulator.kube_model`)."""
        return self.kube.preemption_candidates(job.pod)

    def free_on(self, node: str) -> Resources:
        """What kube-scheduler sees free on ``node`` for a pod of no higher priority than the
        pods nominated there: free less what they are owed (never below zero)."""
        return self.kube.free_for_lowest(node)

    def preempt(self, job: SimJob, plan: PreemptionPlan) -> None:
        """kube-scheduler's preemption once victims are chosen: delete ``plan.victims`` (they
        stop working now and release their resources when their GP ends) and nominate the TE
        ``job`` to ``plan.node``, where it is bound when the last victim there is gone."""
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
            # The deletion as the watch shows it: the pod holds its resources until it is gone.
            self.engine.apply_pod(structs.replace(victim.pod, node_name=victim.node, phase="Running", terminating=True))
            del self.running_be[victim.index]
            if victim.node == plan.node:
                victim.preempted_for = job
                on_target += 1
            self._push(now + victim.spec.grace_period, _GRACE_END, victim)
        if not on_target:
            raise AssertionError(f"no victim of {job.uid} runs on its node {plan.node}")
        if self.decisions is not None:
            self.decisions.append((now, "preempt", job.pod.uid, plan.node, tuple(v.pod.uid for v in plan.victims)))
        job.state = JobState.RESERVED
        job.reserved_node = plan.node
        job.pending_victims = on_target
        self.kube.nominate(job.pod, plan.node)

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
        self.engine.apply_pod(job.pod)  # the new pending pod, as the watch shows it
        (self.te_queue if job.trial else self.be_queue).append(job)

    def _start(self, job: SimJob, node: str) -> None:
        self.kube.bind(job.pod, node, at=self.now)
        if self.decisions is not None:
            self.decisions.append((self.now, "bind", job.pod.uid, node, ()))
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
        assert job.node is not None
        self.kube.release(job.pod.uid)
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
        # The Job controller's next pod, pending (the engine's resume hold keeps room for it);
        # the resumed PriorityClass puts it at the head of the BE queue.
        del self.by_pod[victim.pod.uid]
        self.engine.apply_pod(victim.next_pod())
        self.by_pod[victim.pod.uid] = victim
        self.be_queue.appendleft(victim)
        job = victim.preempted_for
        victim.preempted_for = None
        if job is None:
            return
        job.pending_victims -= 1
        if job.pending_victims:
            return  # what this victim released stays with the TE job, nominated there
        self._retry_nominated(job)

    def _retry_nominated(self, job: SimJob) -> None:
        """The TE job's last victim on its nominated node is gone: kube-scheduler tries it at
        once, on that node first (its own filter, with the other nominated pods counted, then
        the engine's). FitGpp does not see nominations, so a second TE job may have been given
        victims whose room was owed to this one; then the node has no room and the job goes
        back to the TE queue, in arrival order, for the policy's next pass (it may preempt
        again)."""
        node = self._unnominate(job)
        if self.kube.fits_nominated(job.pod, node):
            self._start(job, node)
            return
        self.requeues += 1
        queue = self.te_queue
        at = next((i for i, other in enumerate(queue) if other.arrival_seq > job.arrival_seq), len(queue))
        queue.insert(at, job)

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



def served_settings(settings: FitGppSettings, *, seed: int, configuration: Settings | None = None) -> Settings:
    """``configuration`` (default: the one ``cellfit serve`` runs with by default) with FitGpp's
    preemption at the run's s, P and seed (the fallback's order)."""
    default = configuration if configuration is not None else load_settings(None)
    preemption = default.preemption.model_copy(
        update={
            "grace_period_weight": settings.grace_period_weight,
            "max_preemptions": settings.max_preemptions,
            "seed": seed,
            "policy": "fitgpp",
        }
    )
    return default.model_copy(update={"preemption": preemption})
