"""The engine interface every driver talks to, and the decisions it returns.

The extender (kube-scheduler's webhooks), the watch cache and the simulator all drive a
:class:`SchedulingEngine`; the policies behind it (resource fit today, HiveD cells, FitGpp
preemption and AlloX matching as they land) are interchangeable. An engine is pure: no I/O, no
wall clock, no threads. Callers serialise access (the extender holds one lock around it).

Engines see nodes as slots of their :class:`~scheduler.core.nodeindex.NodeIndex` and answer by
position among the slots offered; the names, in whatever form a request carried them, stay
with the drivers (``scheduler.kube.names`` turns them into slots and positions back into names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Final, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np
import numpy.typing as npt

from scheduler.core.model import JobInfo, NodeInfo, PodInfo
from scheduler.core.nodeindex import NodeIndex, Positions, Slots


Reasons = dict[str, str]  # node name -> why it cannot take the pod (drivers' answers)
# Why offered nodes cannot take the pod: each reason with the positions (among the offered
# slots) it is given for. Few reasons, many nodes: a driver names each group in bulk.
Verdicts = dict[str, Positions]
# Prioritize's scores: one int64 per offered node, in the offered order.
Scores = npt.NDArray[np.int64]
_NO_POSITIONS: Final[Positions] = np.zeros(0, dtype=np.int64)


class FilterDecision:
    """Which of the offered nodes can take the pod, by position among the offered slots (the
    driver turned kube-scheduler's names into slots and turns positions back into names).

    ``feasible`` are ascending positions, each at most once. ``failed`` nodes could take the
    pod if pods were preempted; ``unresolvable`` nodes never can (kube-scheduler skips them in
    preemption). Each reason is one short human sentence, shown to users in FailedScheduling
    events.

    An engine knows no name for an offered slot its index does not hold (:data:`UNKNOWN`), and
    a reason naming a node need not be built until it is read: the unresolvable positions
    ``named_at`` get their reason from the driver, worded by ``by_name`` from each node's name
    (``unresolvable_count`` counts them, ``unresolvable`` does not hold them). By name, they
    come after the nodes of the first ``named_after`` reasons of ``unresolvable`` and before
    the others: the order the answers to kube-scheduler have always had (resource fit names
    unknown nodes first; HiveD its nodes without cells after the others, FitGpp's kept nodes
    after those).

    kube-scheduler reads the reasons only when no node is feasible, and under HiveD every node
    but one gets a reason: an engine may therefore hand over ``explain``, which builds both
    dicts on first access to :attr:`failed` or :attr:`unresolvable`, with the counts known at
    once. ``explain`` runs after the caller released the engine's lock, so it must read only
    values computed during the decision, never the engine's mutable state. The counts count
    offered positions; kube-scheduler never offers a name twice.
    """

    __slots__ = (
        "feasible", "failed_count", "unresolvable_count", "named_at", "by_name", "named_after", "_failed", "_unresolvable", "_explain"
    )

    def __init__(
        self,
        *,
        feasible: Positions = _NO_POSITIONS,
        failed: Verdicts | None = None,
        unresolvable: Verdicts | None = None,
        explain: Callable[[], tuple[Verdicts, Verdicts]] | None = None,
        failed_count: int | None = None,
        unresolvable_count: int | None = None,
        named_at: Positions = _NO_POSITIONS,
        by_name: Callable[[str], str] | None = None,
        named_after: int = 0,
    ) -> None:
        if explain is not None and (failed is not None or unresolvable is not None):
            raise ValueError("give the reasons or explain, not both")
        if explain is not None and (failed_count is None or unresolvable_count is None):
            raise ValueError("explain needs failed_count and unresolvable_count")
        if len(named_at) and by_name is None:
            raise ValueError("named_at needs by_name")
        if named_after < 0:
            raise ValueError(f"named_after must be 0 or more, not {named_after}")
        self.feasible = feasible
        self._failed = failed if failed is not None else {}
        self._unresolvable = unresolvable if unresolvable is not None else {}
        self._explain = explain
        self.failed_count = _count(self._failed) if failed_count is None else failed_count
        self.unresolvable_count = _count(self._unresolvable) if unresolvable_count is None else unresolvable_count
        self.named_at = named_at
        self.by_name = by_name
        self.named_after = named_after

    @property
    def failed(self) -> Verdicts:
        self._explain_now()
        return self._failed

    @property
    def unresolvable(self) -> Verdicts:
        self._explain_now()
        return self._unresolvable

    def _explain_now(self) -> None:
        if self._explain is not None:
            self._failed, self._unresolvable = self._explain()
            self._explain = None

    def __repr__(self) -> str:
        return (
            f"FilterDecision(feasible={self.feasible.tolist()!r}, failed={_listed(self.failed)!r}, "
            f"unresolvable={_listed(self.unresolvable)!r}, named_at={self.named_at.tolist()!r})"
        )


def _count(verdicts: Verdicts) -> int:
    return sum(len(positions) for positions in verdicts.values())


def _listed(verdicts: Verdicts) -> dict[str, list[int]]:
    return {reason: positions.tolist() for reason, positions in verdicts.items()}


@dataclass(frozen=True, slots=True)
class Placement:
    """A reservation made at bind time. ``annotations`` are written onto the pod with the
    binding, so the decision survives a restart."""

    pod_uid: str
    node_name: str
    annotations: Mapping[str, str] = field(default_factory=dict)


class SchedulingEngine(Protocol):
    """What kube-scheduler's verbs and the cluster watch need from a scheduling policy."""

    # --- decisions, over the offered nodes' slots in :attr:`node_index` ---
    @property
    def node_index(self) -> NodeIndex:
        """The slots of every node the engine knows (the cluster's Nodes, HiveD's cell nodes):
        drivers turn offered names into these slots, :data:`~scheduler.core.nodeindex.UNKNOWN`
        for a name it does not hold."""
        ...

    def filter(self, pod: PodInfo, offered: Slots) -> FilterDecision:
        """Which offered nodes can take ``pod``, by position among ``offered``."""
        ...

    def prioritize(self, pod: PodInfo, offered: Slots) -> Scores:
        """Scores in 0..MAX_EXTENDER_PRIORITY, one per offered node, in the offered order."""
        ...

    def select_victims(
        self,
        pod: PodInfo,
        candidates: Mapping[str, Sequence[str]],
        victim_pods: Mapping[str, PodInfo],
    ) -> dict[str, list[str]]:
        """From kube-scheduler's candidate victims (node -> pod UIDs), the nodes and victims
        this policy accepts. ``victim_pods`` describes victims the request carried in full."""
        ...

    def reserve(self, pod: PodInfo, node_name: str) -> Placement:
        """Book the pod onto the node at bind time; raises ``SchedulingConflict`` when it no
        longer fits and ``UnknownNode`` for a node the engine has never seen."""
        ...

    def unreserve(self, pod_uid: str) -> None:
        """Undo :meth:`reserve` (the binding API call failed)."""
        ...

    # --- cluster state ---
    def apply_node(self, node: NodeInfo) -> None: ...

    def delete_node(self, node_name: str) -> None: ...

    def apply_pod(self, pod: PodInfo) -> None:
        """Record a pod's latest state: bound and unfinished pods hold resources, others not."""
        ...

    def delete_pod(self, pod_uid: str) -> None: ...

    def knows_node(self, node_name: str) -> bool: ...

    def stats(self) -> Mapping[str, int]:
        """Sizes for metrics and inspection, e.g. ``{"nodes": 3, "pods": 12}``."""
        ...


@runtime_checkable
class TracksJobs(Protocol):
    """An engine that keeps per-Job state (FitGpp's preemption counts): the watch cache then
    also watches Jobs and feeds it."""

    def apply_job(self, job: JobInfo) -> None: ...

    def delete_job(self, job_uid: str) -> None: ...
