"""What the ``allox`` tool computes for one instance, without any I/O: the schedule a policy
produces and its completion times, as the JSON-ready document the tool prints."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

from scheduler.matching.allox import AlloxScheduler
from scheduler.matching.alloxplus import AlloxPlusScheduler
from scheduler.matching.capacity import default_demands
from scheduler.matching.fairness import DemandShare, ShareModel
from scheduler.matching.model import KIND_CPU, Assignment, Demand
from scheduler.matching.plan import plan
from scheduler.matching.policy import Policy
from scheduler.matching.schema import Instance
from scheduler.matching.solve import schedule

PolicyName = Literal["allox", "allox+"]
POLICIES: Final[tuple[PolicyName, ...]] = ("allox", "allox+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    schedule: tuple[Assignment, ...]

    @property
    def total_completion_time(self) -> float:
        return math.fsum(assignment.completion_time for assignment in self.schedule)

    @property
    def average_completion_time(self) -> float | None:
        return self.total_completion_time / len(self.schedule) if self.schedule else None

    def to_document(self) -> dict[str, object]:
        return {
            "schedule": [
                {
                    "job": a.job.name,
                    "machine": a.machine.name,
                    "kind": a.kind,
                    "start": a.start,
                    "finish": a.finish,
                }
                for a in self.schedule
            ],
            "total_completion_time": self.total_completion_time,
            "average_completion_time": self.average_completion_time,
        }


def run_instance(instance: Instance, *, policy: PolicyName = "allox", timeout: float = math.inf) -> Report:
    """Schedule every job of ``instance``.

    AlloX with α = 1 and every job already arrived is one matching (Lemma 3.1 with §3.2's
    delays), and playing Algorithm 2 forward would give a schedule of the same total (a
    started job's machine keeps the rest of the matching optimal), so it is solved directly.
    Otherwise the policy is played forward over the arrivals.
    """
    if policy == "allox" and instance.alpha >= 1.0 and instance.all_arrived:
        result = schedule(
            jobs=instance.jobs, machines=instance.machines, now=instance.now, busy_until=instance.busy_until
        )
        return Report(schedule=tuple(result))
    chosen: Policy
    if policy == "allox":
        chosen = AlloxScheduler(alpha=instance.alpha, shares=_shares(instance))
    else:
        chosen = AlloxPlusScheduler(timeout=timeout)
    result = plan(
        policy=chosen,
        jobs=instance.jobs,
        machines=instance.machines,
        now=instance.now,
        busy_until=instance.busy_until,
    )
    return Report(schedule=tuple(result))


def _shares(instance: Instance) -> ShareModel | None:
    # Without a capacity every job holds one machine: the policy's default machine share.
    if instance.capacity is None:
        return None
    # A job without a CPU demand holds one CPU slot; its size is not in the file, so the
    # largest CPU demand any job states stands in for it.
    slot = max(
        (demand.cpu for job in instance.jobs for kind, demand in job.demand.items() if kind == KIND_CPU),
        default=1.0,
    )
    return DemandShare(capacity=instance.capacity, default_demand=default_demands(cpu_slot=Demand(cpu=slot)))
