"""Estimator accuracy on real compute (issue 12): real training runs on this machine, sampled
through the estimator's own code path, predicted, then run in full and compared.

Each workload is deploy/examples/interchangeable/train.py (a numpy MLP trained by minibatch SGD)
at one model and batch size, in two configurations that differ only in their env, as
interchangeable configurations do: ``1-thread`` and ``2-threads`` (OMP_NUM_THREADS /
OPENBLAS_NUM_THREADS). For each workload:

1. **Calibration** (not part of the estimate): a few short runs in each configuration choose the
   Job's iteration count N so that its full run in the slowest configuration takes about the
   workload's target seconds. Nothing measured here reaches the estimator.
2. **Sampling**, as the live controller does it: ``estimator.sampling.plan`` gives the sample
   lengths (1% and 2% of N: 3% of the run), ``estimator.planner.decide`` asks for the sampling
   runs, each runs as a real subprocess of train.py with ``CELLFIT_SAMPLE_ITERATIONS=k`` and a
   temporary termination-message file, read by ``estimator.contract.parse_sample_report``, and
   handed back to ``decide`` as a succeeded ``SamplePod``; its estimate is the prediction.
3. **Full runs**: train.py with N iterations in each configuration (``--repeats`` times, the
   median kept); the actual seconds are read from the same termination message.

Prints per workload and configuration: predicted seconds ± the estimate's own uncertainty (one
standard deviation), actual seconds, the error, the sampling overhead (the configuration's
sample seconds over its full run); then the mean absolute error, the standard deviation of the
error, the mean overhead and how often the actual time fell within 2 uncertainties, with the
machine's load average before and after. The samples and the full runs share the machine with
whatever else runs on it: ``others`` is the share of the CPUs (in percent, from /proc/stat less
this benchmark's own CPU time) that other processes used during the full run / during the
busiest of its samples. ``--wait-quiet`` waits for a quiet machine before each Job's sampling and
each full run; a workload whose runs were disturbed all the same (other processes above 10%
during a sample or a full run) is measured again at the end (``--retries``), its disturbed
attempt summarized apart; and the runs that other processes left alone are summarized apart, as
the estimator's error without that interference (on a cluster, a pod's CPU request isolates it).

``--settle SECONDS`` keeps every CPU busy that long before each sampling run and full run. On a
VM whose host lets the second vCPU burst for under a second and then throttles it (this
machine: numpy on 2 threads did 4,100 matmuls/s in its first second, then 2,550/s, below one
thread's 2,880/s), a 2-thread sample of 0.2 s runs at the burst's speed and its 10 s full run at
the sustained one: no sample that short can see the throttle. Settled, both start throttled,
as a pod's CPU time would be steady on a node.

``--configurations devices`` runs the same program on an NVIDIA GPU (``CELLFIT_DEVICE=gpu``:
CuPy) and on four CPU threads (numpy), AlloX's two kinds of machine, over DEVICE_WORKLOADS (small
models, where the GPU's kernel launches cost more than the CPUs' arithmetic, to larger ones where
the GPU is many times faster); N is sized by the slower configuration of each workload.

On a many-core machine the workloads can run in lanes side by side: ``--shard I/N`` takes every
N-th workload, ``--pin`` gives each lane its own CPUs, ``--watch pinned`` counts only those
CPUs' other load as disturbance, ``--json`` is rewritten after every workload (a lane stopped at
a time limit keeps what it measured), and ``--merge A.json B.json ...`` prints the lanes' summary
as one measurement. ``--target-scale`` shortens (or lengthens) every run.

``--alternative SHORT,LONG`` also samples every Job with other sample fractions (same 3% budget
or less, e.g. ``0.002,0.028``) and scores them against the same full runs: the two-point fit's
error is the samples' timing noise times about N / (k_long - k_short), so the split matters.

    python tests/benchmarks/bench_estimator_accuracy.py [--quick] [--repeats 1] [--alternative 0.002,0.028]
        [--wait-quiet 120] [--wait-total 1200] [--retries 2] [--json FILE]
        [--configurations limits|threads|devices] [--pin CPUS [--isolate] [--watch pinned]]
        [--shard I/N] [--target-scale F]
    python tests/benchmarks/bench_estimator_accuracy.py --merge lane1.json lane2.json ...

Reference: AlloX Fig. 10, 40 jobs, 3% sampling: MAE 8%, std 11%. Target (issue 12): MAE <= 5%
at <= 3% overhead. This prints figures; it asserts nothing.
"""

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from estimator.contract import SampleReport, parse_sample_report  # noqa: E402
from estimator.planner import Decision, EstimatorSettings, SamplePod, decide  # noqa: E402
from estimator.sampling import SamplingSettings, pods_of, waves_of  # noqa: E402
from estimator.sampling import plan as sampling_plan  # noqa: E402
from scheduler.errors import InvalidAnnotation  # noqa: E402

