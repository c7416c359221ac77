"""The record of a FitGpp decision on its preemptor (annotation ``cellfit.io/preemptor-hold``).

A preemptor hold (``holds.py``) lives in the memory of the replica whose preempt verb decided
it. kube-scheduler's nomination of the preemptor to the victims' node is the only trace the
cluster keeps of it, and kube-scheduler clears that nomination when an attempt meets the
extender down (schedule_one.go: an error ends with ``clearNominatedNode``): after a restart of
cellfit in the middle of a preemption nothing would tie the preemptor to the room its victims
free, and the victim Job's next pod would race it for that room. So the replica that answered
the preempt verb writes the decision on the preemptor (in the background, after the answer):
the node FitGpp chose and the victims it named there, by UID. Every replica that reads it
(a restart's first list, a standby's watch) keeps that node's room for the pending pod while
the preemption is in progress: one of those victims still leaves that node, marked by this
scheduler's preemption, or every one of them is gone. The latter is the usual case after a
restart: kube-scheduler's cache counts a leaving victim on its node, so its attempts reach the
extender, and clear the nomination when it is down, only once the victim has exited. A
record none of whose victims has started to leave (kube-scheduler has not deleted them yet)
keeps nothing until one does. The rebuilt hold is an ordinary one (``holds.py``): it ends when
the pod is bound or deleted and gives up ``hold_seconds`` after it first keeps a pod off. The
pod's binding empties the record (unless a gang member it names elsewhere still runs:
``bound_records.py`` leaves it, less ``resumes``, until none does), and a later decision for the
pod replaces it. A bound pod's record keeps no hold. A hold that
stands for a record and gives up (it lapsed, or its wait for stuck victims ran out) has the
replica where it gave up take that record off the pod (scheduler/cluster/preemptor_records.py),
so that no later restart keeps the node's room for the pod again.

Format: compact JSON, ``{"node":"gpu-node-2","victims":["<uid>",...]}``; for a decision that took
a gang whole (scheduler/preemption/gang_victims.py), ``"elsewhere":["<uid>",...]`` names its
members on other nodes, which kube-scheduler does not delete, ``"gangs":["<job uid>",...]`` the
Jobs of the gangs taken whole and ``"at"`` the decision's wall-clock time (seconds since the
epoch). A replica that lists the pods (a restart) deletes those
members still running (scheduler/cluster/gang_recovery.py): the replica that answered may have
died before it did, once the record is older than the answering replica's own tries of them
(a replica that relists while it still acts would preempt them a second time). Only a member that a Job ``gangs`` names owns, of cellfit's gang and
scheduler, is deleted: the record is an annotation, which anyone who may update a pod can write
where the chart's state policy is off, and must not order the deletion of any other pod. The
three are written only with members to name, so a record of any other decision reads as before,
and a record without them (an older replica's) reads as naming none.

``"resumes":{"<victim uid>":"<job uid>",...}`` names, for each victim on the node whose Job gets a
resume hold there (holds.py: the room kept for the Job's next pod), that Job. A victim leaves no
other trace once it has exited (kube-scheduler deleted it): a replica that lists the pods after
that (a restart) rebuilds the Job's resume hold from the record, while the preemptor is pending.
Written only where a victim's Job resumes, so a record without (an older replica's, HiveD's
reclaim) reads as naming none. The binding empties it: from then on the Job's own record of its
holds (``resume_records.py``, written beside this one) is what a restart reads.

``"owed"`` is what the deciding replica writes after the record, on other objects: ``"jobs"``, by
Job UID, each victim's Job (its ``namespace`` and ``name``), the ``count`` its
``cellfit.io/preemptions`` is raised to (the decision's, once per decision) and the resume
``holds`` it is given (victim UID -> node, its ``cellfit.io/resume-holds``); ``"pods"``, by victim
UID, the victims on the node (``namespace/name``) owed their ``Preempted`` Event. A replica killed after the record and before those writes left them undone (user26): a
replica that reads the record (a restart's list, the preemptor's binding) finishes them
(scheduler/cluster/preemptor_records.py ``finish_owed``): a count is raised to the recorded value, never by one, so a second
finisher (or the deciding replica's own write) adds nothing; the holds are merged into the Job's
record; the Event has a name of its own (one per victim), so it is made once. Every replica that
reads it counts the Jobs at once (``FitGppEngine``), before the writes land. Written only for
FitGpp's decisions that count Jobs: any other record reads as owing nothing.
"""

from __future__ import annotations

import math
from typing import Mapping

import msgspec

from scheduler.constants import ANNOTATION_PREEMPTOR_HOLD
from scheduler.errors import InvalidAnnotation

FIELD = f"metadata.annotations[{ANNOTATION_PREEMPTOR_HOLD}]"


class OwedJob(msgspec.Struct, frozen=True, omit_defaults=True):
    """A victim's Job as the decision's record owes it: its name, the count its
    ``cellfit.io/preemptions`` is raised to (0: none) and the resume holds it is given (victim UID ->
    node)."""

    namespace: str
    name: str
    count: int = 0
    holds: dict[str, str] = msgspec.field(default_factory=dict)


