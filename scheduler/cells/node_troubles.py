"""Why each bad node of the cells is bad, and the virtual clusters whose cells on it cannot be
bound because of it.

The allocator only knows that a node's GPUs are bad (``LeafLedger.set_node_bad``): a node
deleted, cordoned, not ready or short of GPUs reads the same. Users reading ``kubectl cellfit
why`` or ``vcs`` need the cause (a cordon is undone by a command, a deleted node only by its
return), and may not be allowed to read Node objects to find it; the engine knows it, from the
Node it was given or its deletion. :class:`NodeTroubles` keeps that cause per node, for the
inspection views, and says once, per virtual cluster and node, that a VC's cells there cannot
be bound (HiveD §3.2: a bad node's cells stay bound to their VC, which cannot use them while the
node is bad; the operator is the one who can act)."""

from __future__ import annotations

import logging
from typing import Final

from scheduler.cells.topology import Cell, CellState, Topology
from scheduler.core.model import NodeInfo

log = logging.getLogger(__name__)

DELETED: Final = "deleted"
_HELD: Final = (CellState.BOUND, CellState.PINNED)

# What each cause means for the VC, in the sentence users read.
_SAID: Final = {
    DELETED: "the node was deleted",
    "cordoned": "the node is cordoned",
    "not ready": "the node is not Ready",
}


def bad_node_cause(node: NodeInfo, *, cell: Cell, member: bool = True) -> str | None:
    """Why HiveD counts ``node`` bad, first cause first: ``deleted`` (a discovered node deleted
    while its pods run: not a ``member``), ``not ready``, ``cordoned``, ``short of GPUs (N of M)``;
    ``None`` when it is healthy. The rule ``HivedEngine.apply_node`` marks nodes bad by."""
    if not member:
        return DELETED
    if not node.ready:
        return "not ready"
    if node.unschedulable:
        return "cordoned"
    if node.allocatable.gpus < cell.total:
        return f"short of GPUs ({node.allocatable.gpus} of {cell.total})"
    return None


def cause_sentence(cause: str) -> str:
    """``the node was deleted``, ``the node is cordoned``, ...: a cause as users read it."""
    return _SAID.get(cause, f"the node is {cause}")


def unbindable_sentence(*, vc: str, node: str, cause: str) -> str:
    """The one sentence for a VC's cells on a bad node, in the log and the views alike."""
    return f"virtual cluster {vc}'s cells on node {node} cannot be bound: {cause_sentence(cause)}"


def vcs_on_node(cell: Cell) -> list[str]:
    """The VCs with a cell bound or pinned on node cell ``cell``: one holding the node (the node or
    a cell above it) or one inside it (a socket, a GPU), in tree order, each once."""
    held = [c for c in (*reversed(tuple(cell.ancestors())), cell, *cell.inner, *cell.leaves) if c.state in _HELD and c.vc]
    return list(dict.fromkeys(str(c.vc) for c in held))


class NodeTroubles:
    """The cause of each bad node (``causes``), and the (VC, node) pairs already told."""

    def __init__(self) -> None:
        self.causes: dict[str, str] = {}
        self._told: set[tuple[str, str]] = set()

    def node_seen(self, topology: Topology, name: str, cause: str | None) -> list[str]:
        """Node ``name`` is bad for ``cause`` now, or healthy (``None``), or out of the cells.
        Returns the sentences newly true (a VC's cells there cannot be bound), each logged as a
        warning once: a node's status arrives every few seconds and must not repeat them; once
        the node is healthy again, a later trouble is told again."""
        cell = topology.nodes.get(name)
        if cause is None or cell is None:
            # Every healthy node's status update comes here: nothing to do unless it was bad.
            if self.causes.pop(name, None) is not None:
                self._told = {told for told in self._told if told[1] != name}
            return []
        self.causes[name] = cause
        said = []
        for vc in vcs_on_node(cell):
            if (vc, name) in self._told:
                continue
            self._told.add((vc, name))
            sentence = unbindable_sentence(vc=vc, node=name, cause=cause)
            log.warning(sentence, extra={"virtualCluster": vc, "node": name, "cause": cause})
            said.append(sentence)
        return said
