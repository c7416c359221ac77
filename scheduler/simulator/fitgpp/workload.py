"""What the simulator runs: jobs (from a trace or the paper's synthetic workload) on a cluster.

The ``fitgpp`` workload follows arXiv:1902.01613 §4.1–4.2: 84 nodes of 32 CPUs, 256 GB and 8
GPUs; 30% TE jobs; execution times from truncated normals (TE mean 5 min cut at 30 min, BE
mean 30 min cut at 24 h); grace periods (GP) mean 3 min cut at 20 min. The paper fits CPU, RAM
and GPU demands to its cluster's trace (its Fig. 2, not in the text) without giving them; the
values below are ours, calibrated so that FIFO lands near the paper's FIFO row of Table 1 (see
README.md for the calibration runs). Arrival times are not part of the workload: they come
from a FIFO run that holds the load at 2.0 (:mod:`scheduler.simulator.fitgpp.simulation`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Final

import numpy as np

from scheduler.core.resources import Resources
from scheduler.preemption.model import JobClass
from scheduler.simulator.cluster import GIB, MINUTE, ClusterSpec
from scheduler.simulator.distributions import TruncatedNormal
from scheduler.simulator.errors import InvalidWorkload

@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """One job: ``submit_time``, ``duration`` (work to do) and ``grace_period`` in seconds,
    ``demand`` in cellfit's units. ``origin`` says where it came from for error messages (a
    trace line) and is not part of its identity."""

    job_id: str
    submit_time: float
    job_class: JobClass
    demand: Resources
    duration: float
    grace_period: float
    origin: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassProfile:
    """The distributions of one job class: duration in minutes, CPU in cores, memory in GiB,
    GPUs in devices. CPU, memory and GPUs are rounded to whole units after sampling (DL jobs
    ask for whole cores and devices), never below 1 core and 1 GiB."""

    duration_minutes: TruncatedNormal
    cpu_cores: TruncatedNormal
    memory_gib: TruncatedNormal
    gpus: TruncatedNormal


# --- the calibrated fitgpp workload (README.md "Calibration") --------------------------------
# Durations: the paper's means and upper cuts; the spreads and lower cuts are ours. A TE job
# shorter than a minute is not a trial anyone monitors, and the paper's trace only kept jobs
# that ran more than 3 minutes, so durations are cut below at 1 minute (TE) and 3 minutes (BE).
TRIAL_PROFILE: Final = ClassProfile(
    duration_minutes=TruncatedNormal(mean=5.0, sd=3.0, low=0.75, high=30.0),
    cpu_cores=TruncatedNormal(mean=4.0, sd=8.0, low=1.0, high=32.0),
    memory_gib=TruncatedNormal(mean=24.0, sd=60.0, low=1.0, high=256.0),
    gpus=TruncatedNormal(mean=1.0, sd=3.0, low=0.0, high=8.0),
)
BEST_EFFORT_PROFILE: Final = ClassProfile(
    duration_minutes=TruncatedNormal(mean=30.0, sd=12.0, low=5.0, high=24 * 60.0),
    cpu_cores=TruncatedNormal(mean=12.0, sd=14.0, low=1.0, high=32.0),
    memory_gib=TruncatedNormal(mean=96.0, sd=120.0, low=1.0, high=256.0),
    gpus=TruncatedNormal(mean=2.0, sd=4.0, low=0.0, high=8.0),
)
# §4.2: GP mean 3 min, cut at 20 min. The spread is ours: sd 1.5 min reproduces LRTP's
# re-scheduling intervals of Table 2 (p50 4, p95 5, p99 7 min at one-minute ticks), which are
# about one GP for a victim that resumes at once.
GRACE_PERIOD_MINUTES: Final = TruncatedNormal(mean=3.0, sd=1.5, low=0.0, high=20.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitGppWorkload:
    """The paper's synthetic workload (§4.2). ``gp_scale`` multiplies the GP distribution's
    mean, sd and cut (Fig. 7's "2.0", "4.0", "8.0")."""

    te_share: float = 0.3
    trial: ClassProfile = TRIAL_PROFILE
    best_effort: ClassProfile = BEST_EFFORT_PROFILE
    grace_period_minutes: TruncatedNormal = GRACE_PERIOD_MINUTES
    gp_scale: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.te_share <= 1.0:
            raise InvalidWorkload(f"{self.te_share!r} is not a fraction in [0, 1]", field="te_share")
        if not math.isfinite(self.gp_scale) or self.gp_scale < 0:
            raise InvalidWorkload(f"{self.gp_scale!r} is not a non-negative number", field="gp_scale")

    def with_changes(self, **changes: object) -> FitGppWorkload:
        return replace(self, **changes)  # type: ignore[arg-type]

    def with_parameter(self, key: str, value: float) -> FitGppWorkload:
        """One distribution parameter changed, by a dotted name: ``te.gpus.mean``,
        ``be.duration.sd``, ``gp.high`` (classes ``te``/``be``; attributes ``duration``
        (minutes), ``cpu`` (cores), ``memory`` (GiB), ``gpus``; ``gp`` is the grace period in
        minutes; fields ``mean``, ``sd``, ``low``, ``high``). For sensitivity runs."""
        parts = key.split(".")
        fields = ("mean", "sd", "low", "high")
        if len(parts) == 2 and parts[0] == "gp" and parts[1] in fields:
            return replace(self, grace_period_minutes=replace(self.grace_period_minutes, **{parts[1]: value}))
        attributes = {"duration": "duration_minutes", "cpu": "cpu_cores", "memory": "memory_gib", "gpus": "gpus"}
        if len(parts) != 3 or parts[0] not in ("te", "be") or parts[1] not in attributes or parts[2] not in fields:
            raise InvalidWorkload(f"{key!r} is not a workload parameter (e.g. te.gpus.mean, be.duration.sd, gp.mean)")
        profile = self.trial if parts[0] == "te" else self.best_effort
        attribute = attributes[parts[1]]
        distribution: TruncatedNormal = replace(getattr(profile, attribute), **{parts[2]: value})
        changed: ClassProfile = replace(profile, **{attribute: distribution})
        return replace(self, trial=changed) if parts[0] == "te" else replace(self, best_effort=changed)

    def generate(self, *, jobs: int, seed: int, cluster: ClusterSpec) -> list[JobSpec]:
        """``jobs`` jobs, all submitted at 0 (arrival times come from the FIFO load run).

        Every attribute has its own random stream derived from ``seed``, so changing one
        distribution (a GP scale, a TE share) leaves the other attributes of every job as they
        were, and sweeps compare like with like.
        """
        if jobs < 0:
            raise InvalidWorkload(f"{jobs} is negative", field="jobs")
        streams = np.random.SeedSequence([seed, 0x46697447]).spawn(7)
        draw = [np.random.default_rng(stream).random(jobs) for stream in streams]
        trial = draw[0] < self.te_share
        duration = np.where(
            trial,
            self.trial.duration_minutes.quantiles(draw[1]),
            self.best_effort.duration_minutes.quantiles(draw[1]),
        )
        cpu = np.where(trial, self.trial.cpu_cores.quantiles(draw[2]), self.best_effort.cpu_cores.quantiles(draw[2]))
        memory = np.where(
            trial, self.trial.memory_gib.quantiles(draw[3]), self.best_effort.memory_gib.quantiles(draw[3])
        )
        gpus = np.where(trial, self.trial.gpus.quantiles(draw[4]), self.best_effort.gpus.quantiles(draw[4]))
        grace = self.grace_period_minutes.scaled(self.gp_scale).quantiles(draw[5])
        node = cluster.node
        out: list[JobSpec] = []
        width = len(str(max(jobs - 1, 0)))
        for i in range(jobs):
            demand = Resources(
                cpu_millis=min(max(1, round(float(cpu[i]))) * 1000, node.cpu_millis),
                memory_bytes=min(max(1, round(float(memory[i]))) * GIB, node.memory_bytes),
                gpus=min(max(0, round(float(gpus[i]))), node.gpus),
            )
            out.append(
                JobSpec(
                    job_id=f"job-{i:0{width}d}",
                    submit_time=0.0,
                    job_class=JobClass.TRIAL if trial[i] else JobClass.BEST_EFFORT,
                    demand=demand,
                    duration=float(duration[i]) * MINUTE,
                    grace_period=float(grace[i]) * MINUTE,
                )
            )
        return out