TRAIN = ROOT / "deploy" / "examples" / "interchangeable" / "train.py"
# A run during which other processes kept more than this share of the machine's CPUs busy
# counts as disturbed; ``--wait-quiet`` waits for a share below it before each Job and full run.
QUIET = 0.10
CPUS = os.cpu_count() or 1
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Configuration:
    """How one configuration runs train.py: its BLAS threads (env), the device it computes on
    (``CELLFIT_DEVICE``: numpy on CPUs, CuPy on the GPU) and, as a pod's ``limits.cpu`` does, a
    CFS quota of ``cpu_limit`` CPUs (None: no quota)."""

    name: str
    threads: int
    cpu_limit: float | None = None
    device: str = "cpu"

    @property
    def env(self) -> dict[str, str]:
        env = {name: str(self.threads) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        return env | {"CELLFIT_DEVICE": self.device}


CONFIGURATION_SETS: dict[str, tuple[Configuration, ...]] = {
    # Two CPU limits of one single-threaded program, as two interchangeable configurations that
    # differ in their resources: steady on this VM (see the module docstring).
    "limits": (Configuration("1-cpu", threads=1, cpu_limit=1.0), Configuration("half-cpu", threads=1, cpu_limit=0.5)),
    # Two thread counts, no quota: the second thread runs on the VM's second vCPU.
    "threads": (Configuration("1-thread", threads=1), Configuration("2-threads", threads=2)),
    # One program on an NVIDIA GPU (CuPy) and on four CPU threads (numpy): AlloX's two kinds of
    # machine. Needs CuPy and a GPU; give --pin four CPUs.
    "devices": (Configuration("gpu", threads=1, device="gpu"), Configuration("cpu-4", threads=4)),
}
# The set in use (--configurations); the first of it calibrates the Job's length.
CONFIGURATIONS: dict[str, Configuration] = {c.name: c for c in CONFIGURATION_SETS["limits"]}
# CFS period of the quota. Kubernetes' default is 100 ms; a sample here lasts 0.1-0.5 s, where
# 100 ms slices would be a quantization error no real sample (minutes long) sees, so the period
# is scaled down with the Jobs' length (kubelet: --cpu-cfs-quota-period).
CFS_PERIOD_MICROSECONDS = 10_000
CPU_CGROUP = Path("/sys/fs/cgroup/cpu")  # cgroup v1 cpu controller
CPUSET_CGROUP = Path("/sys/fs/cgroup/cpuset")  # cgroup v1 cpuset controller
# The CPUs this benchmark and its runs use (--pin): None, all.
PINNED: set[int] | None = None


# Whose load counts as disturbance (--watch): "all" CPUs, or only the "pinned" ones.
WATCH = "all"


def watched_cpus() -> list[int]:
    """The CPUs whose load counts as disturbance: by default all of them, pinned or not (a busy
    sibling vCPU slows a pinned run down as much as a neighbour on its own CPU: on a 2-vCPU VM a
    pinned thread ran at 13,000-26,000 matmuls/s with the other vCPU busy, 27,500 ± 3% with it
    idle). ``--watch pinned``: only the pinned CPUs, for lanes of this benchmark running side by
    side on disjoint CPUs of a many-core machine."""
    if WATCH == "pinned" and PINNED is not None:
        return sorted(PINNED)
    return list(range(CPUS))


def quota_group(configuration: Configuration) -> Path | None:
    """The cgroup that holds a configuration's CPU limit (created on first use)."""
    if configuration.cpu_limit is None:
        return None
    group = CPU_CGROUP / "cellfit-bench" / configuration.name
    if not group.is_dir():
        group.mkdir(parents=True)
        (group / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_MICROSECONDS))
        (group / "cpu.cfs_quota_us").write_text(str(round(configuration.cpu_limit * CFS_PERIOD_MICROSECONDS)))
    return group


def remove_quota_groups() -> None:
    parent = CPU_CGROUP / "cellfit-bench"
    for group in (parent.iterdir() if parent.is_dir() else ()):
        if group.is_dir():
            group.rmdir()
    if parent.is_dir():
        parent.rmdir()


def confine(configuration: Configuration):
    """The preexec_fn of a run: into the configuration's quota group, onto the pinned CPUs."""
    group = quota_group(configuration)

    def enter() -> None:
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))
        if PINNED is not None:
            os.sched_setaffinity(0, PINNED)

    return enter if group is not None or PINNED is not None else None


REST = CPUSET_CGROUP / "cellfit-bench-rest"


def release_isolation() -> None:
    """Moves every process back from the cpuset ``isolate`` put them in, and removes it."""
    if not REST.is_dir():
        return
    for pid in (REST / "cgroup.procs").read_text().split():
        try:
            (CPUSET_CGROUP / "cgroup.procs").write_text(pid)
        except OSError:
            pass  # exited meanwhile
    REST.rmdir()


def isolate(cpus: set[int]) -> int:
    """Moves every other process of the machine into a cpuset without ``cpus`` (cgroup v1, as
    root), as a node's CPU manager gives a guaranteed pod cores of its own. Returns how many
    moved; kernel threads bound to a CPU stay."""
    release_isolation()
    REST.mkdir()
    (REST / "cpuset.cpus").write_text(",".join(str(c) for c in range(CPUS) if c not in cpus))
    (REST / "cpuset.mems").write_text((CPUSET_CGROUP / "cpuset.mems").read_text().strip())
    moved = 0
    for pid in (CPUSET_CGROUP / "cgroup.procs").read_text().split():
        if int(pid) == os.getpid():
            continue
        try:
            (REST / "cgroup.procs").write_text(pid)
            moved += 1
        except OSError:
            pass  # a kernel thread, or exited meanwhile
    return moved


