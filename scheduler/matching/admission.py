"""AlloX admission: the live state of interchangeable Jobs in, which of them start now (and on
which kind), and where every other one stands, out. The live placer controller and the
simulator call this one function.

- **Machines** (§3.1, §4.1, §4.4): the capacity other work leaves cut into whole GPUs and CPU
  slots (``capacity.machines_for``: one core kept beside each GPU); one of them per running
  interchangeable Job is busy until ``ω = started + estimate`` (never before ``now``: an overdue
  Job is taken to end any moment), the rest are idle.
- **Starts**: :class:`~scheduler.matching.allox.AlloxScheduler` (Algorithm 2, fairness α, §4.4's
  temporary raise) or AlloX+ on the idle machines.
- **Fairness** (§3.3.2): a user's progress is the sum of her running Jobs' values, a Job's value
  the dominant share of its faster configuration's demand over the cluster's ``capacity``
  (DRF: ``max(cpu/C, gpu/G, memory/M)``), discounted by ``p_fast / p_placed`` when it runs on the
  slower kind; so a running Job carries every kind's estimate, not only its own kind's.
  ``progress_spread`` is the standard deviation of the progress of the users with Jobs waiting
  or running, after the starts (what the simulator's ``progress sd`` integrates over time).
- **Queue**: the Jobs left waiting are matched once more on every machine, the started ones now
  busy (Lemma 3.1's optimal order): each gets a kind, its position among the Jobs queued for
  that kind, and the expected start, for the Job's condition ("2nd on gpu, expected start in
  ~12 min").

Pure: no I/O, no clock; deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Collection, Literal, Mapping, Sequence

from scheduler.matching.allox import AlloxScheduler
from scheduler.matching.alloxplus import AlloxPlusScheduler
from scheduler.matching.capacity import DEFAULT_RESERVED_CPU_PER_GPU, NodeResources, default_demands, machines_for
from scheduler.matching.fairness import Capacity, DemandShare, user_progress
from scheduler.matching.model import Assignment, Demand, Job, Machine
from scheduler.matching.solve import schedule

AdmissionPolicy = Literal["allox", "allox+"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingJob:
    """An estimated, suspended interchangeable Job. ``seconds``: its estimate per kind (a kind
    without one cannot be chosen); ``demand``: one pod's resources per kind (cores, GPUs, GiB)."""

    key: str
    user: str
    arrival: float
    seconds: Mapping[str, float]
    demand: Mapping[str, Demand] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningJob:
    """An interchangeable Job running on ``kind`` since ``started``. ``seconds``: its estimate per
    kind, the running kind's included (ω = ``started + seconds[kind]``; the others measure how far
    it is from its faster configuration, §3.3.2); ``demand``: one pod's resources per kind."""

    key: str
    user: str
    kind: str
    started: float
    seconds: Mapping[str, float]
    demand: Mapping[str, Demand] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in self.seconds:
            raise ValueError(f"running Job {self.key!r}: no estimate for the kind it runs on ({self.kind})")


@dataclass(frozen=True, slots=True)
class Start:
    key: str
    kind: str
    machine: str
    seconds: float  # its estimate on that kind


@dataclass(frozen=True, slots=True)
class Queued:
    key: str
    kind: str
    position: int  # 1: next on that kind
    expected_start_seconds: float  # from now


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    starts: tuple[Start, ...]
    queue: tuple[Queued, ...]
    # Jobs no machine of the cluster can run (no kind they have an estimate for exists).
    unplaceable: tuple[str, ...]
    idle_machines: Mapping[str, int]  # by kind, before the starts
    busy_machines: Mapping[str, int]
    cpu_slot: Demand
    # §3.3.2's progress of every user with Jobs waiting or running, after the starts, and its
    # standard deviation over those users.
    progress: Mapping[str, float]
    progress_spread: float


def idle_machines(
    *, free_nodes: Sequence[NodeResources], running: Sequence[RunningJob], cpu_slot: Demand, reserved_cpu_per_gpu: float
) -> list[Machine]:
    """The free capacity's machines less one per running interchangeable Job of its kind."""
    machines = machines_for(free_nodes, cpu_slot=cpu_slot, reserved_cpu_per_gpu=reserved_cpu_per_gpu)
    taken: dict[str, int] = {}
    for job in running:
        taken[job.kind] = taken.get(job.kind, 0) + 1
    kept: list[Machine] = []
    for machine in reversed(machines):  # a running Job holds one machine of its kind (the last ones)
        if taken.get(machine.kind, 0) > 0:
            taken[machine.kind] -= 1
        else:
            kept.append(machine)
    return kept[::-1]


def cpu_slot_for(waiting: Sequence[WaitingJob], *, default: Demand = Demand(cpu=1.0)) -> Demand:
    """A CPU machine must hold any queued CPU configuration: the largest one asked for."""
    demands = [job.demand["cpu"] for job in waiting if "cpu" in job.seconds and "cpu" in job.demand]
    if not demands:
        return default
    return Demand(cpu=max(max(d.cpu for d in demands), 1e-3), memory=max(d.memory for d in demands))


