"""What the requeue nudge (scheduler/cluster/nudge.py) asks of the API server per minute, counted
(never timed): list calls, pods and bytes listed, watch events and bytes, and signal pods, with
``--pending`` pods of the cellfit profile parked and ``--changes`` of them changing each minute
(kube-scheduler rewriting a pod's PodScheduled condition), against a server that lists and
watches them as kube-apiserver does (tests/support/pending_pods_api.py). The pods are
kube_objects.pod's (~2.4 KB of JSON each; real ones, with more managedFields, env and volumes,
are larger). The nudge passes every 5 s on a simulated clock.

``--source DIR`` runs the nudge of another checkout (``git archive <commit> | tar -x -C DIR``)
for a before/after comparison.

    python tests/benchmarks/bench_nudge_api.py [--pending 5000] [--minutes 3] [--changes 50] [--source DIR]

This prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

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
    return (server.lists, server.listed_objects, server.listed_bytes, server.watch_events, server.watched_bytes, server.signal_calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", type=int, default=5000)
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--changes", type=int, default=0, help="pods whose condition changes each minute")
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose nudge runs")
    options = parser.parse_args()
    sys.path.insert(0, str(options.source.resolve()))
    for name in [name for name in sys.modules if name == "scheduler" or name.startswith("scheduler.")]:
        del sys.modules[name]
    from scheduler.cluster.nudge import Nudger
    from scheduler.config import NudgeSettings

    message = "0/64 nodes are available: 64 Insufficient nvidia.com/gpu. preemption: 0/64 nodes are available: 64 No victims found."
    server = PendingPodsServer(parked_pod(f"burst-{i}", message=message) for i in range(options.pending))
    clock = [T0]
    nudge = Nudger(api=server, settings=NudgeSettings(), namespace="cellfit-system", ready=lambda: True, clock=lambda: clock[0])
    print(f"nudge of {options.source}: {options.pending} pending pods, {options.changes} changing a minute")
    print(f"{'minute':>6} {'lists':>6} {'pods listed':>12} {'MB listed':>10} {'watch events':>13} {'MB watched':>11} {'signal calls':>13}")
    before = counts(server)
    try:
        for minute in range(1, options.minutes + 1):
            for _ in range(int(60 / PERIOD_SECONDS)):
                nudge.pass_once()
                clock[0] += PERIOD_SECONDS
            read = server.events_read + options.changes
            for change in range(options.changes):
                server.update(f"ml/burst-{(minute * options.changes + change) % options.pending}",
                              lambda pod, m=minute: pod["status"]["conditions"][0].update(message=f"{message} ({m})"))
            if server.watches:  # counted once the watcher has read them
                server.wait_read(read)
            now = counts(server)
            lists, objects, listed, events, watched, signals = (b - a for a, b in zip(before, now))
            print(f"{minute:>6} {lists:>6} {objects:>12} {listed / 1e6:>10.2f} {events:>13} {watched / 1e6:>11.3f} {signals:>13}")
            before = now
    finally:
        nudge.stop()
        server.close()


if __name__ == "__main__":
    main()
