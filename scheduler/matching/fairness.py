"""Per-user progress and the fairness knob α (§3.3.2–3.3.3, §4.4).

A job's *dominant share* is that of its faster configuration: ``max(cpu/C, gpu/G, memory/M)``
(§3.3.2; the paper writes ``m_c`` in the GPU case, a typo for the GPU configuration's memory
``m_g``). Its *value* is that share, discounted by ``p_fast / p_placed`` when it runs on the slower
configuration, so that value × running time is the same on either: a user's progress (the sum
of her running jobs' values) is her instantaneous throughput. Only the ``ceil(α·n)`` users with
the lowest progress are offered to the matching.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, Sequence

from scheduler.matching.model import Assignment, Demand, Job, Machine

# α·n is computed in floating point, where 0.3 × 20 is 6.000000000000001; rounding first keeps
# the paper's own example (20 users, α = 0.3 → 6 users) exact.
_ALPHA_DIGITS = 9


@dataclass(frozen=True, slots=True, kw_only=True)
class Capacity:
    """The cluster's total CPU, GPU and memory, in the units jobs' demands use."""

    cpu: float
    gpu: float
    memory: float


class ShareModel(Protocol):
    def usage(self, job: Job, kind: str) -> Mapping[str, float]:
        """Fraction of each resource of the cluster ``job`` holds while it runs on ``kind``."""
        ...

    def dominant_share(self, job: Job, kind: str) -> float:
        """The largest of those fractions (DRF's dominant share)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class MachineShare:
    """Share when jobs give no demands: one machine of a kind is ``1/count`` of that kind, which
    is the dominant share of a job that holds a whole GPU or a whole CPU slot."""

    machines_per_kind: Mapping[str, int]

    @classmethod
    def of(cls, machines: Iterable[Machine]) -> MachineShare:
        counts: dict[str, int] = {}
        for machine in machines:
            counts[machine.kind] = counts.get(machine.kind, 0) + 1
        return cls(machines_per_kind=counts)

    def usage(self, job: Job, kind: str) -> Mapping[str, float]:
        count = self.machines_per_kind.get(kind, 0)
        return {kind: 1.0 / count} if count else {}

    def dominant_share(self, job: Job, kind: str) -> float:
        return max(self.usage(job, kind).values(), default=0.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class DemandShare:
    """DRF's dominant share of each configuration's demand (§3.3.2). ``default_demand`` stands in
    for a job that gives no demand for a kind (see :func:`scheduler.matching.capacity.default_demands`)."""

    capacity: Capacity
    default_demand: Mapping[str, Demand]

    def usage(self, job: Job, kind: str) -> Mapping[str, float]:
        demand = job.demand.get(kind) or self.default_demand.get(kind) or Demand()
        return {
            name: used / total
            for name, used, total in (
                ("cpu", demand.cpu, self.capacity.cpu),
                ("gpu", demand.gpu, self.capacity.gpu),
                ("memory", demand.memory, self.capacity.memory),
            )
            if total > 0
        }

    def dominant_share(self, job: Job, kind: str) -> float:
        # max(usage(...).values()) without the dict: asked for every running and started Job.
        demand = job.demand.get(kind) or self.default_demand.get(kind) or Demand()
        capacity = self.capacity
        share: float | None = None
        for used, total in ((demand.cpu, capacity.cpu), (demand.gpu, capacity.gpu), (demand.memory, capacity.memory)):
            if total > 0:
                ratio = used / total
                share = ratio if share is None or ratio > share else share
        return 0.0 if share is None else share


def preferred_kind(job: Job) -> str:
    """The kind with the shortest processing time (ties: the kind's name, for determinism)."""
    return min(job.processing_time, key=lambda kind: (job.processing_time[kind], kind))


def job_value(job: Job, kind: str, shares: ShareModel) -> float:
    """§3.3.2: the dominant share of the faster configuration, discounted by ``p_fast/p_kind``
    when the job runs on ``kind`` instead."""
    fastest = preferred_kind(job)
    # A Python float whatever the share model returns: progress adds up in float64 in the walk's
    # C run too, where a NumPy float32 kept its own type in Python and ranked users otherwise.
    share = float(shares.dominant_share(job, fastest))
    if kind == fastest:
        return share
    placed = job.time_on(kind)
    # Equal zero times make the two configurations equally good: no discount.
    return share if placed == 0 else share * job.processing_time[fastest] / placed


def user_progress(running: Iterable[Assignment], shares: ShareModel) -> dict[str, float]:
    """Each user's progress: the sum of the values of her running jobs."""
    progress: dict[str, float] = {}
    for assignment in running:
        user = assignment.job.user
        progress[user] = progress.get(user, 0.0) + job_value(assignment.job, assignment.kind, shares)
    return progress


def considered_count(*, alpha: float, users: int) -> int:
    """``ceil(α·n)`` users, and at least one while any user waits (α = 0 still schedules the
    user furthest behind, which is what Lemma 3.4's α = 0 case describes)."""
    if users == 0:
        return 0
    return max(1, min(users, math.ceil(round(alpha * users, _ALPHA_DIGITS))))


def rank_users(users: Iterable[str], progress: Mapping[str, float]) -> list[str]:
    """Users from lowest to highest progress; ties by name so the choice is reproducible."""
    return sorted(set(users), key=lambda user: (progress.get(user, 0.0), user))


def lowest_progress_users(
    *, users: Iterable[str], progress: Mapping[str, float], alpha: float
) -> Sequence[str]:
    """The set A_α of Algorithm 2, line 2."""
    ranking = rank_users(users, progress)
    return ranking[: considered_count(alpha=alpha, users=len(ranking))]
