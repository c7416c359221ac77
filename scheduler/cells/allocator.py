"""HiveD's cell allocator: VCs bound lazily onto physical cells, guaranteed and opportunistic
bookings of GPUs, gangs, bad nodes, VC reconfiguration and recovery.

Each responsibility is a module of its own; :class:`CellAllocator` builds them over one
topology and hands the engine their verbs:

========================  ======================================================================
``virtual_clusters``      VC quotas, pinned cells, VC cells bound and released, the free space
                          (buddy allocator per chain), cells joining and leaving
``ledger``                GPU owners and health, and every counter and index derived from them
``planning``              which VC and targets a request has, and where a pod would go (no change)
``bookkeeping``           bookings by id and by pod: book, release, hand over, victims
``gangs``                 a gang's slots booked all at once, or none
``recovery``              bookings re-created from bind-info after a restart
========================  ======================================================================
"""

from __future__ import annotations

from collections import deque
from typing import Mapping

from scheduler.cells.bookkeeping import Bookkeeper
from scheduler.cells.config import VirtualClusterSpec
from scheduler.cells.gangs import GangPlanner
from scheduler.cells.ledger import LeafLedger
from scheduler.cells.planning import Planner
from scheduler.cells.recovery import Recovery
from scheduler.cells.topology import Topology
from scheduler.cells.virtual_clusters import VirtualClusters

MAX_ANOMALIES = 200


class CellAllocator:
    """All mutable HiveD state. Deterministic: every choice is ordered by configuration order
    and insertion order, never by hashing or time.

    The verbs are the components' own methods, bound here once (no wrapper call on the hot
    path); the components are public for what reaches into one of them (tests, inspection)."""

    def __init__(self, topology: Topology, virtual_clusters: Mapping[str, VirtualClusterSpec]) -> None:
        self.topology = topology
        self.anomalies: deque[str] = deque(maxlen=MAX_ANOMALIES)
        self.virtual_clusters = VirtualClusters(topology, virtual_clusters)
        self.ledger = LeafLedger(
            topology=topology,
            buddies=self.virtual_clusters.buddies,
            idle_nodes=self.virtual_clusters.idle_nodes,
            vcs=self.virtual_clusters.vcs,
        )
        self.bookkeeper = Bookkeeper(virtual_clusters=self.virtual_clusters, ledger=self.ledger)
        self.planner = Planner(topology=topology, virtual_clusters=self.virtual_clusters, bookings=self.bookkeeper.bookings)
        self.gangs = GangPlanner(virtual_clusters=self.virtual_clusters, ledger=self.ledger, planner=self.planner, bookkeeper=self.bookkeeper)
        self.recovery = Recovery(
            topology=topology, virtual_clusters=self.virtual_clusters, planner=self.planner, bookkeeper=self.bookkeeper, note=self.note
        )
        # State (the same objects the components hold; never rebound).
        self.buddies = self.virtual_clusters.buddies
        self.idle_nodes = self.virtual_clusters.idle_nodes
        self.vcs = self.virtual_clusters.vcs
        self.bookings = self.bookkeeper.bookings
        self.by_pod = self.bookkeeper.by_pod
        self.groups = self.bookkeeper.groups
        # VC lifecycle and Theorem 1
        self.configure = self.virtual_clusters.configure
        self.add_top_cell = self.virtual_clusters.add_top_cell
        self.remove_top_cell = self.virtual_clusters.remove_top_cell
        self.is_idle = self.virtual_clusters.is_idle
        self.resize_quota = self.virtual_clusters.resize_quota
        self.demand = self.virtual_clusters.demand
        self.invariant = self.virtual_clusters.invariant
        # health
        self.set_node_bad = self.ledger.set_node_bad
        # planning
        self.vc_state = self.planner.vc_state
        self.targets = self.planner.targets
        self.plan = self.planner.plan
        # bookings
        self.book = self.bookkeeper.book
        self.release = self.bookkeeper.release
        self.victims = self.bookkeeper.victims
        self.assign = self.bookkeeper.assign
        self.unassign = self.bookkeeper.unassign
        self.plan_group = self.gangs.plan_group
        # recovery
        self.recover_exact = self.recovery.recover_exact
        self.recover_on_node = self.recovery.recover_on_node

    def note(self, message: str) -> None:
        """Record an anomaly (an inconsistency found and worked around), kept for inspection."""
        self.anomalies.append(message)