def decide(
    *,
    now: float,
    waiting: Sequence[WaitingJob],
    running: Sequence[RunningJob],
    free_nodes: Sequence[NodeResources],
    capacity: Capacity,
    alpha: float = 1.0,
    policy: AdmissionPolicy = "allox",
    reserved_cpu_per_gpu: float = DEFAULT_RESERVED_CPU_PER_GPU,
    allox_plus_timeout: float = math.inf,
    omega_grid_seconds: float = 60.0,
    omega_grid_ratio: float = 1.25,
    plan_queue: bool = True,
) -> AdmissionDecision:
    """Busy machines' ω is rounded up onto a grid: ``omega_grid_seconds`` apart up to ten steps
    from now, then growing by ``omega_grid_ratio`` (a machine freeing in 3 h is placed within
    25% of it, one freeing in 5 min within a minute). Machines of one kind on the same grid point
    are identical to the matching and fold into one column class (``transport.py``); with
    hundreds of running Jobs each distinct ω would be a class of its own, and the solve falls back
    to scipy on the full matrix (~1 s for 1,000 Jobs). Estimates are good to ~5-10%; the grid
    adds no more than that where it matters. 0 turns rounding off. ``plan_queue`` False leaves
    the queue empty (the starts alone; the simulator needs no positions). ``capacity``: the
    cluster's CPU, GPU and memory (cores, GPUs, GiB), what fairness divides demands by."""
    cpu_slot = cpu_slot_for(waiting)
    shares = DemandShare(capacity=capacity, default_demand=default_demands(cpu_slot=cpu_slot, reserved_cpu_per_gpu=reserved_cpu_per_gpu))
    idle = idle_machines(free_nodes=free_nodes, running=running, cpu_slot=cpu_slot, reserved_cpu_per_gpu=reserved_cpu_per_gpu)
    kinds = {m.kind for m in idle} | {job.kind for job in running}
    busy, running_assignments = busy_machines(now=now, running=running, kinds=kinds, omega_grid_seconds=omega_grid_seconds,
                                              omega_grid_ratio=omega_grid_ratio)
    jobs = []
    unplaceable = []
    for job in sorted(waiting, key=lambda j: (j.arrival, j.key)):
        usable = {kind: seconds for kind, seconds in job.seconds.items() if kind in kinds}
        if not usable:
            unplaceable.append(job.key)
            continue
        jobs.append(Job(name=job.key, user=job.user, arrival=min(job.arrival, now), processing_time=usable,
                        demand={kind: job.demand[kind] for kind in usable if kind in job.demand}))
    scheduler = AlloxScheduler(alpha=alpha, shares=shares) if policy == "allox" else AlloxPlusScheduler(timeout=allox_plus_timeout)
    started = scheduler.on_machine_free(now=now, free_machines=idle, pending_jobs=jobs, busy_until=busy, running=running_assignments)
    starts = tuple(Start(key=a.job.name, kind=a.kind, machine=a.machine.name, seconds=a.finish - a.start) for a in started)
    grid = (lambda delay: _on_grid(delay, step=omega_grid_seconds, ratio=omega_grid_ratio)) if omega_grid_seconds > 0 else (lambda delay: delay)
    queue = _queue(now=now, jobs=jobs, started=started, idle=idle, busy=busy, grid=grid) if plan_queue else ()
    progress = user_progress([*running_assignments, *started], shares)
    users = sorted({job.user for job in waiting} | {job.user for job in running})
    values = [progress.get(user, 0.0) for user in users]
    return AdmissionDecision(
        starts=starts,
        queue=queue,
        unplaceable=tuple(unplaceable),
        idle_machines=_count(idle),
        busy_machines=_count(busy),
        cpu_slot=cpu_slot,
        progress={user: progress.get(user, 0.0) for user in users},
        progress_spread=_standard_deviation(values),
    )


def _standard_deviation(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((value - mean) ** 2 for value in values) / len(values))


def busy_machines(
    *, now: float, running: Sequence[RunningJob], kinds: Collection[str], omega_grid_seconds: float = 60.0,
    omega_grid_ratio: float = 1.25,
) -> tuple[dict[Machine, float], list[Assignment]]:
    """One busy machine per running Job, free at ω (its start + its estimate on its kind, on
    the grid :func:`decide` describes), and the running Jobs as the matching's assignments
    (fairness weighs each against the ``kinds`` the cluster has, as a waiting Job's choices)."""
    busy: dict[Machine, float] = {}
    assignments: list[Assignment] = []
    for job in sorted(running, key=lambda r: r.key):
        machine = Machine(name=f"running/{job.key}", kind=job.kind)
        until = max(now, job.started + job.seconds[job.kind])
        if omega_grid_seconds > 0 and until > now:
            until = now + _on_grid(until - now, step=omega_grid_seconds, ratio=omega_grid_ratio)
        busy[machine] = until
        seconds = {kind: value for kind, value in job.seconds.items() if kind in kinds}
        matching_job = Job(name=job.key, user=job.user, arrival=min(job.started, now), processing_time=seconds,
                           demand={kind: job.demand[kind] for kind in seconds if kind in job.demand})
        assignments.append(Assignment(job=matching_job, machine=machine, start=job.started, finish=until))
    return busy, assignments


