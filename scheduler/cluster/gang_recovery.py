"""The gang members a recorded FitGpp preemption left running on other nodes.

A gang FitGpp takes whole has members on other nodes than the one kube-scheduler deletes the
victims of (scheduler/preemption/gang_victims.py); the replica that answered marks and deletes
those itself, in the background after its answer (``ClusterCache.record_preemption``). Killed
between the answer and those deletions, it leaves them running for ever while their gang-mates
are gone: the distributed job hangs on their GPUs. The decision outlives it in the preemptor's
record (``cellfit.io/preemptor-hold``, scheduler/preemption/records.py), written first, which
names those members (``elsewhere``). A replica that lists the pods (a restart, a relist) finishes
what the record says: each member it names that still runs, not deleted yet, is preempted as
the answering replica would have (marked DisruptionTarget, deleted with its grace period, a
Preempted Event), whoever leads: the answering replica deletes them, leader or not, and a
deletion is guarded by the pod's UID, so a second one changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.core.model import PodInfo
from scheduler.errors import InvalidAnnotation
from scheduler.preemption import records
from scheduler.preemption.gang_victims import preempted_elsewhere


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfinishedMember:
    """A gang member the preemption recorded on ``preemptor`` (of pods on ``node``) took, still
    running on its own node."""

    preemptor: PodInfo
    node: str
    member: PodInfo

    def message(self) -> str:
        """The member's Event and DisruptionTarget message: who, where, why, and that the
        preemption was finished from its record."""
        owner = self.member.owner
        gang = f"{self.member.namespace}/{owner.name}" if owner is not None else None
        head = preempted_elsewhere(gang=gang, preemptor=self.preemptor.key, node=self.node, ran_on=self.member.node_name or "?")
        return (
            f"{head} and goes with every pod of {f'the gang {gang}' if gang else 'its gang'}, as a gang runs whole or not at "
            f"all; deleted from the decision recorded on {self.preemptor.key}, as the replica that made it stopped before "
            "deleting this pod"
        )


def unfinished_members(pods: Iterable[PodInfo], *, current: Callable[[str], PodInfo | None], ours: Callable[[str], bool]) -> list[UnfinishedMember]:
    """The members named by the records ``pods`` carry that still run, not deleted yet, on a
    node: ``current`` gives a pod by UID as the watch shows it (None: gone). A member ``ours``
    (this replica's own decision, whose writes are queued) is left to those writes. A record
    that does not read is passed over, as the holds pass it over (another version's)."""
    found: list[UnfinishedMember] = []
    for pod in pods:
        text = pod.annotations.get(ANNOTATION_PREEMPTOR_HOLD)
        if not text:
            continue
        try:
            record = records.decode(text)
        except InvalidAnnotation:
            continue
        if record is None:
            continue
        for uid in record.elsewhere:
            member = current(uid)
            if member is None or not member.holds_resources or member.terminating or ours(uid):
                continue
            found.append(UnfinishedMember(preemptor=pod, node=record.node, member=member))
    return found
