"""The ``allox`` workload: interchangeable jobs modelled on AlloX's simulations (EuroSys'20 §5.1).

The paper's simulated cluster has 20 GPUs, 20 CPUs of 20 cores and 1,280 GB of memory; 10 users
with over 1,000 TensorFlow jobs each; GPU speedups over one CPU between 1.8 and 10; estimates
from two short samples per configuration, 3% of the job (§4.1; Fig. 10: mean absolute error 8%,
sd 11%). What the paper leaves open is ours, chosen before any measurement and listed in
README.md "Workload ``allox``":

* the cluster is 20 nodes of (20 cores, 64 GiB, 1 GPU); a GPU job holds its GPU and one
  reserved core (§4.4), a CPU job one 19-core slot (§5.1: 19 threads, one core left over);
* GPU processing times are log-normal (median 10 min, sd of the log 0.8, cut to [1, 240] min);
* each user runs her own kinds of models: user ``u``'s speedups centre on a point of [1.8, 10]
  (geometrically spaced over the users) with a log-normal spread, clipped to [1.8, 10];
* arrivals are Poisson (the paper replays the Google trace's arrival times, not published) at a
  rate ``load`` times the highest rate the cluster could sustain (:func:`max_throughput`);
* a job is a training loop of ``N`` iterations (log-uniform) with a start-up per configuration
  (log-uniform seconds, at most ``startup_max_share`` of the run) and a time per iteration that
  makes up the rest of its true processing time;
* its estimates are not drawn: the estimator (:mod:`estimator.planner`) runs on simulated
  samples of ``sampling_fraction`` of the iterations (1/3 short, 2/3 long, per configuration),
  whose measured times carry a log-normal noise of ``sample_noise``
  (:mod:`scheduler.simulator.allox.sampling`); its error and overhead are measured, not set;
* a share ``user_estimate_share`` of the jobs carry an estimate set by their user
  (``cellfit.io/estimate``, AlloX §5.3.2), taken as exact: nothing is sampled for them.

Every random quantity has its own stream derived from the seed, so changing one knob (the load,
the sample noise, the sampling fraction) leaves every other attribute of every job as it was,
and sweeps compare like with like.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any, Final, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.core.resources import Resources
from scheduler.matching.capacity import NodeResources, machines_for
from scheduler.matching.model import KIND_CPU, KIND_GPU, Demand, Machine
from estimator.planner import EstimatorSettings
from scheduler.simulator.allox.sampling import SampledJob, estimator_settings
from scheduler.simulator.distributions import TruncatedNormal
from scheduler.simulator.errors import InvalidWorkload
from scheduler.simulator.cluster import GIB, MINUTE, ClusterSpec

FloatArray = npt.NDArray[np.float64]

# Relative sd of a sampling run's measured time. Chosen so that the estimator's mean absolute
# error on this workload is the paper's 8% (Fig. 10); see README.md "Workload allox".
SAMPLE_NOISE: Final = 0.02
MAX_USERS: Final = 100_000  # allox.users at most (the paper's 10; a billion hung the run)
# Knobs the workload had before the estimator produced its estimates, and what replaces them.
RETIRED: Final = MappingProxyType(
    {
        "estimation_error": "estimates come from the estimator run on simulated samples; their error follows "
        "allox.sample_noise and allox.sampling_fraction (and is reported, not set)",
        "profiling_overhead": "the profiling overhead is the simulated sampling runs' time; set "
        "allox.sampling_fraction (the share of a job's iterations each configuration samples)",
    }
)

# 20 nodes of 20 cores, 64 GiB and one GPU: the paper's 20 GPUs, 20 CPUs of 20 cores, 1,280 GB.
ALLOX_CLUSTER: Final = ClusterSpec(nodes=20, node=Resources(cpu_millis=20_000, memory_bytes=64 * GIB, gpus=1))


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxJobSpec:
    """One interchangeable job. Times in seconds. ``processing_time`` is the truth (what a run
    takes); ``demand`` is each configuration's resources (cores, GPUs, GiB), booked on the node
    while it runs. What the policies see comes either from ``estimate``, set by the job's user
    (``cellfit.io/estimate``: nothing is sampled), or, when that is None, from the estimator run
    on samples of ``sampling`` (the world its sampling runs meet)."""

    job_id: str
    user: str
    submit_time: float
    processing_time: Mapping[str, float]
    demand: Mapping[str, Demand]
    estimate: Mapping[str, float] | None = None
    sampling: SampledJob | None = None

    @property
    def fastest_time(self) -> float:
        return min(self.processing_time.values())

    def speedup(self) -> float:
        """CPU time over GPU time (the paper's speedup rate); 1 where a kind is missing."""
        gpu, cpu = self.processing_time.get(KIND_GPU), self.processing_time.get(KIND_CPU)
        return cpu / gpu if gpu and cpu else 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class AlloxWorkload:
    """The knobs of the ``allox`` workload; ``--set allox.<name>=<value>`` changes one.

    Times in minutes, memory in GiB. ``long_user_scale`` multiplies the last user's processing
    times (the "user with longer jobs" of the paper's Fig. 15; 1 = none). ``sample_share`` is the
    largest share of each kind's machines that samples may hold at once (§4.4: "AlloX also sets
    a limit on resources for sample jobs"). The sampling knobs are described in the module's
    docstring.
    """

    users: int = 10
    gpu_median_minutes: float = 10.0
    gpu_sigma: float = 0.8
    gpu_min_minutes: float = 1.0
    gpu_max_minutes: float = 240.0
    speedup_low: float = 1.8
    speedup_high: float = 10.0
    user_speedup_spread: float = 0.3
    long_user_scale: float = 1.0
    gpu_memory_low: float = 2.0
    gpu_memory_high: float = 8.0
    cpu_memory_low: float = 4.0
    cpu_memory_high: float = 24.0
    cpu_slot_cores: float = 19.0
    reserved_cpu_per_gpu: float = 1.0
    sample_share: float = 0.3
    sampling_fraction: float = 0.03
    sample_noise: float = SAMPLE_NOISE
    startup_low_seconds: float = 5.0
    startup_high_seconds: float = 30.0
    startup_max_share: float = 0.2
    iterations_low: float = 1_000.0
    iterations_high: float = 100_000.0
    user_estimate_share: float = 0.0
    long_factor: float = 10.0
    long_min_seconds: float = 120.0

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, what: str) -> None:
            if not ok:
                raise InvalidWorkload(f"{getattr(self, name)!r} is not {what}", field=f"allox.{name}")

        for spec in fields(self):
            value = getattr(self, spec.name)
            need(isinstance(value, (int, float)) and math.isfinite(value), spec.name, "a finite number")
        need(self.users >= 1 and float(self.users).is_integer(), "users", "a positive whole number")
        # Each user gets a speedup centre and a share of fairness: past this many, generating
        # the jobs alone runs out of memory and time.
        need(self.users <= MAX_USERS, "users", f"at most {MAX_USERS:,}")
        need(self.gpu_median_minutes > 0, "gpu_median_minutes", "positive")
        need(self.gpu_sigma >= 0, "gpu_sigma", "a non-negative sd")
        need(0 < self.gpu_min_minutes <= self.gpu_max_minutes, "gpu_min_minutes", "positive and at most gpu_max_minutes")
        need(1.0 <= self.speedup_low <= self.speedup_high, "speedup_low", "at least 1 and at most speedup_high")
        need(self.user_speedup_spread >= 0, "user_speedup_spread", "a non-negative sd")
        need(self.long_user_scale > 0, "long_user_scale", "positive")
        need(0 < self.gpu_memory_low <= self.gpu_memory_high, "gpu_memory_low", "positive and at most gpu_memory_high")
        need(0 < self.cpu_memory_low <= self.cpu_memory_high, "cpu_memory_low", "positive and at most cpu_memory_high")
        need(self.cpu_slot_cores > 0, "cpu_slot_cores", "positive")
        need(self.reserved_cpu_per_gpu >= 0, "reserved_cpu_per_gpu", "non-negative")
        need(0 < self.sample_share <= 1, "sample_share", "a fraction in (0, 1]")
        need(0 < self.sampling_fraction <= 0.5, "sampling_fraction", "a fraction in (0, 0.5]")
        need(0 <= self.sample_noise <= 1, "sample_noise", "a relative sd in [0, 1]")
        need(
            0 <= self.startup_low_seconds <= self.startup_high_seconds,
            "startup_low_seconds",
            "non-negative and at most startup_high_seconds",
        )
        need(0 <= self.startup_max_share < 1, "startup_max_share", "a fraction in [0, 1)")
        need(
            1 <= self.iterations_low <= self.iterations_high,
            "iterations_low",
            "at least 1 and at most iterations_high",
        )
        need(0 <= self.user_estimate_share <= 1, "user_estimate_share", "a fraction in [0, 1]")
        need(self.long_factor > 1, "long_factor", "above 1")
        need(self.long_min_seconds >= 0, "long_min_seconds", "non-negative")

    @staticmethod
    def parameter_names() -> list[str]:
        return [spec.name for spec in fields(AlloxWorkload)]

    def with_parameter(self, key: str, value: float) -> AlloxWorkload:
        """One knob changed by name, ``allox.<name>`` (the ``allox.`` prefix is optional)."""
        name = key.removeprefix("allox.")
        if name in RETIRED:
            raise InvalidWorkload(f"{key!r} is no longer a parameter: {RETIRED[name]}")
        if name not in self.parameter_names():
            raise InvalidWorkload(
                f"{key!r} is not a parameter of workload allox (known: {', '.join('allox.' + n for n in self.parameter_names())})"
            )
        return self.with_changes(**{name: value})

    def with_changes(self, **changes: float) -> AlloxWorkload:
        for name in changes:
            if name in RETIRED:
                raise InvalidWorkload(f"'allox.{name}' is no longer a parameter: {RETIRED[name]}")
        typed: dict[str, Any] = dict(changes)
        if "users" in typed:
            users = typed["users"]
            if not (math.isfinite(users) and float(users).is_integer()):
                raise InvalidWorkload(f"{users!r} is not a positive whole number", field="allox.users")
            typed["users"] = int(users)
        return replace(self, **typed)

    # ------------------------------------------------------------------ machines

    def nodes(self, cluster: ClusterSpec) -> list[NodeResources]:
        node = cluster.node
        return [
            NodeResources(name=name, cpu=node.cpu_millis / 1000, gpu=node.gpus, memory=node.memory_bytes / GIB)
            for name in cluster.node_names()
        ]

    def machines(self, cluster: ClusterSpec) -> list[Machine]:
        """Every GPU and every CPU slot of the cluster (§4.4: one core per GPU set aside)."""
        return machines_for(
            self.nodes(cluster),
            cpu_slot=Demand(cpu=self.cpu_slot_cores),
            reserved_cpu_per_gpu=self.reserved_cpu_per_gpu,
        )

    # ------------------------------------------------------------------ jobs

    def generate(self, *, jobs: int, seed: int, cluster: ClusterSpec, load: float) -> list[AlloxJobSpec]:
        """``jobs`` jobs arriving as a Poisson process at ``load`` times the cluster's maximum
        sustainable rate (:func:`max_throughput` of these very jobs on these machines)."""
        if jobs < 0:
            raise InvalidWorkload(f"{jobs} is negative", field="jobs")
        if not (math.isfinite(load) and load > 0):
            raise InvalidWorkload(f"{load!r} is not a positive load", field="load")
        machines = self.machines(cluster)
        gpus = sum(1 for m in machines if m.kind == KIND_GPU)
        cpus = sum(1 for m in machines if m.kind == KIND_CPU)
        if not gpus and not cpus:
            raise InvalidWorkload("the cluster has neither a GPU nor a CPU slot", field="nodes")
        users = int(self.users)
        # Streams 0-4 and 7 as before sampling was modelled: the same seed gives the same jobs.
        streams = np.random.SeedSequence([seed, 0x416C6C58]).spawn(12)
        draw = [np.random.default_rng(stream) for stream in streams]
        user = draw[0].integers(0, users, size=jobs)
        log_gpu = TruncatedNormal(
            mean=math.log(self.gpu_median_minutes),
            sd=self.gpu_sigma,
            low=math.log(self.gpu_min_minutes),
            high=math.log(self.gpu_max_minutes),
        )
        gpu_minutes = np.exp(log_gpu.quantiles(draw[1].random(jobs)))
        scale = np.where(user == users - 1, self.long_user_scale, 1.0)
        gpu_seconds = gpu_minutes * scale * MINUTE
        centres = self.user_speedup_centres()
        speedup = np.clip(
            centres[user] * np.exp(self.user_speedup_spread * draw[2].standard_normal(jobs)),
            self.speedup_low,
            self.speedup_high,
        )
        cpu_seconds = gpu_seconds * speedup
        gpu_memory = np.round(draw[3].uniform(self.gpu_memory_low, self.gpu_memory_high, size=jobs))
        cpu_memory = np.round(draw[4].uniform(self.cpu_memory_low, self.cpu_memory_high, size=jobs))
        # One standard normal per job, configuration and sample length: the measured times' noise.
        noise_z = {KIND_GPU: draw[5].standard_normal((jobs, 2)), KIND_CPU: draw[6].standard_normal((jobs, 2))}
        iterations = np.round(
            np.exp(draw[8].uniform(math.log(self.iterations_low), math.log(self.iterations_high), size=jobs))
        ).astype(np.int64)
        startup_draw = {
            kind: np.exp(
                draw[9 + k].uniform(
                    math.log(max(self.startup_low_seconds, 1e-9)), math.log(max(self.startup_high_seconds, 1e-9)), size=jobs
                )
            )
            for k, kind in enumerate((KIND_GPU, KIND_CPU))
        }
        user_set = draw[11].random(jobs) < self.user_estimate_share
        gaps = draw[7].exponential(1.0, size=jobs)
        kinds_present = {KIND_GPU: gpus > 0, KIND_CPU: cpus > 0}
        rate = load * max_throughput(
            gpu_seconds if gpus else np.full(jobs, math.inf),
            cpu_seconds if cpus else np.full(jobs, math.inf),
            gpus=gpus,
            cpus=cpus,
        )
        arrivals = np.cumsum(gaps) / rate if jobs else gaps
        width = len(str(max(jobs - 1, 0)))
        user_width = len(str(users - 1))
        out: list[AlloxJobSpec] = []
        for i in range(jobs):
            truth = {KIND_GPU: float(gpu_seconds[i]), KIND_CPU: float(cpu_seconds[i])}
            truth = {kind: value for kind, value in truth.items() if kinds_present[kind]}
            world = None
            if not user_set[i]:
                startup = {
                    kind: min(float(startup_draw[kind][i]), self.startup_max_share * value) for kind, value in truth.items()
                }
                n = int(iterations[i])
                world = SampledJob(
                    iterations=n,
                    startup=MappingProxyType(startup),
                    per_iteration=MappingProxyType({kind: (value - startup[kind]) / n for kind, value in truth.items()}),
                    noise=MappingProxyType(
                        {
                            (kind, length): math.exp(self.sample_noise * float(noise_z[kind][i, column]))
                            for kind in truth
                            for column, length in enumerate(("short", "long"))
                        }
                    ),
                )
            out.append(
                AlloxJobSpec(
                    job_id=f"job-{i:0{width}d}",
                    user=f"user-{int(user[i]):0{user_width}d}",
                    submit_time=float(arrivals[i]),
                    processing_time=MappingProxyType(truth),
                    estimate=MappingProxyType(dict(truth)) if user_set[i] else None,
                    sampling=world,
                    demand=MappingProxyType(
                        {
                            KIND_GPU: Demand(gpu=1.0, cpu=self.reserved_cpu_per_gpu, memory=float(gpu_memory[i])),
                            KIND_CPU: Demand(cpu=self.cpu_slot_cores, memory=float(cpu_memory[i])),
                        }
                    ),
                )
            )
        return out

    def user_speedup_centres(self) -> FloatArray:
        """User ``u``'s speedup centre: geometrically spaced over [speedup_low, speedup_high]."""
        users = int(self.users)
        if users == 1:
            return np.array([math.sqrt(self.speedup_low * self.speedup_high)])
        return np.geomspace(self.speedup_low, self.speedup_high, users)

    def estimator(self) -> EstimatorSettings:
        """The live estimator's settings with this workload's sample lengths."""
        return estimator_settings(
            self.sampling_fraction, long_factor=self.long_factor, long_min_seconds=self.long_min_seconds
        )


