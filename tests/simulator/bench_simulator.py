"""Benchmark of the simulator: ``python tests/simulator/bench_simulator.py [--jobs N] [--seed S]``.

Not collected by pytest (no ``test_`` prefix) and never asserts on time. It runs the paper's
experiment (84 nodes, load 2.0, P = 1, s = 4; 65,536 jobs by default) once per policy and prints,
per run, wall and CPU seconds, simulated jobs per second and events per second. The issue's
target: all four policies (with the FIFO run that derives the arrivals, which doubles as
FIFO's result) in under 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scheduler.preemption import FitGppSettings  # noqa: E402
from scheduler.simulator.fitgpp.experiment import Experiment, Variant, derive_arrivals, run_variant  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2**16)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    experiment = Experiment(jobs=args.jobs)
    print(f"python {platform.python_version()}, {args.jobs} jobs, 84 nodes, load 2.0")
    started_all = time.perf_counter()
    jobs = experiment.workload.generate(jobs=args.jobs, seed=args.seed, cluster=experiment.cluster)
    print(f"{'workload':<18} {time.perf_counter() - started_all:7.2f} s wall")
    rows = []
    wall, cpu = time.perf_counter(), time.process_time()
    jobs, fifo = derive_arrivals(experiment, jobs, seed=args.seed)
    rows.append(("fifo (arrivals)", time.perf_counter() - wall, time.process_time() - cpu, fifo.events))
    for policy in ("lrtp", "rand", "fitgpp"):
        variant = Variant(label=policy, policy=policy, settings=FitGppSettings())
        wall, cpu = time.perf_counter(), time.process_time()
        result = run_variant(experiment, variant, jobs, seed=args.seed)
        rows.append((policy, time.perf_counter() - wall, time.process_time() - cpu, result.events))
    for name, seconds, cpu_seconds, events in rows:
        print(
            f"{name:<18} {seconds:7.2f} s wall {cpu_seconds:7.2f} s cpu  {args.jobs / seconds:9,.0f} jobs/s  "
            f"{events / seconds:9,.0f} events/s"
        )
    total = time.perf_counter() - started_all
    events = sum(row[3] for row in rows)
    print(f"{'all four policies':<18} {total:7.2f} s wall  {events / total:9,.0f} events/s ({events} events)")


if __name__ == "__main__":
    main()
