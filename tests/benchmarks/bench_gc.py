"""What the cluster's pods cost the garbage collector: how much longer each full collection is
with N pods in the watch cache than with none, and the collections that applying a burst of pod
events triggers.

A full (generation 2) collection holds the GIL for as long as it walks every tracked object, a
stall of every verb and of /healthz. The pods' records (PodInfo, Resources, OwnerRef, the
engines' bookings) are structs the collector does not track, so the cache's size should add
next to nothing. This builds the production composition (``cellfit serve``'s runtime, resource
fit with FitGpp) over the listing test double, applies N pods (100 per node), then times ``gc.collect()`` (median of ``--rounds``) against
the same runtime with no pods, in the same run, and counts the automatic collections that the
pods' arrival (N watch events, the records growing from none) triggers.

    python tests/benchmarks/bench_gc.py [--pods 10000,50000] [--rounds 7]

Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from scheduler.config import parse_settings  # noqa: E402
from scheduler.extender.runtime import build_runtime  # noqa: E402
from scheduler.kube import wire  # noqa: E402
from tests.support.api_double import ListingApi  # noqa: E402
from tests.support.kube_objects import node, pod  # noqa: E402

PODS_PER_NODE = 100


def full_collection_ms(rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        gc.collect()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def one_size(pods: int, *, rounds: int, policy: str) -> dict[str, float]:
    nodes = [node(f"node-{i:04d}", gpus=8, cpu="256") for i in range(max(1, pods // PODS_PER_NODE))]
    bodies = [
        pod(f"train-{i:06d}", uid=f"uid-{i:06d}", cpu="1", node_name=f"node-{i % len(nodes):04d}", phase="Running")
        for i in range(pods)
    ]
    # The fixtures (the pods' dicts, the events) are this benchmark's: out of the collector's
    # sight; what the runtime builds from here on is not.
    arrivals = [msgspec.convert(body, wire.Pod) for body in bodies]
    del bodies
    gc.collect()
    gc.freeze()
    api = ListingApi(nodes=nodes, pods=[])
    settings = parse_settings(f"policy: {{name: {policy}}}\nestimator: {{enabled: false}}\nleaderElection: {{enabled: false}}\n"
                              "nudge: {enabled: false}\n")
    runtime = build_runtime(settings, api=api)  # type: ignore[arg-type]
    cache = runtime.cache
    assert cache is not None
    cache.nodes._list_and_replace()
    cache.pods._list_and_replace()
    empty_ms = full_collection_ms(rounds)
    tracked_empty = len(gc.get_objects())
    pauses: list[tuple[int, float]] = []
    began: list[float] = []

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began.append(time.perf_counter())
        else:
            pauses.append((info["generation"], time.perf_counter() - began.pop()))

    # The pods arrive as watch events (a burst of new pods: the records grow, which is what
    # starts collections; an update replaces a record and starts none).
    gc.callbacks.append(timed)
    try:
        for arrival in arrivals:
            cache._apply_pod(arrival)
    finally:
        gc.callbacks.remove(timed)
    assert cache.sizes()["pods"] == pods
    full_ms = full_collection_ms(rounds)
    tracked_full = len(gc.get_objects())
    gc.unfreeze()
    full_pauses = [seconds for generation, seconds in pauses if generation == 2]
    return {
        "empty_ms": empty_ms,
        "full_ms": full_ms,
        "per_thousand_ms": (full_ms - empty_ms) * 1000 / pods,
        "tracked_per_pod": (tracked_full - tracked_empty) / pods,
        "collections": len(pauses),
        "full_collections": len(full_pauses),
        "longest_ms": 1000 * max((seconds for _, seconds in pauses), default=0.0),
        "paused_ms": 1000 * sum(seconds for _, seconds in pauses),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", default="10000,50000")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for pods in (int(text) for text in args.pods.split(",")):
        figures = one_size(pods, rounds=args.rounds, policy="resource-fit")
        print(f"{pods} pods: a full collection {figures['full_ms']:.2f} ms against {figures['empty_ms']:.2f} ms with no pods "
              f"({figures['per_thousand_ms']:.3f} ms per 1,000 pods; {figures['tracked_per_pod']:.2f} tracked objects per pod); "
              f"while {pods} pods arrived: {figures['collections']:.0f} collections, {figures['full_collections']:.0f} full, "
              f"{figures['paused_ms']:.1f} ms paused in all, the longest {figures['longest_ms']:.2f} ms", flush=True)


if __name__ == "__main__":
    main()
