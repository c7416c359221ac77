"""The engine ``cellfit serve`` composes (:mod:`scheduler.composition`), built for a simulated
cluster on the simulator's virtual clock: what every workload of the simulator drives."""

from __future__ import annotations

from typing import Sequence

from scheduler.composition import Composition, compose
from scheduler.config import Settings
from scheduler.core.model import NodeInfo
from scheduler.preemption.holds import Clock


def compose_served(served: Settings, *, nodes: Sequence[NodeInfo], clock: Clock) -> Composition:
    """What ``cellfit serve`` composes from ``served`` for a cluster of ``nodes``, on ``clock``.
    HiveD without a topology discovers its cells from the cluster's Nodes, as a connected
    cellfit does at startup: here the simulated ones."""
    discovers = served.policy.name == "hived" and served.cells.topology is None
    return compose(served, connected=discovers, nodes=nodes if discovers else None, clock=clock)
