"""The values AlloX decides on: machines, jobs with one processing time per machine kind, and
the assignments it returns.

Times are plain floats in whatever unit the caller uses (the simulator uses seconds, the paper
minutes); AlloX only adds and compares them. A job that cannot use a kind simply has no entry for
it, so "forbidden" never needs a sentinel number that could leak into a sum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Mapping

KIND_GPU: Final = "gpu"
KIND_CPU: Final = "cpu"

_NO_DEMAND: Final[Mapping[str, "Demand"]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    """One unit a job runs on alone: a whole GPU, or a CPU slot the size of the CPU
    configuration (§3.1 assumes each job uses an entire GPU or an entire CPU)."""

    name: str
    kind: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Demand:
    """What one configuration of a job holds while it runs, in the units of the cluster's
    :class:`~scheduler.matching.fairness.Capacity` (only ratios to it matter)."""

    cpu: float = 0.0
    gpu: float = 0.0
    memory: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A job AlloX may place on any kind it has a processing time for.

    ``demand`` maps a kind to that configuration's resources; it only feeds fairness (§3.3.2),
    and a kind without an entry falls back to the share model's default.
    """

    name: str
    user: str
    arrival: float
    processing_time: Mapping[str, float]
    demand: Mapping[str, Demand] = field(default_factory=lambda: _NO_DEMAND)

    def time_on(self, kind: str) -> float:
        """Processing time on ``kind``; infinite where the job has no configuration for it."""
        return self.processing_time.get(kind, math.inf)

    def can_run_on(self, kind: str) -> bool:
        return kind in self.processing_time

    @property
    def fastest_time(self) -> float:
        return min(self.processing_time.values(), default=math.inf)


@dataclass(frozen=True, slots=True, kw_only=True)
class Assignment:
    """Job ``job`` runs on ``machine`` from ``start``; ``finish`` is what the estimate predicts."""

    job: Job
    machine: Machine
    start: float
    finish: float

    @classmethod
    def starting(cls, job: Job, machine: Machine, now: float) -> Assignment:
        """``job`` started on ``machine`` at ``now``, finishing after its time on that kind."""
        return cls(job=job, machine=machine, start=now, finish=now + job.processing_time[machine.kind])

    @property
    def kind(self) -> str:
        return self.machine.kind

    @property
    def completion_time(self) -> float:
        """Measured from the job's arrival, as AlloX's objective (average JCT) counts it."""
        return self.finish - self.job.arrival
