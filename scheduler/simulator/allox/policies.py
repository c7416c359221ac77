"""The interchangeable-job policies of ``cellfit simulate``: AlloX, AlloX+ and the paper's
baselines (EuroSys'20 §2.2, §4.4, §5.1.1), driven through
:class:`~scheduler.simulator.allox.simulation.InterchangeableSimulation`.

``allox`` and ``allox+`` are AlloX admission itself: at every scheduling event the simulation's
state is translated into the inputs of :func:`scheduler.matching.admission.decide` — the
function the live placer controller calls — and its starts are carried out, so a result
measured here is a result of the live decision (DESIGN.md, "one engine, two drivers"). The
baselines drive the policy objects of :mod:`scheduler.matching` directly.

| name | what decides | estimates |
|---|---|---|
| ``allox`` | :func:`~scheduler.matching.admission.decide` ``policy="allox"`` (Algorithm 2, α) | yes |
| ``allox+`` | :func:`~scheduler.matching.admission.decide` ``policy="allox+"`` (timeout) | yes |
| ``es`` | :class:`~scheduler.matching.EqualShareScheduler` | yes |
| ``drff`` | :class:`~scheduler.matching.DrfScheduler` ``order="fcfs"`` | no: users state the configuration they prefer |
| ``drfs`` | :class:`~scheduler.matching.DrfScheduler` ``order="sjf"`` | yes |
| ``drfa`` | :class:`~scheduler.matching.DrfaScheduler` (mean speedup of the jobs it sees) | yes |
| ``srpt`` | :func:`~scheduler.matching.srpt_allocation` at every event, preemptive | yes |
| ``bf`` | :class:`~scheduler.matching.BestFitScheduler` | no: the preferred configuration only |
| ``jsq+`` | :class:`~scheduler.matching.JsqPlusScheduler` | yes |
| ``sjf+`` | :class:`~scheduler.matching.SjfPlusScheduler` | yes |

A policy that needs estimates sees each job's estimated times — the estimator's, once the
job's sampling runs are done, or its user's (``cellfit.io/estimate``); one that does not (DRFF, BF: §5.3.2 "DRFF does not
require estimation") sees the true times but reads nothing from them except which
configuration is faster — the preference a user states.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, Sequence, cast

from scheduler.matching.admission import AdmissionDecision, AdmissionPolicy, RunningJob, WaitingJob, decide
from scheduler.matching.baselines import (
    BestFitScheduler,
    DrfaScheduler,
    DrfScheduler,
    EqualShareScheduler,
    JsqPlusScheduler,
    SjfPlusScheduler,
    srpt_allocation,
)
from scheduler.matching.capacity import NodeResources
from scheduler.matching.fairness import Capacity, ShareModel
from scheduler.matching.model import Assignment, Job, Machine
from scheduler.matching.policy import Policy as MatchingPolicy
from scheduler.simulator.policy_registry import AlloxOptions, PolicyOptions, build_policy, policy_names, register_policy

if TYPE_CHECKING:
    from scheduler.simulator.allox.workload import AlloxWorkload


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmissionInputs:
    """One instant of a simulation as AlloX admission's inputs
    (:meth:`InterchangeableView.admission_inputs`)."""

    now: float
    waiting: tuple[WaitingJob, ...]
    running: tuple[RunningJob, ...]
    free_nodes: tuple[NodeResources, ...]
    capacity: Capacity
    gpu_pools: Mapping[str, int] | None = None  # under HiveD: each VC's GPU machines
    gpu_slots: Mapping[str, int] | None = None  # under HiveD: the GPUs one of them holds, per machine kind


class InterchangeableView(Protocol):
    """What a policy reads and calls of the simulation running it
    (:class:`~scheduler.simulator.allox.simulation.InterchangeableSimulation`, whose methods
    say what each returns)."""

    @property
    def now(self) -> float: ...

    @property
    def workload(self) -> AlloxWorkload: ...

    @property
    def shares(self) -> ShareModel: ...

    @property
    def machines(self) -> Sequence[Machine]: ...

    def free_machines(self) -> list[Machine]: ...

    def waiting_jobs(self) -> list[Job]: ...

    def busy_until(self) -> dict[Machine, float]: ...

    def running(self) -> list[Assignment]: ...

    def in_service(self) -> list[tuple[Job, float, Machine | None]]: ...

    def sampling(self, machine: Machine) -> bool: ...

    def admission_inputs(self) -> AdmissionInputs: ...

    def start(self, job_name: str, machine: Machine) -> None: ...

    def stop(self, job_name: str) -> None: ...


class InterchangeablePolicy(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def preemptive(self) -> bool: ...

    @property
    def needs_estimates(self) -> bool:
        """Whether its jobs must be profiled (§4.1) before it can schedule them."""
        ...

    def schedule(self, sim: InterchangeableView) -> None:
        """Start (and, if preemptive, stop) jobs for the current instant (``sim.now``)."""
        ...


class MatchingDriver:
    """Drives a :class:`scheduler.matching.policy.Policy`: whenever a machine is free and a job
    waits, one ``on_machine_free`` call with the idle machines, the waiting jobs, every busy
    machine's expected end and the running jobs; every decision is started as given (the
    simulation refuses an impossible one). ``build`` makes the policy object once the cluster
    is known (fairness needs its capacity)."""

    preemptive = False

    def __init__(self, name: str, build: Callable[[ShareModel], MatchingPolicy], *, needs_estimates: bool) -> None:
        self.name = name
        self.needs_estimates = needs_estimates
        self._build = build
        self._inner: MatchingPolicy | None = None

    @property
    def inner(self) -> MatchingPolicy | None:
        return self._inner

    def schedule(self, sim: InterchangeableView) -> None:
        if self._inner is None:
            self._inner = self._build(sim.shares)
        free = sim.free_machines()
        if not free:
            return
        decisions = self._inner.on_machine_free(
            now=sim.now,
            free_machines=free,
            pending_jobs=sim.waiting_jobs(),
            busy_until=sim.busy_until(),
            running=sim.running(),
        )
        for assignment in decisions:
            if assignment.start != sim.now:
                raise AssertionError(f"{self.name}: job {assignment.job.name!r} starts at {assignment.start}, not now")
            sim.start(assignment.job.name, assignment.machine)


class AdmissionDriver:
    """AlloX admission (:func:`scheduler.matching.admission.decide`, the live placer
    controller's call) at every instant where a machine is free and a job waits: the
    simulation's waiting jobs, running jobs and free capacity
    (:meth:`~scheduler.simulator.allox.simulation.InterchangeableSimulation.admission_inputs`)
    in, and each start carried out on an idle machine of the kind it names. Admission's
    machines are cut from free capacity, as live, so their names are not the simulation's; all
    idle machines of a kind are alike (ω = now), and the kind is what a start decides — as
    live, where the pods of an unsuspended Job go wherever kube-scheduler puts them.

    ``options.omega_grid_seconds`` None calls ``decide`` with its own (the live) grid for busy
    machines' ω; a number overrides it (0: exact ω)."""

    preemptive = False
    needs_estimates = True

    def __init__(self, name: str, policy: AdmissionPolicy, options: AlloxOptions) -> None:
        self.name = name
        self._policy = policy
        self._options = options

    def schedule(self, sim: InterchangeableView) -> None:
        free: dict[str, list[Machine]] = {}
        for machine in reversed(sim.free_machines()):
            free.setdefault(machine.kind, []).append(machine)  # reversed: pop() gives cluster order
        if not free:
            return
        decision = self.decision(sim)
        for start in decision.starts:
            machines = free.get(start.kind)
            if not machines:
                # Admission counted a machine that a sampling run holds while its pod waits for
                # a node (the free capacity it reads, as live, has no pending pod in it). Live,
                # the Job would start and its pod wait behind the sampling pod; here the job
                # waits in admission's queue until a machine of its kind is idle.
                continue
            sim.start(start.key, machines.pop())


    def decision(self, sim: InterchangeableView) -> AdmissionDecision:
        """What AlloX admission decides on the simulation's state now (no queue planned): the
        live placer controller's call, with the machines it gives it (under HiveD each VC's, and
        the GPUs one of them holds, as placer/guarantee.py ``vc_machines`` sizes them)."""
        inputs = sim.admission_inputs()
        grid = self._options.omega_grid_seconds
        admit = decide if grid is None else functools.partial(decide, omega_grid_seconds=grid)
        return admit(
            now=inputs.now,
            waiting=inputs.waiting,
            running=inputs.running,
            free_nodes=inputs.free_nodes,
            capacity=inputs.capacity,
            alpha=self._options.alpha,
            policy=self._policy,
            reserved_cpu_per_gpu=sim.workload.reserved_cpu_per_gpu,
            allox_plus_timeout=self._options.timeout,
            plan_queue=False,
            gpu_pools=inputs.gpu_pools,
            gpu_slots=inputs.gpu_slots,
        )


class SrptDriver:
    """SRPT (§5.1.1), the preemptive reference: at every arrival and completion,
    :func:`scheduler.matching.srpt_allocation` decides which jobs run where given the work
    they have left (estimated), over the machines samples do not hold; running jobs it drops
    are preempted and keep their progress, jobs it moves to another kind migrate, and a job it
    keeps on the same kind stays on its machine. Preemption and migration cost nothing — what
    makes it unrealistic, and a reference to beat."""

    name = "srpt"
    preemptive = True
    needs_estimates = True

    def schedule(self, sim: InterchangeableView) -> None:
        machines = [machine for machine in sim.machines if not sim.sampling(machine)]
        jobs = sim.in_service()
        allocation = srpt_allocation(machines=machines, remaining=[(job, left) for job, left, _ in jobs])
        wanted = {job.name: machine.kind for job, machine in allocation}
        kept: set[str] = set()
        for job, _, machine in jobs:
            if machine is None:
                continue
            if wanted.get(job.name) == machine.kind:
                kept.add(job.name)
            else:
                sim.stop(job.name)
        free: dict[str, list[Machine]] = {}
        for machine in reversed(sim.free_machines()):
            free.setdefault(machine.kind, []).append(machine)  # reversed: pop() gives cluster order
        for job, machine in allocation:
            if job.name not in kept:
                sim.start(job.name, free[machine.kind].pop())


def _matching(name: str, build: Callable[[PolicyOptions, ShareModel], MatchingPolicy], *, needs_estimates: bool = True) -> None:
    register_policy(
        name,
        lambda options: MatchingDriver(name, lambda shares: build(options, shares), needs_estimates=needs_estimates),
        model="interchangeable",
    )


register_policy("allox", lambda options: AdmissionDriver("allox", "allox", options.allox), model="interchangeable")
register_policy("allox+", lambda options: AdmissionDriver("allox+", "allox+", options.allox), model="interchangeable")
_matching("es", lambda options, shares: EqualShareScheduler())
_matching("drff", lambda options, shares: DrfScheduler(order="fcfs", shares=shares), needs_estimates=False)
_matching("drfs", lambda options, shares: DrfScheduler(order="sjf", shares=shares))
_matching("drfa", lambda options, shares: DrfaScheduler())
register_policy("srpt", lambda options: SrptDriver(), model="interchangeable")
_matching("bf", lambda options, shares: BestFitScheduler(), needs_estimates=False)
_matching("jsq+", lambda options, shares: JsqPlusScheduler())
_matching("sjf+", lambda options, shares: SjfPlusScheduler())

# The policies whose result depends on α (an α sweep runs the others once).
ALPHA_POLICIES = frozenset({"allox"})
# The policies that decide through AlloX admission, on its grid of busy machines' ends.
ADMISSION_POLICIES = frozenset({"allox", "allox+"})
# The paper's §5 set, in its figures' order.
PAPER_POLICIES = ("allox", "allox+", "es", "drff", "drfs", "drfa", "srpt")


def make_interchangeable_policy(name: str, options: PolicyOptions) -> InterchangeablePolicy:
    """The policy ``name`` for interchangeable jobs; :class:`UnknownPolicy` otherwise."""
    return cast(InterchangeablePolicy, build_policy(name, options, model="interchangeable"))


def interchangeable_policy_names() -> list[str]:
    return policy_names("interchangeable")