def max_throughput(gpu_times: FloatArray, cpu_times: FloatArray, *, gpus: int, cpus: int) -> float:
    """Jobs per second the cluster sustains at most, given these jobs' mix: the optimum of the
    fluid relaxation (each job split between the kinds in any proportion, machines of a kind
    pooled). Moving work to CPUs in order of increasing speedup is optimal (an exchange
    argument: a job's CPU work per unit of GPU work saved is its speedup), so the optimum is
    where the CPU and GPU pools would finish together, found on the sorted prefix sums. Load 1
    is this rate; no policy keeps up beyond it."""
    n = len(gpu_times)
    if n == 0:
        return 1.0
    if cpus == 0 or not np.isfinite(cpu_times).any():
        return n / (float(np.sum(gpu_times)) / gpus)
    if gpus == 0 or not np.isfinite(gpu_times).any():
        return n / (float(np.sum(cpu_times)) / cpus)
    order = np.argsort(cpu_times / gpu_times, kind="stable")
    cpu_sorted, gpu_sorted = cpu_times[order], gpu_times[order]
    # k jobs (the k lowest speedups) on CPUs: finish times of the two pools.
    cpu_done = np.concatenate(([0.0], np.cumsum(cpu_sorted))) / cpus
    gpu_done = (float(np.sum(gpu_sorted)) - np.concatenate(([0.0], np.cumsum(gpu_sorted)))) / gpus
    k = int(np.searchsorted(cpu_done - gpu_done, 0.0, side="right")) - 1  # last k with cpu <= gpu
    if k >= n:
        return n / float(cpu_done[n])
    share = (gpu_done[k] - cpu_done[k]) / (cpu_sorted[k] / cpus + gpu_sorted[k] / gpus)
    makespan = float(cpu_done[k] + share * cpu_sorted[k] / cpus)
    return n / makespan


def describe(workload: AlloxWorkload) -> dict[str, float]:
    """Every knob by its ``--set`` name, for ``--output-json``'s settings."""
    return {f"allox.{spec.name}": float(getattr(workload, spec.name)) for spec in fields(workload)}


__all__: Sequence[str] = (
    "ALLOX_CLUSTER",
    "AlloxJobSpec",
    "AlloxWorkload",
    "describe",
    "max_throughput",
)
