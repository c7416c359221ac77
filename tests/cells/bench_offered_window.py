"""HiveD's filter and reservation CPU per pod under a burst of one-GPU pods on one rack, offered
as kube-scheduler offers them: a window of nodes not full, whose start moves on by the nodes it
looked at (its percentageOfNodesToScore, rotating). Each pod is filtered, reserved on the node
HiveD placed it on, and then shown bound, as the watch would.

    python tests/cells/bench_offered_window.py [--nodes 1000] [--offered 420] [--pods 1000]

Prints the mean CPU (thread time) of filter and of reserve; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[2]))

from scheduler.cells import HivedEngine  # noqa: E402
from scheduler.kube.names import filter_offered  # noqa: E402
from tests.cells.helpers import bound, node, pod, rack_cluster  # noqa: E402


def burst(*, nodes: int, offered: int, pods: int) -> tuple[float, float]:
    """Mean filter and reserve seconds per pod."""
    names = [f"r0n{i}" for i in range(nodes)]
    engine = HivedEngine.from_config(rack_cluster(1, nodes))
    for name in names:
        engine.apply_node(node(name))
    full: set[str] = set()
    start, filtering, reserving = 0, 0.0, 0.0
    for index in range(pods):
        window: list[str] = []
        while len(window) < offered:  # kube-scheduler's own filters leave full nodes out
            name = names[start % nodes]
            start += 1
            if name not in full:
                window.append(name)
        placed = pod(f"p{index}", 1, None)
        began = time.thread_time()
        decision = filter_offered(engine, placed, window)
        filtered = time.thread_time()
        placement = engine.reserve(placed, decision.feasible[0])
        filtering += filtered - began
        reserving += time.thread_time() - filtered
        engine.apply_pod(bound(placed, placement.node_name, dict(placement.annotations)))
        if engine.topology.nodes[placement.node_name].guaranteed_free == 0:
            full.add(placement.node_name)
    return filtering / pods, reserving / pods


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--offered", type=int, default=420)
    parser.add_argument("--pods", type=int, default=1000)
    args = parser.parse_args()
    filtering, reserving = burst(nodes=args.nodes, offered=args.offered, pods=args.pods)
    print(f"{args.nodes} nodes, {args.offered} offered: filter {filtering * 1e6:.0f} us, reserve {reserving * 1e6:.0f} us per pod")


if __name__ == "__main__":
    main()
