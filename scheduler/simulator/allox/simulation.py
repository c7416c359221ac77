"""The discrete-event simulation of interchangeable jobs (AlloX, EuroSys'20 §5): a virtual clock
that jumps from event to event (arrivals, sample ends, job ends), and machines that are whole GPUs
or CPU slots (:func:`scheduler.matching.capacity.machines_for`), which the policies count and
start jobs on.

Where a job runs is not the machine's to say, as live: each start (and each sampling run) is a
pod of its configuration's demand, and kube-scheduler places it (:mod:`~.kube_model`: its own
resource fit, then the filter, prioritize and bind of the engine ``cellfit serve`` composes,
:func:`~scheduler.simulator.served.compose_served`; its default configuration is resource
fit inside FitGpp). Pending pods wait in kube-scheduler's queue (:mod:`~.kube_queue`, as the
``fitgpp`` workload's ``kube`` policy has it): highest priority first (sampling pods, 600,
before the placed Jobs' pods, 500, as the chart's PriorityClasses have it), then queue time,
backoff ordering a pass; a pod no node has room for is tried again when a pod's deletion (or,
when the engine rejected it, a binding) may have made some; its run starts when it is bound.
The queue's 5-minute flush runs at the passes the simulation makes anyway: a pod here fits
only after a deletion, which moves it at once. Admission reads the free capacity as the live
cluster cache reports it (:meth:`free_by_node`).

A job's life: it arrives; if its policy needs estimates and its user gave none, the estimator's
planner (:mod:`estimator.planner`, through :class:`~scheduler.simulator.allox.sampling.SamplingRun`)
asks for its sampling runs — two lengths per configuration (§4.1) — which run first: ahead of
every waiting job, FIFO among samples, on machines of their configuration's kind, at most
``sample_share`` of each kind's machines at once (§4.4 "AlloX prioritizes all sample jobs … sets
a limit on resources for sample jobs"). A run that goes far past what its peers predict is
stopped by the planner (§4.4 "we do not need to complete it"). Once every run has ended, the
planner's estimates are what the policy sees; the job waits until the policy starts it on a
machine, and runs for its *true* processing time on that kind. A preemptive policy (SRPT) may
stop a running job; it keeps the fraction of its work done and may resume on any machine
(preemption and migration are free, §5.1.1).

At each instant, job and sample ends are applied first, then samples past their deadline are
stopped, then arrivals, then samples take free machines, then kube-scheduler tries the pods made
meanwhile (and, if a pod was deleted, the ones waiting), then the policy gets one
:meth:`InterchangeablePolicy.schedule` call (a non-preemptive policy only when a machine is free
and a job waits), then kube-scheduler tries the pods of the jobs it started.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import TYPE_CHECKING, Callable, Final, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.config import Settings, load_settings
from scheduler.core.engine import SchedulingEngine
from scheduler.core.model import NodeInfo, PodInfo
from scheduler.core.resources import Resources
from scheduler.matching.admission import RunningJob, WaitingJob
from scheduler.matching.capacity import NodeResources, cluster_capacity, default_demands
from scheduler.matching.fairness import DemandShare, ShareModel, job_value
from scheduler.matching.model import KIND_CPU, KIND_GPU, Assignment, Demand, Job, Machine
from estimator.planner import StopSample
from placer.guarantee import guarantees, vc_machines
from scheduler.simulator.allox.policies import AdmissionInputs
from scheduler.simulator.allox.sampling import RunState, SamplingRun
from scheduler.simulator.allox.workload import AlloxJobSpec, AlloxWorkload
from scheduler.simulator.errors import InvalidWorkload, PolicyError, SimulationStalled
from scheduler.simulator.kernel import EventKernel
from scheduler.simulator.kube_model import KubeSchedulerCycle
from scheduler.simulator.kube_queue import SchedulingQueue
from scheduler.simulator.served import compose_served
from scheduler.simulator.cluster import GIB, ClusterSpec

if TYPE_CHECKING:
    from scheduler.simulator.allox.policies import InterchangeablePolicy

FloatArray = npt.NDArray[np.float64]
KINDS: Final = (KIND_GPU, KIND_CPU)

_JOB_END: Final = 0
_SAMPLE_END: Final = 1
_SAMPLE_CHECK: Final = 2

# The pods' priorities, as the chart's PriorityClasses give them: sampling pods (cellfit-sampling)
# above the placed Jobs' pods (best-effort), so kube-scheduler tries them first.
SAMPLING_PRIORITY: Final = 600
JOB_PRIORITY: Final = 500

ProgressCallback = Callable[[int, int], None]


class Phase(IntEnum):
    FUTURE = 0
    PROFILING = 1  # its samples run or wait for a machine
    WAITING = 2  # profiled (or needing no profile), waiting for the policy
    RUNNING = 3
    DONE = 4


def demand_resources(demand: Demand) -> Resources:
    """A configuration's demand (cores, GPUs, GiB) as the fit engine books it."""
    return Resources(
        cpu_millis=math.ceil(demand.cpu * 1000), memory_bytes=math.ceil(demand.memory * GIB), gpus=math.ceil(demand.gpu)
    )


