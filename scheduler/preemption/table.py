"""Columnar views of the preemption candidates, so that eqs. 1–4 are a few numpy operations over
every running best-effort pod rather than a Python loop per pod.

Two ways to get a :class:`CandidateTable`:

* :meth:`CandidateTable.from_nodes` from plain :class:`~scheduler.preemption.model.NodeState`
  values (what a preempt request carries: a few candidate nodes and their pods);
* :class:`PreemptionIndex`, kept up to date pod by pod (the watch cache, the simulator), whose
  :meth:`~PreemptionIndex.table` is a view of its arrays: no per-call copy of 20,000 pods.

Both feed the same :func:`scheduler.preemption.fitgpp.choose_victims`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Iterable, Mapping, Protocol, Sequence

import numpy as np
import numpy.typing as npt

from scheduler.core.model import TERMINAL_PHASES, NodeInfo, PodInfo
from scheduler.core.nodeindex import NodeIndex
from scheduler.core.resources import Resources
from scheduler.errors import InvalidAnnotation
from scheduler.preemption.model import Candidate, NodeState, is_pinned, job_class_or_best_effort, preemption_count_of

IntMatrix = npt.NDArray[np.int64]
IntVector = npt.NDArray[np.int64]
FloatVector = npt.NDArray[np.float64]
BoolVector = npt.NDArray[np.bool_]
IndexVector = npt.NDArray[np.intp]

_DIMENSIONS: Final = 3


class SlotsByName(Protocol):
    """Node name -> column of a table's node arrays (a dict, or the composition's
    :class:`~scheduler.core.nodeindex.NodeIndex`)."""

    def get(self, name: str, /) -> int | None: ...


@dataclass(frozen=True, slots=True, eq=False)
class CandidateTable:
    """Nodes and preemptible pods as parallel arrays (row ``i`` of the pod arrays is one pod).

    Node arrays (``m`` rows): ``node_names``, ``node_capacity`` (allocatable; normalises eq. 1)
    and ``node_free`` (*N* of eq. 2: allocatable minus every bound pod). Pod arrays (``n``
    rows): ``uids``, ``keys``, ``node_of`` (row into the node arrays), ``demand`` (*D_j*),
    ``sizes`` (eq. 1 of the demand on its node), ``grace_seconds`` (GP_j), ``preemptions``
    (PreemptionCount_j) and ``valid``: the row is a running, non-terminating best-effort pod on
    a usable node. Rows that are not valid (empty slots of an index, TE or terminating pods)
    are ignored everywhere, including the maxima of eq. 3.

    Resource matrices are ``(3, rows)``, one contiguous row per dimension (CPU millicores,
    memory bytes, GPUs) as in :class:`~scheduler.core.fit.ResourceFitEngine`: the element-wise
    test of eq. 2 is then three comparisons of contiguous vectors, an order of magnitude faster
    than reducing along a 3-wide axis. They are int64 so that the test is exact.

    A table from :meth:`PreemptionIndex.table` shares the index's arrays: use it before the next
    change to the index.
    """

    node_names: Sequence[str | None]
    node_index: SlotsByName
    node_capacity: IntMatrix
    node_free: IntMatrix
    uids: Sequence[str | None]
    keys: Sequence[str | None]
    node_of: IndexVector
    demand: IntMatrix
    sizes: FloatVector
    grace_seconds: FloatVector
    preemptions: IntVector
    valid: BoolVector
    priorities: IntVector | None = None  # pod priorities; None: all 0

    @classmethod
    def from_nodes(cls, nodes: Iterable[NodeState]) -> CandidateTable:
        """A table of the given nodes and their preemptible candidates (others are dropped)."""
        names: list[str] = []
        index: dict[str, int] = {}
        capacity: list[tuple[int, int, int]] = []
        free: list[tuple[int, int, int]] = []
        uids: list[str] = []
        keys: list[str] = []
        node_of: list[int] = []
        demand: list[tuple[int, int, int]] = []
        grace: list[float] = []
        counts: list[int] = []
        priorities: list[int] = []
        for node in nodes:
            if node.name in index:
                raise ValueError(f"node {node.name!r} appears twice")
            slot = len(names)
            index[node.name] = slot
            names.append(node.name)
            capacity.append(node.capacity.as_tuple())
            free.append(node.free.as_tuple())
            for candidate in node.candidates:
                if not candidate.preemptible:
                    continue
                uids.append(candidate.uid)
                keys.append(candidate.key)
                node_of.append(slot)
                demand.append(candidate.requests.as_tuple())
                grace.append(candidate.grace_period_seconds)
                counts.append(candidate.preemptions)
                priorities.append(candidate.priority)
        capacity_matrix = _columns(capacity)
        demand_matrix = _columns(demand)
        node_rows = np.array(node_of, dtype=np.intp)
        return cls(
            node_names=tuple(names),
            node_index=index,
            node_capacity=capacity_matrix,
            node_free=_columns(free),
            uids=tuple(uids),
            keys=tuple(keys),
            node_of=node_rows,
            demand=demand_matrix,
            sizes=sizes_of(demand_matrix, capacity_matrix[:, node_rows]),
            grace_seconds=np.array(grace, dtype=np.float64),
            preemptions=np.array(counts, dtype=np.int64),
            valid=np.ones(len(uids), dtype=np.bool_),
            priorities=np.array(priorities, dtype=np.int64),
        )

    def free_on(self, node_name: str) -> Resources:
        slot = self.node_index.get(node_name)
        if slot is None:
            raise KeyError(node_name)
        cpu, memory, gpus = self.node_free[:, slot].tolist()
        return Resources(cpu, memory, gpus)


def sizes_of(demand: IntMatrix, capacity: IntMatrix) -> FloatVector:
    """Eq. 1 column by column: ``demand`` and ``capacity`` are ``(3, n)``. A resource a node does
    not have (capacity 0) adds nothing: no job there can request it."""
    fractions = np.divide(
        demand.astype(np.float64),
        capacity.astype(np.float64),
        out=np.zeros(demand.shape, dtype=np.float64),
        where=capacity > 0,
    )
    sizes: FloatVector = np.sqrt((fractions * fractions).sum(axis=0))
    return sizes


class PreemptionIndex:
    """Every pod that holds resources, by node, kept up to date one change at a time.

    It mirrors what a resource-fit engine books (so ``free`` is *N*) and additionally knows each
    pod's class, grace period and preemption count. Methods follow the
    :class:`~scheduler.core.engine.SchedulingEngine` state methods so a driver feeds both from
    the same watch events. Pods may arrive before their node; they count once it does. Each
    pod's eq. 1 size is computed when it (or its node's capacity) changes, not per decision.

    ``node_index``: the placement engine's, whose slots key the node arrays, so the composition
    has one node name -> slot map. Its owner adds and removes the names: a node is applied here
    after it was applied there and deleted here before it is deleted there. Without one the
    index keeps its own.
    """

    def __init__(self, *, node_index: NodeIndex | None = None, initial_capacity: int = 64) -> None:
        capacity = max(1, initial_capacity)
        self._owns_names = node_index is None
        self._nodes: NodeIndex = node_index if node_index is not None else NodeIndex()
        # The node whose usage each slot holds (None: none). A slot the node index handed to
        # another name since is detected here, so the new node never inherits the old one's pods.
        self._node_names: list[str | None] = [None] * capacity
        self._node_count = 0
        self._capacity: IntMatrix = np.zeros((_DIMENSIONS, capacity), dtype=np.int64)
        self._used: IntMatrix = np.zeros((_DIMENSIONS, capacity), dtype=np.int64)
        self._usable: BoolVector = np.zeros(capacity, dtype=np.bool_)

        self._pod_slot: dict[str, int] = {}
        self._uids: list[str | None] = []
        self._keys: list[str | None] = []
        self._pod_node: list[str | None] = []
        self._free_pod_slots: list[int] = []
        self._node_of: IndexVector = np.full(capacity, -1, dtype=np.intp)
        self._demand: IntMatrix = np.zeros((_DIMENSIONS, capacity), dtype=np.int64)
        self._sizes: FloatVector = np.zeros(capacity, dtype=np.float64)
        self._grace: FloatVector = np.zeros(capacity, dtype=np.float64)
        self._preemptions: IntVector = np.zeros(capacity, dtype=np.int64)
        self._priorities: IntVector = np.zeros(capacity, dtype=np.int64)
        self._preemptible: BoolVector = np.zeros(capacity, dtype=np.bool_)
        self._pods_by_node: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ nodes

    def apply_node(self, node: NodeInfo) -> None:
        slot = self._nodes.add(node.name) if self._owns_names else self._nodes.get(node.name)
        if slot is None:
            raise LookupError(f"node {node.name!r} is not in the placement engine's node index: apply it there first")
        self._grow_nodes_to(self._nodes.capacity)
        if self._node_names[slot] != node.name:
            self._release_node_slot(slot)
            self._node_names[slot] = node.name
            self._node_count += 1
            for uid in self._pods_by_node.get(node.name, ()):
                pod_slot = self._pod_slot[uid]
                self._node_of[pod_slot] = slot
                self._used[:, slot] += self._demand[:, pod_slot]
        self._capacity[:, slot] = node.allocatable.as_tuple()
        # Preempting on a node no new pod can land on frees nothing the preemptor can use.
        self._usable[slot] = node.ready and not node.unschedulable
        members = [self._pod_slot[uid] for uid in self._pods_by_node.get(node.name, ())]
        if members:
            rows = np.array(members, dtype=np.intp)
            self._sizes[rows] = sizes_of(self._demand[:, rows], self._capacity[:, [slot] * len(members)])

    def delete_node(self, node_name: str) -> None:
        slot = self._slot_of(node_name)
        if slot < 0:
            return
        self._release_node_slot(slot)
        if self._owns_names:
            self._nodes.remove(node_name)

    def _release_node_slot(self, slot: int) -> None:
        """Forget the node whose usage ``slot`` holds, if any: its pods wait for it to come back."""
        node_name = self._node_names[slot]
        if node_name is None:
            return
        for uid in self._pods_by_node.get(node_name, ()):
            self._node_of[self._pod_slot[uid]] = -1
        self._node_names[slot] = None
        self._node_count -= 1
        self._capacity[:, slot] = 0
        self._used[:, slot] = 0
        self._usable[slot] = False

    def has_node(self, node_name: str) -> bool:
        """Whether the node has been applied (and not deleted since)."""
        return self._slot_of(node_name) >= 0

    def usable(self, node_name: str) -> bool:
        """Whether a new pod can land on the node: applied, Ready and not cordoned."""
        slot = self._slot_of(node_name)
        return slot >= 0 and bool(self._usable[slot])

    def _slot_of(self, node_name: str) -> int:
        """The slot holding ``node_name``'s usage; -1 while the node has not been applied."""
        slot = self._nodes.get(node_name)
        if slot is None or slot >= len(self._node_names) or self._node_names[slot] != node_name:
            return -1
        return slot

    # ------------------------------------------------------------------ pods

    def apply_pod(self, pod: PodInfo, *, preemptions: int | None = None) -> None:
        """Record a pod's latest state. ``preemptions`` is the count from the pod's Job; without
        it the pod's own ``cellfit.io/preemptions`` annotation is read.

        A label or annotation cellfit cannot read does not stop the watch: such a pod is
        treated as best-effort (the class that never preempts) with the count it shows, or 0.
        The same label is refused when that pod asks to preempt (:func:`~scheduler.preemption.model.job_class_of`).
        """
        if pod.node_name is None and pod.phase not in TERMINAL_PHASES:
            return  # pending: holds nothing yet (a bind-time reservation stays, as in the engine)
        if not pod.holds_resources:
            self.delete_pod(pod.uid)
            return
        assert pod.node_name is not None
        job_class = job_class_or_best_effort(pod.labels)
        if preemptions is None:
            try:
                preemptions = preemption_count_of(pod.annotations)
            except InvalidAnnotation:
                preemptions = 0
        self.add(
            Candidate(
                uid=pod.uid,
                key=pod.key,
                job_class=job_class,
                requests=pod.requests,
                grace_period_seconds=float(pod.grace_period_seconds),
                preemptions=preemptions,
                terminating=pod.terminating,
                priority=pod.priority,
                pinned=is_pinned(pod),
            ),
            node_name=pod.node_name,
        )

    def add(self, candidate: Candidate, *, node_name: str) -> None:
        """Record (or replace) a pod bound to ``node_name``; TE and terminating pods count
        against their node's free resources but are never candidates."""
        slot = self._pod_slot.get(candidate.uid)
        if slot is not None and self._pod_node[slot] != node_name:
            self.delete_pod(candidate.uid)
            slot = None
        if slot is None:
            slot = self._take_pod_slot()
            self._pod_slot[candidate.uid] = slot
            self._pod_node[slot] = node_name
            self._pods_by_node.setdefault(node_name, set()).add(candidate.uid)
            node_slot = self._slot_of(node_name)
            self._node_of[slot] = node_slot
        else:
            node_slot = int(self._node_of[slot])
            if node_slot >= 0:
                self._used[:, node_slot] -= self._demand[:, slot]
        self._uids[slot] = candidate.uid
        self._keys[slot] = candidate.key
        demand = candidate.requests.as_tuple()
        self._demand[:, slot] = demand
        self._grace[slot] = candidate.grace_period_seconds
        self._preemptions[slot] = candidate.preemptions
        self._priorities[slot] = candidate.priority
        self._preemptible[slot] = candidate.preemptible
        if node_slot >= 0:
            self._used[:, node_slot] += demand
            # Eq. 1 in plain floats: numpy's per-call overhead dominates for one pod.
            total = 0.0
            for amount, whole in zip(demand, self._capacity[:, node_slot].tolist()):
                if whole > 0:
                    total += (amount / whole) ** 2
            self._sizes[slot] = math.sqrt(total)

    def delete_pod(self, pod_uid: str) -> None:
        slot = self._pod_slot.pop(pod_uid, None)
        if slot is None:
            return
        node_name = self._pod_node[slot]
        assert node_name is not None
        members = self._pods_by_node[node_name]
        members.discard(pod_uid)
        if not members:
            del self._pods_by_node[node_name]
        node_slot = int(self._node_of[slot])
        if node_slot >= 0:
            self._used[:, node_slot] -= self._demand[:, slot]
        self._uids[slot] = None
        self._keys[slot] = None
        self._pod_node[slot] = None
        self._node_of[slot] = -1
        self._demand[:, slot] = 0
        self._preemptible[slot] = False
        self._free_pod_slots.append(slot)

    def set_terminating(self, pod_uid: str) -> None:
        """The pod was told to stop: it keeps its resources until it is gone, but it is no
        longer a candidate (they are promised to the pod that preempted it)."""
        slot = self._pod_slot.get(pod_uid)
        if slot is not None:
            self._preemptible[slot] = False

    # ------------------------------------------------------------------ views

    def row_of(self, pod_uid: str) -> int | None:
        """The pod's row in :meth:`table` (None: not held)."""
        return self._pod_slot.get(pod_uid)

    def knows_pod(self, pod_uid: str) -> bool:
        return pod_uid in self._pod_slot

    def free_on(self, node_name: str) -> Resources:
        slot = self._slot_of(node_name)
        if slot < 0:
            raise KeyError(node_name)
        cpu, memory, gpus = (self._capacity[:, slot] - self._used[:, slot]).tolist()
        return Resources(cpu, memory, gpus)

    def stats(self) -> Mapping[str, int]:
        return {
            "nodes": self._node_count,
            "pods": len(self._pod_slot),
            "candidates": int(self._preemptible[: len(self._uids)].sum()),
        }

    def table(self) -> CandidateTable:
        """The current state as a :class:`CandidateTable` (views, valid until the next change)."""
        # The placement engine may have handed out slots this index was not told of (HiveD's
        # cell nodes without a Node yet): they are columns of no node here, as are spare ones.
        self._grow_nodes_to(self._nodes.capacity)
        nodes = len(self._node_names)
        pods = len(self._uids)
        node_of = self._node_of[:pods]
        valid = self._preemptible[:pods] & (node_of >= 0)
        if nodes:
            valid &= self._usable[node_of]  # -1 reads the last slot; those rows are already False
        return CandidateTable(
            node_names=self._node_names,
            node_index=self._nodes,
            node_capacity=self._capacity[:, :nodes],
            node_free=self._capacity[:, :nodes] - self._used[:, :nodes],
            uids=self._uids,
            keys=self._keys,
            node_of=node_of,
            demand=self._demand[:, :pods],
            sizes=self._sizes[:pods],
            grace_seconds=self._grace[:pods],
            preemptions=self._preemptions[:pods],
            valid=valid,
            priorities=self._priorities[:pods],
        )

    # ------------------------------------------------------------------ slots

    def _grow_nodes_to(self, count: int) -> None:
        held = len(self._node_names)
        if count <= held:
            return
        grown = max(count, 2 * held)
        self._capacity = _grow(self._capacity, grown)
        self._used = _grow(self._used, grown)
        self._usable = np.concatenate([self._usable, np.zeros(grown - held, dtype=np.bool_)])
        self._node_names.extend([None] * (grown - held))

    def _take_pod_slot(self) -> int:
        if self._free_pod_slots:
            return self._free_pod_slots.pop()
        slot = len(self._uids)
        if slot == self._demand.shape[1]:
            grown = 2 * slot
            self._demand = _grow(self._demand, grown)
            self._node_of = np.concatenate([self._node_of, np.full(grown - slot, -1, dtype=np.intp)])
            self._sizes = np.concatenate([self._sizes, np.zeros(grown - slot, dtype=np.float64)])
            self._grace = np.concatenate([self._grace, np.zeros(grown - slot, dtype=np.float64)])
            self._preemptions = np.concatenate([self._preemptions, np.zeros(grown - slot, dtype=np.int64)])
            self._priorities = np.concatenate([self._priorities, np.zeros(grown - slot, dtype=np.int64)])
            self._preemptible = np.concatenate([self._preemptible, np.zeros(grown - slot, dtype=np.bool_)])
        self._uids.append(None)
        self._keys.append(None)
        self._pod_node.append(None)
        return slot


def _columns(rows: list[tuple[int, int, int]]) -> IntMatrix:
    return np.array(rows, dtype=np.int64).reshape(-1, _DIMENSIONS).T.copy()


def _grow(matrix: IntMatrix, columns: int) -> IntMatrix:
    return np.concatenate([matrix, np.zeros((matrix.shape[0], columns - matrix.shape[1]), dtype=matrix.dtype)], axis=1)
