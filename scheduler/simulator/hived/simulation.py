"""The ``hived`` workload's event loop: gang jobs of several tenants on one cluster, placed by
a :class:`~scheduler.core.engine.SchedulingEngine` through a model of kube-scheduler's cycle.

* **The engine** is the production one: :class:`~scheduler.cells.HivedEngine` built from the
  same ``cells:`` configuration ``cellfit serve`` reads (HiveD), or cellfit's
  :class:`~scheduler.core.fit.ResourceFitEngine` behind a per-tenant GPU quota (the quota-only
  baseline), each inside FitGpp's engine as ``cellfit serve`` composes them
  (``experiment.as_served``). Nothing here allocates cells or GPUs itself.
* **kube-scheduler's cycle, per pod** (:class:`ClusterScheduler` over the simulator's one
  :class:`~scheduler.simulator.kube_model.KubeSchedulerCycle`): kube-scheduler's own resource
  fit, the engine's filter on the nodes left, the node chosen among the feasible ones
  (prioritize's first best, or kube-scheduler's own LeastAllocated), reserve, and once every
  pod of the gang is reserved the bound pods reported back as the watch would. A gang is all
  or nothing, as a coscheduling plugin makes it: if one pod finds no node, the pods reserved
  before it are unreserved and the job waits. Under HiveD the first pod's filter books every
  slot of the gang, so a gang either gets all its cells or none. kube-scheduler's own fit
  removes only nodes without the GPUs a pod asks for, which both engines refuse too (they see
  the same bound pods), and every pod of a gang asks for as many: the feasible nodes, hence
  the decisions, are the ones a filter over every node gives (the reference runs and the
  tests compare job by job).
* **The queue**, one of :data:`QUEUES`: ``fifo`` (§5.2's YARN-CS, one FIFO queue per tenant;
  the default) tries the tenants' head jobs oldest first, and a head that cannot start blocks
  its tenant's queue until something is released (head-of-line blocking, as the paper describes
  for the quota-based cluster). Whether a job may start depends on the engine's answer alone,
  so under HiveD a tenant's decisions are those of its private cluster (sharing safety; the
  tests check it job by job). ``kube`` is kube-scheduler's own queue, the simulator's one
  model of it (:class:`~scheduler.simulator.kube_queue.SchedulingQueue`, as the ``fitgpp``
  workload's ``kube`` policy and the ``allox`` workload use it): a job is one queued unit (its
  pods are created together with one priority; under HiveD the first pod's filter books the
  whole gang or fails, and the others then fail or pass with it), ordered by priority then
  queue time, where a failed job's time is its last failure; a failed job is parked until an
  assigned pod is deleted, or (the extender refused it) bound, or until the 5-minute flush;
  backoff orders the ready ones. A quota refusal (a ResourceQuota: the pod is not created
  until the tenant's GPUs are released) counts as a failure kube-scheduler's own filter made,
  moved by a deletion. Under this queue another tenant's binds, deletions and the flushes'
  timing change when a tenant's parked jobs are retried, hence their queue times and backoff,
  hence the order they are tried in: HiveD no longer equals the private cluster job by job.
* **Events** (virtual clock, no ticks): at each instant, completions first, then arrivals, then
  one scheduling pass (under ``kube`` also at the flushes, every 30 s while a job is parked).
  Every job is a regular (guaranteed) job: no opportunistic jobs, no preemption, so a job's
  queueing delay is its start less its submit time.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
from msgspec import structs

from scheduler.constants import (
    ANNOTATION_GANG,
    ANNOTATION_GANG_SIZE,
    LABEL_VIRTUAL_CLUSTER,
)
from scheduler.core.engine import SchedulingEngine, TracksJobs
from scheduler.core.fit import ResourceFitEngine
from scheduler.core.model import JobInfo, NodeInfo, OwnerRef, PodInfo
from scheduler.core.resources import Resources
from scheduler.simulator.errors import InvalidWorkload, SimulationStalled
from scheduler.simulator.hived.quota import QuotaGate, least_allocated
from scheduler.simulator.kernel import EventKernel
from scheduler.simulator.kube_model import KubeSchedulerCycle, NodeChoice, best_scored
from scheduler.simulator.kube_queue import SchedulingQueue
from scheduler.simulator.hived.workload import GangJob

ProgressCallback = Callable[[int, int], None]
# Queue disciplines: ``fifo`` — one FIFO queue per tenant whose head blocks it (YARN-CS, the
# paper's §5.2 policy); ``kube`` — kube-scheduler's queue (``kube_queue.SchedulingQueue``).
QUEUES: Final = ("fifo", "kube")
# The kernel's event for a pass at a flush of kube-scheduler's queue (completions are jobs'
# positions, never negative); after the completions of its instant.
_FLUSH: Final = -1
_FLUSH_KIND: Final = 1


def engine_choice(engine: SchedulingEngine) -> NodeChoice:
    """The node the engine's prioritize scores best, the first one on a tie (kube-scheduler with
    the extender's scores alone, as the FitGpp simulation places)."""

    return functools.partial(best_scored, engine)


