"""What kube-scheduler itself does around the extender's verbs, modelled for the simulator: its
own resource fit on its cache of bound pods, the room a nominated pod keeps on its node, and
the preemption dry run that offers the extender its candidate nodes. The extender never sees
any of it, so none of it is the engine's to do.

* **NodeResourcesFit** runs before the extender: only nodes with room for every resource the
  pod requests (CPU, memory, GPUs as an extended resource) are offered to the extender's
  filter, and with none left the extender is not called.
* **Nominated pods.** A pod that preempted is nominated to its node until its victims are
  gone. kube-scheduler's filter then places a pod of no higher priority on that node only if
  it fits with the nominated pods' requests counted as used (``RunFilterPluginsWithNominatedPods``;
  NodeResourcesFit checks only the resources a pod requests).
* **The dry run** (``SelectVictimsOnNode``): on each node the extender's filter did not mark
  unresolvable, every pod of lower priority is removed and the nominated pods of at least the
  preemptor's priority added; the node is a candidate if the preemptor then fits, and its
  victims are what is left after reprieving, most important first (higher priority, then the
  earlier start), each pod whose return still leaves room. It stops after
  ``max(10% of nodes, 100)`` candidates (``minCandidateNodesPercentage`` and
  ``minCandidateNodesAbsolute``), here starting from the first node (kube-scheduler starts at a
  random offset; the simulator's clusters have at most 100 nodes unless asked otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from scheduler.core.engine import SchedulingEngine
from scheduler.core.model import PodInfo
from scheduler.core.resources import ZERO, Resources

MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100


@dataclass(frozen=True, slots=True)
class RunningPod:
    """A pod bound to a node, as kube-scheduler's cache shows it to the dry run."""

    pod: PodInfo
    started_at: float


def fits(request: Resources, free: Resources) -> bool:
    """NodeResourcesFit: every resource the pod requests (and only those) is there."""
    return (
        (not request.cpu_millis or request.cpu_millis <= free.cpu_millis)
        and (not request.memory_bytes or request.memory_bytes <= free.memory_bytes)
        and (not request.gpus or request.gpus <= free.gpus)
    )


def best_scored(engine: SchedulingEngine, pod: PodInfo, feasible: Sequence[str]) -> str:
    """The node kube-scheduler binds ``pod`` to among the ``feasible`` ones the engine's filter
    left, with the extender's scores alone: prioritize's first best (kube-scheduler breaks ties
    at random; the first keeps runs reproducible)."""
    if len(feasible) == 1:
        return feasible[0]
    scores = engine.prioritize(pod, feasible)
    return feasible[int(np.argmax(np.asarray(scores)))]


def bind(engine: SchedulingEngine, pod: PodInfo, node: str) -> None:
    """The extender's bind verb for ``pod`` on ``node``, then the bound pod as the watch brings
    it back (a resume hold ends when the binding is confirmed). A SchedulingConflict here is a
    bug of the caller (it binds only where the filter passed): let it out."""
    engine.reserve(pod, node)
    engine.apply_pod(replace(pod, node_name=node, phase="Running"))


class NodeCache:
    """kube-scheduler's cache of the nodes: allocatable and the requests of the pods bound to
    each (a terminating pod counts until it is gone)."""

    __slots__ = ("names", "_slot", "_free")

    def __init__(self, nodes: Sequence[tuple[str, Resources]]) -> None:
        self.names = [name for name, _ in nodes]
        self._slot = {name: i for i, name in enumerate(self.names)}
        self._free = np.array([a.as_tuple() for _, a in nodes], dtype=np.int64).reshape(len(nodes), 3)

    def bind(self, node: str, requests: Resources) -> None:
        self._free[self._slot[node]] -= requests.as_tuple()

    def release(self, node: str, requests: Resources) -> None:
        self._free[self._slot[node]] += requests.as_tuple()

    def free(self, node: str) -> Resources:
        cpu, memory, gpus = self._free[self._slot[node]].tolist()
        return Resources(cpu, memory, gpus)

    def fitting(self, pod: PodInfo) -> Sequence[str]:
        """The nodes with room for ``pod`` (every name, the same list, when all have it)."""
        requested = [d for d, amount in enumerate(pod.requests.as_tuple()) if amount]
        if not requested:
            return self.names
        request = np.array(pod.requests.as_tuple(), dtype=np.int64)[requested]
        ok = (self._free[:, requested] >= request).all(axis=1)
        if ok.all():
            return self.names
        return [self.names[i] for i in np.flatnonzero(ok).tolist()]


class NominatedPods:
    """Pods nominated to nodes while their victims terminate."""

    __slots__ = ("_by_node",)

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_node)

    def nominate(self, pod: PodInfo, node: str) -> None:
        self._by_node.setdefault(node, {})[pod.uid] = pod

    def clear(self, pod: PodInfo, node: str) -> None:
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(pod.uid, None)
            if not pods:
                del self._by_node[node]

    def nodes(self) -> Iterable[str]:
        return self._by_node.keys()

    def kept_for(self, pod: PodInfo, node: str) -> Resources:
        """What ``node`` keeps for pods nominated there that go before ``pod`` (priority at
        least ``pod``'s; ``pod`` itself excluded)."""
        kept = ZERO
        for other in self._by_node.get(node, {}).values():
            if other.uid != pod.uid and other.priority >= pod.priority:
                kept = kept + other.requests
        return kept


def admits(pod: PodInfo, node: str, *, free: Resources, nominated: NominatedPods) -> bool:
    """kube-scheduler's own filter on ``node`` with the nominated pods counted."""
    kept = nominated.kept_for(pod, node)
    return kept == ZERO or fits(pod.requests, free - kept)  # below zero where room is owed


def preemption_candidates(
    pod: PodInfo,
    *,
    nodes: Sequence[str],
    unresolvable: Mapping[str, str],
    free_on: Callable[[str], Resources],
    pods_on: Callable[[str], Sequence[RunningPod]],
    nominated: NominatedPods,
) -> dict[str, list[str]]:
    """The candidate nodes and their victims' UIDs, as kube-scheduler sends them to the
    extender's preempt verb (``NodeNameToMetaVictims``)."""
    wanted = max(len(nodes) * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE)
    candidates: dict[str, list[str]] = {}
    for node in nodes:
        if node in unresolvable:
            continue
        lower = [running for running in pods_on(node) if running.pod.priority < pod.priority]
        if not lower:
            continue
        room = free_on(node) - nominated.kept_for(pod, node)  # below zero where room is owed
        for running in lower:
            room = room + running.pod.requests
        if not fits(pod.requests, room):
            continue
        victims: list[str] = []
        for running in sorted(lower, key=lambda r: (-r.pod.priority, r.started_at)):
            without = room - running.pod.requests
            if fits(pod.requests, without):
                room = without  # reprieved: it stays
            else:
                victims.append(running.pod.uid)
        if victims:
            candidates[node] = victims
            if len(candidates) >= wanted:
                break
    return candidates

