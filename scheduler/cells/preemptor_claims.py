"""Cells booked for the pod FitGpp preempted pods for, so that its virtual cluster's quota waits
for it (user24's F1).

FitGpp (scheduler/preemption) preempts best-effort pods of a VC for a trial pod of that VC on one
node, and keeps that node's room for it (its preemptor hold, holds.py). Under HiveD the room is
not all it needs: its VC's quota. When the last victim leaves, the VC's cell on that node is
unbound, and until the preemptor binds any pod of the VC may bind a cell of the quota elsewhere
(another node's filter does not see the node's hold); the preemptor is then refused for a quota
exhausted, its victims preempted for nothing. HiveD's own reclaim books its preemptor's cells
while its victims leave; this does the same for FitGpp's preemptor: a *claim* on the node names
its victims, and the moment the last of them has released its cells (or the next decision, when
this process never saw them: after a restart) the preemptor's cells there are booked for it, in
the same step, so no other pod's filter or bind comes between.

A claim ends when the pod is bound (its booking is then its own), is deleted, or its hold ends
without a binding (it lapsed, its wait for stuck victims ran out, or its record was taken off the
pod: the driver calls :meth:`PreemptorClaims.end`), and the cells its booking holds go back. The
claim itself is only bookkeeping; the engine plans and books (``scheduler/cells/engine.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Iterator, Mapping

from scheduler.cells.booking import Booking
from scheduler.cells.request import CellRequest, Priority
from scheduler.core.model import PodInfo


def keeps_quota(request: CellRequest) -> bool:
    """Whether a preemptor of ``request`` gets its cells booked once its victims have left: a
    guaranteed pod of no gang, whose VC's quota is to wait for it. An opportunistic pod has no
    quota of its own to keep, and a gang books its slots itself."""
    return request.priority is Priority.GUARANTEED and request.gang is None


@dataclass(slots=True)
class PreemptorClaim:
    """The node whose cells are the preemptor's once ``victims`` (pod UIDs) have left it."""

    pod: PodInfo
    node: str
    victims: frozenset[str]
    booking: int | None = None  # the booking made for it, once its victims left


class PreemptorClaims:
    """Every pending preemptor's claim, by pod UID."""

    def __init__(self) -> None:
        self._claims: dict[str, PreemptorClaim] = {}

    def __bool__(self) -> bool:
        return bool(self._claims)

    def claim(self, pod: PodInfo, *, node: str, victims: AbstractSet[str]) -> PreemptorClaim | None:
        """Claim ``node`` for ``pod``; the claim it replaces (a decision on another node), if any."""
        old = self._claims.get(pod.uid)
        if old is not None and old.node == node and old.victims == victims:
            old.pod = pod
            return None
        self._claims[pod.uid] = PreemptorClaim(pod=pod, node=node, victims=frozenset(victims))
        return old

    def get(self, pod_uid: str) -> PreemptorClaim | None:
        return self._claims.get(pod_uid)

    def end(self, pod_uid: str) -> PreemptorClaim | None:
        """The pod's claim, no longer kept."""
        return self._claims.pop(pod_uid, None)

    def due(self, held: Mapping[str, Booking], *, released: str | None = None) -> Iterator[PreemptorClaim]:
        """The claims not booked yet whose victims hold no cells now (``held``: bookings by pod
        UID); with ``released``, only those naming that victim (it has just left)."""
        for claim in list(self._claims.values()):
            if claim.booking is not None or (released is not None and released not in claim.victims):
                continue
            if not any(victim in held for victim in claim.victims):
                yield claim

    def booked_in(self, vc: str, bookings: Mapping[int, Booking]) -> list[str]:
        """The pods (namespace/name) whose claims hold cells of ``vc`` now, sorted."""
        return sorted(
            claim.pod.key
            for claim in self._claims.values()
            if claim.booking is not None and (booking := bookings.get(claim.booking)) is not None and booking.vc == vc
        )
