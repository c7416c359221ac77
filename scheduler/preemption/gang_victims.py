"""A running gang as one FitGpp victim.

HiveD places a gang (``cellfit.io/gang: "true"``, ``cellfit.io/gang-size: N``, pods of one Job)
all or nothing, and its workload is one distributed job: a member preempted alone leaves the
others holding their GPUs while the job hangs. So FitGpp takes a gang member only together with
every other running member of its gang. Its score counts the whole gang: eq. 1's sizes of all
its members summed (each on its own node's capacity), and the longest grace period among them.
The room it frees for the preemptor is only what its members on the preemptor's node free
(eq. 2's test counts those alone), so a gang spread over nodes costs more than the room it makes
there, and a single pod that frees as much wins.

:func:`gangs_as_rows` folds each gang's members on one node into one row of the candidate table
(that node's demand, the gang's cost); :class:`GangVictim` is what the decision tells of the
gang, and which of its members the preempt verb answers and which the driver deletes itself
(kube-scheduler deletes the victims of the one node it picks).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from scheduler.constants import ANNOTATION_GANG
from scheduler.core.model import PodInfo
from scheduler.preemption.table import CandidateTable


def is_gang_pod(pod: PodInfo) -> bool:
    """Whether HiveD places the pod as a member of its Job's gang (scheduler/cells/request.py:
    ``cellfit.io/gang: "true"`` on a pod a Job owns). Any group's kind "Job" (Volcano's too, not
    only batch/v1: OwnerRef.is_batch_job): the gang is HiveD's, keyed by its owner's UID, and its
    ranks hang whatever controller made them; what is written on the gang's Job
    (``cellfit.io/gang-preempted``) is written only where a batch/v1 Job of that UID exists."""
    return pod.owner is not None and pod.owner.kind == "Job" and pod.annotations.get(ANNOTATION_GANG, "").strip().lower() == "true"


@dataclass(frozen=True, slots=True, kw_only=True)
class GangMember:
    uid: str
    key: str
    node: str
    gpus: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GangVictim:
    """A gang taken whole: its Job's UID (the gang's key), its name (``namespace/job``) and every
    running member."""

    job: str
    name: str
    members: tuple[GangMember, ...]

    @property
    def gpus(self) -> int:
        return sum(member.gpus for member in self.members)

    def describe(self) -> str:
        """``the gang ml-a/gang-bert (2 pods, 16 GPUs)``."""
        count = len(self.members)
        return f"the gang {self.name} ({count} pod{'' if count == 1 else 's'}, {self.gpus} GPU{'' if self.gpus == 1 else 's'})"

    def on(self, node: str) -> tuple[str, ...]:
        """The UIDs of its members on ``node``."""
        return tuple(member.uid for member in self.members if member.node == node)

    def elsewhere(self, node: str) -> dict[str, list[str]]:
        """Its members on other nodes than ``node``, by node."""
        by_node: dict[str, list[str]] = {}
        for member in self.members:
            if member.node != node:
                by_node.setdefault(member.node, []).append(member.uid)
        return by_node

    def other_nodes(self, node: str) -> list[str]:
        return sorted({member.node for member in self.members if member.node != node})


def preempted_elsewhere(*, gang: str | None, preemptor: str, node: str, ran_on: str) -> str:
    """``preempted with its gang ml/bert: the trial pod ml/te-1 takes the gang's room on node
    gpu-2; this pod ran on node gpu-3``: the head of the Preempted Event of a gang member FitGpp
    took on another node than the trial pod's, which cellfit deletes itself; "preempted by
    ml/te-1 on node gpu-2" would read as if gpu-2 were its own node. ``gang``: ``namespace/job``,
    None where unknown. ``kubectl cellfit why`` reads the preemptor and ``node`` from it
    (scheduler/kubectl/objects.py PREEMPTED_BY, PREEMPTED_WHERE)."""
    named = f"its gang {gang}" if gang else "its gang"
    return f"preempted with {named}: the trial pod {preemptor} takes the gang's room on node {node}; this pod ran on node {ran_on}"


def gangs_as_rows(
    table: CandidateTable, gangs: Sequence[GangVictim], *, row_of: Callable[[str], int | None]
) -> tuple[CandidateTable, Mapping[int, GangVictim]]:
    """``table`` with each gang's members on one node folded into one row: the first member's
    there, with the demand of all its members on that node (eq. 2: the room they free together),
    the sum of all its members' sizes and the longest of their grace periods (eq. 3: the gang's
    cost, wherever its members run), and the highest of their priorities; the other members'
    rows invalid. A gang with a member the table cannot take (terminating, not best-effort,
    passed over, or not in the table) has all its rows invalid: taking the rest would break it
    as much. Also the folded rows, each with its gang. Eq. 3's maxima must be taken before.
    ``row_of``: a pod's row in ``table`` (:meth:`PreemptionIndex.row_of`)."""
    if not gangs:
        return table, {}
    rows_of = [[row for row in (row_of(member.uid) for member in gang.members) if row is not None] for gang in gangs]
    valid = table.valid.copy()
    demand = table.demand.copy()
    sizes = table.sizes.copy()
    grace = table.grace_seconds.copy()
    priorities = table.priorities.copy() if table.priorities is not None else None
    folded: dict[int, GangVictim] = {}
    for gang, rows in zip(gangs, rows_of):
        if not rows:
            continue
        if len(rows) < len(gang.members) or not table.valid[rows].all():
            valid[rows] = False
            continue
        total_size = float(table.sizes[rows].sum())
        longest = float(table.grace_seconds[rows].max())
        by_node: dict[int, list[int]] = {}
        for row in rows:
            by_node.setdefault(int(table.node_of[row]), []).append(row)
        for node_rows in by_node.values():
            first = node_rows[0]
            demand[:, first] = table.demand[:, node_rows].sum(axis=1)
            sizes[first] = total_size
            grace[first] = longest
            if priorities is not None and table.priorities is not None:
                priorities[first] = int(np.max(table.priorities[rows]))
            valid[node_rows[1:]] = False
            folded[first] = gang
    return replace(table, valid=valid, demand=demand, sizes=sizes, grace_seconds=grace, priorities=priorities), folded