@dataclass(frozen=True)
class Workload:
    hidden: int
    layers: int
    batch: int
    target_seconds: float  # the full run's length with 1 thread, about (calibrate sets N)

    @property
    def name(self) -> str:
        return f"mlp-h{self.hidden}-l{self.layers}-b{self.batch}"

    def arguments(self) -> list[str]:
        return ["--hidden", str(self.hidden), "--layers", str(self.layers), "--batch", str(self.batch)]


# Several model and batch sizes: from Python-overhead-bound (small matrices, many iterations)
# to BLAS-bound (large matrices, where a second thread can help), 16 to 36 s per full run in the
# first configuration: long next to the ~0.2 s start-up of each run (numpy's import, the data),
# which a real Job's hour dwarfs.
WORKLOADS: tuple[Workload, ...] = (
    Workload(64, 1, 16, 16),
    Workload(64, 2, 32, 20),
    Workload(64, 4, 64, 28),
    Workload(128, 1, 64, 16),
    Workload(128, 2, 16, 24),
    Workload(128, 3, 128, 20),
    Workload(128, 4, 256, 32),
    Workload(256, 1, 256, 20),
    Workload(256, 2, 64, 16),
    Workload(256, 3, 32, 24),
    Workload(256, 3, 128, 28),
    Workload(256, 4, 512, 20),
    Workload(512, 1, 128, 24),
    Workload(512, 2, 256, 16),
    Workload(512, 2, 32, 20),
    Workload(512, 3, 64, 32),
    Workload(512, 4, 512, 24),
    Workload(1024, 1, 64, 20),
    Workload(1024, 2, 128, 24),
    Workload(1024, 2, 512, 36),
    Workload(1024, 3, 256, 28),
    Workload(2048, 1, 256, 24),
)
QUICK: tuple[Workload, ...] = (WORKLOADS[1], WORKLOADS[8], WORKLOADS[13], WORKLOADS[18])
# For the devices configurations: from matrices so small that the GPU's kernel launches cost
# more than four CPU threads' arithmetic, to ones where the GPU is many times faster (beyond
# these, N for a slowest run of ~15 s leaves the GPU's run almost all start-up).
DEVICE_WORKLOADS: tuple[Workload, ...] = (
    Workload(64, 1, 16, 12),
    Workload(128, 2, 64, 12),
    Workload(256, 2, 64, 12),
    Workload(256, 3, 128, 12),
    Workload(512, 2, 128, 12),
    Workload(512, 3, 256, 12),
    Workload(1024, 2, 256, 12),
)
# Multiplies every workload's target seconds (--target-scale).
TARGET_SCALE = 1.0


@dataclass(frozen=True)
class Run:
    seconds: float  # from the termination message: what the estimator reads
    wall_seconds: float  # the subprocess as seen from here (interpreter start-up included)
    cpu_seconds: float  # user + system of the subprocess
    iterations: int
    peak_memory_bytes: int | None
    others: float | None  # share of the machine's CPUs other processes used meanwhile
    report: SampleReport  # the termination message, parsed as the controller parses it


class RunFailed(RuntimeError):
    pass


def busy_cpu_seconds() -> float | None:
    """CPU seconds the watched CPUs (all, or the pinned ones) have been busy since boot
    (/proc/stat); None off Linux."""
    watched = {f"cpu{c}" for c in watched_cpus()}
    busy = 0
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                name, *fields = line.split()
                if name in watched:
                    values = [int(v) for v in fields[:8]]  # user .. steal
                    busy += sum(values) - values[3] - values[4]  # less idle, iowait
    except (OSError, ValueError):
        return None
    return busy / CLOCK_TICKS


def own_cpu_seconds() -> float:
    """This process's and its finished children's CPU seconds."""
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))


class OtherLoad:
    """The share of the machine's CPUs that processes other than this benchmark and its runs
    used between ``__init__`` and :meth:`share`."""

    def __init__(self) -> None:
        self.busy, self.own, self.started = busy_cpu_seconds(), own_cpu_seconds(), time.perf_counter()

    def share(self) -> float | None:
        busy = busy_cpu_seconds()
        if busy is None or self.busy is None:
            return None
        wall = time.perf_counter() - self.started
        return max(0.0, (busy - self.busy) - (own_cpu_seconds() - self.own)) / (wall * len(watched_cpus()))


class Quiet:
    """Waits for other processes to use less than QUIET of the CPUs (probed for a second at a
    time), ``per_wait`` seconds at the most each time and ``total`` seconds in all."""

    def __init__(self, *, per_wait: float, total: float) -> None:
        self.per_wait, self.left = per_wait, total

    def wait(self) -> float:
        """Returns the seconds waited."""
        limit = min(self.per_wait, self.left)
        started = time.perf_counter()
        while limit > 0:
            probe = OtherLoad()
            time.sleep(1.0)
            share = probe.share()
            waited = time.perf_counter() - started
            if share is None or share < QUIET or waited >= limit:
                break
            time.sleep(min(4.0, max(0.0, limit - waited)))
        waited = time.perf_counter() - started
        self.left -= waited
        return waited


