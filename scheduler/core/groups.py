"""Names joined into groups: a union-find (disjoint sets with path halving), for the places that
must change several things together when any of them links them (HiveD's cells sharing nodes,
a relist's nodes a gang's booking spans)."""

from __future__ import annotations

from typing import Iterable


class DisjointSets:
    """Every name added is in exactly one group; :meth:`union` merges the groups of its names."""

    __slots__ = ("_parent",)

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        """The name standing for ``name``'s group (``name`` joins a group of its own if new)."""
        parent = self._parent
        while parent.setdefault(name, name) != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    def union(self, names: Iterable[str]) -> None:
        """One group of ``names`` and everything already grouped with any of them."""
        roots = [self.find(name) for name in names]
        for other in roots[1:]:
            if other != roots[0]:
                self._parent[other] = roots[0]

    def groups(self) -> list[list[str]]:
        """Every group, its names sorted, in the order of each group's first name."""
        grouped: dict[str, list[str]] = {}
        for name in sorted(self._parent):
            grouped.setdefault(self.find(name), []).append(name)
        return list(grouped.values())
