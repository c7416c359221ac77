"""The resume holds a preempted Job is owed, recorded on the Job (annotation ``cellfit.io/resume-holds``).

A resume hold (``holds.py``) keeps room on a victim's node for its Job's next pod. It lives in the
memory of each replica, and the pods show it only while they last: the victim while it leaves
(its ``DisruptionTarget``), the preemptor's record while the preemptor is pending (``records.py``
``resumes``; the preemptor's binding empties it). A restart after both are gone (the victim
exited and the trial pod bound, its Job's next pod still pending) would forget the hold, and any
best-effort pod whose backoff ended first would take the room. So the Job, which outlives all of
them, carries the holds itself: the replica that decided writes each victim whose Job gets a
hold, with its node, and the replica where that hold ends (a pod of the Job bound by its bind
verb, or the hold gave up) takes the victim off (scheduler/cluster/preemptor_records.py). A
restarted replica rebuilds a hold for each victim the Job still names.

Format: compact JSON, ``{"<victim uid>":"<node>",...}``, keys sorted; the annotation is taken off
when it would name none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Mapping

import msgspec

from scheduler.constants import ANNOTATION_RESUME_HOLDS
from scheduler.errors import InvalidAnnotation

FIELD = f"metadata.annotations[{ANNOTATION_RESUME_HOLDS}]"

_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODER = msgspec.json.Decoder(dict[str, str])


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRef:
    """The Job whose record is written: its name to address it, its UID to guard the write."""

    uid: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def encode(holds: Mapping[str, str]) -> str:
    """The annotation's text for ``holds`` (victim UID -> node)."""
    return _ENCODER.encode(dict(holds)).decode()


def decode(text: str) -> dict[str, str]:
    """The holds the annotation's text names (victim UID -> node); none for an empty text. Raises
    :class:`InvalidAnnotation` naming the annotation for a text that does not read, or names a
    victim or a node by an empty name."""
    if not text:
        return {}
    try:
        holds = _DECODER.decode(text)
    except msgspec.DecodeError as error:
        raise InvalidAnnotation(f"{text[:200]!r} does not read as victim UIDs to nodes: {error}", field=FIELD) from None
    if not all(victim and node for victim, node in holds.items()):
        raise InvalidAnnotation(f"{text[:200]!r} names a victim or a node by an empty name", field=FIELD)
    return holds


def updated(text: str | None, *, added: Mapping[str, str], ended: Collection[str]) -> dict[str, str] | None:
    """The holds the Job should name once ``added`` (victim UID -> node) are recorded and ``ended``
    (victim UIDs) are taken off the record ``text`` holds (None: no annotation; one that does not
    read is replaced); None when that changes nothing."""
    try:
        current = decode(text or "")
    except InvalidAnnotation:
        current = None
    wanted = {victim: node for victim, node in {**(current or {}), **added}.items() if victim not in ended}
    return None if wanted == current else wanted