def spread_choice(engine: ResourceFitEngine, allocatable: int) -> NodeChoice:
    """kube-scheduler's LeastAllocated over GPUs (:func:`~.quota.least_allocated`)."""

    def choose(pod: PodInfo, feasible: Sequence[str]) -> str:
        free = [engine.free_on(name).gpus for name in feasible]
        return feasible[least_allocated(requested=pod.requests.gpus, free=free, allocatable=[allocatable] * len(free))]

    return choose


def job_pods(job: GangJob) -> list[PodInfo]:
    """The job's pods as the placer would create them: in the tenant's namespace, labelled with
    its virtual cluster, owned by the Job, and (several pods) annotated as one gang."""
    owner = OwnerRef(kind="Job", name=job.job_id, uid=f"uid-{job.job_id}")
    annotations = {ANNOTATION_GANG: "true", ANNOTATION_GANG_SIZE: str(job.pods)} if job.pods > 1 else {}
    requests = Resources(gpus=job.gpus_per_pod)
    return [
        PodInfo(
            uid=f"{job.job_id}-{i}",
            namespace=job.tenant,
            name=f"{job.job_id}-{i}",
            requests=requests,
            labels={LABEL_VIRTUAL_CLUSTER: job.tenant},
            annotations=annotations,
            owner=owner,
        )
        for i in range(job.pods)
    ]


class ClusterScheduler:
    """One cluster: an engine fed the nodes, kube-scheduler's cycle per pod, and (for the
    quota-only baseline) a :class:`QuotaGate` in front."""

    def __init__(
        self,
        *,
        engine: SchedulingEngine,
        nodes: Sequence[NodeInfo],
        choice: NodeChoice | None = None,
        quota: QuotaGate | None = None,
        jobs: TracksJobs | None = None,
    ) -> None:
        """``jobs``: the part of the engine that follows Jobs (``Composition.jobs``), told each
        gang's width and end as the watch cache would."""
        self.engine = engine
        for node in nodes:
            engine.apply_node(node)
        self.choice = choice if choice is not None else engine_choice(engine)
        self.kube = KubeSchedulerCycle(engine, [(node.name, node.allocatable) for node in nodes], choice=self.choice)
        self.node_names = self.kube.node_names
        self.quota = quota
        self._jobs = jobs
        self._running: dict[str, list[PodInfo]] = {}
        # Whether the last failed :meth:`try_start` was the engine's refusal (kube-scheduler
        # called the extender), not its own resource fit leaving no node or the quota.
        self.rejected_by_extender = False

    def try_start(self, job: GangJob) -> list[str] | None:
        """Bind every pod of ``job`` and return their nodes, or bind none and return None: one
        kube-scheduler cycle per pod, each reserving its node, then every pod bound."""
        if self.quota is not None and not self.quota.admits(job.tenant, job.gpus):
            self.rejected_by_extender = False
            return None
        kube = self.kube
        pods = job_pods(job)
        if self._jobs is not None:
            self._jobs.apply_job(JobInfo(uid=f"uid-{job.job_id}", namespace=job.tenant, name=job.job_id, parallelism=job.pods))
        bound: list[PodInfo] = []
        for pod in pods:
            node = kube.schedule(pod)
            if node is None:
                self.rejected_by_extender = kube.rejected_by_extender
                for placed in bound:
                    kube.unreserve(placed.uid)
                if self._jobs is not None:
                    self._jobs.delete_job(f"uid-{job.job_id}")
                return None
            # The start time is what kube-scheduler's preemption reads; nothing preempts here.
            bound.append(kube.reserve(pod, node, at=0.0))
        for pod in bound:
            kube.confirm(pod)  # the watch reports the bound pod
        if self.quota is not None:
            self.quota.take(job.tenant, job.gpus)
        self._running[job.job_id] = bound
        return [pod.node_name or "" for pod in bound]

    def finish(self, job: GangJob) -> None:
        """The job's pods succeeded: the watch reports them finished, then the Job goes."""
        for pod in self._running.pop(job.job_id):
            self.engine.apply_pod(structs.replace(pod, phase="Succeeded"))
            self.kube.release(pod.uid)
        if self._jobs is not None:
            self._jobs.delete_job(f"uid-{job.job_id}")
        if self.quota is not None:
            self.quota.give_back(job.tenant, job.gpus)


