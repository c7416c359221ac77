"""The resource-fit policy: CPU, memory and GPU requests against allocatable minus what is bound.

This is cellfit's baseline engine (and the fallback for clusters without a HiveD topology). It
keeps one row per node in numpy arrays so that filter and prioritize over thousands of offered
node names are a handful of vectorised operations rather than a Python loop per node.

Scoring, in 0..10 (kube-scheduler multiplies by the extender's weight):

* a GPU pod scores nodes by how full their GPUs would be after placing it (most-allocated), so
  GPU pods pack and whole nodes stay free for large jobs;
* a CPU-only pod scores a node without GPUs 10, and a GPU node at most 5, less the more of its
  GPUs are idle, so CPU work does not squat on the CPU and memory that idle GPUs need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.constants import MAX_EXTENDER_PRIORITY
from scheduler.core.engine import FilterDecision, Placement
from scheduler.core.model import TERMINAL_PHASES, NodeInfo, PodInfo
from scheduler.core.resources import Resources, format_bytes, format_cpu
from scheduler.errors import SchedulingConflict, UnknownNode

_CPU, _MEMORY, _GPU = 0, 1, 2
_DIMENSIONS: Final = 3
_CPU_ONLY_GPU_NODE_MAX: Final = MAX_EXTENDER_PRIORITY // 2

Vector = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class _Booking:
    node_name: str
    requests: Resources


class ResourceFitEngine:
    """A :class:`~scheduler.core.engine.SchedulingEngine` deciding on resource fit alone."""

    def __init__(self, *, initial_capacity: int = 64) -> None:
        self._index: dict[str, int] = {}
        self._nodes: list[NodeInfo | None] = []
        self._free_slots: list[int] = []
        self._allocatable: Vector = np.zeros((initial_capacity, _DIMENSIONS), dtype=np.int64)
        self._used: Vector = np.zeros((initial_capacity, _DIMENSIONS), dtype=np.int64)
        self._bookings: dict[str, _Booking] = {}
        # Pods bound to nodes not seen yet: folded in when the node arrives.
        self._pods_by_node: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ cluster state

    def knows_node(self, node_name: str) -> bool:
        return node_name in self._index

    def apply_node(self, node: NodeInfo) -> None:
        slot = self._index.get(node.name)
        if slot is not None:
            if self._nodes[slot] != node:
                self._nodes[slot] = node
                self._allocatable[slot] = node.allocatable.as_tuple()
            return
        slot = self._take_slot()
        self._index[node.name] = slot
        self._nodes[slot] = node
        self._allocatable[slot] = node.allocatable.as_tuple()
        used = np.zeros(_DIMENSIONS, dtype=np.int64)
        for uid in self._pods_by_node.get(node.name, ()):
            used += self._bookings[uid].requests.as_tuple()
        self._used[slot] = used

    def delete_node(self, node_name: str) -> None:
        slot = self._index.pop(node_name, None)
        if slot is None:
            return
        self._nodes[slot] = None
        self._allocatable[slot] = 0
        self._used[slot] = 0
        self._free_slots.append(slot)

    def apply_pod(self, pod: PodInfo) -> None:
        if pod.node_name is None and pod.phase not in TERMINAL_PHASES:
            # Pending: it holds nothing yet. A reservation made at bind time stays, because the
            # watch can still deliver the pod's pre-binding state after the binding succeeded.
            return
        if not pod.holds_resources:
            self.delete_pod(pod.uid)
            return
        assert pod.node_name is not None
        booking = self._bookings.get(pod.uid)
        if booking is not None and booking.node_name == pod.node_name and booking.requests == pod.requests:
            return
        self.delete_pod(pod.uid)
        self._book(pod.uid, _Booking(pod.node_name, pod.requests))

    def delete_pod(self, pod_uid: str) -> None:
        booking = self._bookings.pop(pod_uid, None)
        if booking is None:
            return
        members = self._pods_by_node.get(booking.node_name)
        if members is not None:
            members.discard(pod_uid)
            if not members:
                del self._pods_by_node[booking.node_name]
        slot = self._index.get(booking.node_name)
        if slot is not None:
            self._used[slot] -= booking.requests.as_tuple()

    def stats(self) -> Mapping[str, int]:
        return {"nodes": len(self._index), "pods": len(self._bookings)}

    # ------------------------------------------------------------------ decisions

    def filter(self, pod: PodInfo, node_names: Sequence[str]) -> FilterDecision:
        decision = FilterDecision()
        slots, known, unknown = self._slots(node_names)
        for name in unknown:
            decision.unresolvable[name] = "cellfit has not seen this node yet (no Node object)."
        if not known:
            return decision
        request = np.array(pod.requests.as_tuple(), dtype=np.int64)
        allocatable = self._allocatable[slots]
        free = allocatable - self._used[slots]
        never = allocatable < request  # per node and dimension: too small even when empty
        not_now = free < request
        never_any = never.any(axis=1)
        not_now_any = not_now.any(axis=1) & ~never_any
        if not never_any.any() and not not_now_any.any():
            decision.feasible = known
            return decision
        never_reasons = self._reasons(pod.requests, "in all")
        busy_reasons = self._reasons(pod.requests, "free")
        never_dim = never.argmax(axis=1)
        busy_dim = not_now.argmax(axis=1)
        for position, name in enumerate(known):
            if never_any[position]:
                decision.unresolvable[name] = never_reasons[never_dim[position]]
            elif not_now_any[position]:
                decision.failed[name] = busy_reasons[busy_dim[position]]
            else:
                decision.feasible.append(name)
        return decision

    def prioritize(self, pod: PodInfo, node_names: Sequence[str]) -> list[tuple[str, int]]:
        slots, known, unknown = self._slots(node_names)
        scores: dict[str, int] = dict.fromkeys(unknown, 0)
        if known:
            allocatable = self._allocatable[slots]
            fits = ((allocatable - self._used[slots]) >= np.array(pod.requests.as_tuple(), dtype=np.int64)).all(axis=1)
            used_gpus = self._used[slots, _GPU]
            total_gpus = allocatable[:, _GPU]
            has_gpus = total_gpus > 0
            safe_total = np.where(has_gpus, total_gpus, 1)
            if pod.requests.gpus > 0:
                after = np.minimum(used_gpus + pod.requests.gpus, safe_total)
                raw = np.where(has_gpus, after * MAX_EXTENDER_PRIORITY // safe_total, 0)
            else:
                busy = np.clip(used_gpus, 0, safe_total) * _CPU_ONLY_GPU_NODE_MAX // safe_total
                raw = np.where(has_gpus, busy, MAX_EXTENDER_PRIORITY)
            scores.update(zip(known, np.where(fits, raw, 0).tolist()))
        return [(name, scores[name]) for name in node_names]

    def select_victims(
        self,
        pod: PodInfo,
        candidates: Mapping[str, Sequence[str]],
        victim_pods: Mapping[str, PodInfo],
    ) -> dict[str, list[str]]:
        accepted: dict[str, list[str]] = {}
        for node_name, victim_uids in candidates.items():
            slot = self._index.get(node_name)
            if slot is None:
                continue
            victims: list[tuple[str, PodInfo | Resources | None]] = []
            for uid in victim_uids:
                described = victim_pods.get(uid)
                booking = self._bookings.get(uid)
                victims.append((uid, described if described is not None else (booking.requests if booking else None)))
            if any(victim is None for _, victim in victims):
                # A victim cellfit has no record of: kube-scheduler's own plugins chose it, and
                # without its requests cellfit can neither confirm nor narrow the choice.
                accepted[node_name] = list(victim_uids)
                continue
            chosen = self._minimal_victims(pod.requests, slot, victims)
            if chosen is not None:
                accepted[node_name] = chosen
        return accepted

    def reserve(self, pod: PodInfo, node_name: str) -> Placement:
        slot = self._index.get(node_name)
        if slot is None:
            raise UnknownNode(node_name)
        booking = self._bookings.get(pod.uid)
        if booking is not None:
            if booking.node_name == node_name:
                return Placement(pod_uid=pod.uid, node_name=node_name)
            raise SchedulingConflict(f"pod {pod.key} is already bound to node {booking.node_name}")
        free = self._allocatable[slot] - self._used[slot]
        if (free < np.array(pod.requests.as_tuple())).any():
            raise SchedulingConflict(
                f"node {node_name} no longer has room for pod {pod.key} "
                f"(needs {pod.requests.describe()}, free {_describe(free)})"
            )
        self._book(pod.uid, _Booking(node_name, pod.requests))
        return Placement(pod_uid=pod.uid, node_name=node_name)

    def unreserve(self, pod_uid: str) -> None:
        self.delete_pod(pod_uid)

    def free_on(self, node_name: str) -> Resources:
        """What is left on a node; for inspection and tests."""
        slot = self._index.get(node_name)
        if slot is None:
            raise UnknownNode(node_name)
        cpu, memory, gpus = (self._allocatable[slot] - self._used[slot]).tolist()
        return Resources(cpu, memory, gpus)

    # ------------------------------------------------------------------ internals

    def _slots(self, node_names: Sequence[str]) -> tuple[npt.NDArray[np.intp], list[str], list[str]]:
        index = self._index
        found = [index.get(name, -1) for name in node_names]
        if -1 not in found:
            return np.fromiter(found, dtype=np.intp, count=len(found)), list(node_names), []
        known = [name for name, slot in zip(node_names, found) if slot >= 0]
        unknown = [name for name, slot in zip(node_names, found) if slot < 0]
        return np.array([slot for slot in found if slot >= 0], dtype=np.intp), known, unknown

    def _book(self, uid: str, booking: _Booking) -> None:
        self._bookings[uid] = booking
        self._pods_by_node.setdefault(booking.node_name, set()).add(uid)
        slot = self._index.get(booking.node_name)
        if slot is not None:
            self._used[slot] += booking.requests.as_tuple()

    def _take_slot(self) -> int:
        if self._free_slots:
            return self._free_slots.pop()
        slot = len(self._nodes)
        if slot == len(self._allocatable):
            grown = max(64, 2 * slot)
            self._allocatable = np.resize(self._allocatable, (grown, _DIMENSIONS))
            self._used = np.resize(self._used, (grown, _DIMENSIONS))
            self._allocatable[slot:] = 0
            self._used[slot:] = 0
        self._nodes.append(None)
        return slot

    def _minimal_victims(
        self, request: Resources, slot: int, victims: list[tuple[str, PodInfo | Resources | None]]
    ) -> list[str] | None:
        """Evict all candidates, then give back (highest priority first) every victim the pod
        can do without, as kube-scheduler's own preemption does. ``None`` if even evicting all
        of them leaves too little room."""
        free = self._allocatable[slot] - self._used[slot]
        need = np.array(request.as_tuple(), dtype=np.int64)

        def requests_of(victim: PodInfo | Resources | None) -> Vector:
            if isinstance(victim, PodInfo):
                return np.array(victim.requests.as_tuple(), dtype=np.int64)
            assert victim is not None
            return np.array(victim.as_tuple(), dtype=np.int64)

        released = sum((requests_of(v) for _, v in victims), np.zeros(_DIMENSIONS, dtype=np.int64))
        if ((free + released) < need).any():
            return None
        ordered = sorted(
            victims, key=lambda item: -(item[1].priority if isinstance(item[1], PodInfo) else 0)
        )
        chosen: list[str] = []
        for uid, victim in ordered:
            amount = requests_of(victim)
            if ((free + released - amount) >= need).all():
                released = released - amount  # reprieved: it keeps running
            else:
                chosen.append(uid)
        return chosen

    @staticmethod
    def _reasons(request: Resources, qualifier: str) -> tuple[str, str, str]:
        # One sentence per dimension, built once per request and shared by every node that
        # fails on it: a per-node sentence costs more than the whole filter at 5,000 nodes.
        if qualifier == "in all":
            return (
                f"node has less than the {format_cpu(request.cpu_millis)} CPU the pod requests, even when empty.",
                f"node has less than the {format_bytes(request.memory_bytes)} memory the pod requests, even when empty.",
                f"node has fewer than the {request.gpus} GPUs the pod requests, even when empty.",
            )
        return (
            f"not enough free CPU for the pod's {format_cpu(request.cpu_millis)}.",
            f"not enough free memory for the pod's {format_bytes(request.memory_bytes)}.",
            f"not enough free GPUs for the pod's {request.gpus}.",
        )


def _describe(vector: Vector) -> str:
    cpu, memory, gpus = vector.tolist()
    return Resources(cpu, memory, gpus).describe()
