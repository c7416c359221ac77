"""The record a preemptor's binding leaves on it while a gang member the record names still runs.

The binding empties a preemptor's record (``records.py``), except where the record names members
of a gang FitGpp took whole on other nodes (``elsewhere``) that still run: the replica that
decided may have died before deleting them, and the record is all a replica that lists the pods
later finishes that preemption from (scheduler/cluster/gang_recovery.py), once it is old enough
that the deciding replica's own tries are over (5 minutes), long after the preemptor usually
binds (its victims' grace period). Emptied at the binding, the record left those members running
for ever beside their deleted gang-mates (review28). So the binding writes the record less what
only a pending preemptor needs (its resumed Jobs: the Jobs' own records keep their holds from the
binding on), and the record is taken off once none of the members it names runs: the watch shows
the last of them that ran leave (:class:`GangRecordsLeft`), or a relist finds none of them running
(gang_recovery.py). A bound pod's record keeps no hold: holds.py reads a pending pod's only.
The record lasts only as long as the bound pod, so the replica that binds it names those members
on their Jobs first (``gang_records.py``; scheduler/cluster/cache.py ``ClusterCache.bind``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Collection

from scheduler.core.model import PodInfo
from scheduler.errors import InvalidAnnotation
from scheduler.preemption import records


def runs(pod: PodInfo | None) -> bool:
    """Whether a gang member a record names still runs: shown, on a node, not finished, not leaving
    (whoever deleted it, it goes)."""
    return pod is not None and pod.holds_resources and not pod.terminating


def kept_at_binding(text: str | None, *, current: Callable[[str], PodInfo | None]) -> tuple[str, tuple[str, ...]]:
    """The record ``text`` as the preemptor's binding leaves it, and the members it names that
    still run (``current``: a pod by UID as this replica shows it): ``""`` (emptied), unless it
    names a gang member elsewhere that runs and says what a recovery acts on (``gangs``, ``at``).
    A record that does not read is emptied, as before."""
    try:
        record = records.decode(text or "")
    except InvalidAnnotation:
        return "", ()
    if record is None or not record.gangs or record.at is None:
        return "", ()
    running = tuple(uid for uid in record.elsewhere if runs(current(uid)))
    if not running:
        return "", ()
    left = records.encode(node=record.node, victims=record.victims, elsewhere=record.elsewhere, gangs=record.gangs, decided_at=record.at)
    return left, running


def names_members(text: str | None) -> tuple[str, ...]:
    """The gang members elsewhere a bound pod's record ``text`` names (none for a record that does
    not read, or names none)."""
    try:
        record = records.decode(text or "")
    except InvalidAnnotation:
        return ()
    return record.elsewhere if record is not None else ()


@dataclass(slots=True)
class _Left:
    pod: PodInfo
    text: str
    running: set[str]


@dataclass(slots=True)
class GangRecordsLeft:
    """The bound preemptors whose record names gang members elsewhere, with those of them seen
    running; a record is spent (to be taken off) once the last member seen running leaves.
    Members not shown when the preemptor is (a restart lists pods node by node) join as they are
    shown running; a record none of whose members is ever shown running is a relist's to take off
    (gang_recovery.py)."""

    _by_preemptor: dict[str, _Left] = field(default_factory=dict)
    _naming: dict[str, set[str]] = field(default_factory=dict)  # member UID -> preemptor UIDs

    def __bool__(self) -> bool:
        return bool(self._by_preemptor)

    def bound(self, pod: PodInfo, *, text: str, running: Collection[str]) -> None:
        """``pod`` is bound carrying ``text``, ``running`` among the members it names."""
        known = self._by_preemptor.get(pod.uid)
        if known is not None and known.text == text:
            known.pod = pod
            known.running.update(running)
            return
        self.forget(pod.uid)
        self._by_preemptor[pod.uid] = _Left(pod=pod, text=text, running=set(running))
        for member in names_members(text):
            self._naming.setdefault(member, set()).add(pod.uid)

    def forget(self, pod_uid: str) -> None:
        """The preemptor's record is followed no more (gone, emptied, replaced, or the pod ended)."""
        left = self._by_preemptor.pop(pod_uid, None)
        if left is None:
            return
        for member, preemptors in list(self._naming.items()):
            preemptors.discard(pod_uid)
            if not preemptors:
                del self._naming[member]

    def member_shown(self, pod: PodInfo) -> list[tuple[PodInfo, str]]:
        """A member a record names is shown: running, it is waited for; leaving or ended, the
        records none of whose members seen running runs any more are returned, spent, and
        followed no more."""
        if runs(pod):
            for preemptor in self._naming.get(pod.uid, ()):
                self._by_preemptor[preemptor].running.add(pod.uid)
            return []
        return self.member_gone(pod.uid)

    def member_gone(self, member_uid: str) -> list[tuple[PodInfo, str]]:
        """A member a record names left: the records it was the last running member of, spent."""
        spent: list[tuple[PodInfo, str]] = []
        for preemptor in list(self._naming.get(member_uid, ())):
            left = self._by_preemptor[preemptor]
            if member_uid in left.running:
                left.running.discard(member_uid)
                if not left.running:
                    spent.append((left.pod, left.text))
                    self.forget(preemptor)
        return spent
