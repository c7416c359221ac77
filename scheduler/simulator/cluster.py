"""The simulated cluster every workload of the simulator builds on: identical nodes
(:class:`ClusterSpec`), and the units its workloads are written in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from scheduler.core.resources import Resources
from scheduler.simulator.errors import InvalidWorkload

GIB: Final = 2**30
MINUTE: Final = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    """Identical nodes, named ``node-00`` ... (the paper's cluster is homogeneous)."""

    nodes: int = 84
    node: Resources = Resources(cpu_millis=32_000, memory_bytes=256 * GIB, gpus=8)

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise InvalidWorkload(f"{self.nodes} is not a positive number of nodes", field="nodes")

    @property
    def capacity(self) -> Resources:
        n = self.nodes
        return Resources(self.node.cpu_millis * n, self.node.memory_bytes * n, self.node.gpus * n)

    def node_names(self) -> list[str]:
        width = max(2, len(str(self.nodes - 1)))
        return [f"node-{i:0{width}d}" for i in range(self.nodes)]
