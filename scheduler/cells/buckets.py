"""An ordered multiset of cells keyed by a small integer (a free-GPU count), for best-fit search.

Best fit = "the cell with the fewest free GPUs that still holds the request": iterate keys upward
from the request size. Keys live in a sorted list so that sparse key ranges (a rack root keyed by
up to 2,048 free GPUs) cost nothing; cells within a key keep insertion order, which makes every
pick deterministic. Each entry holds its insertion number (the index's count of insertions
when it went in): within a key, entries are in the order of their numbers, so a caller that knows
some items and their keys can put them in :meth:`at_least`'s order without walking the rest
(:meth:`in_walk_order`).

Items keyed 0 are not stored at all: every query asks for at least one free GPU, so a full cell
could only be walked past, and an 8-GPU pod filling a node then costs one removal instead of a
move.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from itertools import islice
from typing import Generic, Hashable, Iterable, Iterator, TypeVar

T = TypeVar("T", bound=Hashable)


class Buckets(Generic[T]):
    __slots__ = ("_by_key", "_keys", "_inserted")

    def __init__(self) -> None:
        self._by_key: dict[int, dict[T, int]] = {}  # key -> {item: insertion number}, in insertion order
        self._keys: list[int] = []
        self._inserted = 0

    def add(self, item: T, key: int) -> None:
        if not key:
            return
        number = self._inserted
        self._inserted = number + 1
        bucket = self._by_key.get(key)
        if bucket is None:
            self._by_key[key] = {item: number}
            insort(self._keys, key)
        elif item not in bucket:  # there already: it keeps its place (and its number)
            bucket[item] = number

    def remove(self, item: T, key: int) -> None:
        if not key:
            return
        bucket = self._by_key[key]
        del bucket[item]
        if not bucket:
            del self._by_key[key]
            del self._keys[bisect_left(self._keys, key)]

    def move(self, item: T, old: int, new: int) -> None:
        # remove() and add() inlined: this runs for every cell whose free count changes.
        if old == new:
            return
        by_key = self._by_key
        if old:
            bucket = by_key[old]
            del bucket[item]
            if not bucket:
                del by_key[old]
                del self._keys[bisect_left(self._keys, old)]
        if new:
            number = self._inserted
            self._inserted = number + 1
            target = by_key.get(new)
            if target is None:
                by_key[new] = {item: number}
                insort(self._keys, new)
            else:
                target[item] = number

    def at_least(self, key: int) -> Iterator[T]:
        """Items with key >= ``key`` (which must be >= 1), smallest key first. Callers must not
        mutate while iterating."""
        start = bisect_left(self._keys, key)
        for k in self._keys[start:]:
            yield from self._by_key[k]

    def groups_at_least(self, key: int) -> list[dict[T, int]]:
        """The items of :meth:`at_least`, one ordered group (iterate it for its items) per key:
        a caller's loop over them runs without a generator's step per item."""
        by_key = self._by_key
        keys = self._keys
        return [by_key[k] for k in keys[bisect_left(keys, key) :]]

    def in_walk_order(self, keyed: Iterable[tuple[T, int]]) -> list[T]:
        """The ``(item, key)`` pairs' items (distinct) in :meth:`at_least`'s order (key, then
        insertion), without walking the others; each must be held under its key (else
        ``KeyError``)."""
        by_key = self._by_key
        stride = self._inserted  # above every insertion number: key * stride + number orders by both
        ranked = {key * stride + by_key[key][item]: item for item, key in keyed}
        return [ranked[rank] for rank in sorted(ranked)]

    def first_at_least(self, key: int) -> T | None:
        """The first item :meth:`at_least` would give, without making a generator."""
        keys = self._keys
        index = bisect_left(keys, key)
        if index == len(keys):
            return None
        return next(iter(self._by_key[keys[index]]))

    def first_with(self, key: int, count: int) -> list[T]:
        """Up to ``count`` items keyed exactly ``key``, in order."""
        bucket = self._by_key.get(key)
        return list(islice(bucket, count)) if bucket is not None else []

    def items_at_least(self, key: int) -> Iterator[tuple[int, T]]:
        """``(key, item)`` pairs with key >= ``key``, smallest key first."""
        start = bisect_left(self._keys, key)
        for k in self._keys[start:]:
            for item in self._by_key[k]:
                yield k, item

    def __bool__(self) -> bool:
        return bool(self._keys)  # empty buckets are dropped eagerly

    def __len__(self) -> int:
        return sum(len(b) for b in self._by_key.values())

    def __contains__(self, item: object) -> bool:
        return any(item in b for b in self._by_key.values())
