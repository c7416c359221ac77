"""The members of a gang FitGpp took whole still to delete, recorded on the gang's Job
(annotation ``cellfit.io/gang-preempted``).

A gang's members on other nodes than the preemption's are deleted by cellfit alone
(``gang_victims.py``); the preemptor's record (``records.py`` ``elsewhere``) names them, so that
a replica finishes the preemption should the one that decided stop before deleting them
(scheduler/cluster/gang_recovery.py), once the record is 5 minutes old. The preemptor's record
lasts only as long as the preemptor shows it: a trial pod, a short run, may finish or be deleted
within those 5 minutes (a list of unfinished pods leaves it out), and a pending preemptor's hold
that gives up takes its record off. A replica's memory keeps such a record, but not across a
restart; the member then ran for ever beside its deleted gang-mates (review27 R2). So the Job,
which outlives the preemptor, names them too: a replica that reads a preemptor's record naming
members still running that it did not decide (a list while the record is young, the preemptor
ending or its record taken off), the replica that binds the preemptor while a member its record
names runs (before the binding: one that only watched the record arrive had named nobody), and
the deciding replica whose own deletion of one gave up, writes each member on its Job with the decision (the preemptor, its node, the decision's time);
whoever deletes a member, or finds it running no more, takes it off. A restarted replica reads
the Jobs and finishes what they name, as it does the preemptors' records.

Format: compact JSON, ``{"<member uid>":{"by":"<namespace>/<preemptor>","node":"<node>","at":<seconds>},...}``,
keys sorted; the annotation is taken off when it would name none.
"""

from __future__ import annotations

import math
from typing import Collection, Mapping

import msgspec

from scheduler.constants import ANNOTATION_GANG_PREEMPTED
from scheduler.errors import InvalidAnnotation

FIELD = f"metadata.annotations[{ANNOTATION_GANG_PREEMPTED}]"


class LeftMember(msgspec.Struct, frozen=True):
    """A member the preemption of ``by`` (``namespace/name``) on ``node``, decided at wall-clock
    ``at`` (seconds since the epoch), took and has not deleted yet."""

    by: str
    node: str
    at: float


_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODER = msgspec.json.Decoder(dict[str, LeftMember])


def encode(members: Mapping[str, LeftMember]) -> str:
    """The annotation's text for ``members`` (member UID -> its preemption)."""
    return _ENCODER.encode(dict(members)).decode()


def decode(text: str) -> dict[str, LeftMember]:
    """The members the annotation's text names; none for an empty text. Raises
    :class:`InvalidAnnotation` naming the annotation for a text that does not read, or names a
    member, a preemptor or a node by an empty name, or a time that is no time."""
    if not text:
        return {}
    try:
        members = _DECODER.decode(text)
    except msgspec.DecodeError as error:
        raise InvalidAnnotation(f"{text[:200]!r} does not read as gang members to their preemptions: {error}", field=FIELD) from None
    for uid, left in members.items():
        if not (uid and left.by.count("/") == 1 and all(left.by.split("/")) and left.node):
            raise InvalidAnnotation(f"{text[:200]!r} names a member, its preemptor (namespace/name) or its node by an empty name",
                                    field=FIELD)
        if not (math.isfinite(left.at) and left.at >= 0):
            raise InvalidAnnotation(f"{text[:200]!r} has a decision time (at) that is no time: {left.at}", field=FIELD)
    return members


def updated(text: str | None, *, added: Mapping[str, LeftMember], gone: Collection[str]) -> dict[str, LeftMember] | None:
    """What the Job should name once ``added`` are recorded (a member named already keeps its
    first decision) and ``gone`` (member UIDs) taken off the record ``text`` holds (None: no
    annotation; one that does not read is replaced); None when that changes nothing."""
    try:
        current: dict[str, LeftMember] | None = decode(text or "")
    except InvalidAnnotation:
        current = None
    wanted = {**added, **(current or {})}
    for uid in gone:
        wanted.pop(uid, None)
    return None if wanted == current else wanted
