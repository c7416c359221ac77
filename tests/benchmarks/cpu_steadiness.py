"""How steady is one CPU's speed? The question under every accuracy figure of the estimator: a
sample can only predict its full run if the CPU runs at the same speed during both.

One thread pinned to ``--cpu`` multiplies two 128x128 float32 matrices (numpy, one BLAS thread)
for ``--seconds`` and counts the products in every half second; with ``--load CPUS`` the same
loop runs on those CPUs meanwhile (neighbours: shared caches, memory, power budget; on a VM the
host's other tenants are never visible). Prints the median rate, its spread (coefficient of
variation, min, max) and the share of half seconds more than 10% off the median.

    OPENBLAS_NUM_THREADS=1 python tests/benchmarks/cpu_steadiness.py --cpu 4 --seconds 20 [--load 5-15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # before numpy's import: one BLAS thread, here and in the neighbours

import numpy  # noqa: E402

WINDOW_SECONDS = 0.5


def rates(*, seconds: float) -> list[float]:
    """Matrix products per second, one value per half second."""
    a = numpy.random.default_rng(0).random((128, 128), dtype=numpy.float32)
    b = a.copy()
    out = numpy.empty_like(a)
    measured = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        started, products = time.perf_counter(), 0
        while time.perf_counter() - started < WINDOW_SECONDS:
            numpy.matmul(a, b, out=out)
            products += 1
        measured.append(products / (time.perf_counter() - started))
    return measured


def cpus(text: str) -> list[int]:
    chosen: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        chosen += range(int(low), int(high or low) + 1)
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", type=int, default=0, help="the CPU measured (default 0)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long (default 20)")
    parser.add_argument("--load", type=cpus, default=[], metavar="CPUS", help="run the same loop on these CPUs meanwhile (e.g. 5-15)")
    parser.add_argument("--neighbour", action="store_true", help=argparse.SUPPRESS)  # one of --load's loops
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    if args.neighbour:
        rates(seconds=args.seconds)
        return
    neighbours = [
        subprocess.Popen([sys.executable, __file__, "--neighbour", "--cpu", str(cpu), "--seconds", str(args.seconds + 2)])
        for cpu in args.load
    ]
    time.sleep(1.0 if neighbours else 0.0)  # the neighbours past their start-up
    measured = rates(seconds=args.seconds)
    for neighbour in neighbours:
        neighbour.wait()
    median = statistics.median(measured)
    off = sum(abs(r - median) > 0.1 * median for r in measured) / len(measured)
    print(
        f"cpu {args.cpu}, {len(args.load)} loaded neighbours: median {median:,.0f} products/s, "
        f"cv {statistics.pstdev(measured) / statistics.fmean(measured):.1%}, min {min(measured):,.0f}, max {max(measured):,.0f}, "
        f"{off:.0%} of half seconds >10% off the median ({len(measured)} half seconds)"
    )


if __name__ == "__main__":
    main()
