"""Where opportunistic pods look for idle GPUs: node cells by idle GPU count, split by whether a
VC cell overlaps the node.

Opportunistic pods go first to nodes no VC holds, so that owners rarely have to preempt them,
and best fit within that (fullest node first). Marking every node of a freshly bound 256-node rack
as "held" would cost hundreds of index moves per bind, so nodes under a *wide* parent (more than
``WIDE`` nodes, i.e. real racks) live in a per-parent group that a bound ancestor covers with a
single counter; the search merges the groups' best-fit orders. Nodes under narrow parents, and
standalone nodes, share one group per chain and move individually.
"""

from __future__ import annotations

import heapq
from operator import itemgetter
from typing import Iterator

from scheduler.cells.buckets import Buckets
from scheduler.cells.topology import WIDE, Cell, Chain, Topology


class _Group:
    __slots__ = ("covered", "free", "held", "order")

    def __init__(self, order: int) -> None:
        self.order = order
        self.covered = 0  # VC cells at or above the group's parent that cover every node in it
        self.free: Buckets[Cell] = Buckets()  # nodes no VC cell overlaps, keyed by idle GPUs
        self.held: Buckets[Cell] = Buckets()  # nodes some VC cell overlaps


class _Node:
    """What the index keeps per node: its group, and how many VC cells overlap it on their own
    (on or inside the node, or covering it individually, not through its group)."""

    __slots__ = ("group", "overlaps")

    def __init__(self, group: _Group) -> None:
        self.group = group
        self.overlaps = 0


class IdleNodeIndex:
    def __init__(self, topology: Topology) -> None:
        self._groups: dict[Chain, list[_Group]] = {c: [_Group(0)] for c in topology.used_chains}
        self._wide: dict[Cell, _Group] = {}
        self._nodes: dict[Cell, _Node] = {}
        for node in topology.nodes.values():
            self.add_node(node)

    def add_node(self, node: Cell) -> None:
        """Index a node (at construction, or when it joins a running cluster, not yet covered
        by any VC cell)."""
        parent = node.parent
        groups = self._groups.setdefault(node.chain, [_Group(0)])
        if parent is not None and len(parent.children) > WIDE:
            group = self._wide.get(parent)
            if group is None:
                group = self._wide[parent] = _Group(len(groups))
                groups.append(group)
        else:
            group = groups[0]
        self._nodes[node] = _Node(group)
        group.free.add(node, node.idle_gpus)

    def remove_node(self, node: Cell) -> None:
        """Forget a node that left the cluster (no VC cell covers it any more)."""
        entry = self._nodes.pop(node)
        group = entry.group
        (group.held if entry.overlaps else group.free).remove(node, node.idle_gpus)
        parent = node.parent
        if parent is not None and self._wide.get(parent) is group and not any(n in self._nodes for n in parent.children):
            del self._wide[parent]
            self._groups[node.chain].remove(group)

    def idle_changed(self, node: Cell, old: int) -> None:
        entry = self._nodes[node]
        group = entry.group
        (group.held if entry.overlaps else group.free).move(node, old, node.idle_gpus)

    def held(self, node: Cell) -> bool:
        entry = self._nodes[node]
        return entry.overlaps > 0 or entry.group.covered > 0

    def cover(self, root: Cell, delta: int) -> None:
        """A VC cell was bound (+1) or released (-1): the nodes it overlaps change side."""
        node_level = root.chain.node_level
        if root.level <= node_level:
            assert root.node_cell is not None
            self._overlap(root.node_cell, delta)
            return
        stack = [root]
        while stack:
            cell = stack.pop()
            group = self._wide.get(cell)
            if group is not None:
                group.covered += delta
            elif cell.level == node_level:
                self._overlap(cell, delta)
            else:
                stack.extend(cell.children)

    def _overlap(self, node: Cell, delta: int) -> None:
        entry = self._nodes[node]
        before = entry.overlaps
        after = entry.overlaps = before + delta
        if (before > 0) != (after > 0) and node.idle_gpus:  # a full node is in no bucket (see Buckets)
            group = entry.group
            (group.held if before else group.free).remove(node, node.idle_gpus)
            (group.held if after else group.free).add(node, node.idle_gpus)

    def candidates(self, chain: Chain, gpus: int) -> Iterator[Cell]:
        """Nodes with at least ``gpus`` idle GPUs: unheld nodes best fit first, then held ones."""
        groups = self._groups[chain]
        first = [g.free for g in groups if not g.covered]
        second = [g.held for g in groups if not g.covered] + [b for g in groups if g.covered for b in (g.free, g.held)]
        for pass_buckets in (first, second):
            live = [b for b in pass_buckets if b]
            if len(live) == 1:
                yield from live[0].at_least(gpus)
            elif live:
                for _, node in heapq.merge(*(b.items_at_least(gpus) for b in live), key=itemgetter(0)):
                    yield node
