"""What a Prometheus scrape of cellfit under HiveD costs the verbs: how long the HiveD gauges
hold the engine lock (``HivedEngine.metrics``, which the extender's collector calls under it,
scheduler/extender/runtime.py), read from the counts kept as cells change, against the full
walk over every cell that it replaced (tests/cells/metrics_walk.py), in the same run and on the
same engine, taking turns. Also the whole exposition (every family of a fresh
``ExtenderMetrics`` with the cells collector, written as Prometheus text), which the scrape waits
for but the verbs do not.

Clusters as tests/cells/bench_cells.py builds them (racks of 256 nodes of 8 GPUs, two VCs),
filled to half their GPUs with guaranteed pods of 1 to 8 GPUs, then opportunistic pods on a
twentieth, and one node in a hundred bad, so that every gauge counts something.

    python tests/benchmarks/bench_cell_metrics.py [--rounds 15] [--racks 2,32]

Medians in milliseconds; figures only, nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from scheduler.cells import HivedEngine  # noqa: E402
from scheduler.cells.planning import Unplaceable  # noqa: E402
from scheduler.core.model import NodeInfo  # noqa: E402
from scheduler.core.resources import Resources  # noqa: E402
from scheduler.extender.metrics import ExtenderMetrics  # noqa: E402
from tests.cells.bench_cells import config  # noqa: E402
from tests.cells.helpers import pod as make_pod  # noqa: E402
from tests.cells.metrics_walk import metrics_by_walk  # noqa: E402

NODES_PER_RACK = 256
GPUS_PER_NODE = 8


def fill(engine: HivedEngine, *, share: float, opportunistic: bool, rng: random.Random, first: int) -> int:
    """Book pods (HiveD's plan and booking, no filter verb) until ``share`` of the GPUs are
    used or placements keep failing; returns the next pod number."""
    total = engine.topology.total_gpus()
    used = total - sum(top.idle_gpus for top in engine.topology.top_cells)
    misses, number = 0, first
    while used < share * total and misses < 50:
        number += 1
        gpus = rng.choice((1, 1, 1, 2, 4, 8))
        pod = make_pod(f"fill-{number}", gpus, ("racks", "nodes")[number % 2], priority="opportunistic" if opportunistic else None)
        context = engine._context(pod)
        try:
            spot = engine.allocator.plan(context.request, context.vc, context.targets, allowed=None)
        except Unplaceable:
            misses += 1
            continue
        engine._book(spot, context, pod)
        used += gpus
    return number


def build(racks: int, rng: random.Random) -> HivedEngine:
    engine = HivedEngine.from_config(config(racks, NODES_PER_RACK))
    number = fill(engine, share=0.5, opportunistic=False, rng=rng, first=0)
    fill(engine, share=0.55, opportunistic=True, rng=rng, first=number)
    for name in rng.sample(sorted(engine.topology.nodes), max(1, len(engine.topology.nodes) // 100)):
        engine.apply_node(NodeInfo(name=name, allocatable=Resources(gpus=GPUS_PER_NODE), ready=False))
    return engine


def held(lock: threading.Lock, read: Callable[[], Any]) -> float:
    """Seconds ``read`` holds ``lock``, as the scrape holds the engine lock."""
    with lock:
        start = time.perf_counter()
        read()
        return time.perf_counter() - start


def exposition(engine: HivedEngine, lock: threading.Lock) -> Callable[[], bytes]:
    """The cells families of /metrics, collected and written as Prometheus text."""
    metrics = ExtenderMetrics(CollectorRegistry(auto_describe=True))

    def locked() -> Any:
        with lock:
            return engine.metrics()

    metrics.track_cells(locked)
    return lambda: generate_latest(metrics.registry)


def median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e3:9.3f}"


def run(racks: int, rounds: int, rng: random.Random) -> None:
    start = time.perf_counter()
    engine = build(racks, rng)
    setup = time.perf_counter() - start
    gc.collect()
    gc.freeze()  # the cell tree would otherwise weigh on every timed round's collections
    lock = threading.Lock()
    scrape = exposition(engine, lock)
    counted: list[float] = []
    walked: list[float] = []
    scraped: list[float] = []
    for _ in range(rounds):  # taking turns: the machine's drift weighs on both alike
        counted.append(held(lock, engine.metrics))
        walked.append(held(lock, lambda: metrics_by_walk(engine.allocator)))
        begin = time.perf_counter()
        scrape()
        scraped.append(time.perf_counter() - begin)
    gc.unfreeze()
    figures = engine.metrics()
    same = figures == metrics_by_walk(engine.allocator)
    nodes = next(row for row in figures["physical"] if row["cellType"] == "NODE")
    gpus = racks * NODES_PER_RACK * GPUS_PER_NODE
    ratio = statistics.median(walked) / statistics.median(counted)
    print(
        f"{gpus:>7,} {len(engine.topology.nodes):>6,} {median_ms(counted)} {median_ms(walked)} {ratio:>9,.0f}x "
        f"{median_ms(scraped)}   {'yes' if same else 'NO':>5}  (node cells: {nodes['used']:,} bound, "
        f"{nodes['opportunistic']:,} with opportunistic pods, {nodes['bad']:,} bad; setup {setup:.1f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--racks", default="2,32", help="comma-separated rack counts (256 nodes x 8 GPUs each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"medians of {args.rounds} rounds, milliseconds; lock held = engine.metrics() under a lock, as the scrape takes it")
    print(f"{'GPUs':>7} {'nodes':>6} {'counts':>9} {'old walk':>9} {'walk/new':>10} {'exposition':>10} {'equal':>6}")
    for racks in (int(r) for r in args.racks.split(",")):
        run(racks, args.rounds, random.Random(args.seed))


if __name__ == "__main__":
    main()