# Seconds of load on every CPU before each run (--settle); 0: none.
SETTLE_SECONDS = 0.0
_SPIN = "import time, sys\nend = time.perf_counter() + float(sys.argv[1])\nwhile time.perf_counter() < end:\n    pass\n"


def settle(seconds: float) -> None:
    """Keep every CPU busy for ``seconds``, so that a run starts with the CPU time the host
    grants under sustained load: on a VM whose host lets a second vCPU burst for about a second
    and then throttles it, a 0.2 s sample would otherwise run at the burst's speed and its
    10 s full run mostly at the sustained one (see --settle)."""
    spinners = [subprocess.Popen([sys.executable, "-c", _SPIN, str(seconds)]) for _ in watched_cpus()]
    for spinner in spinners:
        spinner.wait()


def run_train(
    workload: Workload, configuration: str, *, iterations: int, sample: int | None, split: int | None = None,
    timeout: float = 120, settled: bool = True,
) -> Run:
    """train.py as a pod would run it: the configuration's env, N in CELLFIT_ITERATIONS, and for
    a sampling run CELLFIT_SAMPLE_ITERATIONS=k; the result read from its termination message."""
    if settled and SETTLE_SECONDS > 0:
        settle(SETTLE_SECONDS)
    env = {key: value for key, value in os.environ.items() if not key.startswith("CELLFIT_")}
    env.update(CONFIGURATIONS[configuration].env)
    env["CELLFIT_ITERATIONS"] = str(iterations)
    if sample is not None:
        env["CELLFIT_SAMPLE_ITERATIONS"] = str(sample)
    if split is not None:
        env["CELLFIT_SAMPLE_SPLIT_ITERATIONS"] = str(split)
    with tempfile.TemporaryDirectory(prefix="cellfit-bench-") as directory:
        message = Path(directory) / "termination-log"
        env["CELLFIT_TERMINATION_MESSAGE_PATH"] = str(message)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        others = OtherLoad()
        started = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, str(TRAIN), *workload.arguments()], env=env, capture_output=True, text=True, timeout=timeout,
                preexec_fn=confine(CONFIGURATIONS[configuration]),
            )
        except subprocess.TimeoutExpired:
            raise RunFailed(f"still running after {timeout:.0f} s, stopped") from None
        wall = time.perf_counter() - started
        share = others.share()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise RunFailed(f"exit {done.returncode}: {done.stderr.strip()[-300:]}")
        try:
            report = parse_sample_report(message.read_text())
        except (OSError, InvalidAnnotation) as error:
            raise RunFailed(f"no usable termination message: {error}") from None
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(report.seconds, wall, cpu, report.iterations, report.peak_memory_bytes, share, report)


def calibrate(workload: Workload) -> int:
    """N such that the full run in the slowest configuration takes about the target. Rough on
    purpose: it only sizes the Job; the estimator never sees these runs. Other work on the
    machine only ever slows a run down, so the faster of two measurements is kept. (On a GPU the
    first runs also fill CuPy's kernel cache, as an image built with its cache would have it.)"""
    slowest: tuple[float, float] | None = None
    for configuration in CONFIGURATIONS:
        rates = []
        for _ in range(2):
            first = run_train(workload, configuration, iterations=1000, sample=2, settled=False).seconds
            k = 32
            while True:
                seconds = run_train(workload, configuration, iterations=1000, sample=k, settled=False).seconds
                if seconds - first >= 0.5 or k >= 1 << 20:
                    break
                k *= 4
            rates.append((max(seconds - first, 1e-3) / (k - 2), first))
        fastest = min(rates)
        slowest = fastest if slowest is None else max(slowest, fastest)
    assert slowest is not None
    rate, startup = slowest
    iterations = max(300, (TARGET_SCALE * workload.target_seconds - startup) / rate)
    digits = len(str(int(iterations))) - 2  # two significant digits: a Job's round count
    return int(round(iterations, -digits))


@dataclass
class Prediction:
    """One configuration's estimate from one sampling of the Job."""

    sample_iterations: list[int]
    sample_seconds: list[float]
    sample_startups: list[float | None]  # each sample's startupSeconds, as reported
    sample_splits: list[list[list[float]]]  # each sample's splits, as reported
    seconds: float
    uncertainty_seconds: float
    method: str
    sample_others: list[float | None]  # share of the CPUs other processes used during each sample
    error: float = 0.0  # (predicted - actual) / actual
    overhead: float = 0.0  # this configuration's sample seconds / its actual full run


@dataclass
class Row:
    workload: str
    configuration: str
    iterations: int
    actual_seconds: float
    actual_runs: list[float]
    cpu_per_wall: float  # of the full run(s)
    others: float | None  # share of the CPUs other processes used during the full run(s), at most
    waited_seconds: float  # waiting for the machine to be quiet, before sampling and this full run
    load_1min: float  # when the full run ended
    job_overhead: float | None  # the planner's overheadFraction, as the controller reports it
    default: Prediction  # sampled with the estimator's default lengths
    alternative: Prediction | None  # sampled with --alternative's lengths
    attempt: int = 0  # > 0: measured again after a disturbed attempt


