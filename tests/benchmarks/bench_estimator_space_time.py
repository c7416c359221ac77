"""Learning in space against learning in time (SLearn §4, issue 12 "Space vs time"): on a
simulated trace of multi-pod Jobs whose pods' lengths vary (task skew) and whose families drift
from run to run, the estimator's prediction error from its samples alone, from its family
history alone, from the two combined (SLearn §4.1's posterior), and from what the planner
actually does (history alone where the prior is tight enough, the posterior elsewhere).

The trace. A family ``f`` has a start-up ``a_f`` (uniform 5–30 s) and a time per iteration
(log-uniform 0.1–1 s at first) that drifts: ``log b_{f,r} = log b_{f,r−1} + drift · z`` from one
run ``r`` of the family to the next (new data, a changed model: SLearn's job-wise variation
across time), kept within [0.05, 2] s by reflection. Run ``r`` is one Job of ``S`` pods
(log-uniform 10–150; completions S, one pod at a time, so the Job takes the sum of its pods'
times) of ``N`` iterations each (log-uniform 5,000–20,000: pods of minutes to hours). Its pods differ (task-wise variation across space): pod ``i`` takes
``a_f + b_{f,r} · exp(skew · z_i) · N`` seconds, and a share ``stragglers`` of them are
another 1.5–3× slower. A sampling run of ``k`` iterations of pod ``i`` measures
``(a_f + b_{f,r} · exp(skew · z_i) · k) · exp(noise · z)`` seconds.

The predictors, all from :mod:`estimator`, as the live controller calls them:

* **sampling alone**: ``estimator.sampling.plan`` picks ``max(1, round(3% · S))`` pilot pods
  (SLearn's ratio, at most 16), each sampled at 1% and 2% of N;
  ``estimate_configuration(samples, iterations=N, waves=S)``;
* **history alone**: ``prior_from_history`` over the family's last 20 finished Jobs' real
  seconds per iteration (the Job's time / waves / N, as the controller records it) and their
  pilots' spread (``taskCov`` of the planner's estimate, where it had two pilots or more);
  ``estimate_from_history``;
* **posterior**: ``estimate_configuration(..., prior=prior)``: SLearn §4.1's posterior, σ1 at
  least the family's task spread learnt from past pilots;
* **planner**: ``estimator.planner.decide`` with the prior: history alone when the prior is
  tight (≥ 3 Jobs, σ0/μ ≤ 5%), otherwise the posterior; ``skipped`` is the share of Jobs it
  did not sample;
* **oracle σ1** (not the estimator's code, a reference): the same posterior with σ1 floored by
  the family's true past task spread (the mean coefficient of variation of its past Jobs' pod
  times, which the estimator never sees) instead of the spread its pilots showed.

Every Job with at least 3 earlier runs of its family is scored (so that history has something
to say) on ``|predicted / actual − 1|`` of the Job's total time. Three regimes, as SLearn §4.1's
analysis predicts: drifting families with moderate skew (sampling wins), stable families with
heavy skew (history wins), stable families with light skew (both good).

    python tests/benchmarks/bench_estimator_space_time.py [--families 40] [--runs 25] [--seed 1] [--json FILE]

Prints a Markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from estimator.model import Sample, estimate_configuration, estimate_from_history, prior_from_history  # noqa: E402
from estimator.planner import EstimatorSettings, SampleKey, SamplePod, decide  # noqa: E402
from estimator.sampling import plan, waves_of  # noqa: E402

KIND = "gpu"
RATIO = 0.03  # SLearn's sampling ratio (§4.3: max(1, 0.03·S) pilot tasks)
HISTORY_WINDOW = 20  # the controller's historyWindow
MIN_HISTORY = 3
PREDICTORS = ("sampling", "history", "posterior", "planner", "oracle")


@dataclass(frozen=True)
class Scenario:
    name: str
    drift: float  # sd of the log step of a family's time per iteration between runs
    skew: float  # sd of the log of a pod's time per iteration around its Job's
    stragglers: float  # share of pods another 1.5-3x slower
    noise: float = 0.02  # relative timing noise of one sampling run (the estimator's default)


SCENARIOS = (
    Scenario("drifting families, task skew", drift=0.25, skew=0.15, stragglers=0.05),
    Scenario("stable families, heavy skew", drift=0.02, skew=0.5, stragglers=0.10),
    Scenario("stable families, light skew", drift=0.02, skew=0.05, stragglers=0.0),
)


@dataclass(frozen=True)
class Job:
    family: int
    run: int
    pods: int
    iterations: int
    startup: float
    per_iteration: tuple[float, ...]  # one per pod


def trace(scenario: Scenario, *, families: int, runs: int, seed: int) -> list[Job]:
    rng = random.Random(f"{seed}/{scenario.name}")
    jobs = []
    for family in range(families):
        startup = rng.uniform(5, 30)
        log_rate = rng.uniform(math.log(0.1), math.log(1.0))
        for run in range(runs):
            if run:
                log_rate = _reflect(log_rate + scenario.drift * rng.gauss(0, 1), math.log(0.05), math.log(2.0))
            pods = round(math.exp(rng.uniform(math.log(10), math.log(150))))
            iterations = round(math.exp(rng.uniform(math.log(5_000), math.log(20_000))))
            rates = []
            for _ in range(pods):
                rate = math.exp(log_rate + scenario.skew * rng.gauss(0, 1))
                if rng.random() < scenario.stragglers:
                    rate *= rng.uniform(1.5, 3.0)
                rates.append(rate)
            jobs.append(Job(family, run, pods, iterations, startup, tuple(rates)))
    return jobs


def _reflect(value: float, low: float, high: float) -> float:
    """A random walk kept in [low, high] by reflection at the bounds."""
    while not low <= value <= high:
        value = 2 * low - value if value < low else 2 * high - value
    return value


def actual_seconds(job: Job) -> float:
    return sum(job.startup + rate * job.iterations for rate in job.per_iteration)


def sample_pods(job: Job, scenario: Scenario, settings: EstimatorSettings, rng: random.Random) -> tuple[list[SamplePod], object]:
    sample_plan = plan(job_uid=f"f{job.family}-r{job.run}", iterations=job.iterations, pods=job.pods, ratio=RATIO, settings=settings.sampling)
    pods = []
    for pilot in sample_plan.pilots:
        for length, k in sample_plan.iterations.items():
            exact = job.startup + job.per_iteration[pilot] * k
            seconds = exact * math.exp(scenario.noise * rng.gauss(0, 1))
            key = SampleKey(configuration=KIND, pilot=pilot, length=length)
            pods.append(
                SamplePod(
                    name=f"{key.pilot}-{key.length}", key=key, attempt=0, state="succeeded",
                    sample=Sample(KIND, k, seconds, pilot=pilot),
                )
            )
    return pods, sample_plan


def evaluate(scenario: Scenario, *, families: int, runs: int, seed: int) -> dict[str, object]:
    settings = EstimatorSettings()
    rng = random.Random(f"{seed}/{scenario.name}/samples")
    history: dict[int, deque[float]] = {}
    spreads: dict[int, deque[float]] = {}  # per family: the CoV of past Jobs' pod times (the truth)
    covs: dict[int, deque[float]] = {}  # per family: past estimates' taskCov (what the controller keeps)
    errors: dict[str, list[float]] = {name: [] for name in PREDICTORS}
    skipped = pilots = 0
    for job in trace(scenario, families=families, runs=runs, seed=seed):
        actual = actual_seconds(job)
        waves = waves_of(completions=job.pods, parallelism=None)
        past = history.setdefault(job.family, deque(maxlen=HISTORY_WINDOW))
        past_spread = spreads.setdefault(job.family, deque(maxlen=HISTORY_WINDOW))
        past_covs = covs.setdefault(job.family, deque(maxlen=HISTORY_WINDOW))
        pods, sample_plan = sample_pods(job, scenario, settings, rng)
        samples = [pod.sample for pod in pods if pod.sample is not None]
        prior = prior_from_history(list(past), task_covs=list(past_covs), settings=settings.model)
        decision = decide(
            configurations=(KIND,), plan=sample_plan, job_iterations=job.iterations, waves=waves,  # type: ignore[arg-type]
            pods=pods, priors={KIND: prior} if prior is not None and len(past) >= MIN_HISTORY else {}, settings=settings,
        )
        assert decision.estimates is not None
        if len(past) >= MIN_HISTORY:
            assert prior is not None
            predicted = {
                "sampling": estimate_configuration(KIND, samples, iterations=job.iterations, waves=waves, settings=settings.model),
                "history": estimate_from_history(KIND, prior, iterations=job.iterations, waves=waves),
                "posterior": estimate_configuration(
                    KIND, samples, iterations=job.iterations, waves=waves, prior=prior, settings=settings.model
                ),
                "planner": decision.estimates[KIND],
            }
            oracle = _oracle(job, samples, prior, statistics.fmean(past_spread), settings, waves=waves)
            skipped += decision.estimates[KIND].method == "history"
            pilots += len(sample_plan.pilots)  # type: ignore[attr-defined]
            for name, estimate in predicted.items():
                errors[name].append(estimate.seconds / actual - 1.0)
            errors["oracle"].append(oracle / actual - 1.0)
        # What the controller keeps of the estimate it wrote: the pilots' spread (taskCov).
        if decision.estimates[KIND].task_cov is not None:
            past_covs.append(decision.estimates[KIND].task_cov)
        # The Job finished: its real seconds per iteration join its family's history.
        past.append(actual / waves / job.iterations)
        pod_times = [job.startup + rate * job.iterations for rate in job.per_iteration]
        past_spread.append(statistics.pstdev(pod_times) / statistics.fmean(pod_times))
    scored = len(errors["sampling"])
    return {
        "scenario": asdict(scenario),
        "jobs": scored,
        "mean_pilots": pilots / scored if scored else 0.0,
        "planner_skipped_sampling": skipped / scored if scored else 0.0,
        "predictors": {name: _figures(values) for name, values in errors.items()},
    }


def _oracle(job: Job, samples: Sequence[Sample], prior: object, task_cov: float, settings: EstimatorSettings, *, waves: int) -> float:
    """SLearn's posterior with σ1 at least the family's true task spread (see the module docstring)."""
    pilots = sorted({sample.pilot for sample in samples})
    means = []
    variances = []
    for pilot in pilots:
        one = estimate_configuration(
            KIND, [s for s in samples if s.pilot == pilot], iterations=job.iterations, settings=settings.model
        )
        means.append(one.pod_seconds)
        variances.append(one.uncertainty_seconds**2)
    m = len(means)
    mean = statistics.fmean(means)
    spread = statistics.variance(means) if m >= 2 else 0.0
    task_variance = max(spread, statistics.fmean(variances), (task_cov * mean) ** 2, 1e-12)
    prior_mean = prior.mean_per_iteration * job.iterations  # type: ignore[attr-defined]
    prior_variance = max((prior.std_per_iteration * job.iterations) ** 2, 1e-12)  # type: ignore[attr-defined]
    precision = m / task_variance + 1 / prior_variance
    return (sum(means) / task_variance + prior_mean / prior_variance) / precision * waves


def _figures(errors: Sequence[float]) -> dict[str, float]:
    absolute = sorted(abs(e) for e in errors)
    return {
        "mae": statistics.fmean(absolute),
        "p50": _percentile(absolute, 50),
        "p90": _percentile(absolute, 90),
        "bias": statistics.fmean(errors),
    }


def _percentile(ordered: Sequence[float], q: float) -> float:
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def table(results: Sequence[dict[str, object]]) -> str:
    header = "| trace | jobs | pilots (mean) | " + " | ".join(
        f"{name} MAE / p50 / p90" for name in PREDICTORS[:4]
    ) + " | planner skipped sampling | oracle σ1 (reference): MAE / p50 / p90 |"
    lines = [header, "|" + "---|" * (4 + len(PREDICTORS))]
    for result in results:
        scenario = result["scenario"]
        assert isinstance(scenario, dict)
        label = f"{scenario['name']} (drift {scenario['drift']:g}, skew {scenario['skew']:g}, stragglers {scenario['stragglers']:.0%})"
        cells = []
        figures = result["predictors"]
        assert isinstance(figures, dict)
        best = min(PREDICTORS[:3], key=lambda name: figures[name]["mae"])
        for name in PREDICTORS:
            f = figures[name]
            text = f"{f['mae']:.1%} / {f['p50']:.1%} / {f['p90']:.1%}"
            cells.append(f"**{text}**" if name == best else text)
        lines.append(
            f"| {label} | {result['jobs']} | {result['mean_pilots']:.1f} | " + " | ".join(cells[:4])
            + f" | {result['planner_skipped_sampling']:.0%} | {cells[4]} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=40)
    parser.add_argument("--runs", type=int, default=25, help="Jobs per family, in order")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    results = [evaluate(scenario, families=args.families, runs=args.runs, seed=args.seed) for scenario in SCENARIOS]
    print(table(results))
    print(
        "\n|error| of the Job's total time (sum of its pods), mean / median / 90th percentile; bold: the lowest "
        "mean of sampling, history and posterior. Jobs with >= 3 earlier runs of their family are scored. "
        "'oracle σ1' is not the estimator's code: it floors σ1 with the true past task spread (see the docstring)."
    )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
