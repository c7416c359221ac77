"""The simulator's registry of scheduling policies, and what a policy factory gets.

Policies are registered for one *job model*: ``"demand"`` (jobs with one resource demand, run
by :class:`~scheduler.simulator.fitgpp.simulation.Simulation`: the ``fitgpp`` workload and
traces; :mod:`scheduler.simulator.fitgpp.policies`) or ``"interchangeable"`` (jobs with a
processing time per configuration, CPU or GPU, run by
:class:`~scheduler.simulator.allox.simulation.InterchangeableSimulation`: the ``allox``
workload; :mod:`scheduler.simulator.allox.policies`)::

    register_policy("fifo", FifoPolicy)
    register_policy("allox", factory, model="interchangeable")

A name asked of the other model is refused with the model it belongs to
(:class:`~scheduler.simulator.errors.UnknownPolicy`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Final, Literal

from scheduler.preemption.model import FitGppSettings
from scheduler.simulator.errors import UnknownPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxOptions:
    """Settings of the interchangeable-job policies: AlloX's fairness knob ``alpha`` (§3.3.3;
    the paper's simulations use 0.1), AlloX+'s waiting ``timeout`` in seconds (§4.4; the
    paper gives no value, README.md says how ours was chosen) and ``omega_grid_seconds``, the
    grid AlloX admission rounds busy machines' ω onto (None: admission's own default, what
    the live controller uses; 0: exact)."""

    alpha: float = 0.1
    timeout: float = 4 * 3600.0
    omega_grid_seconds: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyOptions:
    """What a policy factory gets: FitGpp's settings (P applies to every preemptive policy),
    the run's seed (for RAND's order and FitGpp's fallback) and, for the interchangeable-job
    policies, :class:`AlloxOptions`."""

    settings: FitGppSettings
    seed: int = 0
    allox: AlloxOptions = AlloxOptions()


JobModel = Literal["demand", "interchangeable"]
JOB_MODELS: Final[tuple[JobModel, ...]] = ("demand", "interchangeable")
_REGISTRY: dict[str, tuple[JobModel, Callable[[PolicyOptions], object]]] = {}


def register_policy(name: str, factory: Callable[[PolicyOptions], object], *, model: JobModel = "demand") -> None:
    """Make ``name`` available to the simulator and ``cellfit simulate --policies``, for the
    workloads of job model ``model``. The factory returns a :class:`Policy` for ``"demand"``
    and an :class:`~scheduler.simulator.allox.policies.InterchangeablePolicy` for
    ``"interchangeable"``."""
    if model not in JOB_MODELS:
        raise ValueError(f"unknown job model {model!r}")
    if name in _REGISTRY:
        raise ValueError(f"policy {name!r} is already registered")
    _REGISTRY[name] = (model, factory)


def policy_names(model: JobModel = "demand") -> list[str]:
    """The policies registered for ``model``, in registration order."""
    return [name for name, (registered, _) in _REGISTRY.items() if registered == model]


def policy_model(name: str) -> JobModel | None:
    """The job model ``name`` is registered for; None if nobody registered it."""
    entry = _REGISTRY.get(name)
    return entry[0] if entry else None


def build_policy(name: str, options: PolicyOptions, *, model: JobModel) -> object:
    """The factory's product for ``name``; :class:`UnknownPolicy` if ``name`` is not registered
    for ``model`` (the message lists the policies that are)."""
    entry = _REGISTRY.get(name)
    if entry is None or entry[0] != model:
        raise UnknownPolicy(name, policy_names(model), other_model=entry[0] if entry else None)
    return entry[1](options)