def sample_job(
    workload: Workload, iterations: int, configurations: list[str], sampling: SamplingSettings
) -> tuple[Decision, dict[str, float | None]]:
    """The live controller's loop, run synchronously: ask ``decide`` what to create, run it, tell
    ``decide`` what happened, until it has an estimate. Also returns the other processes' share
    of the CPUs during each sampling run, by pod name."""
    pods = pods_of(completions=1, parallelism=1)
    job_plan = sampling_plan(job_uid=workload.name, iterations=iterations, pods=pods, ratio=0.03, settings=sampling)
    waves = waves_of(completions=1, parallelism=1)
    settings = EstimatorSettings(sampling=sampling)
    existing: list[SamplePod] = []
    others: dict[str, float | None] = {}
    for _ in range(10):
        decision = decide(configurations=configurations, plan=job_plan, job_iterations=iterations, waves=waves, pods=existing, settings=settings)
        if decision.done:
            return decision, others
        for create in decision.create:
            name = f"{workload.name}-{create.key.configuration}-{create.key.length}-{create.attempt}"
            try:
                run = run_train(
                    workload, create.key.configuration, iterations=iterations, sample=create.iterations, split=create.split_iterations
                )
            except RunFailed as error:
                existing.append(SamplePod(name=name, key=create.key, attempt=create.attempt, state="failed", failure=str(error)))
                continue
            others[name] = run.others
            if run.iterations != create.iterations:
                print(f"  warning: {name} reported {run.iterations} iterations, asked for {create.iterations}", file=sys.stderr)
            sample = run.report.sample(configuration=create.key.configuration, pilot=create.key.pilot)
            existing.append(SamplePod(name=name, key=create.key, attempt=create.attempt, state="succeeded", sample=sample))
    raise RuntimeError(f"{workload.name}: the planner did not finish sampling")


def prediction(sampled: tuple[Decision, dict[str, float | None]], configuration: str) -> Prediction | None:
    decision, others = sampled
    estimate = (decision.estimates or {}).get(configuration)
    if estimate is None:
        return None
    samples = [sample for _, sample in decision.samples[configuration]]
    return Prediction(
        sample_others=[others[pod] for pod, _ in decision.samples[configuration]],
        sample_iterations=[s.iterations for s in samples],
        sample_seconds=[round(s.seconds, 4) for s in samples],
        sample_startups=[None if s.startup_seconds is None else round(s.startup_seconds, 4) for s in samples],
        sample_splits=[[[k, round(t, 4)] for k, t in s.splits] for s in samples],
        seconds=estimate.seconds,
        uncertainty_seconds=estimate.uncertainty_seconds,
        method=estimate.method,
    )


def measure(workload: Workload, *, repeats: int, alternative: SamplingSettings | None, quiet: Quiet) -> list[Row]:
    waited = quiet.wait()
    iterations = calibrate(workload)
    configurations = list(CONFIGURATIONS)
    waited += quiet.wait()
    default = sample_job(workload, iterations, configurations, SamplingSettings())
    other = sample_job(workload, iterations, configurations, alternative) if alternative else None
    rows = []
    for configuration in configurations:
        predicted = prediction(default, configuration)
        if predicted is None:
            print(f"  {workload.name} {configuration}: no estimate ({default[0].failed.get(configuration)})")
            continue
        runs = []
        for _ in range(repeats):
            waited += quiet.wait()
            try:
                # Ten times its target: only a machine busy with other work takes that long.
                runs.append(run_train(workload, configuration, iterations=iterations, sample=None, timeout=10 * TARGET_SCALE * workload.target_seconds))
            except RunFailed as error:
                print(f"  {workload.name} {configuration}: full run failed ({error}); left out")
        if not runs:
            continue
        shares = [run.others for run in runs if run.others is not None]
        actual = statistics.median(run.seconds for run in runs)
        row = Row(
            workload=workload.name,
            configuration=configuration,
            iterations=iterations,
            actual_seconds=actual,
            actual_runs=[round(run.seconds, 4) for run in runs],
            cpu_per_wall=sum(run.cpu_seconds for run in runs) / sum(run.wall_seconds for run in runs),
            others=max(shares) if shares else None,
            waited_seconds=round(waited, 1),
            load_1min=os.getloadavg()[0],
            job_overhead=default[0].overhead_fraction,
            default=predicted,
            alternative=prediction(other, configuration) if other else None,
        )
        for p in (row.default, row.alternative):
            if p is not None:
                p.error = (p.seconds - actual) / actual
                p.overhead = sum(p.sample_seconds) / actual
        rows.append(row)
        waited = 0.0
    return rows


def summarize(predictions: list[Prediction], actual: list[float]) -> dict[str, float]:
    errors = [p.error for p in predictions]
    absolute = [abs(e) for e in errors]
    return {
        "runs": len(predictions),
        "mae": statistics.fmean(absolute),
        "error_std": statistics.stdev(errors) if len(errors) > 1 else 0.0,
        "median_absolute_error": statistics.median(absolute),
        "max_absolute_error": max(absolute),
        "bias": statistics.fmean(errors),
        "mean_overhead": statistics.fmean(p.overhead for p in predictions),
        "within_2_uncertainties": sum(abs(p.seconds - a) <= 2 * p.uncertainty_seconds for p, a in zip(predictions, actual)) / len(predictions),
        "mean_relative_uncertainty": statistics.fmean(p.uncertainty_seconds / p.seconds for p in predictions),
    }


