"""HiveD (../../../shared/papers/hived.txt §3-3.2) as a pure core: virtual clusters of
multi-level GPU cells, the buddy cell allocator, opportunistic pods, gangs, bad nodes and
restart recovery. No I/O, no clock, no global state; see README.md in this directory.

The extender builds a :class:`HivedEngine` with :meth:`HivedEngine.from_config` (or
:meth:`HivedEngine.from_nodes` when nothing is configured); ``cellfit check-config`` calls
:func:`check_config`.
"""

from scheduler.cells.check import CellsCheck, check_config, default_virtual_clusters
from scheduler.cells.config import (
    CellsConfig,
    CellTypeSpec,
    PhysicalCellSpec,
    TopologyConfig,
    VirtualCellSpec,
    VirtualClusterSpec,
    format_validation_error,
    parse_cells_config,
)
from scheduler.cells.discovery import describe_topology, discover_topology
from scheduler.cells.engine import HivedEngine
from scheduler.constants import ANNOTATION_GANG_SIZE, DEFAULT_VIRTUAL_CLUSTER

__all__ = [
    "ANNOTATION_GANG_SIZE",
    "DEFAULT_VIRTUAL_CLUSTER",
    "CellTypeSpec",
    "CellsCheck",
    "CellsConfig",
    "HivedEngine",
    "PhysicalCellSpec",
    "TopologyConfig",
    "VirtualCellSpec",
    "VirtualClusterSpec",
    "check_config",
    "default_virtual_clusters",
    "describe_topology",
    "discover_topology",
    "format_validation_error",
    "parse_cells_config",
]
