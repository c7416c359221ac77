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
import time
from typing import AbstractSet, Callable, Final

from scheduler.cells.allocator import CellAllocator
from scheduler.cells.topology import Cell, CellState, Chain
from scheduler.core.model import NodeInfo

log = logging.getLogger(__name__)

DELETED: Final = "deleted"
_HELD: Final = (CellState.BOUND, CellState.PINNED)

# The two kinds of sentence told per VC and node, each once: its cells there cannot be bound,
# and its quota not bound that the free healthy cells left cannot all back (the one kubectl
# cellfit vcs marks CANNOT-BIND by), often both for one VC and node.
_CELLS: Final = "cells"
_GUARANTEE: Final = "guarantee"

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


def bindable_sentence(*, vc: str, node: str, was: str) -> str:
    """The sentence for a VC's cells on a node bad for ``was`` that is healthy again."""
    back = "is back" if was == DELETED else "is healthy again"
    return f"virtual cluster {vc}'s cells on node {node} can be bound again: the node {back} (it was {was})"


def short_sentence(*, vc: str, cell_type: str, missing: int, free: int, wanted: int, node: str, cause: str) -> str:
    """The sentence for a VC's quota not bound that the free healthy cells left cannot all back."""
    cells = f"{missing} {cell_type!r} cell{'s' if missing > 1 else ''} of its quota {'are' if missing > 1 else 'is'}"
    return (
        f"virtual cluster {vc}'s guarantee cannot be bound: {cells} not bound and {free} free healthy "
        f"cell{'s' if free != 1 else ''} of the type {'are' if free != 1 else 'is'} left for {wanted} not bound in all "
        f"virtual clusters ({cause_sentence(cause).replace('the node', f'node {node}', 1)})"
    )


def vcs_on_node(cell: Cell) -> list[str]:
    """The VCs with a cell bound or pinned on node cell ``cell``: one holding the node (the node or
    a cell above it) or one inside it (a socket, a GPU), in tree order, each once."""
    held = [c for c in (*reversed(tuple(cell.ancestors())), cell, *cell.inner, *cell.leaves) if c.state in _HELD and c.vc]
    return list(dict.fromkeys(str(c.vc) for c in held))


# How long after the first node seen a VC's quota not bound is judged without a pod known: the
# watch relists the pods, whose bindings HiveD recovers, seconds after the nodes.
RECOVERY_SETTLE_SECONDS: Final = 120.0