def undisturbed(prediction: Prediction, row: Row) -> bool:
    shares = [*prediction.sample_others, row.others]
    return all(share is not None and share < QUIET for share in shares)


def default_of(row: Row) -> Prediction:
    return row.default


def alternative_of(row: Row) -> Prediction | None:
    return row.alternative


def report(title: str, rows: list[Row], pick) -> dict[str, object]:
    chosen = [(pick(r), r) for r in rows if pick(r) is not None]
    summary: dict[str, object] = dict(summarize([p for p, _ in chosen], [r.actual_seconds for _, r in chosen]))
    print(f"{title}:")
    print(f"  mean absolute error {summary['mae']:.1%}, std of the error {summary['error_std']:.1%} (bias {summary['bias']:+.1%}, "
          f"median |error| {summary['median_absolute_error']:.1%}, max {summary['max_absolute_error']:.1%}), {summary['runs']} runs")
    for name in CONFIGURATIONS:
        part = [(p, r) for p, r in chosen if r.configuration == name]
        if part:
            figures = summarize([p for p, _ in part], [r.actual_seconds for _, r in part])
            summary[name] = figures
            print(f"    {name}: MAE {figures['mae']:.1%}, std {figures['error_std']:.1%}, {figures['runs']} runs")
    repeated = [r for _, r in chosen if len(r.actual_runs) >= 2]
    if repeated:
        # The machine's own floor: how well one full run predicts its repeat (same N, same
        # configuration, moments apart). No sample can predict a run better than that.
        floor = statistics.fmean(abs(r.actual_runs[1] - r.actual_runs[0]) / r.actual_runs[1] for r in repeated)
        summary["repeat_mae"] = floor
        print(f"    the machine's floor: a full run predicts its repeat with MAE {floor:.1%} ({len(repeated)} runs repeated)")
    quiet = [(p, r) for p, r in chosen if undisturbed(p, r)]
    if len(quiet) >= 2:
        figures = summarize([p for p, _ in quiet], [r.actual_seconds for _, r in quiet])
        summary["undisturbed"] = figures
        print(f"    undisturbed (other processes used < {QUIET:.0%} of the CPUs during both samples and the full run): "
              f"MAE {figures['mae']:.1%}, std {figures['error_std']:.1%}, {figures['runs']} runs")
    print(f"  sampling overhead {summary['mean_overhead']:.2%} of the full run (mean over runs)")
    if pick is default_of:
        job = [r.job_overhead for r in rows if r.job_overhead is not None]
        summary["mean_job_overhead"] = statistics.fmean(job) if job else None
        if job:
            print(f"  the planner's overheadFraction (every sample over the fastest configuration's estimate): {statistics.fmean(job):.2%} (mean)")
    print(f"  actual within 2 uncertainties: {summary['within_2_uncertainties']:.0%} "
          f"(mean uncertainty {summary['mean_relative_uncertainty']:.1%} of the prediction)")
    return summary


def others_column(full: float | None, samples: list[float | None]) -> str:
    """Other processes' share of the CPUs, in percent: during the full run / the most during a sample."""
    shown = [full, max((s for s in samples if s is not None), default=None)]
    return "/".join("?" if share is None else f"{100 * share:.0f}" for share in shown)