@dataclass(frozen=True, slots=True, kw_only=True)
class GangRunResult:
    """What one run measured, arrays indexed like the input jobs; times in seconds.
    ``busy_gpu_seconds`` and ``used_node_seconds`` (nodes with at least one GPU in use: not
    available to a whole-node pod, the paper's fragmentation level) are integrated over
    [0, ``window``], the arrival window."""

    setting: str
    seed: int
    tenants: tuple[str, ...]
    tenant: npt.NDArray[np.int64]
    gpus: npt.NDArray[np.int64]
    submit: npt.NDArray[np.float64]
    start: npt.NDArray[np.float64]
    finish: npt.NDArray[np.float64]
    events: int
    window: float
    nodes: int
    cluster_gpus: int
    busy_gpu_seconds: float
    used_node_seconds: float

    @property
    def delay(self) -> npt.NDArray[np.float64]:
        """Queueing delay: from submission to start."""
        result: npt.NDArray[np.float64] = self.start - self.submit
        return result

    @property
    def utilisation(self) -> float:
        return self.busy_gpu_seconds / (self.cluster_gpus * self.window) if self.window > 0 else 0.0

    @property
    def nodes_in_use(self) -> float:
        return self.used_node_seconds / (self.nodes * self.window) if self.window > 0 else 0.0


@dataclass(slots=True, eq=False, kw_only=True)
class _Queued:
    """A job in kube-scheduler's queue: its position and its first pod (what the queue orders
    by), with the cluster state (binds + releases) and the answer of its last failure."""

    position: int
    pod: PodInfo
    failed_at: int = -1
    by_extender: bool = False


