"""Node names and the dense slots engines keep per-node state in.

kube-scheduler offers an extender thousands of node names per call. Engines never see them:
the driver turns them into slots of the engine's :class:`NodeIndex` (:data:`UNKNOWN` for a name
it does not hold) and engines answer by position among those slots. Done name by name in
Python, that lookup is the dearest step of a 5,000-node filter, so a driver holding the names
in a cheaper form (the request's raw JSON) resolves them in bulk (``scheduler.kube.names``);
:meth:`NodeIndex.resolve` is the plain list's way.
"""

from __future__ import annotations

from itertools import repeat
from typing import Final, NamedTuple, Sequence

import numpy as np
import numpy.typing as npt

Slots = npt.NDArray[np.int64]
Positions = npt.NDArray[np.int64]  # indices into the offered slots (and names)
UNKNOWN: Final = -1  # the slot of a name the index does not hold
_NO_POSITIONS: Final[Positions] = np.zeros(0, dtype=np.int64)


class Located(NamedTuple):
    """Offered slots split into those the index holds and the :data:`UNKNOWN` ones."""

    slots: Slots  # the known slots, in offered order
    known_at: Positions | None  # their positions among the offered slots; None: all are known
    unknown_at: Positions  # the positions of the unknown ones


class NodeIndex:
    """Node name -> slot, slots reused after a name is removed.

    ``generation`` changes whenever the set of names does (never on a node's status update), so a
    driver may keep a table derived from :attr:`names` and rebuild it only when it changed.
    """

    __slots__ = ("_slots", "_names", "_free", "generation", "__weakref__")

    def __init__(self) -> None:
        self._slots: dict[str, int] = {}
        self._names: list[str | None] = []
        self._free: list[int] = []
        self.generation = 0

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, name: object) -> bool:
        return name in self._slots

    @property
    def capacity(self) -> int:
        """One more than the highest slot ever handed out."""
        return len(self._names)

    @property
    def names(self) -> Sequence[str | None]:
        """The name of each slot, ``None`` for a free one."""
        return self._names

    def get(self, name: str) -> int | None:
        return self._slots.get(name)

    def add(self, name: str) -> int:
        """The slot of ``name``, taking a free one (or a new one) if it is new."""
        slot = self._slots.get(name)
        if slot is not None:
            return slot
        slot = self._free.pop() if self._free else len(self._names)
        if slot == len(self._names):
            self._names.append(name)
        else:
            self._names[slot] = name
        self._slots[name] = slot
        self.generation += 1
        return slot

    def remove(self, name: str) -> int | None:
        """Free the slot of ``name``; the slot it had, or ``None`` if it had none."""
        slot = self._slots.pop(name, None)
        if slot is not None:
            self._names[slot] = None
            self._free.append(slot)
            self.generation += 1
        return slot

    def resolve(self, names: Sequence[str]) -> Slots:
        """The slot of each name, in order; :data:`UNKNOWN` where the index does not hold it."""
        try:  # every name known, the usual case: __getitem__ is a third cheaper than get(name, -1)
            return np.fromiter(map(self._slots.__getitem__, names), dtype=np.int64, count=len(names))
        except KeyError:
            return np.fromiter(map(self._slots.get, names, repeat(UNKNOWN)), dtype=np.int64, count=len(names))


def locate(offered: Slots) -> Located:
    """Which offered slots are known (their slots and positions) and which are :data:`UNKNOWN`."""
    known = offered >= 0
    if known.all():
        return Located(offered, None, _NO_POSITIONS)
    known_at = np.flatnonzero(known).astype(np.int64, copy=False)
    return Located(offered[known_at], known_at, np.flatnonzero(~known).astype(np.int64, copy=False))
