"""Benchmark of AlloX's matching: ``python tests/matching/bench_matching.py [--repeat N]``.

Not collected by pytest (no ``test_`` prefix) and never asserts on time: it prints, for each
jobs × machines size: the time to prepare the instance (validate Job and Machine objects into
arrays); to build the matrix the solver uses (position bound, slots, and either the full Q or Q
folded to one column per class of identical slots — ``classes`` gives their number, or how many
instances were folded); to solve it; end to end (``schedule()``: Job objects in, assignments out);
and scipy's ``linear_sum_assignment`` on the full Q of the same slots (``Q shape``) in the same
run, with the ratio end-to-end / scipy. Each time is the minimum of ``--repeat`` runs.

Two scenarios per size:

* ``idle``: every machine free, all jobs at time 0 (§3.1, Lemma 3.1);
* ``busy``: 80% of machines busy for a random remaining time (§3.2): busy machines each have
  their own ω, and the ~1,000 idle machines per kind compete for about as many jobs, which makes
  scipy's solve vary a lot between instances (``e2e max`` is the slowest instance).

Machines are half GPUs, half CPU slots; GPU times are uniform in [1, 100] and CPU times a speedup
in [1.8, 10] slower (§5.1). ``paper Q`` is scipy on the paper's unbounded n × (n·m) matrix, where
it fits in memory (first instance only).
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
from scipy.optimize import linear_sum_assignment

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.matching.model import Job, Machine  # noqa: E402
from scheduler.matching.solve import Problem, build, cost_matrix, match, prepare, schedule  # noqa: E402

SIZES = [(10, 100), (100, 100), (200, 500), (1_000, 10_000)]
PAPER_Q_LIMIT = 20_000_000  # entries (160 MB of float64)


def instance(jobs: int, machines: int, *, busy: bool, seed: int) -> tuple[list[Job], list[Machine], dict[str, float]]:
    rng = np.random.default_rng(seed)
    gpu = rng.uniform(1, 100, jobs)
    cpu = gpu * rng.uniform(1.8, 10, jobs)
    job_list = [
        Job(name=f"j{i}", user=f"u{i % 10}", arrival=0.0, processing_time={"gpu": float(g), "cpu": float(c)})
        for i, (g, c) in enumerate(zip(gpu, cpu))
    ]
    machine_list = [Machine(name=f"gpu-{i}", kind="gpu") for i in range(machines // 2)] + [
        Machine(name=f"cpu-{i}", kind="cpu") for i in range(machines - machines // 2)
    ]
    busy_until: dict[str, float] = {}
    if busy:
        remaining = rng.uniform(0, 200, machines)
        for machine, left, draw in zip(machine_list, remaining, rng.random(machines)):
            if draw < 0.8:
                busy_until[machine.name] = float(left)
    return job_list, machine_list, busy_until


def best(function: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def measure(jobs: int, machines: int, *, busy: bool, seed: int, repeat: int, paper_q: bool) -> dict[str, float]:
    job_list, machine_list, busy_until = instance(jobs, machines, busy=busy, seed=seed)

    def prepared() -> Problem:
        return prepare(jobs=job_list, machines=machine_list, now=0.0, busy_until=busy_until)

    problem = prepared()
    matrix = build(problem)
    _, q = cost_matrix(problem)
    result = {
        "columns": float(q.shape[1]),
        "classes": float(matrix.cost.shape[1]) if matrix.method == "classes" else math.nan,
        "prepare": best(prepared, repeat),
        "build": best(lambda: build(problem), repeat),
        "solve": best(lambda: match(problem, matrix), repeat),
        "e2e": best(lambda: schedule(jobs=job_list, machines=machine_list, busy_until=busy_until), repeat),
    }
    # scipy alone on the full Q of the same kept slots (what the folded matrix stands for).
    result["scipy"] = best(lambda: linear_sum_assignment(q), repeat)
    result["paper"] = math.nan
    if paper_q and jobs * jobs * machines <= PAPER_Q_LIMIT:
        _, full = cost_matrix(problem, bounded=False)
        result["paper"] = best(lambda: linear_sum_assignment(full), 1)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (the minimum is kept)")
    parser.add_argument("--seeds", type=int, default=5, help="random instances per row (medians are printed)")
    args = parser.parse_args()
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}; "
        f"ms, median over {args.seeds} instances of the min of {args.repeat} runs"
    )
    header = (
        f"{'jobs x machines':>16} {'scenario':>8} {'Q shape':>11} {'classes':>7} {'prepare':>8} {'build':>8} "
        f"{'solve':>8} {'end-to-end':>10} {'e2e max':>8} {'scipy(Q)':>9} {'e2e/scipy':>9} {'paper Q':>8}"
    )
    print(header)
    print("-" * len(header))
    for jobs, machines in SIZES:
        for busy in (False, True):
            runs = [
                measure(jobs, machines, busy=busy, seed=seed, repeat=args.repeat, paper_q=seed == 0)
                for seed in range(args.seeds)
            ]

            def median(key: str) -> float:
                return statistics.median(run[key] for run in runs)

            ratio = statistics.median(run["e2e"] / run["scipy"] for run in runs)
            paper = runs[0]["paper"]
            shape = f"{jobs}x{median('columns'):.0f}"
            folded = [run["classes"] for run in runs if not math.isnan(run["classes"])]
            classes = f"{statistics.median(folded):.0f}" if len(folded) == len(runs) else f"{len(folded)}/{len(runs)}"
            print(
                f"{f'{jobs:,} x {machines:,}':>16} {'busy' if busy else 'idle':>8} "
                f"{shape:>11} {classes:>7} "
                f"{median('prepare'):8.3f} {median('build'):8.3f} {median('solve'):8.3f} {median('e2e'):10.3f} "
                f"{max(run['e2e'] for run in runs):8.2f} {median('scipy'):9.3f} {ratio:9.2f} "
                f"{'-' if math.isnan(paper) else f'{paper:.1f}':>8}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
