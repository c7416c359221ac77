"""What ``gc.freeze()`` after the watch cache's first sync (scheduler/extender/gc_tuning.py) does
to the extender's full (generation 2) collections and to filter calls, at N pods.

The production composition (``cellfit serve``'s runtime, resource fit) over the listing test
double holds N pods (100 per node), applied as watch events. Then, in the same run, before and
after :func:`freeze_long_lived`:

* a full collection's duration (``gc.collect()``, median of ``--rounds``);
* ``--calls`` filter calls (a 1-GPU pod offered 100 nodes, in process), each timed, with every
  automatic collection during them timed by generation through ``gc.callbacks``. Automatic full
  collections are rare in a quiet process, so every ``--every``-th call also runs one inside
  the call (``gc.collect(2)``) as the one-in-nine the AlloX benchmark showed: that call's time is
  a verb with a full collection in it, and the p99 shows it.

And the AlloX solver child (``allox.solverProcess``), on bench_admission.py's full cluster (1,000
pending Jobs, 990 machines busy): a full collection in the child after its passes, frozen after
its first decision (placer/solver_wire.py) and unfrozen, and in this (the parent's) process.
The child imports this script's modules too (spawn re-imports the main module), as it does
under bench_admission.py: its heap is larger than a served child's.

    python tests/benchmarks/bench_gc_freeze.py [--pods 10000,50000] [--calls 900] [--every 9] [--passes 9]

Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_admission's fixtures

import msgspec  # noqa: E402
from bench_gc import full_collection_ms  # noqa: E402

from scheduler.config import parse_settings  # noqa: E402
from scheduler.extender.gc_tuning import freeze_long_lived  # noqa: E402
from scheduler.extender.runtime import Runtime, build_runtime  # noqa: E402
from scheduler.extender.service import Answer  # noqa: E402
from scheduler.kube import wire  # noqa: E402
from tests.support import kube_objects as k  # noqa: E402
from tests.support.api_double import ListingApi  # noqa: E402

PODS_PER_NODE = 100
OFFERED_NODES = 100


def loaded_runtime(pods: int) -> Runtime:
    nodes = [k.node(f"node-{i:04d}", gpus=8, cpu="256") for i in range(max(1, pods // PODS_PER_NODE))]
    settings = parse_settings("policy: {name: resource-fit}\nestimator: {enabled: false}\nleaderElection: {enabled: false}\n"
                              "nudge: {enabled: false}\n")
    runtime = build_runtime(settings, api=ListingApi(nodes=nodes, pods=[]))  # type: ignore[arg-type]
    cache = runtime.cache
    assert cache is not None
    for reflector in cache.reflectors:
        reflector._list_and_replace()
    for i in range(pods):
        body = k.pod(f"train-{i:06d}", uid=f"uid-{i:06d}", cpu="1", memory="1Gi", node_name=f"node-{i % len(nodes):04d}", phase="Running")
        cache._apply_pod(msgspec.convert(body, wire.Pod))
    return runtime


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def filter_calls(runtime: Runtime, *, calls: int, every: int) -> dict[str, float]:
    offered = [{"metadata": {"name": f"node-{i:04d}"}} for i in range(OFFERED_NODES)]
    body = k.dumps(k.extender_args(k.pod("waiting", uid="uid-waiting", gpus=1), offered, node_cache_capable=True))
    pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
    began: list[float] = []

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began.append(time.perf_counter())
        else:
            pauses[info["generation"]].append(time.perf_counter() - began.pop())

    handler = runtime.app.routes["/v1/extender/filter"].handler
    latencies = []
    gc.callbacks.append(timed)
    try:
        for call in range(calls):
            started = time.perf_counter()
            answer = handler(body)
            if every and call % every == every - 1:
                gc.collect(2)
            latencies.append(time.perf_counter() - started)
            assert isinstance(answer, Answer) and b'"Error":""' in answer.body, answer
    finally:
        gc.callbacks.remove(timed)
    full = pauses[2] or [0.0]
    return {
        "p50_ms": 1000 * percentile(latencies, 0.50),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "full_ms": 1000 * statistics.median(full),
        "young": len(pauses[0]) + len(pauses[1]),
        "young_longest_ms": 1000 * max(pauses[0] + pauses[1], default=0.0),
    }


def child_full_collections_ms(rounds: int) -> tuple[int, float, float]:
    """In the solver child: how many objects its first decision froze, and a full collection
    frozen and unfrozen (then frozen again, as it was)."""
    frozen = gc.get_freeze_count()
    with_freeze = full_collection_ms(rounds)
    gc.unfreeze()
    without = full_collection_ms(rounds)
    gc.freeze()
    return frozen, with_freeze, without


def solver_figures(*, passes: int, rounds: int) -> None:
    import bench_admission as allox

    from placer.controller import PlacerController
    from scheduler.config import AlloxSettings

    raw, free, *_ = allox.instance(1000, busy=allox.FULL_BUSY)
    placer = PlacerController(api=allox.NullApi(), jobs=allox.Jobs(raw), free_by_node=lambda _running: free,
                              capacity=lambda: allox.CAPACITY_RESOURCES, settings=AlloxSettings(alpha=1.0, solver_process=True),
                              gpu_resource="nvidia.com/gpu", clock=lambda: allox.NOW)
    decisions = []
    for _ in range(passes):
        placer._started.clear()
        placer._told.clear()
        placer.admit()
        decisions.append(placer.last.from_state_seconds)
    solver = placer._solver
    assert solver is not None
    frozen, child_with, child_without = solver.submit(child_full_collections_ms, rounds).result()
    parent_without = full_collection_ms(rounds)
    freeze_long_lived(what="benchmark passes run")
    parent_with = full_collection_ms(rounds)
    gc.unfreeze()
    print(f"AlloX full cluster, 1,000 pending Jobs, solver process: decision p50 {1000 * percentile(decisions, 0.5):.1f} ms; "
          f"a full collection in the child {child_without:.2f} ms unfrozen, {child_with:.2f} ms after its first decision froze "
          f"{frozen} objects (x{child_without / max(child_with, 1e-6):.0f}); in the parent {parent_without:.2f} -> {parent_with:.2f} ms",
          flush=True)
    solver.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", default="10000,50000")
    parser.add_argument("--calls", type=int, default=900)
    parser.add_argument("--every", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--passes", type=int, default=9, help="AlloX passes before the solver child's figures; 0: none")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    for pods in (int(text) for text in args.pods.split(",")):
        runtime = loaded_runtime(pods)
        gc.collect()
        before_full = full_collection_ms(args.rounds)
        before = filter_calls(runtime, calls=args.calls, every=args.every)
        frozen = freeze_long_lived(what="benchmark cache loaded")
        after_full = full_collection_ms(args.rounds)
        after = filter_calls(runtime, calls=args.calls, every=args.every)
        gc.unfreeze()
        print(f"{pods} pods ({frozen} objects frozen): full collection {before_full:.2f} -> {after_full:.2f} ms "
              f"(x{before_full / max(after_full, 1e-6):.0f} shorter); inside filter calls: full {before['full_ms']:.2f} -> "
              f"{after['full_ms']:.2f} ms; filter p50 {before['p50_ms']:.3f} -> {after['p50_ms']:.3f} ms, "
              f"p99 {before['p99_ms']:.2f} -> {after['p99_ms']:.2f} ms (x{before['p99_ms'] / after['p99_ms']:.1f}); "
              f"young collections {before['young']:.0f} / {after['young']:.0f}, longest "
              f"{before['young_longest_ms']:.2f} / {after['young_longest_ms']:.2f} ms", flush=True)
        del runtime
        gc.collect()
    if args.passes:
        solver_figures(passes=args.passes, rounds=args.rounds)


if __name__ == "__main__":
    main()
