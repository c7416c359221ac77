"""An ordered multiset of cells keyed by a small integer (a free-GPU count), for best-fit search.

Best fit = "the cell with the fewest free GPUs that still holds the request": iterate keys upward
from the request size. Keys live in a sorted list so that sparse key ranges (a rack root keyed by
up to 2,048 free GPUs) cost nothing; cells within a key keep insertion order, which makes every
pick deterministic.

Items keyed 0 are not stored at all: every query asks for at least one free GPU, so a full cell
could only be walked past, and an 8-GPU pod filling a node then costs one removal instead of a
move.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from itertools import islice
from typing import Generic, Hashable, Iterator, TypeVar

T = TypeVar("T", bound=Hashable)


class Buckets(Generic[T]):
    __slots__ = ("_by_key", "_keys")

    def __init__(self) -> None:
        self._by_key: dict[int, dict[T, None]] = {}
        self._keys: list[int] = []

    def add(self, item: T, key: int) -> None:
        if not key:
            return
        bucket = self._by_key.get(key)
        if bucket is None:
            self._by_key[key] = {item: None}
            insort(self._keys, key)
        else:
            bucket[item] = None

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
            target = by_key.get(new)
            if target is None:
                by_key[new] = {item: None}
                insort(self._keys, new)
            else:
                target[item] = None

    def at_least(self, key: int) -> Iterator[T]:
        """Items with key >= ``key`` (which must be >= 1), smallest key first. Callers must not
        mutate while iterating."""
        start = bisect_left(self._keys, key)
        for k in self._keys[start:]:
            yield from self._by_key[k]

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
