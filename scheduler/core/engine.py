"""The engine interface every driver talks to, and the decisions it returns.

The extender (kube-scheduler's webhooks), the watch cache and the simulator all drive a
:class:`SchedulingEngine`; the policies behind it (resource fit today, HiveD cells, FitGpp
preemption and AlloX matching as they land) are interchangeable. An engine is pure: no I/O, no
wall clock, no threads. Callers serialise access (the extender holds one lock around it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np
import numpy.typing as npt

from scheduler.core.model import JobInfo, NodeInfo, PodInfo


Reasons = dict[str, str]
# Prioritize's scores: one int64 per offered node, in the offered order.
Scores = npt.NDArray[np.int64]


class FilterDecision:
    """Which of the offered nodes can take the pod.

    ``failed`` nodes could take it if pods were preempted; ``unresolvable`` nodes never can
    (kube-scheduler skips them in preemption). Each reason is one short human sentence, shown
    to users in FailedScheduling events.

    kube-scheduler reads the reasons only when no node is feasible, and under HiveD every node
    but one gets a reason: an engine may therefore hand over ``explain``, which builds both
    dicts on first access to :attr:`failed` or :attr:`unresolvable`, with the counts known at
    once. ``explain`` runs after the caller released the engine's lock, so it must read only
    values computed during the decision, never the engine's mutable state.

    ``feasible`` may be the very sequence the caller offered (every node fits): read it, do not
    change it. The counts count offered names; kube-scheduler never offers one twice.
    """

    __slots__ = ("feasible", "failed_count", "unresolvable_count", "_failed", "_unresolvable", "_explain")

    def __init__(
        self,
        *,
        feasible: Sequence[str] = (),
        failed: Reasons | None = None,
        unresolvable: Reasons | None = None,
        explain: Callable[[], tuple[Reasons, Reasons]] | None = None,
        failed_count: int | None = None,
        unresolvable_count: int | None = None,
    ) -> None:
        if explain is not None and (failed is not None or unresolvable is not None):
            raise ValueError("give the reasons or explain, not both")
        if explain is not None and (failed_count is None or unresolvable_count is None):
            raise ValueError("explain needs failed_count and unresolvable_count")
        self.feasible = feasible
        self._failed = failed if failed is not None else {}
        self._unresolvable = unresolvable if unresolvable is not None else {}
        self._explain = explain
        self.failed_count = len(self._failed) if failed_count is None else failed_count
        self.unresolvable_count = len(self._unresolvable) if unresolvable_count is None else unresolvable_count

    @property
    def failed(self) -> Reasons:
        self._explain_now()
        return self._failed

    @property
    def unresolvable(self) -> Reasons:
        self._explain_now()
        return self._unresolvable

    def _explain_now(self) -> None:
        if self._explain is not None:
            self._failed, self._unresolvable = self._explain()
            self._explain = None

    def __repr__(self) -> str:
        return (
            f"FilterDecision(feasible={list(self.feasible)!r}, failed={self.failed!r}, "
            f"unresolvable={self.unresolvable!r})"
        )


@dataclass(frozen=True, slots=True)
class Placement:
    """A reservation made at bind time. ``annotations`` are written onto the pod with the
    binding, so the decision survives a restart."""

    pod_uid: str
    node_name: str
    annotations: Mapping[str, str] = field(default_factory=dict)


class SchedulingEngine(Protocol):
    """What kube-scheduler's verbs and the cluster watch need from a scheduling policy."""

    # --- decisions ---
    def filter(self, pod: PodInfo, node_names: Sequence[str]) -> FilterDecision: ...

    def prioritize(self, pod: PodInfo, node_names: Sequence[str]) -> Scores:
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