def fractions(text: str) -> SamplingSettings:
    short, long = (float(part) for part in text.split(","))
    if not 0 < short < long or short + long > 0.03 + 1e-9:
        raise argparse.ArgumentTypeError("expected SHORT,LONG with 0 < SHORT < LONG and SHORT + LONG <= 0.03")
    return SamplingSettings(short_fraction=short, long_fraction=long)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"{len(QUICK)} workloads instead of {len(WORKLOADS)} (a smoke run)")
    parser.add_argument(
        "--repeats", type=int, default=1,
        help="full runs per workload and configuration; the median is kept, and with 2 or more the summary also gives the "
             "machine's floor: how well a full run predicts its repeat (default 1)",
    )
    parser.add_argument(
        "--alternative", type=fractions, metavar="SHORT,LONG",
        help="also sample each Job with these sample fractions (e.g. 0.002,0.028) and compare, on the same full runs",
    )
    parser.add_argument(
        "--wait-quiet", type=float, default=120, metavar="SECONDS",
        help=f"before each Job's sampling and each full run, wait up to this long until other processes use less than {100 * QUIET:.0f}%% of the CPUs (0: never; default 120)",
    )
    parser.add_argument("--wait-total", type=float, default=1200, metavar="SECONDS", help="... and this long in all (default 1200)")
    parser.add_argument(
        "--retries", type=int, default=2,
        help=f"measure a workload again, at the end, when other processes used >= {100 * QUIET:.0f}%% of the CPUs during its runs (default 2 more times)",
    )
    parser.add_argument("--retry-minutes", type=float, default=25, help="... but start no retry after this many minutes (default 25)")
    parser.add_argument(
        "--settle", type=float, default=0.0, metavar="SECONDS",
        help="before every run, keep all CPUs busy this long (a VM whose host throttles sustained use of its "
             "vCPUs after a burst: samples and full runs then meet the same sustained speed; default 0)",
    )
    parser.add_argument(
        "--configurations", choices=sorted(CONFIGURATION_SETS), default="limits",
        help="limits: 1-cpu and half-cpu, one thread under a CFS quota (default); threads: 1 and 2 BLAS threads, no quota",
    )
    parser.add_argument(
        "--pin", type=cpu_list, metavar="CPUS",
        help="run the benchmark and every run on these CPUs only (e.g. 1)",
    )
    parser.add_argument(
        "--isolate", action="store_true",
        help="with --pin: move every other process of the machine to the other CPUs while it runs (root, cgroup v1 cpuset)",
    )
    parser.add_argument(
        "--watch", choices=("all", "pinned"), default="all",
        help="whose load counts as other processes' (disturbance): all CPUs (default) or, with --pin, only the pinned ones "
             "(lanes of this benchmark side by side on disjoint CPUs of a many-core machine)",
    )
    parser.add_argument("--shard", type=shard, metavar="I/N", help="only every N-th workload from the I-th (1-based): one lane of several")
    parser.add_argument("--target-scale", type=float, default=1.0, metavar="FACTOR", help="multiply every workload's target seconds (default 1)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows and the summary as JSON (rewritten after every workload)")
    parser.add_argument(
        "--merge", nargs="+", metavar="FILE",
        help="measure nothing: print the summary of the rows in these --json files together (lanes of one measurement)",
    )
    args = parser.parse_args()
    global SETTLE_SECONDS, CONFIGURATIONS, PINNED, WATCH, TARGET_SCALE
    SETTLE_SECONDS = args.settle
    WATCH = args.watch
    TARGET_SCALE = args.target_scale
    if args.merge:
        merge(args.merge)
        return
    CONFIGURATIONS = {c.name: c for c in CONFIGURATION_SETS[args.configurations]}
    if args.isolate and args.pin is None:
        parser.error("--isolate needs --pin")
    if args.pin is not None:
        if max(c.threads for c in CONFIGURATIONS.values()) > len(args.pin):
            parser.error(f"--pin gives {len(args.pin)} CPU(s); the {args.configurations} configurations run up to "
                         f"{max(c.threads for c in CONFIGURATIONS.values())} threads")
        PINNED = args.pin
        os.sched_setaffinity(0, PINNED)
    # Stopped with SIGTERM: exit through subprocess.run, which kills the running train.py (and
    # through the finally below, which gives the machine its CPUs back).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if args.isolate:
            print(f"isolated: {isolate(PINNED)} processes moved off CPU {','.join(map(str, sorted(PINNED)))}")
        run(args)
    finally:
        if args.isolate:
            release_isolation()
        remove_quota_groups()


def shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N, got {text!r}") from None
    if not 1 <= index <= count:
        raise argparse.ArgumentTypeError(f"{text!r}: I must be 1 to N")
    return index, count


def row_of(document: dict) -> Row:
    """A Row back from its --json form."""
    fields = dict(document)
    for key in ("default", "alternative"):
        if fields[key] is not None:
            fields[key] = Prediction(**fields[key])
    return Row(**fields)


def merge(paths: list[str]) -> None:
    """The summary of several lanes' --json files, as one measurement."""
    global CONFIGURATIONS
    documents = [json.loads(Path(path).read_text()) for path in paths]
    CONFIGURATIONS = {}
    for document in documents:
        for name, fields in document["configurations"].items():
            fields = {key: value for key, value in fields.items() if key != "env"}
            CONFIGURATIONS.setdefault(name, Configuration(**fields))
    rows = [row_of(row) for document in documents for row in document["rows"]]
    redone = [row_of(row) for document in documents for row in document.get("redone", [])]
    print(f"{len(paths)} lanes, {len({r.workload for r in rows})} workloads, {len(rows)} full runs; "
          f"{sum(undisturbed(r.default, r) for r in rows)} undisturbed; "
          f"{', '.join(str(d.get('elapsed_seconds', '?')).split('.')[0] + ' s' for d in documents)} per lane; "
          f"{sum(not d.get('complete', True) for d in documents)} lanes cut short")
    report("estimator defaults", rows, default_of)
    if any(r.alternative is not None for r in rows):
        report("alternative", rows, alternative_of)
    if redone:
        report("the disturbed attempts measured again (estimator defaults), for comparison", redone, default_of)
    print("reference: AlloX Fig. 10 MAE 8%, std 11%; target MAE <= 5% at <= 3% overhead")


def cpu_list(text: str) -> set[int]:
    try:
        cpus = {int(part) for part in text.split(",")}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected CPU numbers separated by commas, got {text!r}") from None
    if not cpus or not cpus <= set(range(CPUS)):
        raise argparse.ArgumentTypeError(f"CPUs {text!r}: this machine has CPUs 0-{CPUS - 1}")
    return cpus


