"""The cell nodes a filter was offered, as a set read through the byte mask of their slots.

kube-scheduler offers hundreds of nodes per filter (42% of 1,000 by default), and HiveD's plan
asks of some of them whether they are offered: a few, or hundreds where its walk passes nodes
not offered (kube-scheduler offers a rotating window of its node list). A frozenset of the
offered names, built per filter for those questions, hashed every offered name into a new table,
the filter's dearest step under a burst. Here a question is two C calls, the name's slot and its
byte in the mask, which the walk makes inline (search.py) rather than through ``in``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence, Set

SlotOf = Callable[[str, int], int]  # dict.get: a name's slot, or the default


class OfferedNodes(Set[str]):
    """The names whose slot's byte in :attr:`mask` is non-zero. :attr:`slot_of` is the node
    index's names to slots (``dict.get``, C), and ``names`` its slots' names, read while the
    caller holds the engine's lock (the index does not change meanwhile); :meth:`snapshot`
    keeps the set past it. ``mask`` has one byte per slot and a last one, zero, that the
    default slot -1 of a name not in the index reads."""

    __slots__ = ("_names", "slot_of", "mask", "_count")

    def __init__(self, *, names: Sequence[str | None], slot_of: SlotOf, mask: bytes, count: int) -> None:
        if len(mask) != len(names) + 1 or mask[-1]:
            raise ValueError(f"mask: {len(mask)} bytes for {len(names)} slots; one byte per slot and a last zero one are needed")
        self._names = names
        self.slot_of = slot_of
        self.mask = mask
        self._count = count  # the non-zero bytes of ``mask``

    def __contains__(self, name: object) -> bool:
        return self.mask[self.slot_of(name, -1)] != 0  # type: ignore[arg-type]  # any other key is in no index: -1

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        return itertools.compress(self._names, self.mask)  # type: ignore[arg-type]  # a masked slot is named

    def snapshot(self) -> frozenset[str]:
        """The same names, independent of the node index's later changes."""
        return frozenset(self)
