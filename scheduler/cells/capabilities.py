"""What the drivers may do with HiveD's cells beyond the scheduling verbs, one capability each.

The composition hands the drivers :class:`Cells` (``Composition.cells``); each driver names the
narrowest capability it uses, so what a driver can reach is written in its signature and not in
the engine's class: the inspect API and metrics read (:class:`CellInspection`), a live reload
and the cell exchange's quota moves change the VCs (:class:`CellReconfiguration`), the booking
sweeper releases what lost its reason (:class:`BookingSweep`), the admission webhook asks
whether a request could ever be placed (:class:`RequestCheck`), the leader's reclaim keeps
the guarantees kube-scheduler's preemption cannot (:class:`GuaranteeKeeping`). :class:`~scheduler.cells.engine.HivedEngine`
is the one implementation; callers hold the engine's lock for every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Any, Mapping, Protocol, Sequence

from scheduler.cells.config import CellsConfig
from scheduler.cells.expiry import BookingLimits, BookingReleased
from scheduler.cells.planning import Unplaceable
from scheduler.cells.request import CellRequest, RequestProblem
from scheduler.cells.topology import Topology
from scheduler.core.model import PodInfo


class CellInspection(Protocol):
    """Read-only views of the cells and the virtual clusters (JSON-ready)."""

    @property
    def summary(self) -> str:
        """One line: the topology and the VCs (the startup log, the inspect API)."""

    @property
    def default_vc(self) -> str | None:
        """The VC of pods that name none (None: such pods are refused)."""

    @property
    def topology(self) -> Topology:
        """The physical cells; fixed for the engine's life (a new topology needs a restart)."""

    def stats(self) -> Mapping[str, int]: ...

    def inspect_virtual_clusters(self) -> dict[str, Any]: ...

    def inspect_virtual_cluster(self, name: str) -> dict[str, Any] | None:
        """None for a VC the cells do not have."""

    def inspect_guarantees(
        self, *, except_pods: AbstractSet[str] = frozenset(), within: AbstractSet[str] | None = None
    ) -> dict[str, list[dict[str, Any]]]: ...

    def inspect_cells(self, *, node: str | None = None, gpus: bool = True) -> dict[str, Any]: ...

    def metrics(self) -> dict[str, Any]: ...


class CellReconfiguration(CellInspection, Protocol):
    """Changed virtual clusters applied at runtime (the topology stays; a shrink never evicts)."""

    def reconfigure(self, data: Mapping[str, Any] | CellsConfig, *, prefix: str = "") -> None: ...


class BookingSweep(Protocol):
    """Bookings that lost their reason, released by a periodic sweep (expiry.py)."""

    @property
    def booking_limits(self) -> BookingLimits:
        """How long a booking may wait for its pod or its gang (sets the sweep's period)."""

    def watch_pods(self, watched: bool) -> None:
        """Whether a watch feeds the engine every pod: then a booking for a pod the watch never
        shows can be told apart from one whose pod is on its way."""

    def expire_bookings(self, now: float) -> list[BookingReleased]: ...


class RequestCheck(Protocol):
    """Whether the running configuration could ever place a request (the admission webhook)."""

    def request_problem(self, request: CellRequest) -> tuple[RequestProblem, Unplaceable] | None: ...


@dataclass(frozen=True)
class WaitingGuarantee:
    """A guaranteed pod waiting for the opportunistic pods on its booked GPUs to go."""

    pod_uid: str
    vc: str
    cell: str  # the id of the VC cell its booking is in (its cell type when outside one)
    node: str | None  # the node of its booked GPUs
    victims: tuple[str, ...]  # UIDs of the opportunistic pods on them


class GuaranteeKeeping(Protocol):
    """HiveD's guarantee where kube-scheduler's preemption does not keep it: kube-scheduler
    offers as victims only pods of lower priority than the preemptor, and never brings a pod to
    the filter when every node it could go to is full (scheduler/cluster/reclaim.py)."""

    def waiting_guarantees(self) -> list[WaitingGuarantee]:
        """Each guaranteed pod whose booked cells opportunistic pods still use, with those pods."""

    def booked_nodes(self) -> dict[str, str]:
        """Pod UID -> the node of the cells booked for it, for every pod with cells of its own."""

    def reclaim_candidate(self, pod: PodInfo) -> bool:
        """Whether the pod is a guaranteed GPU pod without cells of its own."""

    def reclaim_need(self, pod: PodInfo, *, among: Sequence[str]) -> WaitingGuarantee | None:
        """What :meth:`book_reclaim` would book and wait for, changing nothing (no booking, no
        pod counted as leaving); None when it would book nothing."""

    def book_reclaim(self, pod: PodInfo, *, among: Sequence[str]) -> WaitingGuarantee | None:
        """Book its cells on one of the nodes ``among``, as the filter books a pod waiting for
        its victims; None, nothing booked, when it needs no victim there or cannot go there."""

    def cancel_reclaim(self, pod_uid: str) -> None:
        """Give back what :meth:`book_reclaim` booked."""

    def reclaim_record(self, pod_uid: str) -> str | None:
        """The pod's booked cells as its annotation ``cellfit.io/reclaim-booking`` records them
        (None: none booked), written on the pod before any victim is deleted: every replica's
        engine keeps the cells it names for the pending pod (its pod watch applies it)."""


class RecoversBindings(Protocol):
    """HiveD recovers its bindings from the pods as the watch lists them."""

    def pods_listed(self) -> None:
        """The watch applied a whole list of the pods: every binding is recovered."""


class Cells(CellReconfiguration, BookingSweep, RequestCheck, GuaranteeKeeping, RecoversBindings, Protocol):
    """Every capability HiveD's cells give the drivers (``Composition.cells``)."""