def run(args: argparse.Namespace) -> None:
    if args.configurations == "devices":
        workloads = DEVICE_WORKLOADS[:2] if args.quick else DEVICE_WORKLOADS
    else:
        workloads = QUICK if args.quick else WORKLOADS
    if args.shard:
        index, count = args.shard
        workloads = workloads[index - 1 :: count]
    defaults = SamplingSettings()

    load_before = os.getloadavg()
    started = time.perf_counter()
    print(f"{len(workloads)} workloads x {len(CONFIGURATIONS)} configurations ({', '.join(CONFIGURATIONS)}), "
          f"{os.cpu_count()} CPUs, load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
          f"samples of {defaults.short_fraction:.1%} and {defaults.long_fraction:.1%} of N (the estimator's defaults)"
          + (f", alternative {args.alternative.short_fraction:.1%} and {args.alternative.long_fraction:.1%}" if args.alternative else ""))
    header = f"{'workload':<20} {'config':<9} {'N':>7} {'k':>10} {'predicted':>13} {'actual':>7} {'error':>7} {'overhead':>8} {'others':>7} {'load':>5}"
    if args.alternative:
        header += f" {'alt k':>9} {'alt predicted':>13} {'alt err':>7}"
    print(header)
    rows: list[Row] = []
    redone: list[Row] = []  # disturbed attempts, measured again
    quiet = Quiet(per_wait=args.wait_quiet, total=args.wait_total)
    queue = deque((workload, 0) for workload in workloads)
    while queue:
        workload, attempt = queue.popleft()
        measured = measure(workload, repeats=args.repeats, alternative=args.alternative, quiet=quiet)
        disturbed = not all(undisturbed(p, r) for r in measured for p in (r.default, r.alternative) if p is not None)
        again = disturbed and attempt < args.retries and time.perf_counter() - started < 60 * args.retry_minutes
        for row in measured:
            row.attempt = attempt
            d = row.default
            name = row.workload if not attempt else f"{row.workload} #{attempt + 1}"
            line = (f"{name:<20} {row.configuration:<9} {row.iterations:>7} {'/'.join(map(str, d.sample_iterations)):>10} "
                    f"{f'{d.seconds:.2f}±{d.uncertainty_seconds:.2f}':>13} {row.actual_seconds:>7.2f} {d.error:>+7.1%} {d.overhead:>8.2%} "
                    f"{others_column(row.others, d.sample_others):>7} {row.load_1min:>5.2f}")
            if row.alternative:
                a = row.alternative
                line += f" {'/'.join(map(str, a.sample_iterations)):>9} {f'{a.seconds:.2f}±{a.uncertainty_seconds:.2f}':>13} {a.error:>+7.1%}"
            print(line, flush=True)
        (redone if again else rows).extend(measured)
        if args.json:
            write_json(args, workloads=workloads, rows=rows, redone=redone, started=started, load_before=load_before, summaries=None)
        if again:
            print(f"  {workload.name}: other processes used >= {QUIET:.0%} of the CPUs meanwhile; measured again later")
            queue.append((workload, attempt + 1))
    load_after = os.getloadavg()
    elapsed = time.perf_counter() - started

    print()
    print(f"{len(rows)} full runs, {elapsed:.0f} s in all; load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} on {os.cpu_count()} CPUs; "
          f"{sum(r.waited_seconds for r in rows):.0f} s of it waiting for a quiet machine; "
          f"{sum(undisturbed(r.default, r) for r in rows)} of {len(rows)} runs undisturbed; "
          f"{len(redone)} disturbed runs measured again (below, only the last attempt of each counts)")
    summaries = {"default": report(f"estimator defaults ({defaults.short_fraction:.1%} + {defaults.long_fraction:.1%})", rows, default_of)}
    if args.alternative:
        summaries["alternative"] = report(
            f"alternative ({args.alternative.short_fraction:.1%} + {args.alternative.long_fraction:.1%})", rows, alternative_of
        )
    if redone:
        summaries["redone"] = report("the disturbed attempts measured again (estimator defaults), for comparison", redone, default_of)
    print("reference: AlloX Fig. 10 MAE 8%, std 11%; target MAE <= 5% at <= 3% overhead")
    if args.json:
        write_json(args, workloads=workloads, rows=rows, redone=redone, started=started, load_before=load_before, summaries=summaries)


def write_json(
    args: argparse.Namespace, *, workloads: tuple[Workload, ...], rows: list[Row], redone: list[Row], started: float,
    load_before: tuple[float, float, float], summaries: dict[str, object] | None,
) -> None:
    """The rows so far (``complete`` false until the summary is in): a lane stopped at its
    time limit still leaves what it measured."""
    document = {
        "complete": summaries is not None,
        "workloads": [asdict(w) | {"name": w.name} for w in workloads],
        "configurations": {name: asdict(c) | {"env": c.env} for name, c in CONFIGURATIONS.items()},
        "cfs_period_microseconds": CFS_PERIOD_MICROSECONDS,
        "pinned": sorted(PINNED) if PINNED is not None else None,
        "watch": WATCH,
        "isolated": args.isolate,
        "shard": args.shard,
        "target_scale": TARGET_SCALE,
        "sampling": {"default": asdict(SamplingSettings()), "alternative": asdict(args.alternative) if args.alternative else None},
        "repeats": args.repeats,
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "elapsed_seconds": time.perf_counter() - started,
        "summary": summaries,
        "rows": [asdict(row) for row in rows],
        "redone": [asdict(row) for row in redone],
    }
    Path(args.json).write_text(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