class Owed(msgspec.Struct, frozen=True, omit_defaults=True):
    """What the deciding replica writes after the record: the victims' Jobs (by Job UID) and the
    victims owed their ``Preempted`` Event (victim UID -> ``namespace/name``)."""

    jobs: dict[str, OwedJob] = msgspec.field(default_factory=dict)
    pods: dict[str, str] = msgspec.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.jobs or self.pods)


class PreemptorRecord(msgspec.Struct, frozen=True, omit_defaults=True):
    """The node FitGpp preempted pods on for the pod, those victims' UIDs, the UIDs of the
    members on other nodes of the gangs it took whole (``elsewhere``) and those gangs' Job UIDs
    (``gangs``), the decision's wall-clock seconds (``at``) where it names such members, and the
    Job UID of each victim whose Job gets a resume hold on the node, by the victim's UID
    (``resumes``); what the deciding replica writes after it (``owed``), for a replica that reads it
    to finish."""

    node: str
    victims: tuple[str, ...]
    elsewhere: tuple[str, ...] = ()
    gangs: tuple[str, ...] = ()
    at: float | None = None
    resumes: dict[str, str] = msgspec.field(default_factory=dict)
    owed: Owed | None = None


class _WholeRecord(PreemptorRecord, frozen=True, forbid_unknown_fields=True):
    """A record read whole: a field this version does not know refuses it."""


_ENCODER = msgspec.json.Encoder()
# Fields this version does not know (a newer version's) are ignored: in a rolling upgrade the old
# replicas keep the holds the new ones record. Versions before this one refuse such a record.
_DECODER = msgspec.json.Decoder(PreemptorRecord)
_WHOLE_DECODER = msgspec.json.Decoder(_WholeRecord)


def encode(
    *,
    node: str,
    victims: tuple[str, ...],
    elsewhere: tuple[str, ...] = (),
    gangs: tuple[str, ...] = (),
    decided_at: float | None = None,
    resumes: Mapping[str, str] | None = None,
    owed: Owed | None = None,
) -> str:
    """The record's text; ``decided_at`` (wall-clock seconds) is written only with ``elsewhere``:
    the record of any other decision stays as older replicas read it."""
    owed = owed if owed else None
    at = decided_at if elsewhere else None
    record = PreemptorRecord(node=node, victims=victims, elsewhere=elsewhere, gangs=gangs, at=at, resumes=dict(resumes or {}),
                             owed=owed)
    return _ENCODER.encode(record).decode()


def decode(text: str, *, whole: bool = False) -> PreemptorRecord | None:
    """The record the annotation's text holds; None for an empty one (the binding empties it,
    as a binding's annotations can set a key but not remove it). Fields this version does not
    know are ignored, unless ``whole``: then they refuse the record (what orders deletions must
    be understood whole: a newer field may narrow it). Raises :class:`InvalidAnnotation` naming
    the annotation for a text that does not read, or names no node or no victim."""
    if not text:
        return None
    try:
        record: PreemptorRecord = (_WHOLE_DECODER if whole else _DECODER).decode(text)
    except msgspec.DecodeError as error:
        raise InvalidAnnotation(f"{text[:200]!r} does not read: {error}", field=FIELD) from None
    if not record.node:
        raise InvalidAnnotation(f"{text[:200]!r} names no node", field=FIELD)
    if not record.victims or not all(record.victims):
        raise InvalidAnnotation(f"{text[:200]!r} names no victim by UID", field=FIELD)
    if not all(record.elsewhere):
        raise InvalidAnnotation(f"{text[:200]!r} names a gang member elsewhere by an empty UID", field=FIELD)
    if not all(record.gangs):
        raise InvalidAnnotation(f"{text[:200]!r} names a gang by an empty Job UID", field=FIELD)
    if not all(victim in record.victims and job for victim, job in record.resumes.items()):
        raise InvalidAnnotation(f"{text[:200]!r} names a resumed Job for a pod that is not one of its victims, or by an empty UID",
                                field=FIELD)
    if record.owed is not None and not _owed_reads(record.owed, victims=record.victims):
        raise InvalidAnnotation(f"{text[:200]!r} owes a Job or an Event it names by an empty name, a count below 0, or a pod that is "
                                "not one of its victims", field=FIELD)
    if record.at is not None and not (math.isfinite(record.at) and record.at >= 0):
        raise InvalidAnnotation(f"{text[:200]!r} has a decision time (at) that is no time: {record.at}", field=FIELD)
    return record


def _owed_reads(owed: Owed, *, victims: tuple[str, ...]) -> bool:
    """Whether what a record owes names each Job and pod in full, counts from 0 up, and owes
    Events and holds to its own victims only (a hold of a gang's member elsewhere, on its node,
    included: ``holds`` may name any node)."""
    jobs_read = all(uid and job.namespace and job.name and job.count >= 0 and all(v and n for v, n in job.holds.items())
                    for uid, job in owed.jobs.items())
    pods_read = all(uid in victims and key.count("/") == 1 and all(key.split("/")) for uid, key in owed.pods.items())
    return jobs_read and pods_read