class GangSimulation:
    """One run of ``jobs`` (any tenants) on one cluster; call :meth:`run` once."""

    def __init__(
        self,
        *,
        jobs: Sequence[GangJob],
        scheduler: ClusterScheduler,
        tenants: Sequence[str],
        setting: str,
        seed: int,
        gpus_per_node: int,
        queue: str = "fifo",
        reuse_failures: bool = True,
        window: float | None = None,
        on_progress: ProgressCallback | None = None,
        progress_every: int = 1024,
    ) -> None:
        self.jobs = list(jobs)
        self.scheduler = scheduler
        self.tenants = tuple(tenants)
        self.setting = setting
        self.seed = seed
        self.gpus_per_node = gpus_per_node
        self.window = window if window is not None else max((job.submit_time for job in self.jobs), default=0.0)
        self.now = 0.0
        if queue not in QUEUES:
            raise InvalidWorkload(f"{queue!r} is not one of {', '.join(QUEUES)}", field="hived.queue")
        self.queue = queue
        # Under ``kube``, a job retried while nothing was bound or released since its last
        # failure fails again as it did (the engine, kube-scheduler's fit and the quota see the
        # same cluster), so the engine is not asked; False asks it every time (the tests
        # compare the two).
        self.reuse_failures = reuse_failures
        self._kube: SchedulingQueue[_Queued] | None = SchedulingQueue() if queue == "kube" else None
        self._binds = 0  # assigned-pod events (binds): what moves pods the extender refused
        self._released = False  # a pod deleted since the last pass: every parked job moves
        self._flush_at: float | None = None  # the next pass for the queue's flush, if any
        self._running = 0  # jobs started and not finished: completions still to come
        self._wakes: set[float] = set()  # flush passes scheduled on the kernel
        self._lanes: dict[str, deque[int]] = {}  # ``fifo``: each tenant's waiting jobs
        self._start = np.full(len(self.jobs), np.nan)
        self._finish = np.full(len(self.jobs), np.nan)
        self._nodes_of: dict[int, list[str]] = {}
        self._used: dict[str, int] = dict.fromkeys(scheduler.node_names, 0)
        self._busy = 0
        self._used_nodes = 0
        self._busy_area = 0.0
        self._node_area = 0.0
        # Bumped at every release (a job's pods deleted): under ``fifo`` a tenant whose head
        # failed at version v waits for v + 1.
        self._version = 0
        self._blocked: dict[str, int] = {}
        self._events = 0
        self._done = 0
        self._on_progress = on_progress
        self._progress_every = max(1, progress_every)
        self._ran = False

    def run(self) -> GangRunResult:
        if self._ran:
            raise RuntimeError("a GangSimulation runs once")
        self._ran = True
        order = sorted(range(len(self.jobs)), key=lambda i: (self.jobs[i].submit_time, i))
        # Events: completions, by job position, ties at one instant in position order; under
        # ``kube`` also the flush passes (``_FLUSH``, after the completions).
        kernel: EventKernel[int] = EventKernel()
        cursor = 0

        def next_arrival() -> float | None:
            return self.jobs[order[cursor]].submit_time if cursor < len(order) else None

        def instant(now: float) -> None:
            nonlocal cursor
            kube = self._kube
            while cursor < len(order) and self.jobs[order[cursor]].submit_time <= now:
                position = order[cursor]
                self._events += 1
                job = self.jobs[position]
                if kube is None:
                    self._lanes.setdefault(job.tenant, deque()).append(position)
                else:
                    kube.add(_Queued(position=position, pod=job_pods(job)[0]), key=position, now=now)
                cursor += 1
            started = self._schedule() if kube is None else self._schedule_kube(kube)
            for position in started:
                kernel.schedule(now + self.jobs[position].duration, position, order=position)
            if kube is not None:
                # A pass at the queue's next flush, while one may still matter: a flush starts
                # nothing (a parked job saw no deletion since it failed, so the cluster only
                # filled up), but it restamps the jobs it moves, which reorders them for what
                # comes next; with nothing running and nothing to come, nothing will.
                flush = kube.next_flush() if self._running or cursor < len(order) else None
                self._flush_at = flush
                if flush is not None and flush not in self._wakes:
                    self._wakes.add(flush)
                    kernel.schedule(flush, _FLUSH, kind=_FLUSH_KIND)

        kernel.run(next_arrival=next_arrival, on_event=self._on_event, instant=instant, advance=self._advance)
        if self._done != len(self.jobs):
            raise SimulationStalled(f"{len(self.jobs) - self._done} jobs never started under {self.setting}")
        jobs = self.jobs
        return GangRunResult(
            setting=self.setting,
            seed=self.seed,
            tenants=self.tenants,
            tenant=np.array([self.tenants.index(job.tenant) for job in jobs], dtype=np.int64),
            gpus=np.array([job.gpus for job in jobs], dtype=np.int64),
            submit=np.array([job.submit_time for job in jobs], dtype=np.float64),
            start=self._start,
            finish=self._finish,
            events=self._events,
            window=self.window,
            nodes=len(self._used),
            cluster_gpus=len(self._used) * self.gpus_per_node,
            busy_gpu_seconds=self._busy_area,
            used_node_seconds=self._node_area,
        )

    def _advance(self, now: float) -> None:
        span = min(now, self.window) - min(self.now, self.window)
        if span > 0:
            self._busy_area += span * self._busy
            self._node_area += span * self._used_nodes
        self.now = now

    def _schedule(self) -> list[int]:
        """``fifo``'s pass: the oldest head of the tenants' queues not blocked is tried, until
        every queue is blocked or empty. Returns the jobs started. A queue whose head failed
        stays blocked until something is released (state only fills up meanwhile, so it would
        fail again)."""
        started: list[int] = []
        lanes, blocked, jobs = self._lanes, self._blocked, self.jobs
        version = self._version
        while True:
            best: tuple[float, int] | None = None
            best_lane: str | None = None
            for lane, queue in lanes.items():
                if not queue or blocked.get(lane) == version:
                    continue
                head = queue[0]
                key = (jobs[head].submit_time, head)
                if best is None or key < best:
                    best, best_lane = key, lane
            if best is None or best_lane is None:
                return started
            position = best[1]
            job = jobs[position]
            nodes = self.scheduler.try_start(job)
            if nodes is None:
                blocked[best_lane] = version
                continue
            lanes[best_lane].popleft()
            self._started(position, nodes)
            started.append(position)

    def _schedule_kube(self, queue: SchedulingQueue[_Queued]) -> list[int]:
        """kube-scheduler's pass (as the ``fitgpp`` workload's ``kube`` policy and the ``allox``
        workload make it): a deletion since the last pass moves every parked job, a due flush
        those parked over 5 minutes; every ready job is tried in the queue's order, started or
        parked; again while binds move jobs the extender refused. Returns the jobs started."""
        now = self.now
        started: list[int] = []
        if self._released:
            self._released = False
            queue.pod_deleted()
        if self._flush_at is not None and now >= self._flush_at:
            queue.flush_leftover(now)
        scheduler, jobs = self.scheduler, self.jobs
        while True:
            for queued in queue.take(now):
                item = queued.item
                state = self._binds + self._version
                if self.reuse_failures and item.failed_at == state:
                    nodes = None  # nothing bound or released since it failed: it fails again
                else:
                    nodes = scheduler.try_start(jobs[item.position])
                if nodes is None:
                    if item.failed_at != state:
                        item.failed_at, item.by_extender = state, scheduler.rejected_by_extender
                    queue.failed(queued, now=now, by_extender=item.by_extender, events=self._binds)
                    continue
                self._binds += 1
                self._started(item.position, nodes)
                started.append(item.position)
            if not queue.assigned_pod_changed(self._binds):
                return started

    def _started(self, position: int, nodes: list[str]) -> None:
        job = self.jobs[position]
        self._events += 1
        self._start[position] = self.now
        self._nodes_of[position] = nodes
        for node in nodes:
            if self._used[node] == 0:
                self._used_nodes += 1
            self._used[node] += job.gpus_per_pod
        self._busy += job.gpus
        self._running += 1

    def _on_event(self, position: int) -> None:
        if position == _FLUSH:
            self._wakes.discard(self.now)  # the pass at the end of the instant flushes
        else:
            self._complete(position)

    def _complete(self, position: int) -> None:
        job = self.jobs[position]
        self._events += 1
        self.scheduler.finish(job)
        for node in self._nodes_of.pop(position):
            self._used[node] -= job.gpus_per_pod
            if self._used[node] == 0:
                self._used_nodes -= 1
        self._busy -= job.gpus
        self._finish[position] = self.now
        self._version += 1
        self._released = True
        self._running -= 1
        self._done += 1
        if self._on_progress is not None and self._done % self._progress_every == 0:
            self._on_progress(self._done, len(self.jobs))