def _as_job(spec: AlloxJobSpec, processing_time: Mapping[str, float]) -> Job:
    """``spec`` as the matching package's :class:`Job` with these processing times (the truth,
    or what the policy is told)."""
    return Job(
        name=spec.job_id, user=spec.user, arrival=spec.submit_time, processing_time=dict(processing_time), demand=spec.demand
    )


class _SimJob:
    __slots__ = (
        "index",
        "spec",
        "phase",
        "seen",
        "truth",
        "done",
        "machine",
        "started_at",
        "bound_at",
        "epoch",
        "first_start",
        "finish",
        "starts",
        "final_kind",
        "sampling",
    )

    def __init__(self, index: int, spec: AlloxJobSpec, seen: Job, truth: Job) -> None:
        self.index = index
        self.spec = spec
        self.phase = Phase.FUTURE
        self.seen = seen  # what the policy is told (estimates, or the truth for estimate-free policies)
        self.truth = truth
        self.done = 0.0  # fraction of the work done by earlier (preempted) runs
        self.machine: Machine | None = None
        self.started_at = 0.0  # when the policy started it (its Job unsuspended): ω counts from here
        self.bound_at: float | None = None  # when its pod was bound: its work counts from here
        self.epoch = 0
        self.first_start = -1.0
        self.finish = -1.0
        self.starts = 0
        self.final_kind = ""
        self.sampling: SamplingRun | None = None  # the estimator's view of its samples, once it arrived

    def fraction_done(self, now: float) -> float:
        if self.machine is None or self.bound_at is None:
            return self.done
        return self.done + (now - self.bound_at) / self.spec.processing_time[self.machine.kind]


@dataclass(slots=True, eq=False)
class _Sample:
    """A sampling run holding a machine; it runs once its pod is bound (``started_at``)."""

    job: _SimJob
    run: RunState
    length: float  # how long it runs if nobody stops it
    machine: Machine
    started_at: float | None = None

    @property
    def kind(self) -> str:
        return self.machine.kind


@dataclass(frozen=True, slots=True)
class _PendingPod:
    """A pod kube-scheduler has not bound yet, for the job or sample ``holder``."""

    pod: PodInfo
    holder: _SimJob | _Sample


@dataclass(frozen=True, slots=True)
class _Event:
    """A job's end (valid while the job's epoch is still ``epoch``), a sample's end, or the
    instant a running sample passes its deadline (``check``)."""

    job: _SimJob | None = None
    epoch: int = 0
    sample: _Sample | None = None
    check: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplingRecord:
    """What the estimator did in one run, arrays indexed like the input jobs. ``estimate``: the
    estimates the policy saw, per job and kind (columns GPU, CPU; NaN where a kind was not
    estimated and for jobs nothing was sampled for); ``truth``: the true times in the same
    shape; ``sampled``: which jobs the estimator sampled; ``overhead``: the planner's overhead
    figure per sampled job (sampling seconds over the sum of its estimates, what the live Event
    reports; NaN elsewhere); ``sample_seconds``: the machine-seconds each job's runs held;
    ``methods``: the estimates by the model's method; ``stopped``: the runs the planner stopped
    as long."""

    estimate: FloatArray
    truth: FloatArray
    sampled: npt.NDArray[np.bool_]
    overhead: FloatArray
    sample_seconds: FloatArray
    methods: Mapping[str, int]
    stopped: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxRunResult:
    """What one run measured. Times in seconds; arrays indexed like the input jobs.

    ``final_kind`` is the kind each job finished on (0 GPU, 1 CPU). ``progress_sd`` is the
    time average, over the arrival window (first to last arrival), of the standard deviation of
    the users' progress (§3.3.2: the sum of the values of a user's running jobs, measured with
    the true times) across the users with a job in the system; ``progress_mean`` the time
    average of their mean; ``user_progress`` each user's time-averaged progress. ``busy`` is
    machine-seconds per kind spent on jobs and on samples over the whole run; ``window_busy``
    the machines per kind held on average over the arrival window (utilisation × ``machines``).
    ``cpu_work_speedup`` is the CPU time jobs ran for over the GPU time the same work would have
    taken: the mean speedup of the work done on CPUs, weighted by CPU time (lower means the CPUs
    ran the jobs that lose least there; None when CPUs ran nothing). ``sampling`` is what the
    estimator did (:class:`SamplingRecord`). ``pods_waited``: the pods (jobs' and sampling runs')
    kube-scheduler found no node for when they were made, so that they waited for room while
    their machine was counted busy.
    """

    policy: str
    seed: int
    users: tuple[str, ...]
    user: npt.NDArray[np.int64]
    submit: FloatArray
    first_start: FloatArray
    finish: FloatArray
    fastest: FloatArray
    final_kind: npt.NDArray[np.int64]
    progress_sd: float
    progress_mean: float
    user_progress: FloatArray
    busy: Mapping[str, Mapping[str, float]]
    window_busy: Mapping[str, Mapping[str, float]]
    machines: Mapping[str, int]
    cpu_work_speedup: float | None
    makespan: float
    events: int
    decisions: int
    preemptions: int
    pods_waited: int
    sampling: SamplingRecord

    @property
    def jobs(self) -> int:
        return len(self.submit)

    @property
    def completion_time(self) -> FloatArray:
        """JCT: finish minus arrival (what AlloX minimises on average)."""
        result: FloatArray = self.finish - self.submit
        return result