def _queue(
    *,
    now: float,
    jobs: Sequence[Job],
    started: Sequence[Assignment],
    idle: Sequence[Machine],
    busy: Mapping[Machine, float],
    grid: Callable[[float], float],
) -> tuple[Queued, ...]:
    started_names = {a.job.name for a in started}
    left = [job for job in jobs if job.name not in started_names]
    if not left:
        return ()
    until = {m.name: t for m, t in busy.items()}
    for assignment in started:  # on the grid as on the next pass, when they are busy machines
        until[assignment.machine.name] = now + grid(assignment.finish - now)
    machines = [*idle, *busy]
    plan = schedule(jobs=left, machines=machines, now=now, busy_until=until)
    queued: list[Queued] = []
    positions: dict[str, int] = {}
    for assignment in sorted(plan, key=lambda a: (a.start, a.machine.name)):
        positions[assignment.kind] = positions.get(assignment.kind, 0) + 1
        queued.append(Queued(key=assignment.job.name, kind=assignment.kind, position=positions[assignment.kind],
                             expected_start_seconds=max(0.0, assignment.start - now)))
    return tuple(queued)


def _on_grid(delay: float, *, step: float, ratio: float) -> float:
    """``delay`` rounded up: to a multiple of ``step`` up to ``10·step``, then to ``10·step·ratio^k``."""
    linear_end = 10 * step
    if delay <= linear_end or ratio <= 1:
        return math.ceil(delay / step - 1e-9) * step
    k = math.ceil(math.log(delay / linear_end, ratio) - 1e-9)
    return linear_end * ratio**k


def _count(machines: Sequence[Machine] | Mapping[Machine, float]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for machine in machines:
        counts[machine.kind] = counts.get(machine.kind, 0) + 1
    return counts


@dataclass(frozen=True, slots=True)
class TrialChoice:
    """Where a trial Job starts now, and why (the Event's words)."""

    kind: str
    reason: str


def choose_for_trial(
    *,
    seconds: Mapping[str, float],
    idle: Mapping[str, int],
    gpu_free_in: float | None,
    preemption_seconds: float | None,
) -> TrialChoice | None:
    """FitGpp's trial Jobs start at once (they never wait in AlloX's queue); with CPU and GPU
    configurations they start where they finish first (beyond AlloX and FitGpp):

    - a GPU is idle: on it;
    - else on a CPU slot when the CPU run ends sooner than the GPU run would: after FitGpp's
      preemption (``preemption_seconds``: the victim's grace period, its checkpoint), or after
      the first busy GPU frees (``gpu_free_in``), whichever comes first;
    - else on the GPU configuration: kube-scheduler and FitGpp preempt a best-effort pod.

    None when the Job has no estimate for any kind it could run on here."""
    gpu = seconds.get("gpu")
    cpu = seconds.get("cpu")
    if gpu is not None and idle.get("gpu", 0) > 0:
        return TrialChoice("gpu", f"gpu: a GPU is free, done in ~{_minutes(gpu)}")
    waits = [w for w in (preemption_seconds, gpu_free_in) if w is not None]
    gpu_done = gpu + min(waits) if gpu is not None and waits else None
    if cpu is not None and idle.get("cpu", 0) > 0 and (gpu_done is None or cpu < gpu_done):
        after = "" if gpu_done is None else (
            f"; gpu would start after a best-effort Job checkpoints, ~{_minutes(gpu_done)}"
            if preemption_seconds is not None and (gpu_free_in is None or preemption_seconds <= gpu_free_in)
            else f"; gpu would start when one frees, ~{_minutes(gpu_done)}"
        )
        return TrialChoice("cpu", f"cpu: done in ~{_minutes(cpu)}{after}")
    if gpu is not None:
        why = f"gpu: done in ~{_minutes(gpu_done)}" if gpu_done is not None else "gpu"
        if cpu is not None:
            why += f", before cpu (~{_minutes(cpu)})" if idle.get("cpu", 0) > 0 else "; no CPU slot is free"
        return TrialChoice("gpu", why + " (FitGpp preempts a best-effort Job if no GPU frees)")
    if cpu is not None and idle.get("cpu", 0) > 0:
        return TrialChoice("cpu", f"cpu: done in ~{_minutes(cpu)}")
    return None


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
