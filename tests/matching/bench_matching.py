"""Benchmark of AlloX's matching: ``python tests/matching/bench_matching.py [--repeat N]``.

Not collected by pytest (no ``test_`` prefix) and never asserts on time: it prints, for each
jobs × machines size, the time to prepare the instance (validate Job and Machine objects and turn
them into arrays), to build Q from those arrays (position bound, slots, matrix), to solve it, end to
end (``schedule()``: Job objects in, assignments out), and scipy's ``linear_sum_assignment`` on
the very same Q in the same run, with the ratio end-to-end / scipy. Minimum of ``--repeat`` runs.

Two scenarios per size:

* ``idle``: every machine free, all jobs at time 0 (§3.1, Lemma 3.1);
* ``busy``: 80% of machines busy for a random remaining time (§3.2), so that every machine has
  its own ω and the identical-machine reduction of Claim 2 does not apply.

Machines are half GPUs, half CPU slots; GPU times are uniform in [1, 100] and CPU times a speedup
in [1.8, 10] slower (§5.1). ``paper Q`` is scipy on the paper's unbounded n × (n·m) matrix, where
it fits in memory.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
from scipy.optimize import linear_sum_assignment

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.matching.model import Job, Machine  # noqa: E402
from scheduler.matching.solve import Problem, cost_matrix, prepare, schedule  # noqa: E402

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}; min of {args.repeat} runs, ms")
    header = (
        f"{'jobs x machines':>16} {'scenario':>8} {'Q shape':>14} {'prepare':>8} {'build Q':>8} {'solve':>8} "
        f"{'end-to-end':>10} {'scipy(Q)':>9} {'e2e/scipy':>9} {'paper Q':>9}"
    )
    print(header)
    print("-" * len(header))
    for jobs, machines in SIZES:
        for busy in (False, True):
            job_list, machine_list, busy_until = instance(jobs, machines, busy=busy, seed=jobs + machines)

            def prepared() -> Problem:
                return prepare(jobs=job_list, machines=machine_list, now=0.0, busy_until=busy_until)

            problem = prepared()
            _, q = cost_matrix(problem)
            prepare_ms = best(prepared, args.repeat)
            build_ms = best(lambda: cost_matrix(problem), args.repeat)
            solve_ms = best(lambda: linear_sum_assignment(q), args.repeat)
            e2e_ms = best(
                lambda: schedule(jobs=job_list, machines=machine_list, busy_until=busy_until), args.repeat
            )
            # scipy alone on the same matrix, timed again on a fresh copy so that neither caches
            # nor memory layout favour it or us.
            fresh = np.array(q, copy=True)
            scipy_ms = best(lambda: linear_sum_assignment(fresh), args.repeat)
            paper = "-"
            if jobs * jobs * machines <= PAPER_Q_LIMIT:
                _, full = cost_matrix(problem, bounded=False)
                paper = f"{best(lambda: linear_sum_assignment(full), 1):.1f}"
                del full
            print(
                f"{f'{jobs:,} x {machines:,}':>16} {'busy' if busy else 'idle':>8} "
                f"{f'{q.shape[0]}x{q.shape[1]}':>14} {prepare_ms:8.3f} {build_ms:8.3f} {solve_ms:8.3f} {e2e_ms:10.3f} "
                f"{scipy_ms:9.3f} {e2e_ms / scipy_ms:9.2f} {paper:>9}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