class InterchangeableSimulation:
    """One run of interchangeable ``jobs`` on ``cluster`` under ``policy``; call :meth:`run` once."""

    def __init__(
        self,
        *,
        cluster: ClusterSpec,
        workload: AlloxWorkload,
        jobs: Sequence[AlloxJobSpec],
        policy: InterchangeablePolicy,
        seed: int = 0,
        on_progress: ProgressCallback | None = None,
        progress_every: int = 1024,
        configuration: Settings | None = None,
    ) -> None:
        """``configuration``: what the engine is composed from, as ``cellfit serve --config``
        reads it (default: its embedded default configuration)."""
        self.cluster = cluster
        self.workload = workload
        self.policy = policy
        self.seed = seed
        self.now = 0.0
        self.nodes = workload.nodes(cluster)
        self.machines: tuple[Machine, ...] = tuple(workload.machines(cluster))
        self.kinds = tuple(kind for kind in KINDS if any(m.kind == kind for m in self.machines))
        self._capacity = cluster_capacity(self.nodes)
        self.shares: ShareModel = DemandShare(
            capacity=self._capacity,
            default_demand=default_demands(
                cpu_slot=Demand(cpu=workload.cpu_slot_cores), reserved_cpu_per_gpu=workload.reserved_cpu_per_gpu
            ),
        )
        nodes = [NodeInfo(name=name, allocatable=cluster.node) for name in cluster.node_names()]
        served = configuration if configuration is not None else load_settings(None)
        composition = compose_served(served, nodes=nodes, clock=lambda: self.now)
        self.engine: SchedulingEngine = composition.engine
        self._cells = composition.cells  # HiveD, whose guarantees admission reads
        for node in nodes:
            self.engine.apply_node(node)
        # kube-scheduler's side: its cycle around the engine, with its cache of the bound pods'
        # requests per node (its own resource fit, and the free capacity the live cluster cache
        # gives admission), and the pods waiting for a node.
        self.kube = KubeSchedulerCycle(self.engine, [(node.name, node.allocatable) for node in nodes])
        self._pending: dict[str, _PendingPod] = {}
        self._kube_queue: SchedulingQueue[_PendingPod] = SchedulingQueue()
        self._deleted = False  # a bound pod was deleted since the last pass
        self._binds = 0  # the assigned-pod events that move pods the engine rejected
        self._pods_waited = 0
        self._estimator = workload.estimator()
        self.jobs: list[_SimJob] = []
        seen_ids: set[str] = set()
        for index, spec in enumerate(jobs):
            if spec.job_id in seen_ids:
                raise InvalidWorkload(f"job id {spec.job_id!r} appears twice", field="job_id")
            seen_ids.add(spec.job_id)
            usable = [kind for kind in spec.processing_time if kind in self.kinds]
            if not usable:
                raise InvalidWorkload(f"no machine of this cluster can run job {spec.job_id!r}", field="nodes")
            for kind in usable:
                if not demand_resources(spec.demand[kind]).fits_in(cluster.node):
                    raise InvalidWorkload(
                        f"job {spec.job_id!r}'s {kind} configuration does not fit on a node", field="nodes"
                    )
            truth = _as_job(spec, {kind: spec.processing_time[kind] for kind in usable})
            seen = truth  # estimate-free policies; replaced below or once the samples are done
            if policy.needs_estimates:
                if spec.estimate is not None:
                    missing = [kind for kind in usable if kind not in spec.estimate]
                    if missing:
                        raise InvalidWorkload(f"job {spec.job_id!r}'s estimate has no {missing[0]} time", field="estimate")
                    seen = _as_job(spec, {kind: spec.estimate[kind] for kind in usable})
                elif spec.sampling is None:
                    raise InvalidWorkload(
                        f"job {spec.job_id!r} has neither an estimate nor a sampling model", field="estimate"
                    )
            self.jobs.append(_SimJob(index, spec, seen, truth))
        self._index_of = {job.spec.job_id: job.index for job in self.jobs}
        self.users: tuple[str, ...] = tuple(sorted({job.spec.user for job in self.jobs}))
        self._user_index = {user: i for i, user in enumerate(self.users)}
        # Machine state: what each machine holds (a job, a sample, or nothing).
        self._holder: dict[str, _SimJob | _Sample | None] = {machine.name: None for machine in self.machines}
        self._waiting: dict[int, _SimJob] = {}  # insertion order = arrival order (SRPT re-queues)
        self._running: dict[int, _SimJob] = {}
        self._sample_queue: dict[str, deque[tuple[_SimJob, RunState]]] = {kind: deque() for kind in self.kinds}
        self._sample_holding: dict[str, _Sample] = {}  # run name -> the sample running it
        self._samples_running = {kind: 0 for kind in self.kinds}
        per_kind = {kind: sum(1 for m in self.machines if m.kind == kind) for kind in self.kinds}
        self._machine_count = per_kind
        self._sample_limit = {kind: max(1, math.floor(workload.sample_share * count)) for kind, count in per_kind.items()}
        self._kernel: EventKernel[_Event] = EventKernel()
        self._done = 0
        self._events = 0
        self._decisions = 0
        self._preemptions = 0
        self._stopped_samples = 0
        self._busy = {kind: {"jobs": 0.0, "samples": 0.0} for kind in self.kinds}
        # Machine-seconds held inside the arrival window, and how many machines jobs hold now.
        self._window_busy = {kind: {"jobs": 0.0, "samples": 0.0} for kind in self.kinds}
        self._holding_jobs = {kind: 0 for kind in self.kinds}
        self._cpu_work_on_gpu = 0.0
        # Fairness bookkeeping (true values): progress per user, jobs in the system per user.
        self._progress = np.zeros(len(self.users))
        self._in_system = np.zeros(len(self.users), dtype=np.int64)
        submits = [job.spec.submit_time for job in self.jobs]
        self._window = (min(submits), max(submits)) if submits else (0.0, 0.0)
        self._measured_until = self._window[0]
        self._sd_integral = 0.0
        self._mean_integral = 0.0
        self._user_integral = np.zeros(len(self.users))
        self._on_progress = on_progress
        self._progress_every = max(1, progress_every)
        self._ran = False

    # ------------------------------------------------------------------ the loop

    def run(self) -> AlloxRunResult:
        if self._ran:
            raise RuntimeError("a simulation runs once")
        self._ran = True
        future = sorted(self.jobs, key=lambda job: (job.spec.submit_time, job.index))
        kernel = self._kernel
        cursor = 0

        def next_arrival() -> float | None:
            return future[cursor].spec.submit_time if cursor < len(future) else None

        def advance(now: float) -> None:
            self._measure(now)
            self.now = now

        def instant(now: float) -> None:
            nonlocal cursor
            while cursor < len(future) and future[cursor].spec.submit_time <= now:
                self._arrive(future[cursor])
                cursor += 1
            self._start_samples()
            # Bound before the policy reads the free capacity, as live, where kube-scheduler
            # binds a sampling pod in milliseconds and admission waits out its debounce.
            self._schedule_pods()
            if self.policy.preemptive or (self._waiting and any(h is None for h in self._holder.values())):
                if self._waiting or self._running:
                    self._decisions += 1
                    self.policy.schedule(self)
            self._schedule_pods()
            if not kernel.pending and self._pending:
                names = ", ".join(repr(uid) for uid in list(self._pending)[:5])
                raise SimulationStalled(f"{len(self._pending)} pods ({names}) found no node on an idle cluster")
            if not kernel.pending and cursor >= len(future) and (self._waiting or self._profiling_left()):
                names = ", ".join(repr(job.spec.job_id) for job in list(self._waiting.values())[:5])
                raise SimulationStalled(
                    f"policy {self.policy.name!r} left {len(self._waiting)} jobs waiting ({names}) with every machine idle"
                )

        kernel.run(next_arrival=next_arrival, on_event=self._on_event, instant=instant, advance=advance)
        if self._done != len(self.jobs):  # pragma: no cover - the stall check above catches it
            raise SimulationStalled(f"{len(self.jobs) - self._done} jobs never finished under {self.policy.name!r}")
        return self._result()

    # ------------------------------------------------------------------ what policies read

    def free_machines(self) -> list[Machine]:
        """Idle machines, in the cluster's order (node by node, GPUs before CPU slots)."""
        return [machine for machine in self.machines if self._holder[machine.name] is None]

    def waiting_jobs(self) -> list[Job]:
        """Jobs the policy may start, as the policy sees them (estimates), in arrival order."""
        return [job.seen for job in self._waiting.values()]

    def busy_until(self) -> dict[Machine, float]:
        """Every busy machine and when its work is expected to end: a job by its estimate
        (never before now), a sample by its length."""
        out: dict[Machine, float] = {}
        for machine in self.machines:
            holder = self._holder[machine.name]
            if isinstance(holder, _SimJob):
                left = (1.0 - holder.done) * holder.seen.processing_time[machine.kind]
                out[machine] = max(holder.started_at + left, self.now)
            elif isinstance(holder, _Sample):
                out[machine] = (self.now if holder.started_at is None else holder.started_at) + holder.length
        return out

    def free_on(self, node: str) -> Resources:
        """Free on ``node`` in kube-scheduler's cache: allocatable less its bound pods."""
        return self.kube.free(node)

    def free_by_node(self) -> dict[str, Resources]:
        """What each node has left for AlloX admission, as the live cluster cache reports it
        (``ClusterCache.free_by_node(except_owners=<the running Jobs>)``): allocatable less every
        pod bound to it except the running jobs', which admission counts as busy machines of
        their own — here, allocatable less the sampling runs. In node-name order, as the cache."""
        free = {name: self.kube.free(name) for name in self.cluster.node_names()}
        for job in self._running.values():
            bound = self.kube.bound.get(job.spec.job_id)
            if bound is not None:
                free[bound.node] = free[bound.node] + bound.pod.requests
        return free

    def admission_inputs(self) -> AdmissionInputs:
        """The state :func:`scheduler.matching.admission.decide` takes, translated as the live
        placer controller translates a cluster's: every job waiting for the policy (profiled)
        with the estimates the policy sees and its configurations' demands; every running job
        with its start, the kind it runs on and its estimates on every kind (ω = start + the
        running kind's; fairness weighs the others, §3.3.2); :meth:`free_by_node` as
        :class:`NodeResources` (cores, GPUs, GiB); and the cluster's capacity in those units.
        Under HiveD, every job is of the implicit default VC (the workload's pods carry no VC
        label), and each VC's GPU machines are what its free guarantee holds, read from the
        engine's own view with the running jobs' pods left out (``placer.guarantee``)."""
        waiting = tuple(
            WaitingJob(
                key=job.spec.job_id,
                user=job.spec.user,
                arrival=job.spec.submit_time,
                seconds=dict(job.seen.processing_time),
                demand={kind: job.spec.demand[kind] for kind in job.seen.processing_time},
            )
            for job in self._waiting.values()
        )
        running = []
        for job in self._running.values():
            machine = job.machine
            assert machine is not None
            running.append(
                RunningJob(
                    key=job.spec.job_id,
                    user=job.spec.user,
                    kind=machine.kind,
                    started=job.started_at,
                    seconds={kind: (1.0 - job.done) * seconds for kind, seconds in job.seen.processing_time.items()},
                    demand={kind: job.spec.demand[kind] for kind in job.seen.processing_time},
                )
            )
        free = tuple(
            NodeResources(name=name, cpu=r.cpu_millis / 1000, gpu=max(r.gpus, 0), memory=max(r.memory_bytes, 0) / GIB)
            for name, r in self.free_by_node().items()
        )
        if self._cells is None:
            return AdmissionInputs(now=self.now, waiting=waiting, running=tuple(running), free_nodes=free, capacity=self._capacity)
        except_pods = frozenset(job.spec.job_id for job in self._running.values())
        # The opportunistic pods' requests from kube-scheduler's cache, as live from the cluster
        # snapshot: what HiveD's reclaim frees beside their GPUs.
        cells = guarantees(self._cells.inspect_guarantees(except_pods=except_pods), requests=self._bound_requests)
        default_vc = self._cells.default_vc
        pool = default_vc if default_vc in cells else None
        waiting = tuple(replace(job, pool=pool) for job in waiting)
        running = [replace(job, pool=pool) for job in running]
        machines = vc_machines(waiting, free=free, cells=cells)
        return AdmissionInputs(now=self.now, waiting=waiting, running=tuple(running), free_nodes=free,
                               capacity=self._capacity, gpu_pools=machines.gpu_pools, gpu_slots=machines.gpu_slots)

    def _bound_requests(self, uid: str) -> Resources | None:
        bound = self.kube.bound.get(uid)
        return bound.pod.requests if bound is not None else None

    def running(self) -> list[Assignment]:
        """The running jobs as the policy sees them (estimated finish), for fairness."""
        out = []
        for job in self._running.values():
            assert job.machine is not None
            left = (1.0 - job.done) * job.seen.processing_time[job.machine.kind]
            out.append(Assignment(job=job.seen, machine=job.machine, start=job.started_at, finish=job.started_at + left))
        return out

    def in_service(self) -> list[tuple[Job, float, Machine | None]]:
        """Every waiting or running job with the fraction of its work left and its machine (None
        when waiting), in arrival order: what SRPT reallocates."""
        jobs = sorted([*self._waiting.values(), *self._running.values()], key=lambda job: job.index)
        return [(job.seen, 1.0 - job.fraction_done(self.now), job.machine) for job in jobs]

    def sampling(self, machine: Machine) -> bool:
        return isinstance(self._holder[machine.name], _Sample)

    def holdings(self) -> dict[str, str | None]:
        """Per machine name, the pod it holds (``<job>`` or ``<job>/sample-<kind>-<length>``) or None:
        what invariant checks compare with the fit engine's bookings."""
        out: dict[str, str | None] = {}
        for name, holder in self._holder.items():
            if isinstance(holder, _SimJob):
                out[name] = holder.spec.job_id
            elif isinstance(holder, _Sample):
                out[name] = holder.run.name
            else:
                out[name] = None
        return out

    def bound_pods(self) -> dict[str, tuple[str, Resources]]:
        """Every bound pod (``<job>`` or ``<job>/sample-<kind>-<length>``): its node and requests."""
        return {uid: (bound.node, bound.pod.requests) for uid, bound in self.kube.bound.items()}

    def waiting_pods(self) -> list[str]:
        """The pods kube-scheduler has not bound yet."""
        return list(self._pending)

    def progress_of(self, job_name: str) -> float:
        """Fraction of ``job_name``'s work done so far (1 once finished)."""
        return self._job(job_name).fraction_done(self.now)

    # ------------------------------------------------------------------ what policies do

    def start(self, job_name: str, machine: Machine) -> None:
        """Start waiting job ``job_name`` on idle ``machine`` now: its pod, of that kind's
        demand, goes to kube-scheduler, and the job runs for its true time once it is bound."""
        job = self._job(job_name)
        if job.phase is not Phase.WAITING:
            raise PolicyError(f"job {job_name!r} is not waiting ({job.phase.name})")
        if machine.name not in self._holder or self._holder[machine.name] is not None:
            raise PolicyError(f"machine {machine.name!r} is not idle")
        if machine.kind not in job.truth.processing_time:
            raise PolicyError(f"job {job_name!r} has no {machine.kind} configuration")
        self._holder[machine.name] = job
        self._holding_jobs[machine.kind] += 1
        del self._waiting[job.index]
        self._running[job.index] = job
        job.phase = Phase.RUNNING
        job.machine = machine
        job.started_at = self.now
        job.starts += 1
        if job.first_start < 0:
            job.first_start = self.now
        self._progress[self._user_index[job.spec.user]] += job_value(job.truth, machine.kind, self.shares)
        self._make_pod(job.spec.job_id, job.spec.demand[machine.kind], priority=JOB_PRIORITY, holder=job)

    def stop(self, job_name: str) -> None:
        """Preempt running job ``job_name`` (preemptive policies only): it keeps the work done
        and waits again."""
        if not self.policy.preemptive:
            raise PolicyError(f"policy {self.policy.name!r} is not preemptive")
        job = self._job(job_name)
        if job.phase is not Phase.RUNNING:
            raise PolicyError(f"job {job_name!r} is not running")
        job.done = job.fraction_done(self.now)
        self._stop_running(job)
        job.phase = Phase.WAITING
        self._waiting[job.index] = job
        self._preemptions += 1

    # ------------------------------------------------------------------ internals

    def _job(self, name: str) -> _SimJob:
        index = self._index_of.get(name)
        if index is None:
            raise PolicyError(f"unknown job {name!r}")
        return self.jobs[index]

    # ------------------------------------------------------------------ kube-scheduler

    def _make_pod(self, uid: str, demand: Demand, *, priority: int, holder: _SimJob | _Sample) -> None:
        """A pod for ``holder``, queued for kube-scheduler's next pass of this instant."""
        pod = PodInfo(uid=uid, namespace="sim", name=uid, requests=demand_resources(demand), priority=priority)
        entry = self._pending[uid] = _PendingPod(pod=pod, holder=holder)
        self._kube_queue.add(entry, key=uid, now=self.now)

    def _schedule_pods(self) -> None:
        """kube-scheduler's pass: every pod its queue has ready, in the queue's order, bound where
        the engine's filter and prioritize say (after kube-scheduler's own filter) or set aside
        until an event may help it; again while bindings move pods the engine rejected."""
        queue = self._kube_queue
        if self._deleted:
            self._deleted = False
            queue.pod_deleted()
        if (flush := queue.next_flush()) is not None and flush <= self.now:
            queue.flush_leftover(self.now)
        while True:
            for queued in queue.take(self.now):
                entry = queued.item
                node = self.kube.schedule(entry.pod)
                if node is None:
                    if not queued.failures:
                        self._pods_waited += 1
                    queue.failed(queued, now=self.now, by_extender=self.kube.rejected_by_extender, events=self._binds)
                    continue
                del self._pending[entry.pod.uid]
                self.kube.bind(entry.pod, node, at=self.now)
                self._binds += 1
                if isinstance(entry.holder, _SimJob):
                    self._job_bound(entry.holder)
                else:
                    self._sample_bound(entry.holder)
            if not queue.assigned_pod_changed(self._binds):
                break

    def _delete_pod(self, uid: str) -> None:
        """``uid`` deleted: unbound if it was bound, out of kube-scheduler's queue otherwise."""
        if uid not in self.kube.bound:
            del self._pending[uid]
            self._kube_queue.discard(uid)
            return
        self.kube.release(uid)
        self._deleted = True

    def _job_bound(self, job: _SimJob) -> None:
        assert job.machine is not None
        job.bound_at = self.now
        left = (1.0 - job.done) * job.spec.processing_time[job.machine.kind]
        self._push(self.now + left, _JOB_END, _Event(job=job, epoch=job.epoch))

    def _sample_bound(self, sample: _Sample) -> None:
        assert sample.job.sampling is not None
        sample.started_at = self.now
        sample.job.sampling.started(sample.run, self.now)
        self._push(self.now + sample.length, _SAMPLE_END, _Event(sample=sample))
        self._watch(sample)

    def _push(self, time: float, kind: int, event: _Event) -> None:
        self._kernel.schedule(time, event, kind=kind)

    def _on_event(self, event: _Event) -> None:
        if event.job is not None:
            if event.job.epoch == event.epoch:
                self._events += 1
                self._complete(event.job)
        elif event.sample is not None and self._holder[event.sample.machine.name] is event.sample:
            self._events += 1
            if event.check:
                self._sample_check(event.sample)
            else:
                self._sample_done(event.sample)

    def _arrive(self, job: _SimJob) -> None:
        self._events += 1
        self._in_system[self._user_index[job.spec.user]] += 1
        if self.policy.needs_estimates and job.spec.estimate is None:
            assert job.spec.sampling is not None
            job.phase = Phase.PROFILING
            job.sampling = SamplingRun(
                job_id=job.spec.job_id,
                world=job.spec.sampling,
                configurations=tuple(job.truth.processing_time),
                settings=self._estimator,
            )
            self._queue_samples(job, job.sampling.start())
        else:
            job.phase = Phase.WAITING
            self._waiting[job.index] = job

    def _queue_samples(self, job: _SimJob, runs: Sequence[RunState]) -> None:
        for run in runs:
            self._sample_queue[run.create.key.configuration].append((job, run))

    def _start_samples(self) -> None:
        for kind in self.kinds:
            queue = self._sample_queue[kind]
            if not queue:
                continue
            for machine in self.machines:
                if not queue or self._samples_running[kind] >= self._sample_limit[kind]:
                    break
                if machine.kind != kind or self._holder[machine.name] is not None:
                    continue
                job, run = queue.popleft()
                sample = _Sample(job=job, run=run, length=run.seconds, machine=machine)
                self._holder[machine.name] = sample
                self._sample_holding[run.name] = sample
                self._samples_running[kind] += 1
                self._make_pod(run.name, job.spec.demand[kind], priority=SAMPLING_PRIORITY, holder=sample)

    def _watch(self, sample: _Sample) -> None:
        """An event at the instant ``sample`` passes the planner's deadline, if it ever does."""
        assert sample.job.sampling is not None
        deadline = sample.job.sampling.deadline(sample.run)
        if deadline is not None:
            # The planner stops a run that has run *more* than its deadline.
            self._push(deadline + 1e-9 * max(1.0, deadline), _SAMPLE_CHECK, _Event(sample=sample, check=True))

    def _release(self, sample: _Sample) -> None:
        self._delete_pod(sample.run.name)
        self._holder[sample.machine.name] = None
        del self._sample_holding[sample.run.name]
        self._samples_running[sample.kind] -= 1
        if sample.started_at is not None:
            self._busy[sample.kind]["samples"] += self.now - sample.started_at

    def _sample_done(self, sample: _Sample) -> None:
        self._release(sample)
        job = sample.job
        assert job.sampling is not None
        created, stops = job.sampling.ended(sample.run, self.now)
        self._after_sampling_step(job, created, stops)
        # A finished run changes the deadlines of its peers still running.
        for run in job.sampling.runs.values():
            running = self._sample_holding.get(run.name)
            if running is not None and running.started_at is not None:
                self._watch(running)

    def _sample_check(self, sample: _Sample) -> None:
        job = sample.job
        assert job.sampling is not None
        self._after_sampling_step(job, [], job.sampling.check(self.now))

    def _after_sampling_step(self, job: _SimJob, created: Sequence[RunState], stops: Sequence[StopSample]) -> None:
        assert job.sampling is not None
        self._queue_samples(job, created)
        pending = list(stops)
        while pending:
            stop = pending.pop()
            running = self._sample_holding.get(stop.pod)
            if running is None:  # pragma: no cover - the planner stops only runs it saw running
                continue
            self._release(running)
            self._stopped_samples += 1
            more, again = job.sampling.stopped(running.run, self.now)
            self._queue_samples(job, more)
            pending.extend(again)
        if job.sampling.done and job.phase is Phase.PROFILING:
            estimates = job.sampling.estimates
            kinds = {kind: estimate.seconds for kind, estimate in estimates.items() if kind in job.truth.processing_time}
            if not kinds:  # pragma: no cover - simulated runs never fail
                raise SimulationStalled(f"the estimator estimated no configuration of job {job.spec.job_id!r}")
            job.seen = _as_job(job.spec, kinds)
            job.phase = Phase.WAITING
            self._waiting[job.index] = job

    def _profiling_left(self) -> bool:
        return any(self._sample_queue[kind] for kind in self.kinds)

    def _stop_running(self, job: _SimJob) -> None:
        machine = job.machine
        assert machine is not None
        self._delete_pod(job.spec.job_id)
        self._holder[machine.name] = None
        self._holding_jobs[machine.kind] -= 1
        del self._running[job.index]
        ran = 0.0 if job.bound_at is None else self.now - job.bound_at
        self._busy[machine.kind]["jobs"] += ran
        if machine.kind == KIND_CPU and KIND_GPU in job.spec.processing_time:
            # What this CPU work would have taken on a GPU: CPUs are worth this much GPU time.
            self._cpu_work_on_gpu += ran / job.spec.processing_time[KIND_CPU] * job.spec.processing_time[KIND_GPU]
        self._progress[self._user_index[job.spec.user]] -= job_value(job.truth, machine.kind, self.shares)
        job.machine = None
        job.bound_at = None
        job.epoch += 1

    def _complete(self, job: _SimJob) -> None:
        assert job.machine is not None
        job.finish = self.now
        job.final_kind = job.machine.kind
        self._stop_running(job)
        job.done = 1.0
        job.phase = Phase.DONE
        user = self._user_index[job.spec.user]
        self._in_system[user] -= 1
        if self._in_system[user] == 0:
            self._progress[user] = 0.0  # no floating-point residue for a user with nothing running
        self._done += 1
        if self._on_progress is not None and self._done % self._progress_every == 0:
            self._on_progress(self._done, len(self.jobs))

    def _measure(self, now: float) -> None:
        """Integrate the users' progress over [last instant, now] ∩ the arrival window."""
        begin, end = max(self._measured_until, self._window[0]), min(now, self._window[1])
        if end > begin:
            active = self._in_system > 0
            if active.any():
                values = self._progress[active]
                span = end - begin
                self._sd_integral += float(np.std(values)) * span
                self._mean_integral += float(np.mean(values)) * span
            self._user_integral += self._progress * (end - begin)
            for kind in self.kinds:
                held = self._window_busy[kind]
                for what, count in (("jobs", self._holding_jobs[kind]), ("samples", self._samples_running[kind])):
                    held[what] += count * (end - begin)
        self._measured_until = max(self._measured_until, now)

    def _result(self) -> AlloxRunResult:
        jobs = self.jobs
        span = self._window[1] - self._window[0]
        kinds = {KIND_GPU: 0, KIND_CPU: 1}
        return AlloxRunResult(
            policy=self.policy.name,
            seed=self.seed,
            users=self.users,
            user=np.array([self._user_index[job.spec.user] for job in jobs], dtype=np.int64),
            submit=np.array([job.spec.submit_time for job in jobs], dtype=np.float64),
            first_start=np.array([job.first_start for job in jobs], dtype=np.float64),
            finish=np.array([job.finish for job in jobs], dtype=np.float64),
            fastest=np.array([job.truth.fastest_time for job in jobs], dtype=np.float64),
            final_kind=np.array([kinds[job.final_kind] for job in jobs], dtype=np.int64),
            progress_sd=self._sd_integral / span if span > 0 else 0.0,
            progress_mean=self._mean_integral / span if span > 0 else 0.0,
            user_progress=self._user_integral / span if span > 0 else np.zeros(len(self.users)),
            busy={kind: dict(values) for kind, values in self._busy.items()},
            window_busy={kind: {what: value / span if span > 0 else 0.0 for what, value in values.items()} for kind, values in self._window_busy.items()},
            machines=dict(self._machine_count),
            cpu_work_speedup=(
                self._busy[KIND_CPU]["jobs"] / self._cpu_work_on_gpu
                if KIND_CPU in self._busy and self._cpu_work_on_gpu > 0
                else None
            ),
            makespan=self.now,
            events=self._events,
            decisions=self._decisions,
            preemptions=self._preemptions,
            pods_waited=self._pods_waited,
            sampling=self._sampling_record(),
        )

    def _sampling_record(self) -> SamplingRecord:
        jobs = self.jobs
        estimate = np.full((len(jobs), 2), np.nan)
        truth = np.full((len(jobs), 2), np.nan)
        overhead = np.full(len(jobs), np.nan)
        spent = np.zeros(len(jobs))
        sampled = np.zeros(len(jobs), dtype=np.bool_)
        methods: dict[str, int] = {}
        for job in jobs:
            for column, kind in enumerate(KINDS):
                if kind in job.truth.processing_time:
                    truth[job.index, column] = job.truth.processing_time[kind]
            sampling = job.sampling
            if sampling is None or not sampling.done:
                continue
            sampled[job.index] = True
            for column, kind in enumerate(KINDS):
                found = sampling.estimates.get(kind)
                if found is not None:
                    estimate[job.index, column] = found.seconds
                    methods[found.method] = methods.get(found.method, 0) + 1
            assert sampling.decision is not None
            if sampling.decision.overhead_fraction is not None:
                overhead[job.index] = sampling.decision.overhead_fraction
            spent[job.index] = sampling.spent_seconds
        return SamplingRecord(
            estimate=estimate,
            truth=truth,
            sampled=sampled,
            overhead=overhead,
            sample_seconds=spent,
            methods=dict(sorted(methods.items())),
            stopped=self._stopped_samples,
        )
