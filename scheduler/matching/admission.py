"""AlloX admission: the live state of interchangeable Jobs in, which of them start now (and on
which kind), and where every other one stands, out. The simulator calls :func:`decide`; the
live placer controller calls :func:`decide_starts`, carries the starts out, then plans the queue
(:class:`QueuePlan`), so that no start waits for the queue's matching.

- **Machines** (§3.1, §4.1, §4.4): the capacity other work leaves cut into whole GPUs and CPU
  slots (``capacity.machines_for``: one core kept beside each GPU); one of them per running
  interchangeable Job is busy until ``ω = started + estimate`` (never before ``now``: an overdue
  Job is taken to end any moment), the rest are idle. A running Job none of whose pods is bound
  yet and for which no machine is kept (``RunningJob.awaiting``: its user unsuspended it by hand)
  holds none: its pods take the first machines of its kind to free, ahead of every waiting Job,
  busy from then for its estimate (kube-scheduler binds them as soon as one frees).
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
- **Alike Jobs** (one user's, of the same estimates, demand and pods: a sweep) are settled by
  arrival, which the matching cannot tell: of them the oldest start, and the rest queue in the
  order they arrived.

Pure: no I/O, no clock; deterministic.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field, replace
from collections import Counter
from functools import lru_cache
from operator import attrgetter
from types import MappingProxyType
from typing import Callable, Collection, Iterable, Literal, Mapping, Sequence, TypeVar

import numpy as np

from scheduler.matching.allox import AlloxScheduler, Matched
from scheduler.matching.alloxplus import AlloxPlusScheduler
from scheduler.matching.capacity import DEFAULT_RESERVED_CPU_PER_GPU, NodeResources, cpu_slots, default_demands, machines_for
from scheduler.matching.errors import InvalidInstance
from scheduler.matching.fairness import Capacity, DemandShare, ShareModel, job_value
from scheduler.matching.model import KIND_CPU, KIND_GPU, Assignment, Demand, Job, Machine
from scheduler.matching.reuse import Reuse
from scheduler.matching.solve import Fleet, Hint, Problem, Queues, fleet, prepare_on, rows_on, solve
from scheduler.matching.visit_order import visiting_order
from scheduler.wording import duration

AdmissionPolicy = Literal["allox", "allox+"]
DEFAULT_CPU_SLOT = Demand(cpu=1.0)  # what a CPU slot is when no queued CPU configuration sizes it
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingJob:
    """An estimated, suspended interchangeable Job. ``seconds``: its estimate per kind (a kind
    without one cannot be chosen); ``demand``: one pod's resources per kind (cores, GPUs, GiB).
    ``pods``: machines it holds at once (its parallelism; ``seconds`` is the whole Job's time).
    ``pool``: its virtual cluster, whose free guarantee alone its GPU configuration may use
    when :func:`decide` is given ``gpu_pools``."""

    key: str
    user: str
    arrival: float
    seconds: Mapping[str, float]
    demand: Mapping[str, Demand] = field(default_factory=dict)
    pods: int = 1
    pool: str | None = None

    def __post_init__(self) -> None:
        if self.pods < 1:
            raise ValueError(f"waiting Job {self.key!r}: pods must be at least 1, got {self.pods}")


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
    pods: int = 1  # machines it holds, each until ω
    pool: str | None = None  # its virtual cluster (see WaitingJob)
    # No pod of it bound yet, and no machine kept for it (a Job its user unsuspended by hand):
    # it holds none now. Its pending pods take the first machines of its kind to free, an idle
    # one included, before any waiting Job (kube-scheduler binds them as soon as one frees), its
    # estimate counted from then, not from ``started`` (:func:`claimed_first`); one taking an idle
    # machine is listed (``AdmissionDecision.awaiting_on_idle``): its pods unbound beside it for
    # long wait for something else (a node they fit), which the caller judges.
    awaiting: bool = False

    def __post_init__(self) -> None:
        if self.kind not in self.seconds:
            raise ValueError(f"running Job {self.key!r}: no estimate for the kind it runs on ({self.kind})")
        if self.pods < 1:
            raise ValueError(f"running Job {self.key!r}: pods must be at least 1, got {self.pods}")


@dataclass(frozen=True, slots=True)
class Start:
    key: str
    kind: str  # the configuration: cpu or gpu
    machine: str  # the first of its machines
    seconds: float  # its estimate on that kind
    machines: tuple[str, ...] = ()  # every machine it holds (its pods)
    pool: str | None = None  # the virtual cluster whose GPUs it uses


@dataclass(frozen=True, slots=True)
class Queued:
    key: str
    kind: str
    position: int  # 1: next on that kind (in its pool)
    expected_start_seconds: float  # from now
    pool: str | None = None  # the virtual cluster whose GPUs it waits for


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
    # Jobs whose virtual cluster's guarantee holds no GPU machine for them now (``gpu_pools``),
    # with no other kind to run on: they wait for their VC's GPUs to free.
    waiting_for_pool: tuple[str, ...] = ()
    # Running Jobs whose pods wait to be bound (``RunningJob.awaiting``) that took an idle machine.
    awaiting_on_idle: tuple[str, ...] = ()
    # Idle machines Algorithm 2 left undecided, its ``stop`` having ended the walk: a caller
    # decides them in a next pass (the starts made are the whole walk's first ones).
    undecided_machines: int = 0


@dataclass
class DecideReuse:
    """What :func:`decide` keeps between a live controller's passes (``reuse.py``): the
    matching's Job of each waiting Job, and each running Job's machines, Job and value."""

    waiting: Reuse[Job] = field(default_factory=Reuse)
    running: Reuse[_Held] = field(default_factory=Reuse)


def pool_kind(pool: str) -> str:
    """The machine kind of a virtual cluster's GPUs (``gpu@<vc>``): the matching pairs a Job's GPU
    configuration only with its own VC's GPU machines."""
    return f"{KIND_GPU}@{pool}"


def configuration_kind(kind: str) -> str:
    """The configuration a machine kind runs (``gpu@vision`` → ``gpu``)."""
    return kind.split("@", 1)[0]


def _kind_for(kind: str, pool: str | None, gpu_pools: Mapping[str, int] | None) -> str | None:
    """The machine kind a Job's ``kind`` configuration runs on: its VC's GPUs under
    ``gpu_pools`` (None: a GPU configuration outside every pool has no machine)."""
    if gpu_pools is None or kind != KIND_GPU:
        return kind
    return pool_kind(pool) if pool is not None and pool in gpu_pools else None


def _translated(mapping: Mapping[str, T], pool: str | None, gpu_pools: Mapping[str, int] | None) -> dict[str, T]:
    if gpu_pools is None:
        return dict(mapping)
    translated: dict[str, T] = {}
    for kind, value in mapping.items():
        machine_kind = _kind_for(kind, pool, gpu_pools)
        if machine_kind is not None:
            translated[machine_kind] = value
    return translated


def _running_kind(job: RunningJob, gpu_pools: Mapping[str, int] | None) -> str:
    """A running GPU Job outside every pool (opportunistic, or of no VC) keeps the plain kind:
    it holds none of a VC's guarantee, and no waiting Job's GPU configuration matches it."""
    return _kind_for(job.kind, job.pool, gpu_pools) or job.kind


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleMachines:
    """The free capacity's machines less the ones running interchangeable Jobs hold (``pods``
    of their kind each, :func:`held_per_pod` machines a pod): :meth:`laid_out` makes them,
    :meth:`counted` counts them. With ``gpu_pools`` (virtual cluster → GPU machines its free
    guarantee holds, running Jobs' included), the GPU machines are those, named
    ``vc/<vc>/gpu-<i>`` and of kind ``gpu@<vc>``; the nodes' free GPUs only keep cores beside
    them. ``gpu_slots``: GPUs a machine of each GPU kind holds (:func:`gpu_slots_for`; 1 where
    absent). ``cpu_slot_queued`` False: no queued CPU configuration sized ``cpu_slot`` (no CPU
    slot is asked for), and a running CPU pod holds one."""

    free_nodes: Sequence[NodeResources]
    running: Sequence[RunningJob]
    cpu_slot: Demand
    reserved_cpu_per_gpu: float
    gpu_pools: Mapping[str, int] | None = None
    gpu_slots: Mapping[str, int] | None = None
    cpu_slot_queued: bool = True
    reserved_memory_per_gpu: float = 0.0

    def laid_out(self) -> list[Machine]:
        """The idle machines, in Algorithm 2's visiting order."""
        slots = self.gpu_slots or {}
        listed, indices = _machines_for(tuple(self.free_nodes), self.cpu_slot, self.reserved_cpu_per_gpu,
                                        slots.get(KIND_GPU, 1) if self.gpu_pools is None else 1, self.reserved_memory_per_gpu)
        machines: Sequence[Machine] = listed
        if self.gpu_pools is not None:
            # The VCs' GPUs in place of the nodes' (Algorithm 2 visits them in visit_order's order).
            pooled = [Machine(name=f"vc/{pool}/gpu-{index}", kind=pool_kind(pool))
                      for pool in sorted(self.gpu_pools) for index in range(max(self.gpu_pools[pool], 0))]
            machines = [*pooled, *(m for m in listed if m.kind != KIND_GPU)]
            indices = _indices_by_kind(machines)
        # A running Job holds machines of its kind: the last ones.
        held = {index for kind, count in self._held().items() if count > 0 for index in indices.get(kind, ())[-count:]}
        return [machine for index, machine in enumerate(machines) if index not in held]

    def counted(self) -> dict[str, int]:
        """:meth:`laid_out` counted per kind (the kinds with none left out), no machine made:
        what a pass with no Job to match or place reports. At 5,000 nodes the machines of
        one-core CPU slots (no queued CPU configuration sizes them) were hundreds of thousands a pass."""
        counts: dict[str, int] = {}
        if self.gpu_pools is None:
            gpu_slot = (self.gpu_slots or {}).get(KIND_GPU, 1)
            if gpu_slot < 1:
                raise InvalidInstance(f"a GPU slot needs at least one GPU, got {gpu_slot}", field="gpu_slot")
            counts[KIND_GPU] = sum(node.gpu // gpu_slot for node in self.free_nodes)
        else:
            counts.update((pool_kind(pool), max(self.gpu_pools[pool], 0)) for pool in sorted(self.gpu_pools))
        counts[KIND_CPU] = sum(cpu_slots(node, cpu_slot=self.cpu_slot, reserved_cpu_per_gpu=self.reserved_cpu_per_gpu,
                                         reserved_memory_per_gpu=self.reserved_memory_per_gpu) for node in self.free_nodes)
        for kind, count in self._held().items():
            if count > 0 and kind in counts:
                counts[kind] = max(counts[kind] - count, 0)
        return {kind: count for kind, count in counts.items() if count > 0}

    def _held(self) -> dict[str, int]:
        return _held_machines(self.running, gpu_pools=self.gpu_pools, gpu_slots=self.gpu_slots or {},
                              cpu_slot=self.cpu_slot if self.cpu_slot_queued else None)


def _held_machines(running: Sequence[RunningJob], *, gpu_pools: Mapping[str, int] | None, gpu_slots: Mapping[str, int],
                   cpu_slot: Demand | None) -> dict[str, int]:
    """Per machine kind, the machines the running Jobs hold (``pods`` × :func:`held_per_pod`)."""
    taken: dict[str, int] = {}
    for job in running:
        kind = _running_kind(job, gpu_pools)
        taken[kind] = taken.get(kind, 0) + job.pods * held_per_pod(job, gpu_slot=gpu_slots.get(kind, 1), cpu_slot=cpu_slot)
    return taken


def _indices_by_kind(machines: Sequence[Machine]) -> dict[str, tuple[int, ...]]:
    indices: dict[str, list[int]] = {}
    for index, machine in enumerate(machines):
        indices.setdefault(machine.kind, []).append(index)
    return {kind: tuple(found) for kind, found in indices.items()}


@lru_cache(maxsize=16)
def _machines_for(
    free_nodes: tuple[NodeResources, ...], cpu_slot: Demand, reserved_cpu_per_gpu: float, gpu_slot: int, reserved_memory_per_gpu: float
) -> tuple[tuple[Machine, ...], Mapping[str, tuple[int, ...]]]:
    """:func:`machines_for`, once per distinct free capacity (a pass's free capacity is most
    often the last pass's, and making a thousand machines was a quarter of ``decide``), and
    where each kind's machines are in it. Shared, so read only."""
    machines = tuple(machines_for(free_nodes, cpu_slot=cpu_slot, reserved_cpu_per_gpu=reserved_cpu_per_gpu, gpu_slot=gpu_slot,
                                  reserved_memory_per_gpu=reserved_memory_per_gpu))
    return machines, MappingProxyType(_indices_by_kind(machines))


def _pool_holds(job: WaitingJob, gpu_slots: Mapping[str, int], *, more_than: int) -> bool:
    """Whether the caller sized the Job's VC's machines (``gpu_slots``) for its GPU pod of more
    GPUs than any node has free: from the VC's cells opportunistic pods hold, free once HiveD
    reclaims them (placer/guarantee.py ``gpus_per_pod``), so the configuration is no more beyond
    the VC's machines than a pod of a free node's GPUs."""
    gpu = job.demand.get(KIND_GPU)
    return job.pool is not None and gpu is not None and more_than < gpu.gpu <= gpu_slots.get(pool_kind(job.pool), 1)


def _outgrows_pool(job: WaitingJob, gpu_slots: Mapping[str, int]) -> bool:
    """Whether the Job's GPU configuration asks more GPUs a pod than a machine of its VC holds
    (``gpu_slots``, as the caller sized them)."""
    gpu = job.demand.get(KIND_GPU)
    return job.pool is not None and gpu is not None and KIND_GPU in job.seconds and gpu.gpu > gpu_slots.get(pool_kind(job.pool), 1)


def held_per_pod(job: RunningJob, *, gpu_slot: int, cpu_slot: Demand | None = None) -> int:
    """Machines one pod of a running Job holds: as many as its pod fills, at least one. On GPUs,
    machines of ``gpu_slot`` GPUs (a pod of 4 GPUs holds 4 machines of one, and one of 4); on
    CPUs, slots of ``cpu_slot`` (sized for the Jobs queued now: a pod of 8 cores holds 4 slots of
    2, as its cores are counted free)."""
    demand = job.demand.get(job.kind)
    if demand is None:
        return 1
    if configuration_kind(job.kind) == KIND_GPU:
        filled = demand.gpu / gpu_slot
    elif cpu_slot is not None and job.kind == KIND_CPU:
        filled = max(demand.cpu / cpu_slot.cpu, demand.memory / cpu_slot.memory if cpu_slot.memory > 0 else 0.0)
    else:
        return 1
    return max(1, math.ceil(filled - 1e-9))


def gpu_slots_for(
    jobs: Sequence[WaitingJob], *, free_nodes: Sequence[NodeResources], gpu_pools: Mapping[str, int] | None = None
) -> dict[str, int]:
    """GPUs one machine of each GPU kind holds (``gpu``; ``gpu@<vc>`` with ``gpu_pools``): the most
    one of ``jobs``' GPU configurations asks a pod that some node holds with its GPUs free
    (:func:`gpu_shortfall`), as a CPU slot holds the largest queued CPU configuration. A pod of 4
    GPUs binds only where one node has 4 free, so it takes 4 GPUs of one node, not 4 machines of
    one GPU anywhere; a configuration no node holds sizes nothing. A kind absent: 1."""
    room = gpu_room(free_nodes)
    fits: dict[int, bool] = {}  # per demand (Jobs of one configurations annotation and pod share it)
    slots: dict[str, int] = {}
    for job in jobs:
        demand = job.demand.get(KIND_GPU)
        if demand is None or demand.gpu <= 1 or KIND_GPU not in job.seconds:
            continue
        kind = _kind_for(KIND_GPU, job.pool, gpu_pools)
        if kind is None or slots.get(kind, 1) >= demand.gpu:
            continue
        held = fits.get(id(demand))
        if held is None:
            held = fits[id(demand)] = not gpu_shortfall(demand, room=room)
        if held:
            slots[kind] = int(demand.gpu)
    return slots


def cpu_slot_for(
    waiting: Sequence[WaitingJob],
    *,
    free_nodes: Sequence[NodeResources] | None = None,
    reserved_cpu_per_gpu: float = DEFAULT_RESERVED_CPU_PER_GPU,
    default: Demand = DEFAULT_CPU_SLOT,
) -> Demand:
    """A CPU machine must hold any queued CPU configuration: the largest one asked for that one
    of ``free_nodes`` holds (all of them without nodes). A configuration no node holds must not
    size the slots: one user's "1000" cores would leave no CPU slot to anyone."""
    sized = queued_cpu_slot(waiting, free_nodes=free_nodes, reserved_cpu_per_gpu=reserved_cpu_per_gpu)
    return default if sized is None else sized


def queued_cpu_slot(
    waiting: Sequence[WaitingJob], *, free_nodes: Sequence[NodeResources] | None, reserved_cpu_per_gpu: float,
    reserved_memory_per_gpu: float = 0.0,
) -> Demand | None:
    """:func:`cpu_slot_for`, None when no queued CPU configuration sizes the slot."""
    demands = {job.demand["cpu"] for job in waiting if "cpu" in job.seconds and "cpu" in job.demand}
    if free_nodes is not None:
        # Nodes alike hold alike: each distinct (cores beside the GPUs, memory) once.
        room = {(node.cpu - node.gpu * max(reserved_cpu_per_gpu, node.kept_cpu_per_gpu),
                 node.memory - node.gpu * max(reserved_memory_per_gpu, node.kept_memory_per_gpu)) for node in free_nodes}
        demands = {d for d in demands if any(d.cpu <= cores and d.memory <= memory for cores, memory in room)}
    if not demands:
        return None
    return Demand(cpu=max(max(d.cpu for d in demands), 1e-3), memory=max(d.memory for d in demands))


def most_gpus(free_nodes: Sequence[NodeResources]) -> int:
    """The most GPUs one node has free: no pod asks for more and runs now."""
    return max((node.gpu for node in free_nodes), default=0)


GpuRoom = frozenset[tuple[int, float, float]]


def gpu_room(free_nodes: Sequence[NodeResources]) -> GpuRoom:
    """Each distinct (GPUs, cores, memory) free on a node with a GPU free: a GPU configuration's
    pod binds now only where all three hold it (nodes alike count once)."""
    return frozenset((node.gpu, node.cpu, node.memory) for node in free_nodes if node.gpu > 0)


def kinds_beyond(job: WaitingJob, *, cpu_slot: Demand, gpus: int, room: GpuRoom | None = None) -> frozenset[str]:
    """The Job's configurations no machine holds now: its CPU configuration larger than a CPU slot
    (no node holds it), its GPU configuration asking more GPUs a pod than ``gpus``
    (:func:`most_gpus`, when not 0), or, given ``room`` (:func:`gpu_room`), more cores or memory
    than any node with its GPUs free has free. They are no kind of the Job, and size no machine."""
    beyond = demands_beyond(job.demand, cpu_slot=cpu_slot, gpus=gpus, room=room)
    return _estimated(beyond, job.seconds)


def _estimated(kinds: frozenset[str], seconds: Mapping[str, float]) -> frozenset[str]:
    """The ``kinds`` a Job has an estimate for."""
    return kinds if all(kind in seconds for kind in kinds) else frozenset(kind for kind in kinds if kind in seconds)


def demands_beyond(demand: Mapping[str, Demand], *, cpu_slot: Demand, gpus: int, room: GpuRoom | None = None) -> frozenset[str]:
    """:func:`kinds_beyond` of a Job with an estimate for every kind of ``demand``."""
    beyond: set[str] = set()
    cpu = demand.get("cpu")
    if cpu is not None and (cpu.cpu > cpu_slot.cpu or cpu.memory > cpu_slot.memory):
        beyond.add("cpu")
    gpu = demand.get(KIND_GPU)
    # With no GPU free anywhere every GPU Job waits alike (for a GPU, or its VC's): only one
    # that no node with GPUs free holds is beyond.
    if gpu is not None and gpus > 0 and (gpus < gpu.gpu or (room is not None and gpu_shortfall(gpu, room=room))):
        beyond.add(KIND_GPU)
    return frozenset(beyond)


def beside_each_gpu(
    waiting: Sequence[WaitingJob], running: Sequence[RunningJob], *, free_nodes: Sequence[NodeResources], reserved_cpu_per_gpu: float,
    reserved_memory_per_gpu: float = 0.0,
) -> Demand:
    """Cores and memory kept beside each GPU before a node's CPU is cut into slots: at least
    ``reserved_cpu_per_gpu`` cores (§4.4's minimum CPU per job) and ``reserved_memory_per_gpu``
    GiB (what pods AlloX does not start ask per GPU, placer/guarantee.py), and as many cores and as much
    memory as a running GPU Job, or a queued GPU configuration that a node holds
    (:func:`gpu_shortfall`), asks per GPU: its pod's would otherwise be cut into CPU slots as
    well, and CPU Jobs started on them (a running Job's count free, as it is a busy machine of
    its own)."""
    cores, memory = reserved_cpu_per_gpu, reserved_memory_per_gpu
    for held in running:
        demand = held.demand.get(held.kind)
        if configuration_kind(held.kind) == KIND_GPU and demand is not None and demand.gpu > 0:
            cores, memory = max(cores, demand.cpu / demand.gpu), max(memory, demand.memory / demand.gpu)
    room: GpuRoom | None = None
    for job in waiting:
        demand = job.demand.get(KIND_GPU)
        if demand is None or demand.gpu <= 0 or KIND_GPU not in job.seconds:
            continue
        if demand.cpu / demand.gpu <= cores and demand.memory / demand.gpu <= memory:
            continue
        room = gpu_room(free_nodes) if room is None else room
        if not gpu_shortfall(demand, room=room):
            cores, memory = max(cores, demand.cpu / demand.gpu), max(memory, demand.memory / demand.gpu)
    return Demand(cpu=cores, memory=memory)


def gpu_shortfall(demand: Demand, *, room: GpuRoom) -> tuple[str, ...]:
    """What of a GPU configuration's pod no node of ``room`` holds: ``("gpu",)`` when none has
    that many GPUs free; else ``cpu`` and ``memory`` where no node with the GPUs free has that
    much free, or both when each is free on some such node but never together; () when one
    holds it."""
    with_gpus = [(cores, memory) for count, cores, memory in room if count >= demand.gpu]
    if not with_gpus:
        return ("gpu",)
    if any(demand.cpu <= cores and demand.memory <= memory for cores, memory in with_gpus):
        return ()
    alone = tuple(name for name, fits in (("cpu", any(demand.cpu <= cores for cores, _ in with_gpus)),
                                          ("memory", any(demand.memory <= memory for _, memory in with_gpus))) if not fits)
    return alone or ("cpu", "memory")


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
    reserved_memory_per_gpu: float = 0.0,
    allox_plus_timeout: float = math.inf,
    omega_grid_seconds: float = 60.0,
    omega_grid_ratio: float = 1.25,
    plan_queue: bool = True,
    gpu_pools: Mapping[str, int] | None = None,
    gpu_slots: Mapping[str, int] | None = None,
    reuse: DecideReuse | None = None,
    stop: Callable[[], bool] | None = None,
) -> AdmissionDecision:
    """:func:`decide_starts`' decision with its queue planned (``plan_queue`` False leaves the
    queue empty: the starts alone; the simulator needs no positions), in one call: for a caller
    with nothing to carry out between the two. The arguments are :func:`decide_starts`'."""
    decision, plan = decide_starts(
        now=now, waiting=waiting, running=running, free_nodes=free_nodes, capacity=capacity, alpha=alpha, policy=policy,
        reserved_cpu_per_gpu=reserved_cpu_per_gpu, reserved_memory_per_gpu=reserved_memory_per_gpu, allox_plus_timeout=allox_plus_timeout,
        omega_grid_seconds=omega_grid_seconds, omega_grid_ratio=omega_grid_ratio, gpu_pools=gpu_pools, gpu_slots=gpu_slots,
        reuse=reuse, stop=stop,
    )
    return replace(decision, queue=plan.queue()) if plan_queue else decision


def decide_starts(
    *,
    now: float,
    waiting: Sequence[WaitingJob],
    running: Sequence[RunningJob],
    free_nodes: Sequence[NodeResources],
    capacity: Capacity,
    alpha: float = 1.0,
    policy: AdmissionPolicy = "allox",
    reserved_cpu_per_gpu: float = DEFAULT_RESERVED_CPU_PER_GPU,
    reserved_memory_per_gpu: float = 0.0,
    allox_plus_timeout: float = math.inf,
    omega_grid_seconds: float = 60.0,
    omega_grid_ratio: float = 1.25,
    gpu_pools: Mapping[str, int] | None = None,
    gpu_slots: Mapping[str, int] | None = None,
    reuse: DecideReuse | None = None,
    stop: Callable[[], bool] | None = None,
) -> tuple[AdmissionDecision, QueuePlan]:
    """Busy machines' ω is rounded up onto a grid: ``omega_grid_seconds`` apart up to ten steps
    from now, then growing by ``omega_grid_ratio`` (a machine freeing in 3 h is placed within
    25% of it, one freeing in 5 min within a minute). Machines of one kind on the same grid point
    are identical to the matching and fold into one column class (``transport.py``); with
    hundreds of running Jobs each distinct ω would be a class of its own, and the solve falls back
    to scipy on the full matrix (~1 s for 1,000 Jobs). Estimates are good to ~5-10%; the grid
    adds no more than that where it matters. 0 turns rounding off. ``capacity``: the cluster's
    CPU, GPU and memory (cores, GPUs, GiB), what fairness divides demands by.
    ``reserved_memory_per_gpu``: GiB kept beside each free GPU, with ``reserved_cpu_per_gpu``
    cores, before a node is cut into CPU slots (:func:`beside_each_gpu`).

    The decision's queue is empty: where the Jobs left waiting stand decides no start, and its
    matching is a third of the time at 1,000 Jobs, so a live controller carries the starts out
    first and then asks the :class:`QueuePlan` (made of what Algorithm 2 computed, nothing
    matched twice) for the queue :func:`decide` would have returned.

    ``gpu_pools`` (HiveD): virtual cluster → the GPU machines its free guarantee holds
    (:func:`~scheduler.matching.capacity.guaranteed_gpu_machines`, running Jobs' machines
    included). A Job's GPU configuration is then matched only to its own VC's (``pool``)
    machines, a kind of its own per VC (``gpu@<vc>``); other VCs' idle GPUs are not AlloX's.
    ``gpu_slots``: GPUs a machine of each GPU kind holds as the caller sized ``gpu_pools``
    (placer/guarantee.py ``gpus_per_pod``, which counts free a VC's GPUs opportunistic pods
    hold, that no node shows free); None: :func:`gpu_slots_for` of ``free_nodes``.

    Jobs of several pods (``pods`` > 1, gangs) hold that many machines of one kind at once,
    which no column of Q expresses. They go first, oldest first, each on the kind that
    finishes it earliest given when that many machines of the kind are free (the idle ones
    now, the busy ones at their ω): with that many idle it starts; otherwise it holds the
    idle machines of that kind and claims the busy ones that free first, so Jobs matched
    after it cannot take them, and it starts when the last of them frees. Single-pod Jobs are
    then matched (Algorithm 2) on the machines left, the gangs' machines busy until they end.

    ``reuse``: a live controller's, kept between its passes; what is made of an input object
    that the last pass was also given is taken from it (the decision is the same without).

    ``stop`` (policy allox): asked before each of Algorithm 2's visits once it has started a
    Job (``AlloxScheduler.matched``); True leaves the idle machines not visited undecided
    (``AdmissionDecision.undecided_machines``), the starts made being the whole walk's first."""
    if reuse is not None:
        reuse.waiting.begin_pass()
        reuse.running.begin_pass()
    beside = beside_each_gpu(waiting, running, free_nodes=free_nodes, reserved_cpu_per_gpu=reserved_cpu_per_gpu,
                             reserved_memory_per_gpu=reserved_memory_per_gpu)
    reserved_cpu_per_gpu = beside.cpu
    queued_slot = queued_cpu_slot(waiting, free_nodes=free_nodes, reserved_cpu_per_gpu=reserved_cpu_per_gpu,
                                  reserved_memory_per_gpu=beside.memory)
    cpu_slot = DEFAULT_CPU_SLOT if queued_slot is None else queued_slot
    gpus_on_a_node = most_gpus(free_nodes)
    room = gpu_room(free_nodes)
    slots_sized = gpu_slots is not None and gpu_pools is not None
    gpu_slots = gpu_slots_for(waiting, free_nodes=free_nodes, gpu_pools=gpu_pools) if gpu_slots is None else gpu_slots
    defaults = default_demands(cpu_slot=cpu_slot, reserved_cpu_per_gpu=reserved_cpu_per_gpu)
    if gpu_pools is not None:
        defaults.update({pool_kind(pool): defaults[KIND_GPU] for pool in gpu_pools})
    shares = DemandShare(capacity=capacity, default_demand=defaults)
    awaiting = [job for job in running if job.awaiting]
    holds = [job for job in running if not job.awaiting] if awaiting else running
    # With no Job waiting or awaiting its machines nothing is matched or claimed: the idle
    # machines are only counted (every resync with no interchangeable Job, on every node).
    idle_of = IdleMachines(free_nodes=free_nodes, running=holds, cpu_slot=cpu_slot, reserved_cpu_per_gpu=reserved_cpu_per_gpu,
                           gpu_pools=gpu_pools, gpu_slots=gpu_slots, cpu_slot_queued=queued_slot is not None,
                           reserved_memory_per_gpu=beside.memory)
    idle: list[Machine] = []
    counted: dict[str, int] | None = None
    if waiting or awaiting:
        idle = idle_of.laid_out()
    else:
        counted = idle_of.counted()
    kinds = (set(counted) if counted is not None else {m.kind for m in idle}) | {_running_kind(job, gpu_pools) for job in running}
    # The running Jobs as busy machines and their users' progress (Algorithm 2 needs no
    # assignment of theirs: it is given the progress, and their users).
    busy, progress = _busy(now=now, running=holds, kinds=kinds, omega_grid_seconds=omega_grid_seconds, omega_grid_ratio=omega_grid_ratio,
                           gpu_pools=gpu_pools, gpu_slots=gpu_slots, cpu_slot=queued_slot, shares=shares,
                           reuse=reuse.running if reuse is not None else None)
    if awaiting:
        # Jobs whose pods wait to be bound, unsuspended by hand: ahead of every waiting Job on
        # the first machines of their kind to free, busy from then for their estimate.
        grid_of = (lambda delay: _on_grid(delay, step=omega_grid_seconds, ratio=omega_grid_ratio)) if omega_grid_seconds > 0 else None
        idle, busy, awaiting_on_idle = _claimed(now=now, awaiting=awaiting, idle=idle, busy=busy, kinds=kinds, grid=grid_of,
                                             gpu_pools=gpu_pools, gpu_slots=gpu_slots, cpu_slot=queued_slot, shares=shares, progress=progress)
    else:
        awaiting_on_idle = ()
    machines_of: dict[str, int] = {}
    for machine in (*idle, *busy):
        machines_of[machine.kind] = machines_of.get(machine.kind, 0) + 1
    jobs: list[Job] = []
    gangs: list[tuple[Job, int]] = []
    unplaceable: list[str] = []
    waiting_for_pool: list[str] = []
    # pods -> the kinds with that many machines, and with the VCs what a waiting Job's matching
    # Job depends on beside the Job itself (reuse.py's context)
    enough: dict[int, tuple[frozenset[str], object]] = {}
    pools_key = _pools_key(gpu_pools)
    # Jobs of one configurations annotation share its demand mapping (parsed once per text):
    # what lies beyond the nodes is worked out once per mapping in a pass.
    beyond_of: dict[int, frozenset[str]] = {}
    for job in sorted(waiting, key=_arrival_order):
        here = enough.get(job.pods)
        if here is None:
            kinds_for_pods = frozenset(kind for kind, count in machines_of.items() if count >= job.pods)
            here = enough[job.pods] = (kinds_for_pods, (kinds_for_pods, pools_key) if reuse is None else reuse.waiting.context((kinds_for_pods, pools_key)))
        kinds_here, context = here
        # A configuration no node holds is not a kind of this Job now; what was kept of it (with
        # that kind, or without) depends on the nodes, so none is kept.
        beyond = beyond_of.get(id(job.demand))
        if beyond is None:
            beyond = beyond_of[id(job.demand)] = demands_beyond(job.demand, cpu_slot=cpu_slot, gpus=gpus_on_a_node, room=room)
        oversized = _estimated(beyond, job.seconds)
        if slots_sized and KIND_GPU in oversized and _pool_holds(job, gpu_slots, more_than=gpus_on_a_node):
            oversized -= {KIND_GPU}
        # A pooled GPU configuration larger than its VC's machines, as the caller sized them on
        # the nodes' and the reclaimable cells' room, binds on no node now: no machine of its VC
        # takes it this pass (on one of fewer GPUs its pod would wait unbound), and it waits for
        # its VC's GPUs.
        outgrown = slots_sized and KIND_GPU not in oversized and _outgrows_pool(job, gpu_slots)
        # Only a Job that has arrived by now: one whose arrival is later (the clock stepped
        # back) arrives at ``now``, which the kept one does not.
        keep = reuse is not None and job.arrival <= now and not oversized and not outgrown
        kept = reuse.waiting.get(job, context) if reuse is not None and keep else None
        if kept is not None:
            if job.pods > 1:
                gangs.append((kept, job.pods))
            else:
                jobs.append(kept)
            continue
        # Without pools a Job's own mappings serve as they are (read only) when every kind of
        # it has machines: copying them was a sixth of deciding at 1,000 Jobs.
        seconds = job.seconds if gpu_pools is None else _translated(job.seconds, job.pool, gpu_pools)
        usable = seconds
        if oversized or outgrown or not kinds_here.issuperset(seconds):
            usable = {kind: value for kind, value in seconds.items() if kind in kinds_here and configuration_kind(kind) not in oversized
                      and not (outgrown and configuration_kind(kind) == KIND_GPU)}
        if not usable:
            pooled = gpu_pools is not None and job.pool in gpu_pools and KIND_GPU in job.seconds and KIND_GPU not in oversized
            (waiting_for_pool if pooled else unplaceable).append(job.key)
            continue
        demand = job.demand if gpu_pools is None else _translated(job.demand, job.pool, gpu_pools)
        if demand.keys() != usable.keys():
            demand = {kind: demand[kind] for kind in usable if kind in demand}
        matching_job = Job(name=job.key, user=job.user, arrival=job.arrival if job.arrival < now else now, processing_time=usable,
                           demand=demand)
        if reuse is not None and keep:  # else its arrival is the clock's, or its kinds the nodes'
            reuse.waiting.put(job, context, matching_job)
        if job.pods > 1:
            gangs.append((matching_job, job.pods))
        else:
            jobs.append(matching_job)
    gang_plan = _gangs(now=now, gangs=gangs, idle=idle, busy=busy)
    idle = gang_plan.idle
    busy = gang_plan.busy
    holding = gang_plan.started_assignments
    # Once (Algorithm 2 ranks by it, the answer adds the starts): user_progress over the running
    # Jobs' machines then the gangs started.
    for assignment in gang_plan.started_assignments:
        user = assignment.job.user
        progress[user] = progress.get(user, 0.0) + job_value(assignment.job, assignment.kind, shares)
    # The machines in array form once, for Algorithm 2 and the queue's matching (idle ones
    # first, in the order Algorithm 2 visits them). With no single-pod Job there is nothing to
    # match or queue: no machine is laid out (a pass with no waiting Job over 5,000 nodes' GPUs
    # and CPU slots spent ~0.3 s of CPU on them, every resync).
    if not jobs:
        arrays, matched = fleet(machines=(), now=now), Matched([])
    else:
        idle = visiting_order(idle, jobs)
        idle_names = {machine.name for machine in idle}
        arrays = fleet(machines=[*idle, *(m for m in busy if m.name not in idle_names)], now=now,
                       busy_until={m.name: until for m, until in busy.items() if m.name not in idle_names})
        if policy == "allox":
            matched = AlloxScheduler(alpha=alpha, shares=shares).matched(
                now=now, free_machines=idle, pending_jobs=jobs, busy_until=busy, running=holding, progress=progress, machines=arrays,
                holding_users={job.user for job in running}, stop=stop)
        else:
            matched = Matched(AlloxPlusScheduler(timeout=allox_plus_timeout).on_machine_free(
                now=now, free_machines=idle, pending_jobs=jobs, busy_until=busy, running=holding))
    started = matched.started
    named = {kind: (configuration_kind(kind), _pool_of(kind)) for kind in arrays.kinds}  # machine kind -> (configuration, pool)
    starts = (*gang_plan.starts, *(_start(a, named) for a in started))
    instead = _oldest_alike_started(starts, waiting)
    if instead:
        starts = tuple(replace(start, key=instead.get(start.key, start.key)) for start in starts)
    grid = (lambda delay: _on_grid(delay, step=omega_grid_seconds, ratio=omega_grid_ratio)) if omega_grid_seconds > 0 else (lambda delay: delay)
    plan = QueuePlan(now=now, jobs=jobs, matched=matched, machines=arrays, grid=grid, gangs_queued=gang_plan.queued,
                     waiting=waiting, waits_instead={started_key: chosen for chosen, started_key in instead.items()})
    per_demand = _SharePerDemand(shares)
    if matched.progress is not None and _PROGRESS_FROM_WALK:
        # Algorithm 2 ranked by these sums: this progress plus each start's value (the same
        # values: a share depends on the demand alone), user by user in the order of the
        # starts, as the loop below adds them; taken rather than summed again (~1 ms at 455).
        for user in {assignment.job.user for assignment in started}:
            progress[user] = matched.progress[user]
    else:
        for assignment in started:  # as user_progress over holding then started would sum them
            user = assignment.job.user
            progress[user] = progress.get(user, 0.0) + job_value(assignment.job, assignment.kind, per_demand)
    users = sorted({job.user for job in waiting} | {job.user for job in running})
    values = [progress.get(user, 0.0) for user in users]
    if reuse is not None:
        reuse.waiting.end_pass()
        reuse.running.end_pass()
    return AdmissionDecision(
        starts=starts,
        queue=(),
        unplaceable=tuple(unplaceable),
        idle_machines=_count(gang_plan.idle_before) if counted is None else counted,
        busy_machines=_count(gang_plan.busy_before),
        cpu_slot=cpu_slot,
        progress={user: progress.get(user, 0.0) for user in users},
        progress_spread=_standard_deviation(values),
        waiting_for_pool=tuple(waiting_for_pool),
        awaiting_on_idle=awaiting_on_idle,
        undecided_machines=matched.undecided,
    ), plan


# Off: the answer's progress is summed again over the starts, also where Algorithm 2's walk
# kept it (the tests compare both ways).
_PROGRESS_FROM_WALK = True


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class QueuePlan:
    """Where the Jobs a :func:`decide_starts` pass leaves waiting stand, planned when asked. It
    holds what that pass's Algorithm 2 computed (its matching's arrays, the machines with the
    started ones busy), read only, so planning matches no Job twice; :meth:`queue` is the queue
    :func:`decide` returns for the same inputs. Apart from the decision because it decides no
    start: a live controller unsuspends the started Jobs first and tells the others after."""

    now: float
    jobs: Sequence[Job]  # the single-pod Jobs Algorithm 2 was given, in its order
    matched: Matched
    machines: Fleet
    grid: Callable[[float], float]  # a started Job's end, as the next pass puts it on the ω grid
    gangs_queued: tuple[tuple[str, str, float], ...]  # (key, machine kind, start from now) of the gangs waiting
    waiting: Sequence[WaitingJob]  # the pass's waiting Jobs, which say which Jobs are alike
    # A Job that started in place of an alike one the matching chose -> the Job it displaced,
    # which waits where the matching queued the started one (``_oldest_alike_started``).
    waits_instead: Mapping[str, str]

    def queue(self) -> tuple[Queued, ...]:
        """Every Job left waiting with its kind, position and expected start (one more
        min-cost matching: Lemma 3.1's order, see :func:`_queue`), alike Jobs in the order they
        arrived (:func:`_alike_in_arrival_order`)."""
        planned = [*_queue(now=self.now, jobs=self.jobs, matched=self.matched, machines=self.machines, grid=self.grid),
                   *self.gangs_queued]
        queue = _numbered(planned)
        if self.waits_instead:
            queue = tuple(replace(queued, key=self.waits_instead.get(queued.key, queued.key)) for queued in queue)
        return _alike_in_arrival_order(queue, self.waiting)


class _SharePerDemand:
    """``shares``' dominant shares, once per demand mapping and kind: a pass values every Job it
    starts, and Jobs with the same configurations share one demand mapping."""

    def __init__(self, shares: DemandShare) -> None:
        self._shares = shares
        self._known: dict[tuple[int, str], tuple[Mapping[str, Demand], float]] = {}

    def usage(self, job: Job, kind: str) -> Mapping[str, float]:
        return self._shares.usage(job, kind)

    def dominant_share(self, job: Job, kind: str) -> float:
        key = (id(job.demand), kind)
        found = self._known.get(key)
        if found is not None and found[0] is job.demand:
            return found[1]
        share = self._shares.dominant_share(job, kind)
        self._known[key] = (job.demand, share)
        return share


def _start(assignment: Assignment, named: Mapping[str, tuple[str, str | None]]) -> Start:
    machine = assignment.machine
    configuration, pool = named[machine.kind]
    return Start(assignment.job.name, configuration, machine.name, assignment.finish - assignment.start, (machine.name,), pool)


def _arrival_order(job: WaitingJob) -> tuple[float, str]:
    return job.arrival, job.key


# Alike Jobs: the matching cannot tell them apart, and breaks ties between them one way or
# another as time moves its costs (the ω grid). The decision settles them by arrival, here in
# the core, so that the simulator, ``cellfit allox`` and the live controller start and queue the
# same Jobs.


def _alike(item: WaitingJob, queued: Queued | None = None) -> tuple[object, ...]:
    """What tells a waiting Job from another in AlloX's decision, its arrival and name aside
    (and, queued, the kind it waits on)."""
    where = () if queued is None else (queued.kind,)
    return (*where, item.pool, item.user, tuple(sorted(item.seconds.items())), tuple(sorted(item.demand.items())), item.pods)


def _rough(item: WaitingJob) -> tuple[object, ...]:
    """Equal for alike Jobs, and cheap: most Jobs' estimates differ, so :func:`_alike`'s sorting
    and the demands' hashing are left to the few that share this (a pass over 1,000 Jobs). Two
    estimates (a CPU and a GPU one, the usual Job) are put in ``sorted``'s order without it:
    the later first where it is less than the earlier (one comparison, as ``sorted`` makes),
    ~0.6 instead of ~1.3 us a Job."""
    seconds = item.seconds.values()
    if len(seconds) == 2:
        first, second = seconds
        return (item.pool, item.user, item.pods, second, first) if second < first else (item.pool, item.user, item.pods, first, second)
    return item.pool, item.user, item.pods, *sorted(seconds)


def _alike_classes(items: Sequence[WaitingJob], kinds: Sequence[str] | None = None) -> list[list[int]]:
    """The indices of ``items`` in classes of two or more alike Jobs (with ``kinds``: alike and
    queued on the same kind), each in ``items``' order."""
    # Each rough key's first index, and a list only for the keys met again (most Jobs are
    # alone), then those in the order of their first index, as one dict of lists gave them.
    first: dict[tuple[object, ...], int] = {}
    repeated: dict[tuple[object, ...], list[int]] = {}
    for index, item in enumerate(items):
        key = _rough(item) if kinds is None else (kinds[index], *_rough(item))
        at = first.setdefault(key, index)
        if at != index:
            repeated.setdefault(key, [at]).append(index)
    classes: list[list[int]] = []
    for indices in sorted(repeated.values(), key=lambda indices: indices[0]):
        exact: dict[tuple[object, ...], list[int]] = {}
        for index in indices:
            exact.setdefault(_alike(items[index]), []).append(index)
        classes.extend(members for members in exact.values() if len(members) > 1)
    return classes


def _oldest_alike_started(starts: Sequence[Start], waiting: Sequence[WaitingJob]) -> dict[str, str]:
    """The Jobs that start in place of those the matching chose, where alike Jobs wait beside
    them: of alike Jobs, the oldest start, so that a sweep starts in the order it was told it
    waits in. ``{chosen: starts instead}``."""
    chosen = {start.key for start in starts}
    instead: dict[str, str] = {}
    for indices in _alike_classes(waiting):
        members = [waiting[index] for index in indices]
        if not any(item.key in chosen for item in members):
            continue
        members.sort(key=_arrival_order)
        count = sum(1 for item in members if item.key in chosen)
        oldest = {item.key for item in members[:count]}
        displaced = [item.key for item in members if item.key in chosen and item.key not in oldest]
        passed_over = [item.key for item in members[:count] if item.key not in chosen]
        instead.update(zip(displaced, passed_over))
    return instead


def _alike_in_arrival_order(queue: Sequence[Queued], waiting: Sequence[WaitingJob]) -> tuple[Queued, ...]:
    """``queue`` with Jobs that are alike (one user's, of the same estimates, demand and pods,
    queued on one kind of one pool) in their places in the order they arrived. Each swap the
    matching's ties would make rewrites two Jobs' conditions while nothing changed for anyone:
    786 writes in 15 minutes over 200 such Jobs (tests/placer/test_review_97_queue_writes.py)."""
    by_key = {item.key: item for item in waiting}
    at = [index for index, queued in enumerate(queue) if queued.key in by_key]
    items = [by_key[queue[index].key] for index in at]
    ordered = list(queue)
    for members in _alike_classes(items, [queue[index].kind for index in at]):
        indices = [at[member] for member in members]
        arrived = sorted((items[member] for member in members), key=_arrival_order)
        for index, item in zip(sorted(indices, key=lambda index: queue[index].position), arrived):
            ordered[index] = replace(queue[index], key=item.key)
    return tuple(ordered)


def _pool_of(kind: str) -> str | None:
    return kind.split("@", 1)[1] if "@" in kind else None


@dataclass(frozen=True, slots=True)
class _GangPlan:
    starts: tuple[Start, ...]
    started_assignments: tuple[Assignment, ...]  # one per machine: fairness counts every pod
    queued: tuple[tuple[str, str, float], ...]  # (key, machine kind, start from now) of the gangs waiting
    idle: list[Machine]  # what single-pod Jobs may start on
    busy: dict[Machine, float]  # every other machine, free at ω (a gang's machines: at its end)
    idle_before: list[Machine]
    busy_before: dict[Machine, float]


def _gangs(*, now: float, gangs: Sequence[tuple[Job, int]], idle: Sequence[Machine], busy: Mapping[Machine, float]) -> _GangPlan:
    """Gangs first, oldest first (see :func:`decide`): each on the kind where its ``pods``
    machines free soonest plus its time there ends earliest; it starts now on idle machines, or
    holds the idle ones and claims the busy ones freeing first."""
    free = list(idle)
    # A machine a gang takes or waits for is busy until that gang ends: a later gang on the
    # same kind queues behind it.
    taken_busy: dict[Machine, float] = dict(busy)
    starts: list[Start] = []
    assignments: list[Assignment] = []
    queued: list[tuple[str, str, float]] = []
    for job, pods in gangs:
        best: tuple[float, str, float] | None = None  # (finish, kind, ready)
        for kind, seconds in job.processing_time.items():
            idle_here = sum(1 for m in free if m.kind == kind)
            frees = sorted(until for m, until in taken_busy.items() if m.kind == kind)
            times = [now] * idle_here + frees
            if len(times) < pods:
                continue
            ready = max(now, times[pods - 1])
            option = (ready + seconds, kind, ready)
            if best is None or option < best:
                best = option
        if best is None:  # decide() keeps only kinds with enough machines
            continue
        finish, kind, ready = best
        held = [m for m in free if m.kind == kind][:pods]
        free = [m for m in free if m not in held]
        waiting_on = sorted((m for m in taken_busy if m.kind == kind), key=lambda m: (taken_busy[m], m.name))[: pods - len(held)]
        for machine in (*held, *waiting_on):
            taken_busy[machine] = finish
        if ready <= now and len(held) == pods:
            names = tuple(m.name for m in held)
            starts.append(Start(key=job.name, kind=configuration_kind(kind), machine=names[0], seconds=finish - now,
                                machines=names, pool=_pool_of(kind)))
            assignments.extend(Assignment(job=job, machine=m, start=now, finish=finish) for m in held)
        else:
            queued.append((job.name, kind, ready - now))
    return _GangPlan(starts=tuple(starts), started_assignments=tuple(assignments), queued=tuple(queued), idle=free,
                     busy=taken_busy, idle_before=list(idle), busy_before=dict(busy))


def _numbered(planned: Sequence[tuple[str, str, float]]) -> tuple[Queued, ...]:
    """Positions per machine kind (a VC's GPUs count apart), in the order they start."""
    positions: dict[str, int] = {}
    named = {kind: (configuration_kind(kind), _pool_of(kind)) for kind in {row[1] for row in planned}}  # -> (configuration, pool)
    queued: list[Queued] = []
    append = queued.append
    for key, kind, start_delay in sorted(planned, key=_third):  # stable: ties keep the plan's order
        position = positions[kind] = positions.get(kind, 0) + 1
        configuration, pool = named[kind]
        append(_queued(key, configuration, position, start_delay if start_delay > 0.0 else 0.0, pool))
    return tuple(queued)


_new = object.__new__
_SET_QUEUED = tuple(getattr(Queued, name).__set__ for name in Queued.__dataclass_fields__)


def _queued(key: str, kind: str, position: int, expected_start_seconds: float, pool: str | None) -> Queued:
    """``Queued(key, kind, position, expected_start_seconds, pool)``, its slots written directly:
    the frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field) was three
    quarters of numbering 1,000 queued Jobs. Queued has no ``__post_init__`` to skip."""
    queued: Queued = _new(Queued)
    set_key, set_kind, set_position, set_expected, set_pool = _SET_QUEUED
    set_key(queued, key)
    set_kind(queued, kind)
    set_position(queued, position)
    set_expected(queued, expected_start_seconds)
    set_pool(queued, pool)
    return queued


def _third(row: tuple[str, str, float]) -> float:
    return row[2]


def _standard_deviation(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((value - mean) ** 2 for value in values) / len(values))


def busy_machines(
    *, now: float, running: Sequence[RunningJob], kinds: Collection[str], omega_grid_seconds: float = 60.0,
    omega_grid_ratio: float = 1.25, gpu_pools: Mapping[str, int] | None = None, gpu_slots: Mapping[str, int] | None = None,
    cpu_slot: Demand | None = None,
) -> tuple[dict[Machine, float], list[Assignment]]:
    """The machines running Jobs hold (``pods`` each, :func:`held_per_pod` a pod), free at ω
    (its start + its estimate on its kind, on the grid :func:`decide` describes), and the
    running Jobs as the matching's assignments, one per pod (fairness weighs each against the
    ``kinds`` the cluster has, as a waiting Job's choices, and counts every pod)."""
    assignments: list[Assignment] = []
    busy, _ = _busy(now=now, running=running, kinds=kinds, omega_grid_seconds=omega_grid_seconds, omega_grid_ratio=omega_grid_ratio,
                    gpu_pools=gpu_pools, gpu_slots=gpu_slots or {}, cpu_slot=cpu_slot, shares=None, reuse=None, assignments=assignments)
    return busy, assignments


@dataclass(frozen=True, slots=True)
class _Held:
    """A running Job as :func:`decide` sees it whatever the clock: the machines it holds, when
    its estimate on its kind ends (ω before the clock and the grid), the matching's Job
    (fairness weighs it against the cluster's kinds) and its value (§3.3.2; NaN unasked)."""

    machines: tuple[Machine, ...]  # pod after pod, ``per_pod`` machines each
    per_pod: int
    ends: float
    job: Job
    value: float


def _busy(
    *, now: float, running: Sequence[RunningJob], kinds: Collection[str], omega_grid_seconds: float, omega_grid_ratio: float,
    gpu_pools: Mapping[str, int] | None, gpu_slots: Mapping[str, int], cpu_slot: Demand | None, shares: ShareModel | None,
    reuse: Reuse[_Held] | None, assignments: list[Assignment] | None = None,
) -> tuple[dict[Machine, float], dict[str, float]]:
    """:func:`busy_machines`' machines (its assignments appended to ``assignments``, when
    given), and the users' progress from the running Jobs (with ``shares``; what
    ``user_progress`` over those assignments sums, in the same order)."""
    busy: dict[Machine, float] = {}
    progress: dict[str, float] = {}
    known = frozenset(kinds)
    context = (known, _pools_key(gpu_pools), frozenset(gpu_slots.items()), cpu_slot, shares)
    if reuse is not None:
        context = reuse.context(context)
    for job in sorted(running, key=_by_key):
        held = reuse.get(job, context) if reuse is not None and job.started <= now else None
        if held is None:
            held = _held(job, now=now, known=known, gpu_pools=gpu_pools, gpu_slots=gpu_slots, cpu_slot=cpu_slot, shares=shares)
            if reuse is not None and job.started <= now:  # else its Job's arrival is the clock
                reuse.put(job, context, held)
        until = held.ends if held.ends > now else now
        if omega_grid_seconds > 0 and until > now:
            until = now + _on_grid(until - now, step=omega_grid_seconds, ratio=omega_grid_ratio)
        per_pod = held.per_pod
        for index, machine in enumerate(held.machines):
            busy[machine] = until
            if index % per_pod:  # a pod's further machines: fairness counts the pod once
                continue
            if assignments is not None:
                assignments.append(Assignment(job=held.job, machine=machine, start=job.started, finish=until))
            if shares is not None:
                progress[job.user] = progress.get(job.user, 0.0) + held.value
    return busy, progress


def _held(
    job: RunningJob, *, now: float, known: frozenset[str], gpu_pools: Mapping[str, int] | None, gpu_slots: Mapping[str, int],
    cpu_slot: Demand | None, shares: ShareModel | None,
) -> _Held:
    kind = _running_kind(job, gpu_pools)
    if gpu_pools is None:
        # The Job's own mappings where they serve as they are (read only): a full cluster
        # has a running Job per machine, and copying them was a third of this.
        seconds: Mapping[str, float] = job.seconds
        if not known.issuperset(seconds):
            seconds = {k: value for k, value in seconds.items() if k in known or k == kind}
        demand: Mapping[str, Demand] = job.demand
        if demand.keys() != seconds.keys():
            demand = {k: demand[k] for k in seconds if k in demand}
    else:
        own = _translated(job.seconds, job.pool, gpu_pools)
        own[kind] = job.seconds[job.kind]
        seconds = {k: value for k, value in own.items() if k in known or k == kind}
        translated = _translated(job.demand, job.pool, gpu_pools)
        if job.kind in job.demand:
            translated[kind] = job.demand[job.kind]
        demand = {k: translated[k] for k in seconds if k in translated}
    matching_job = Job(name=job.key, user=job.user, arrival=min(job.started, now), processing_time=seconds, demand=demand)
    per_pod = held_per_pod(job, gpu_slot=gpu_slots.get(kind, 1), cpu_slot=cpu_slot)
    count = job.pods * per_pod
    names = [f"running/{job.key}"] if count == 1 else [f"running/{job.key}/{index}" for index in range(count)]
    return _Held(machines=tuple(Machine(name=name, kind=kind) for name in names), per_pod=per_pod, ends=job.started + job.seconds[job.kind],
                 job=matching_job, value=math.nan if shares is None else job_value(matching_job, kind, shares))


def _by_key(job: RunningJob) -> str:
    return job.key


def _claimed(
    *, now: float, awaiting: Sequence[RunningJob], idle: Sequence[Machine], busy: Mapping[Machine, float], kinds: Collection[str],
    grid: Callable[[float], float] | None, gpu_pools: Mapping[str, int] | None, gpu_slots: Mapping[str, int], cpu_slot: Demand | None,
    shares: ShareModel | None, progress: dict[str, float],
) -> tuple[list[Machine], dict[Machine, float], tuple[str, ...]]:
    """The machines left idle and the busy ones once the running Jobs whose pods are not bound
    yet (``awaiting``) take theirs, and those that took an idle one: each, in the order they
    were unsuspended (then by key), takes its kind's machines free first (an idle one now, else
    the busy one freeing first), which are then busy until it ends there (its estimate from when
    it takes them, on the ω grid); one whose kind has no machine takes none. Their users'
    progress counts them as running."""
    free = list(idle)
    taken = dict(busy)
    known = frozenset(kinds)
    on_idle: list[str] = []
    for job in sorted(awaiting, key=lambda job: (job.started, job.key)):
        held = _held(job, now=now, known=known, gpu_pools=gpu_pools, gpu_slots=gpu_slots, cpu_slot=cpu_slot, shares=shares)
        kind, run = held.machines[0].kind, job.seconds[job.kind]
        for index in range(len(held.machines)):
            at = next((position for position, machine in enumerate(free) if machine.kind == kind), None)
            if at is not None:
                machine, ready = free.pop(at), now
                if not on_idle or on_idle[-1] != job.key:
                    on_idle.append(job.key)
            else:
                of_kind = [machine for machine in taken if machine.kind == kind]
                if not of_kind:
                    break
                machine = min(of_kind, key=lambda machine: (taken[machine], machine.name))
                ready = max(now, taken[machine])
            ends = ready + run
            taken[machine] = now + grid(ends - now) if grid is not None and ends > now else ends
            if shares is not None and index % held.per_pod == 0:
                progress[job.user] = progress.get(job.user, 0.0) + held.value
    return free, taken, tuple(on_idle)


def claimed_first(ends: Sequence[float], runs: Sequence[float], *, idle: int = 0) -> tuple[int, list[float]]:
    """A kind's idle machines and its busy machines' ends (seconds from now, sorted) once Jobs
    whose pods wait to be bound (unsuspended by hand; ``runs``: each pod's estimate, in the
    order they were unsuspended) take the first machines to free: an idle one, else the busy one
    freeing first, which then frees when that pod's run ends. What :func:`decide` counts,
    without the grid, for what the controller tells trial Jobs and slower starts."""
    left = sorted(ends)
    for run in runs:
        if idle > 0:
            idle -= 1
            bisect.insort(left, run)
        elif left:
            bisect.insort(left, max(left.pop(0), 0.0) + run)
    return idle, left


def _pools_key(gpu_pools: Mapping[str, int] | None) -> frozenset[tuple[str, int]] | None:
    return None if gpu_pools is None else frozenset(gpu_pools.items())


def _queue(
    *,
    now: float,
    jobs: Sequence[Job],
    matched: Matched,
    machines: Fleet,
    grid: Callable[[float], float],
) -> list[tuple[str, str, float]]:
    """The single-pod Jobs left waiting, matched once more on every machine (``machines``, the
    started ones busy until their end on the grid, as on the next pass): Lemma 3.1's order.
    (key, machine kind, expected start from now)."""
    started = matched.started
    started_names = {a.job.name for a in started}
    until = {machines.position_of[a.machine.name]: now + grid(a.finish - now) for a in started}
    hint: Hint | None = None
    if matched.problem is not None and matched.queues is not None:
        # Algorithm 2's one matching had every Job: the rows left, its arrays reused.
        rows = [row for row, job in enumerate(matched.problem.jobs) if job.name not in started_names]
        if not rows:
            return []
        problem = rows_on(matched.problem, rows, machines.with_available(until))
        # That matching less its starts stays optimal (allox.py) but for the started machines'
        # ω put on the grid: solve() takes it when it is certainly still the optimum.
        hint = _left_of(matched.problem, matched.queues, rows)
    elif matched.every_job is not None and len(matched.every_job.jobs) == len(jobs):
        # Algorithm 2's arrays of every waiting Job (``jobs``, in order: none was left out):
        # the rows left, as prepare_on would make them again.
        rows = [row for row, job in enumerate(matched.every_job.jobs) if job.name not in started_names]
        if not rows:
            return []
        problem = rows_on(matched.every_job, rows, machines.with_available(until))
    else:
        left = [job for job in jobs if job.name not in started_names]
        if not left:
            return []
        problem = prepare_on(machines.with_available(until), left)
    queues = solve(problem, hint=hint)
    # schedule()'s order (start, then machine name, then job) read off the solve's arrays:
    # making an Assignment per queued Job was half of planning the queue at 1,000 Jobs, and
    # sorting a tuple per Job most of the rest.
    counts = np.diff(queues.bounds)
    machine_of = np.repeat(np.arange(counts.shape[0]), counts)
    listed = problem.machines
    used = np.flatnonzero(counts).tolist()
    names = [listed[m].name for m in used]
    # Machines of one name rank alike (a caller may list a name twice), so that ties fall to
    # the job, then the machine, as schedule()'s tuples have them.
    dense = {name: rank for rank, name in enumerate(sorted(set(names)))}
    name_rank = np.zeros(counts.shape[0], dtype=np.int64)
    name_rank[used] = [dense[name] for name in names]
    order = np.lexsort((machine_of, queues.job, name_rank[machine_of], queues.start))
    kinds = problem.kinds
    kind_of = problem.machine_kind[machine_of[order]].tolist()
    jobs = problem.jobs
    return [(jobs[job].name, kinds[kind], start) for job, kind, start in zip(queues.job[order].tolist(), kind_of, (queues.start[order] - now).tolist())]


def _left_of(problem: Problem, queues: Queues, rows: Sequence[int]) -> Hint:
    """Each of ``rows``' kind and position from the end in ``queues``."""
    counts = np.diff(queues.bounds)
    machine = np.repeat(np.arange(counts.shape[0]), counts)
    kind = np.empty(len(problem.jobs), dtype=np.int64)
    position = np.empty(len(problem.jobs), dtype=np.int64)
    kind[queues.job] = problem.machine_kind[machine]
    position[queues.job] = queues.bounds[machine + 1] - np.arange(queues.job.shape[0])
    picked = np.asarray(rows, dtype=np.int64)
    return Hint(kind=kind[picked], position=position[picked])


def on_omega_grid(delay: float, *, step: float, ratio: float = 1.25) -> float:
    """A busy machine freeing ``delay`` seconds from now, as :func:`decide` counts it: rounded up
    onto the ω grid (``step`` 0: as it is)."""
    return _on_grid(delay, step=step, ratio=ratio) if step > 0 and delay > 0 else delay


def _on_grid(delay: float, *, step: float, ratio: float) -> float:
    """``delay`` rounded up: to a multiple of ``step`` up to ``10·step``, then to ``10·step·ratio^k``."""
    linear_end = 10 * step
    if delay <= linear_end or ratio <= 1:
        return math.ceil(delay / step - 1e-9) * step
    k = math.ceil(math.log(delay / linear_end, ratio) - 1e-9)
    return linear_end * ratio**k


def _count(machines: Iterable[Machine]) -> dict[str, int]:
    return dict(Counter(map(_KIND, machines)))


_KIND = attrgetter("kind")


@dataclass(frozen=True, slots=True)
class TrialChoice:
    """Where a trial Job starts now, and why (the Event's words). On the GPU configuration,
    ``gpu_by`` says what its GPU comes from: ``"idle"``, ``"preemption"`` (FitGpp preempts a
    best-effort pod for it: a trial pod that finds no GPU preempts whenever one is left, so the
    start takes that pod whichever frees a GPU first), ``"frees"`` (none is left to preempt: the
    first busy GPU freeing, ``gpu_wait`` seconds from now), or ``""`` (nothing known to free one)."""

    kind: str
    reason: str
    gpu_by: str = ""
    gpu_wait: float | None = None


@dataclass(frozen=True, slots=True)
class BestEffortGpus:
    """The best-effort pods holding GPUs on AlloX's nodes, as trial Jobs may count on them."""

    graces: tuple[float, ...] = ()  # the grace periods (s) of those FitGpp may still preempt
    leaving: int = 0  # those already terminating (preempted, or deleted): their GPUs free by themselves


def preemptible_for_trials(found: BestEffortGpus, *, owed: int) -> list[float]:
    """The grace periods of the best-effort pods a new trial Job may count on FitGpp preempting,
    shortest first. ``owed``: the GPU pods of trial Jobs started on the GPU configuration and not
    bound yet; they take the pods already leaving first (their own victims, or GPUs freeing
    anyway), then preemptible ones, the shortest grace first (FitGpp's score weighs the grace
    period most, ``preemption.gracePeriodWeight``), as FitGpp preempts for every trial pod that
    finds no GPU whatever it was told. Trial pods themselves are never counted: FitGpp never
    preempts them."""
    graces = sorted(found.graces)
    return graces[max(0, owed - found.leaving):]


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
      preemption (``preemption_seconds``: the victim's grace period, its checkpoint; None when no
      best-effort pod is left to preempt for this Job, see :func:`preemptible_for_trials`), or
      after the first busy GPU frees (``gpu_free_in``), whichever comes first;
    - else on the GPU configuration: kube-scheduler and FitGpp preempt a best-effort pod if one
      is left, else its pod waits for the first busy GPU (the reason says which).

    None when the Job has no estimate for any kind it could run on here."""
    gpu = seconds.get("gpu")
    cpu = seconds.get("cpu")
    if gpu is not None and idle.get("gpu", 0) > 0:
        return TrialChoice("gpu", f"on a free GPU, done in ~{duration(gpu)}", gpu_by="idle", gpu_wait=0.0)
    waits = [w for w in (preemption_seconds, gpu_free_in) if w is not None]
    wait = min(waits) if waits else None
    gpu_done = gpu + wait if gpu is not None and wait is not None else None
    checkpoint = preemption_seconds is not None and (gpu_free_in is None or preemption_seconds <= gpu_free_in)
    if cpu is not None and idle.get("cpu", 0) > 0 and (gpu_done is None or cpu < gpu_done):
        after = "" if gpu_done is None else (
            f"; on gpu it would be done in ~{duration(gpu_done)}, "
            + ("after a best-effort Job checkpoints" if checkpoint else "after the first busy GPU frees"))
        return TrialChoice("cpu", f"done in ~{duration(cpu)}{after}")
    if gpu is not None:
        if gpu_done is None:
            by, why = "", "its pod waits for a GPU, as none is expected to free and no best-effort Job is left to preempt"
        elif preemption_seconds is None:
            by, why = "frees", (f"done in ~{duration(gpu_done)}, starting when the first busy GPU frees, in "
                                f"~{duration(wait or 0.0)} (no best-effort Job is left to preempt)")
        elif checkpoint:
            by, why = "preemption", f"done in ~{duration(gpu_done)}, counting the checkpoint of the best-effort Job its pod preempts"
        else:
            by, why = "preemption", (f"done in ~{duration(gpu_done)} (a busy GPU frees in ~{duration(wait or 0.0)}, before "
                                     "the best-effort Job its pod preempts has checkpointed)")
        if cpu is not None:
            why += f"; on cpu it would be done in ~{duration(cpu)}" if idle.get("cpu", 0) > 0 else "; no CPU slot is free"
        return TrialChoice("gpu", why, gpu_by=by, gpu_wait=wait)
    if cpu is not None and idle.get("cpu", 0) > 0:
        return TrialChoice("cpu", f"done in ~{duration(cpu)}")
    return None
