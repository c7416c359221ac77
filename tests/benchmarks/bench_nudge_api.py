"""What the leader's readers of the pending pods ask of the API server per minute, counted (never
timed): the requeue nudge (scheduler/cluster/nudge.py), HiveD's reclaim of stranded pods
(scheduler/cluster/stranded.py), or both, as ``--reader`` says: list calls, pods and bytes listed,
watches opened, watch events and bytes, and signal pods, with ``--pending`` pods of the cellfit profile parked
(kube-scheduler's PodScheduled=False, reason Unschedulable) and ``--changes`` of them changing
each minute (kube-scheduler rewriting the condition), against a server that lists and watches
them as kube-apiserver does (tests/support/pending_pods_api.py). The pods are kube_objects.pod's
(~2.4 KB of JSON each; real ones, with more managedFields, env and volumes, are larger). Each
reader passes every 5 s on a simulated clock; where the checkout has the term's shared view of
the pending pods (scheduler/cluster/pending.py), the reclaim reads it, and the nudge too with
``both``. The reclaim's engine is a real HivedEngine that knows none of the pods, so it books
nothing and lists no nodes: what is counted is the pending pods' reading alone.

``--source DIR`` runs the readers of another checkout (``git archive <commit> | tar -x -C DIR``)
for a before/after comparison.

    python tests/benchmarks/bench_nudge_api.py [--reader nudge|reclaim|both] [--pending 5000] [--minutes 3]
                                               [--changes 50] [--source DIR]

This prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support import kube_objects as k  # noqa: E402
from tests.support.pending_pods_api import PendingPodsServer  # noqa: E402

PERIOD_SECONDS = 5.0
T0 = datetime(2026, 11, 25, 17, 1, 30, tzinfo=timezone.utc).timestamp()  # the term's beginning, simulated


def parked_pod(name: str, *, message: str) -> dict[str, Any]:
    body = k.pod(name, gpus=1)
    body["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                                     "lastTransitionTime": "2026-11-25T17:00:30Z", "reason": "Unschedulable", "message": message}]
    return body


def counts(server: PendingPodsServer) -> tuple[int, ...]:
    return (server.lists, server.listed_objects, server.listed_bytes, server.watches, server.watch_events, server.watched_bytes,
            server.signal_calls)


def readers(kind: str, server: PendingPodsServer, clock: list[float]) -> tuple[list[Callable[[], object]], list[Callable[[], None]]]:
    """Each reader's pass, and what stops them: the checkout's own, imported from it."""
    import threading

    from scheduler.cells import HivedEngine
    from scheduler.cluster.nudge import Nudger
    from scheduler.cluster.stranded import StrandedGuarantees
    from scheduler.config import NudgeSettings
    from scheduler.core.pods import PodStore
    from tests.cells.helpers import rack_cluster

    shared: dict[str, Any] = {}
    try:
        from scheduler.cluster.pending import PendingPods
    except ImportError:  # a checkout from before the shared view: each reader reads on its own
        pass
    else:
        if kind != "nudge":
            view = PendingPods(api=server, scheduler_name="cellfit")
            view.start()
            shared["pending"] = view
    passes: list[Callable[[], object]] = []
    stops: list[Callable[[], None]] = [view.stop for view in shared.values()]
    if kind in ("nudge", "both"):
        nudge = Nudger(api=server, settings=NudgeSettings(), namespace="cellfit-system", ready=lambda: True, clock=lambda: clock[0],
                       **shared)
        passes.append(nudge.pass_once)
        stops.append(nudge.stop)
    if kind in ("reclaim", "both"):
        engine = HivedEngine.from_config(rack_cluster(vcs={"a": [{"cellType": "V100-RACK", "count": 2}]}))
        stranded = StrandedGuarantees(api=server, engine=engine, pods=PodStore(), lock=threading.RLock(),  # type: ignore[arg-type]
                                      scheduler_name="cellfit", gpu_resource="nvidia.com/gpu", after_seconds=30.0, **shared)
        passes.append(lambda: stranded.book(now=clock[0]))
    return passes, stops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reader", choices=("nudge", "reclaim", "both"), default="nudge")
    parser.add_argument("--pending", type=int, default=5000)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--changes", type=int, default=0, help="pods whose condition changes each minute")
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose readers run")
    options = parser.parse_args()
    sys.path.insert(0, str(options.source.resolve()))
    for name in [name for name in sys.modules if name.split(".")[0] in ("scheduler", "tests")]:
        del sys.modules[name]

    message = "0/64 nodes are available: 64 Insufficient nvidia.com/gpu. preemption: 0/64 nodes are available: 64 No victims found."
    server = PendingPodsServer(parked_pod(f"burst-{i}", message=message) for i in range(options.pending))
    clock = [T0]
    passes, stops = readers(options.reader, server, clock)
    print(f"{options.reader} of {options.source}: {options.pending} pending pods, {options.changes} changing a minute")
    print(f"{'minute':>6} {'lists':>6} {'pods listed':>12} {'MB listed':>10} {'watches':>8} {'watch events':>13} {'MB watched':>11} {'signal calls':>13}")
    before = counts(server)
    try:
        for minute in range(1, options.minutes + 1):
            for _ in range(int(60 / PERIOD_SECONDS)):
                for reader_pass in passes:
                    reader_pass()
                clock[0] += PERIOD_SECONDS
            read = server.events_read + options.changes
            for change in range(options.changes):
                server.update(f"ml/burst-{(minute * options.changes + change) % options.pending}",
                              lambda pod, m=minute: pod["status"]["conditions"][0].update(message=f"{message} ({m})"))
            if server.watches:  # counted once the watcher has read them
                server.wait_read(read)
            now = counts(server)
            lists, objects, listed, watches, events, watched, signals = (b - a for a, b in zip(before, now))
            print(f"{minute:>6} {lists:>6} {objects:>12} {listed / 1e6:>10.2f} {watches:>8} {events:>13} {watched / 1e6:>11.3f} {signals:>13}")
            before = now
    finally:
        for stop in stops:
            stop()
        server.close()


if __name__ == "__main__":
    main()