class NodeTroubles:
    """The cause of each bad node (``causes``), and the (VC, node, kind of sentence) already told.

    A VC's quota not bound (:func:`_short`) is judged only once the pods' bindings are recovered:
    at a restart the nodes arrive before the pods, and every VC looked unbound, so a cordoned
    and a deleted node warned for all three VCs of user25's cluster, two of them bound with
    running pods (#8). Until then (:meth:`pods_recovered` not called yet, after the watch's
    first pods list, and less than ``settle_seconds`` since the first node seen) the node's
    shortfall waits, and is
    judged, on the VCs as they are then, at the first node seen after, with the VCs bound on the
    node by then."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, settle_seconds: float = RECOVERY_SETTLE_SECONDS) -> None:
        self.causes: dict[str, str] = {}
        self._told: set[tuple[str, str, str]] = set()
        self._clock = clock
        self._settle_seconds = settle_seconds
        self._first_seen: float | None = None
        self._recovered = False
        self._waiting: dict[str, str] = {}  # node -> cause whose shortfall waits for the pods' recovery

    def pods_recovered(self, alloc: CellAllocator) -> list[str]:
        """The pods are listed and their bindings recovered: the shortfalls that waited are judged
        now (the sentences newly true, logged as by :meth:`node_seen`)."""
        self._recovered = True
        return self._judge_waiting(alloc)

    def _recovery_done(self, alloc: CellAllocator) -> bool:
        if not self._recovered:
            now = self._clock()
            if self._first_seen is None:
                self._first_seen = now
            # Not on the first pod known: the relist applies pods a few at a time while node
            # statuses arrive beside it (review27 #4).
            self._recovered = now - self._first_seen >= self._settle_seconds
        return self._recovered

    def _judge_waiting(self, alloc: CellAllocator) -> list[str]:
        waiting, self._waiting = self._waiting, {}
        said: list[str] = []
        for name, cause in waiting.items():
            cell = alloc.topology.nodes.get(name)
            if cell is not None and self.causes.get(name) == cause:
                # The VCs bound there are known only now too (their pods recovered).
                unbindable = [(vc, _CELLS, unbindable_sentence(vc=vc, node=name, cause=cause)) for vc in vcs_on_node(cell)]
                said += self._tell(name, cause, unbindable + _short(alloc, cell.chain, node=name, cause=cause))
        return said

    def _tell(self, name: str, cause: str, found: list[tuple[str, str, str]]) -> list[str]:
        """Logs each (VC, kind, sentence) of ``found`` not told yet for the VC on node ``name``."""
        said = []
        for vc, kind, sentence in found:
            if (vc, name, kind) in self._told:
                continue
            self._told.add((vc, name, kind))
            log.warning(sentence, extra={"virtualCluster": vc, "node": name, "cause": cause})
            said.append(sentence)
        return said

    def node_seen(self, alloc: CellAllocator, name: str, cause: str | None) -> list[str]:
        """Node ``name`` is bad for ``cause`` now, or healthy (``None``), or out of the cells.
        Returns the sentences newly true, each logged as a warning once per VC and node: a VC's
        cells on the node that cannot be bound, and (when the node's cause is new) a VC's quota
        not bound that the free healthy cells left cannot all back. A node's status arrives
        every few seconds and must not repeat them; once the node is healthy again, a later
        trouble is told again."""
        cell = alloc.topology.nodes.get(name)
        recovered = self._recovered or self._recovery_done(alloc)
        said = self._judge_waiting(alloc) if recovered and self._waiting else []
        if cause is None or cell is None:
            # Every healthy node's status update comes here: nothing to do unless it was bad.
            was = self.causes.pop(name, None)
            if was is not None:
                # Each VC told its cells there cannot be bound is told they can again (user26 #8);
                # not of a node gone out of the cells.
                again = cause is None and cell is not None
                for vc in sorted({told[0] for told in self._told if again and told[1] == name and told[2] == _CELLS}):
                    log.info(bindable_sentence(vc=vc, node=name, was=was), extra={"virtualCluster": vc, "node": name, "cause": was})
                self._told = {told for told in self._told if told[1] != name}
                self._waiting.pop(name, None)
            return said
        new = self.causes.get(name) != cause
        self.causes[name] = cause
        found = [(vc, _CELLS, unbindable_sentence(vc=vc, node=name, cause=cause)) for vc in vcs_on_node(cell)]
        if new and not recovered:
            self._waiting[name] = cause
        elif new:  # counting the free cells walks them: once per change, not per status update
            found += _short(alloc, cell.chain, node=name, cause=cause)
        return said + self._tell(name, cause, found)


def _short(alloc: CellAllocator, chain: Chain, *, node: str, cause: str) -> list[tuple[str, str, str]]:
    """(VC, kind, sentence) for each VC with quota not bound in ``chain`` at a level where all VCs'
    quota not bound exceeds the free healthy cells left (the rule ``kubectl cellfit vcs`` marks
    CANNOT-BIND by: one VC's share of the shortfall is not known, HiveD binds first come)."""
    found = []
    everywhere = alloc.topology.nodes.keys()
    for level in range(1, chain.top + 1):
        cell_type = chain.type_at(level)
        if alloc.topology.chain_of_type.get(cell_type) is not chain:
            continue
        missing = {vc.name: vc.unbound(cell_type) for vc in alloc.vcs.values() if vc.defined and vc.unbound(cell_type) > 0}
        if not missing:
            continue
        wanted = sum(missing.values())
        free = free_cells_within(alloc, chain, level, everywhere)
        if wanted > free:
            found += [
                (vc, _GUARANTEE, short_sentence(vc=vc, cell_type=cell_type, missing=n, free=free, wanted=wanted, node=node, cause=cause))
                for vc, n in sorted(missing.items())
            ]
    return found


def free_cells_within(alloc: CellAllocator, chain: Chain, level: int, within: AbstractSet[str]) -> int:
    """How many free physical level-``level`` cells of ``chain`` lie wholly on ``within``'s
    nodes, none of them bad: the free cells at that level, and those a split of a higher free
    cell would give."""
    buddy = alloc.buddies.get(chain)
    if buddy is None:
        return 0
    found = 0
    for higher in range(level, chain.top + 1):
        for free in buddy.free_cells(higher):
            found += _usable_parts(free, level, within)
    return found


def _usable_parts(cell: Cell, level: int, within: AbstractSet[str]) -> int:
    """The level-``level`` cells inside ``cell`` (itself included) wholly on ``within`` and not bad."""
    chain = cell.chain
    if cell.level <= chain.node_level:  # on one node: all of its parts share the node's fate
        if cell.node not in within:
            return 0
        if not cell.bad:
            return chain.gpus[cell.level - 1] // chain.gpus[level - 1]
        if cell.level == level:
            return 0
    elif cell.level == level:
        return 1 if all(n.node in within and not n.bad for n in cell.node_cells) else 0
    return sum(_usable_parts(child, level, within) for child in cell.children)
