"""Node names and the dense slots engines keep per-node state in, and the offered-names seam.

kube-scheduler offers an extender thousands of node names per call. An engine that keeps one
column per node (numpy rows indexed by slot) turns those names into slots first; done name by
name in Python, that lookup is the dearest step of a 5,000-node filter. :class:`OfferedNames`
lets a driver that holds the names in a cheaper form (the request's raw JSON, for the
extender) resolve them all at once and pick the answer's names the same way, while engines keep
taking any ``Sequence[str]``: a plain list goes name by name through :meth:`NodeIndex.resolve`.
"""

from __future__ import annotations

from abc import abstractmethod
from itertools import repeat
from typing import Final, NamedTuple, Sequence

import numpy as np
import numpy.typing as npt

Slots = npt.NDArray[np.int64]
Positions = npt.NDArray[np.int64]  # indices into a sequence of offered names
UNKNOWN: Final = -1  # the slot of a name the index does not hold
_NO_POSITIONS: Final[Positions] = np.zeros(0, dtype=np.int64)


class Located(NamedTuple):
    """Offered names located in a :class:`NodeIndex`."""

    slots: Slots  # the slot of each name the index holds, in offered order
    known_at: Positions | None  # their positions among the offered names; None: all are known
    unknown_at: Positions  # the positions of the names it does not hold


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
        if isinstance(names, OfferedNames):
            return names.slots_in(self)
        try:  # every name known, the usual case: __getitem__ is a third cheaper than get(name, -1)
            return np.fromiter(map(self._slots.__getitem__, names), dtype=np.int64, count=len(names))
        except KeyError:
            return np.fromiter(map(self._slots.get, names, repeat(UNKNOWN)), dtype=np.int64, count=len(names))

    def locate(self, names: Sequence[str]) -> Located:
        """Which offered names the index holds (their slots and positions) and which not."""
        found = self.resolve(names)
        known = found >= 0
        if known.all():
            return Located(found, None, _NO_POSITIONS)
        known_at = np.flatnonzero(known).astype(np.int64, copy=False)
        return Located(found[known_at], known_at, np.flatnonzero(~known).astype(np.int64, copy=False))


class OfferedNames(Sequence[str]):
    """Offered node names that resolve and select in bulk. Indexing and iterating give the names
    as ``str`` like any sequence; engines that work by slot call :meth:`NodeIndex.resolve` and
    :func:`pick` instead, and never touch the names one by one."""

    __slots__ = ()

    @abstractmethod
    def slots_in(self, index: NodeIndex) -> Slots:
        """As :meth:`NodeIndex.resolve` of these names."""

    @abstractmethod
    def pick(self, positions: npt.NDArray[np.int64]) -> Sequence[str]:
        """The names at ``positions``, in that order."""


def pick(names: Sequence[str], positions: npt.NDArray[np.int64]) -> Sequence[str]:
    """``[names[i] for i in positions]``, in bulk where ``names`` can. ``positions`` are indices
    in ``range(len(names))``, as ``np.flatnonzero`` gives them."""
    if isinstance(names, OfferedNames):
        return names.pick(positions)
    return [names[i] for i in positions.tolist()]
