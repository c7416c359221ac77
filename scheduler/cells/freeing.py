"""Cells a guaranteed pod's virtual cluster is getting back already, without a preemption.

kube-scheduler calls the preempt verb (and the leader's reclaim books, scheduler/cluster/
stranded.py) among the nodes where removing pods would make room: a node whose GPUs the VC's own
pods still hold while they terminate is not among them, nor is one whose opportunistic pods are
already leaving. Planned among those nodes alone, a pod of the VC would preempt an opportunistic
pod elsewhere while the cells it could have are being freed: a preemption for nothing (seen live,
one try in three). kube-scheduler's own preemption holds back the same way while victims of an
earlier preemption are still terminating on the nominated node (its PodEligibleToPreemptOthers).

:func:`freeing_cell` finds such a cell: one of the request's level inside the VC's usable cells
(bound or pinned, not draining) where enough healthy GPUs are free or held only by pods that are
leaving, and that needs those pods gone (free GPUs alone would not do: the pod would be placed
there without anyone leaving, and a node kube-scheduler refuses it for other reasons must not
stop its preemption for good). The wait it causes ends when those pods are gone.

:class:`JustFreed` carries the wait a moment past that (user24b, item 6): cellfit's watch may
show the leaving pod gone a moment before kube-scheduler's cache does, and kube-scheduler, still
counting it on its node, then offers only other nodes, where HiveD would reclaim an opportunistic
pod while the cells just freed stay idle. For :data:`FREED_CELL_WAIT_SECONDS` after such a pod is
gone, a guaranteed pod of its VC that HiveD would place on its node without a victim gets no
victim elsewhere; kube-scheduler places it there once its cache has dropped the pod. "Its VC" is
each VC whose cells the pod freed (:func:`vcs_freed_by`): its own for a guaranteed pod, and the
VC owning the cell an opportunistic pod leaves, which :func:`freeing_cell` waited for as well
(review28 #1). A bound pod gone without the watch showing it leaving frees its cells the same
way (``HivedEngine.delete_pod``): one that finished (kube-scheduler's pod informer, as cellfit's
cache, lists no finished pod and sees it deleted) or was deleted at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Final, Iterator, Mapping, NamedTuple, Sequence

from scheduler.cells.booking import Booking
from scheduler.cells.planning import Target
from scheduler.cells.request import Priority
from scheduler.cells.topology import Cell, CellState, Chain
from scheduler.cells.virtual_clusters import VcState
from scheduler.constants import CACHE_LAG_SECONDS


class FreeingCell(NamedTuple):
    """A cell the VC gets back once the bookings ``leaving`` (ids, ascending) are gone."""

    cell: Cell
    leaving: list[int]


def freeing_cell(vc: VcState, targets: Sequence[Target], gpus: int, *, leaving: Callable[[int], bool]) -> FreeingCell | None:
    """The first cell, in the VC's cells' order, of a target's level with ``gpus`` healthy GPUs
    each free or held only by bookings that are ``leaving`` (booking id -> whether its pod is
    leaving), fewer than ``gpus`` of them free now; None when there is none."""
    for target in targets:
        for cell in _cells_at(_usable_roots(vc, target), target.level):
            found = _freed_by_leaving(cell, gpus, leaving)
            if found is not None:
                return FreeingCell(cell, found)
    return None


def _usable_roots(vc: VcState, target: Target) -> list[Cell]:
    """The VC's cells of the target's chain at its level or above that its pods may use."""
    chain = target.chain
    roots = [root for cell_type in chain.types[target.level - 1 :] for root in vc.bound.get(cell_type, ()) if root not in vc.draining]
    roots.extend(cell for cell in vc.pinned if cell.chain is chain and cell.level >= target.level)
    return roots


def _cells_at(roots: Sequence[Cell], level: int) -> Iterator[Cell]:
    for root in roots:
        stack = [root]
        while stack:
            cell = stack.pop()
            if cell.level == level:
                yield cell
            elif cell.level > level:
                stack.extend(reversed(cell.children))


def _freed_by_leaving(cell: Cell, gpus: int, leaving: Callable[[int], bool]) -> list[int] | None:
    if cell.total - cell.bad < gpus:
        return None
    free = usable = 0
    held: set[int] = set()
    for leaf in cell.leaves:
        if leaf.is_bad:
            continue
        owners = [owner for owner in (leaf.guaranteed_owner, leaf.opportunistic_owner) if owner is not None]
        if not owners:
            free += 1
            usable += 1
        elif all(leaving(owner) for owner in owners):
            usable += 1
            held.update(owners)
    return sorted(held) if usable >= gpus and free < gpus else None


_HELD: Final = (CellState.BOUND, CellState.PINNED)


def vcs_freed_by(booking: Booking, *, vcs: Mapping[str, VcState]) -> list[str]:
    """The VCs whose cells ``booking``'s pod frees as it goes, in order, each once: its own VC
    for a guaranteed pod, and each VC owning (bound or pinned) a cell one of its GPUs is in: an
    opportunistic pod on another VC's cells frees them for that VC's pods, which
    :func:`freeing_cell` waits for while it leaves. A GPU in no VC's cell is free for each VC
    of ``vcs`` with quota of its chain not bound (HiveD binds a free cell for it)."""
    freed: dict[str, None] = {booking.vc: None} if booking.priority is Priority.GUARANTEED else {}
    in_free_cells = False
    for gpu in booking.gpus:
        held = next((cell for cell in (gpu, *gpu.ancestors()) if cell.state in _HELD), None)
        if held is None:
            in_free_cells = True
        elif held.vc is not None:
            freed[held.vc] = None
    if in_free_cells:  # the VCs are walked once, however many of its GPUs are free
        freed.update((name, None) for name, vc in vcs.items() if vc.defined and _unbound_in(vc, booking.chain))
    return list(freed)


def _unbound_in(vc: VcState, chain: Chain) -> bool:
    return any(vc.unbound(cell_type) > 0 for cell_type in chain.types)


# How long after a pod of a VC left its cells a guaranteed pod of that VC that HiveD would place
# there without a victim preempts nobody elsewhere: kube-scheduler's cache's lag.
FREED_CELL_WAIT_SECONDS: Final = CACHE_LAG_SECONDS


@dataclass(slots=True)
class _Freed:
    pods: list[str]  # namespace/name, in the order they left
    at: float  # the clock's reading when the last of them left


@dataclass(slots=True)
class _Waiter:
    pod_key: str  # namespace/name
    # When its (VC, node)'s cells were first freed while it waited (None: not yet, they are
    # being freed): it keeps them from opportunistic pods ``seconds`` from then, however many
    # pods of the VC leave the node after.
    since: float | None


class JustFreed:
    """Nodes whose cells pods of a VC left a moment ago, by (VC, node), for ``seconds`` after
    the last of them left on ``clock`` (the driver's: monotonic live, virtual in the simulator,
    so both decide alike). At most one entry per VC and node; an entry ends once a pod of its VC
    is bound on its node, or when its time is up.

    A guaranteed pod of the VC told to wait for a node's cells (being freed, or freed just now)
    is one of that (VC, node)'s waiters (:meth:`awaited_by`): while the node's entry is open and
    a waiter is left, the node is :meth:`kept` from opportunistic pods, which HiveD would
    otherwise place on the freed cells and reclaim for a waiter a moment later (user25 #1: 3 of
    3 live). Each waiter keeps the node ``seconds`` at most, from when the cells were freed while
    it waited: a stream of the VC's pods leaving the node opens its entry again and again, and
    must not keep opportunistic pods off it for as long as a waiter that kube-scheduler places
    elsewhere, or nowhere, is pending (review28). A waiter is forgotten when it is bound or gone
    (:meth:`forget_pod`), or with its (VC, node)'s entry once it kept the node; a pod of the VC
    bound there ends the entry only once no waiter is left (several pods of a Job may wait for
    one node's cells)."""

    def __init__(self, *, clock: Callable[[], float], seconds: float = FREED_CELL_WAIT_SECONDS) -> None:
        self.seconds = seconds
        self._clock = clock
        self._freed: dict[tuple[str, str], _Freed] = {}
        self._waiters: dict[tuple[str, str], dict[str, _Waiter]] = {}  # (VC, node) -> pod UID -> waiter, in order

    def __bool__(self) -> bool:
        if self._freed:
            self._forget_past()
        return bool(self._freed)

    def left(self, *, pod_key: str, vc: str, node: str) -> None:
        """A pod that was leaving ``node`` is gone: the cells it held there of ``vc`` are free."""
        now = self._clock()
        key = (vc, node)
        freed = self._freed.get(key)
        if freed is not None and now - freed.at >= self.seconds:
            self._end(key)
            freed = None
        if freed is None:
            self._freed[key] = _Freed(pods=[pod_key], at=now)
        else:
            freed.pods = [*freed.pods[-9:], pod_key]
            freed.at = now  # its window starts again
            self._freed[key] = self._freed.pop(key)  # last: the entries stay in the order of their time
        for waiter in self._waiters.get(key, {}).values():
            if waiter.since is None:
                waiter.since = now

    def bound(self, *, vc: str, node: str, pod_uid: str) -> None:
        """The pod ``pod_uid`` of ``vc`` was bound on ``node``: it waits no more, and once no
        other pod waits for them the cells freed there are taken."""
        self.forget_pod(pod_uid)
        if (vc, node) not in self._waiters:
            self._freed.pop((vc, node), None)

    def awaited_by(self, *, vc: str, node: str, pod_uid: str, pod_key: str) -> None:
        """The guaranteed pod ``pod_key`` of ``vc`` was told to wait for ``node``'s cells."""
        waiting = self._waiters.setdefault((vc, node), {})
        waiter = waiting.get(pod_uid)
        if waiter is None:
            waiter = waiting[pod_uid] = _Waiter(pod_key=pod_key, since=None)
        if waiter.since is None and self._open((vc, node)):
            waiter.since = self._clock()

    def forget_pod(self, pod_uid: str) -> None:
        """The pod is bound or gone: it waits for no cells."""
        if self._waiters:
            for key in [key for key, waiting in self._waiters.items() if pod_uid in waiting]:
                del self._waiters[key][pod_uid]
                if not self._waiters[key]:
                    del self._waiters[key]

    def kept(self) -> dict[str, tuple[str, str]]:
        """The nodes whose cells freed just now a guaranteed pod of their VC waits for, each
        with (VC, the first waiter's namespace/name) among those whose keep has not run out:
        no opportunistic pod is placed there meanwhile."""
        if not self._waiters:
            return {}
        self._forget_past()
        now = self._clock()
        kept: dict[str, tuple[str, str]] = {}
        for (vc, node), waiting in sorted(self._waiters.items()):
            if (vc, node) not in self._freed:
                continue
            first = next((w.pod_key for w in waiting.values() if w.since is not None and now - w.since < self.seconds), None)
            if first is not None:
                kept[node] = (vc, first)
        return kept

    def nodes_of(self, vc: str) -> dict[str, list[str]]:
        """The nodes pods of ``vc`` left just now, each with those pods (namespace/name), sorted."""
        self._forget_past()
        return {node: sorted(freed.pods) for (of, node), freed in sorted(self._freed.items()) if of == vc}

    def _open(self, key: tuple[str, str]) -> bool:
        freed = self._freed.get(key)
        return freed is not None and self._clock() - freed.at < self.seconds

    def _forget_past(self) -> None:
        # The oldest first (left keeps them so, the clock never going back): every pod gone
        # starts an entry, and this runs at every opportunistic pod's filter while any is open.
        now = self._clock()
        past = []
        for key, freed in self._freed.items():
            if now - freed.at < self.seconds:
                break
            past.append(key)
        for key in past:
            self._end(key)

    def _end(self, key: tuple[str, str]) -> None:
        """The (VC, node)'s entry is over, and so are the waiters it kept the node for; one told
        to wait while no entry was open waits on for the cells being freed."""
        del self._freed[key]
        waiting = self._waiters.get(key)
        if waiting is not None:
            for uid in [uid for uid, waiter in waiting.items() if waiter.since is not None]:
                del waiting[uid]
            if not waiting:
                del self._waiters[key]
