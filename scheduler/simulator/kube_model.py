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
* **The scheduling cycle** (:class:`KubeSchedulerCycle`), one pod at a time: the filter
  above, the extender's filter on the nodes left, its prioritize (the first best), then
  reserve and bind; the filter's statuses kept for the dry run when no node is left; a bound
  pod's requests released when it is deleted. Every workload's pods go through it: single pods
  (the ``fitgpp`` and ``allox`` workloads) and gangs (``hived``: one cycle per pod, the gang's
  reservations undone if a pod finds no node, as a coscheduling plugin's Permit stage does).
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

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
from msgspec import structs

from scheduler.core.engine import FilterDecision, SchedulingEngine
from scheduler.core.model import PodInfo
from scheduler.core.resources import ZERO, Resources
from scheduler.kube.names import NamedDecision, filter_offered, prioritize_offered

MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100

# How kube-scheduler picks a node among those the filters left: (pod, feasible node names) ->
# node name. Default: the extender's prioritize (:func:`best_scored`).
NodeChoice = Callable[[PodInfo, Sequence[str]], str]


@dataclass(frozen=True, slots=True)
class RunningPod:
    """A pod bound to a node, as kube-scheduler's cache shows it to the dry run."""

    pod: PodInfo
    started_at: float
    node: str = ""


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
    scores = prioritize_offered(engine, pod, feasible)
    return feasible[int(np.argmax(np.asarray(scores)))]


def bind(engine: SchedulingEngine, pod: PodInfo, node: str) -> None:
    """The extender's bind verb for ``pod`` on ``node``, then the bound pod as the watch brings
    it back (a resume hold ends when the binding is confirmed). A SchedulingConflict here is a
    bug of the caller (it binds only where the filter passed): let it out."""
    engine.reserve(pod, node)
    engine.apply_pod(structs.replace(pod, node_name=node, phase="Running"))


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



class KubeSchedulerCycle:
    """kube-scheduler's scheduling cycle around the extender ``engine``, one pod at a time, with
    the state kube-scheduler keeps for it: its cache of the nodes (:class:`NodeCache`: the
    requests of the pods bound or assumed on each), the pods nominated to nodes
    (:class:`NominatedPods`), the bound pods by node (what its preemption dry run reads) and
    the last failed filter's statuses.

    :meth:`schedule` is the cycle's decision: kube-scheduler's own filter (resource fit, the
    nominated pods counted), the engine's filter on the nodes left (not called when none is
    left), then ``choice`` (default: the engine's prioritize, the first best). :meth:`bind`
    reserves and binds; :meth:`reserve`, :meth:`confirm` and :meth:`unreserve` split that for
    a gang whose pods are reserved one cycle after another and bound only when all are (or
    unreserved when one finds no node). :meth:`release` is a bound pod's deletion as the
    watch brings it. The workloads keep what is theirs (their jobs, queues and the pods' life
    on the API server: a deletion's grace period, a Job's next pod)."""

    __slots__ = (
        "engine",
        "cache",
        "node_names",
        "nominated",
        "bound",
        "rejected_by_extender",
        "_choice",
        "_on_node",
        "_bound_priorities",
        "_no_room",
        "_unplaced",
    )

    def __init__(
        self, engine: SchedulingEngine, nodes: Sequence[tuple[str, Resources]], *, choice: NodeChoice | None = None
    ) -> None:
        self.engine = engine
        self.cache = NodeCache(nodes)
        self.node_names: Sequence[str] = self.cache.names
        self.nominated = NominatedPods()
        # Every bound (or assumed) pod by UID, in the order they were bound.
        self.bound: dict[str, RunningPod] = {}
        # Whether the last failed :meth:`schedule` was the engine's refusal (kube-scheduler
        # called the extender) rather than its own filter leaving no node to offer.
        self.rejected_by_extender = False
        self._choice = choice
        self._on_node: dict[str, dict[str, RunningPod]] = {name: {} for name in self.node_names}
        self._bound_priorities: Counter[int] = Counter()  # of the pods bound anywhere
        # (priority, cpu, memory, GPUs) of pods kube-scheduler's own filter found no node for
        # since resources were last released: a pod asking at least as much at no higher
        # priority finds none either (binds and nominations only take room away).
        self._no_room: list[tuple[int, int, int, int]] = []
        self._unplaced: tuple[str, NamedDecision] | None = None  # the last failed filter

    # ------------------------------------------------------------------ the cycle

    def schedule(self, pod: PodInfo) -> str | None:
        """The node kube-scheduler binds ``pod`` to now, or None (the filter's statuses kept
        for :meth:`preemption_candidates`)."""
        offered = self.offered(pod)
        decision = self._filter(pod, offered)
        feasible = decision.feasible
        if not feasible:
            self._unplaced = (pod.uid, decision)
            self.rejected_by_extender = bool(offered)
            return None
        if self._choice is not None:
            return self._choice(pod, feasible)
        return best_scored(self.engine, pod, feasible)

    def fits_nominated(self, pod: PodInfo, node: str) -> bool:
        """kube-scheduler's first try for a pod nominated to ``node``: that node alone, its own
        filter (the other nominated pods counted), then the engine's."""
        return node in self.offered(pod) and bool(self._filter(pod, [node]).feasible)

    def _filter(self, pod: PodInfo, offered: Sequence[str]) -> NamedDecision:
        """The extender's filter as kube-scheduler calls it: through the engine's node slots,
        as the extender's verb does, and not at all with no node left to offer."""
        return filter_offered(self.engine, pod, offered) if offered else NamedDecision(FilterDecision(), offered)

    def offered(self, pod: PodInfo) -> Sequence[str]:
        """The nodes kube-scheduler's own filter passes on to the extender: those with room
        for the pod in its cache, but not where pods nominated before ``pod`` leave it none.
        Never asked for a pod while it is nominated: the memo below does not leave a pod's own
        nomination out, as :meth:`NominatedPods.kept_for` does."""
        priority = pod.priority
        cpu, memory, gpus = pod.requests.as_tuple()
        for other, c, m, g in self._no_room:
            if other >= priority and c <= cpu and m <= memory and g <= gpus:
                return ()
        offered = self.cache.fitting(pod)
        if offered and self.nominated:
            blocked = {
                node for node in self.nominated.nodes()
                if not admits(pod, node, free=self.cache.free(node), nominated=self.nominated)
            }
            if blocked:
                offered = [name for name in offered if name not in blocked]
        if not offered:
            self._no_room.append((priority, cpu, memory, gpus))
        return offered

    def bind(self, pod: PodInfo, node: str, *, at: float) -> None:
        """The extender's bind verb for ``pod`` on ``node`` (:func:`bind`), the pod then in
        kube-scheduler's cache."""
        bind(self.engine, pod, node)
        self._add(pod, node, at)

    def reserve(self, pod: PodInfo, node: str, *, at: float) -> PodInfo:
        """``pod`` reserved on ``node`` (the extender's bind verb books it) and assumed in
        kube-scheduler's cache; returns the pod as the watch will show it once bound (the
        placement's annotations written with the binding) for :meth:`confirm`. A
        SchedulingConflict here is a bug of the caller (it reserves only where the filter
        passed): let it out."""
        placement = self.engine.reserve(pod, node)
        self._add(pod, node, at)
        return structs.replace(pod, annotations={**pod.annotations, **placement.annotations}, node_name=node, phase="Running")

    def confirm(self, bound: PodInfo) -> None:
        """The bound pod as the watch brings it back."""
        self.engine.apply_pod(bound)

    def unreserve(self, uid: str) -> None:
        """A reserved pod's reservation undone (its gang did not fit): the engine's booking and
        kube-scheduler's assumed pod both go."""
        self.engine.unreserve(uid)
        self._remove(uid)

    def release(self, uid: str) -> None:
        """Bound pod ``uid`` deleted, as the watch brings it: gone from the engine and from
        kube-scheduler's cache."""
        self.engine.delete_pod(uid)
        self._remove(uid)

    def _add(self, pod: PodInfo, node: str, at: float) -> None:
        running = RunningPod(pod=pod, started_at=at, node=node)
        self.bound[pod.uid] = running
        self._on_node[node][pod.uid] = running
        self._bound_priorities[pod.priority] += 1
        self.cache.bind(node, pod.requests)

    def _remove(self, uid: str) -> None:
        running = self.bound.pop(uid)
        del self._on_node[running.node][uid]
        self._bound_priorities[running.pod.priority] -= 1
        self.cache.release(running.node, running.pod.requests)
        self._no_room.clear()

    # ------------------------------------------------------------------ nominations

    def nominate(self, pod: PodInfo, node: str) -> None:
        self.nominated.nominate(pod, node)

    def unnominate(self, pod: PodInfo, node: str) -> None:
        """``pod``'s nomination to ``node`` cleared: the room it kept may go to others, so the
        memo of kube's own filter goes too."""
        self.nominated.clear(pod, node)
        self._no_room.clear()

    # ------------------------------------------------------------------ what it shows

    def free(self, node: str) -> Resources:
        """Free on ``node`` in kube-scheduler's cache: allocatable less its bound pods."""
        return self.cache.free(node)

    def free_for_lowest(self, node: str) -> Resources:
        """What kube-scheduler sees free on ``node`` for a pod of no higher priority than the
        pods nominated there: free less what they are owed (never below zero)."""
        free = self.cache.free(node)
        if not self.nominated:
            return free
        kept = self.nominated.kept_for(_LOWEST, node)
        return Resources(
            max(0, free.cpu_millis - kept.cpu_millis), max(0, free.memory_bytes - kept.memory_bytes), max(0, free.gpus - kept.gpus)
        )

    def running_on(self, node: str) -> list[RunningPod]:
        return list(self._on_node[node].values())

    def preemption_candidates(self, pod: PodInfo) -> dict[str, list[str]]:
        """The candidate nodes and victims kube-scheduler offers the extender's preempt verb
        for ``pod`` after its cycle found no node (:func:`preemption_candidates`), with that
        cycle's filter statuses (or, if another pod's cycle ran since, its filter again)."""
        unplaced = self._unplaced
        if unplaced is not None and unplaced[0] == pod.uid:
            decision = unplaced[1]  # this scheduling cycle's filter
        else:
            offered = self.offered(pod)
            decision = self._filter(pod, offered)
            if decision.feasible:
                raise AssertionError(f"{pod.uid} preempts while a node is feasible for it")
        if not any(count for priority, count in self._bound_priorities.items() if priority < pod.priority):
            return {}  # no pod of lower priority anywhere: the dry run finds no candidate node
        return preemption_candidates(
            pod,
            nodes=self.node_names,
            unresolvable=decision.unresolvable if decision.unresolvable_count else {},
            free_on=self.cache.free,
            pods_on=self.running_on,
            nominated=self.nominated,
        )


# A pod below every simulated pod's priority: what is kept for nominated pods from anyone.
_LOWEST = PodInfo(uid="", namespace="", name="", priority=-1)
