"""What :func:`~scheduler.matching.admission.decide` makes of its input objects, kept between
passes for the same objects.

A live controller hands ``decide`` the same ``WaitingJob`` and ``RunningJob`` objects, pass
after pass, for every Job its watch shows unchanged (most of a queue, and most running Jobs).
What ``decide`` derives from such an object alone — the matching's ``Job``, a running Job's
machines and the end of its estimate, its fairness value — is then the same as last pass, as
long as the rest of the pass it depended on (the cluster's kinds, the virtual clusters, the
capacity fairness divides by: the *context*) is the same. Remaking those objects was a third of
a pass at 1,000 Jobs.

An entry is found by the object's identity and kept with a reference to it (so the identity
cannot be reused by another object while the entry lives) and with its context; a pass keeps
only the entries it asked for or made, so a Job that left drops out at the next pass. The
input objects are frozen, so an object found is the value its entry was made from. Pure: what
is found is what ``decide`` would make again, and tests check decisions with and without it.
Not shared between threads: one per controller, used by one pass at a time.
"""

from __future__ import annotations

from typing import Generic, TypeVar

V = TypeVar("V")
T = TypeVar("T")

# Contexts kept to hand back an equal one (a context changes seldom: nodes join, a VC's quota).
_CONTEXTS = 4


class Reuse(Generic[V]):
    def __init__(self) -> None:
        self._kept: dict[int, tuple[object, object, V]] = {}
        self._this_pass: dict[int, tuple[object, object, V]] = {}
        self._contexts: list[object] = []

    def context(self, context: T) -> T:
        """An equal context this store has seen, else ``context``: one comparison per pass, so
        that each entry's is by identity."""
        for seen in self._contexts:
            if seen == context:
                return seen
        self._contexts = [context, *self._contexts[: _CONTEXTS - 1]]
        return context

    def begin_pass(self) -> None:
        """Start a pass: what a pass that raised had asked for is not kept (it would pile up)."""
        self._this_pass = {}

    def get(self, source: object, context: object) -> V | None:
        """What was made of ``source`` in ``context`` last pass (or earlier this pass), or None."""
        key = id(source)
        entry = self._kept.get(key)  # (one made earlier this pass is made again: cheaper than a second lookup each time)
        if entry is None or entry[0] is not source or not (entry[1] is context or entry[1] == context):
            return None
        self._this_pass[key] = entry
        return entry[2]

    def put(self, source: object, context: object, value: V) -> V:
        self._this_pass[id(source)] = (source, context, value)
        return value

    def end_pass(self) -> None:
        """Keep what this pass asked for or made; forget the rest."""
        self._kept, self._this_pass = self._this_pass, {}

    def __len__(self) -> int:
        return len(self._kept)
