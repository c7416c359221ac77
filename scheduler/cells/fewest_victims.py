"""Minimal reclaim: among placements a VC cannot tell apart, the one preempting the least.

A guaranteed pod's placement is decided in the VC's own view (search.py's guaranteed view:
opportunistic pods are invisible), exactly as its private cluster would decide it. That view
often leaves a choice: two bound VC cells in the same state, two free nodes of a rack, two
switches with the same free GPUs. The private cluster picks one by position; here the choice goes
to the placement whose GPUs carry the fewest opportunistic pods, then the fewest GPUs of them
(every GPU of a victim pod counts, not only the ones the new pod takes).

*The same for the VC* is exact, not a heuristic: two placements are interchangeable when a
symmetry of the VC's view maps one onto the other, i.e. when the cells they lie in have the same
*shape* (:func:`shape`: which GPUs are available, up to reordering children) at every level from
the VC cell (or the free cell the buddy allocator splits) down to the GPUs. Swapping such cells
leaves the VC's view of the cluster unchanged up to relabelling, so its later answers are the
ones its private cluster would give either way: sharing safety is untouched. Free cells from
the buddy allocator are compared the same way, among the free cells of the level the allocator
took its cell from (any of them leaves Theorem 1's invariant as it was).

Pure: called by the allocator with the cells it would book, only when those carry
opportunistic pods (a placement preempting nobody is already minimal), so the hot path without
victims costs nothing more. The search is bounded (:data:`MAX_CANDIDATES`) so that a reclaim on
a very large, very symmetric cluster cannot hold the engine for long; within the bound it is
exhaustive.
"""

from __future__ import annotations

from typing import Callable, Final, Iterable, Iterator, Sequence

from scheduler.cells.topology import Cell

# Placements compared per reclaim at most (each costs a read of its GPUs' owners).
MAX_CANDIDATES: Final = 4096

Shape = tuple[object, ...]
# Victim pods, then their GPUs: what a placement costs in opportunistic work.
Cost = tuple[int, int]


def shape(cell: Cell, memo: dict[Cell, Shape]) -> Shape:
    """The cell as the VC sees it, up to reordering children: available GPUs (no guaranteed
    booking, not bad) and how they sit. Cells all available or all unavailable are described by
    their count alone (cells of one level are built alike), so free cells cost O(1)."""
    found = memo.get(cell)
    if found is not None:
        return found
    if cell.guaranteed_free == cell.total or cell.guaranteed_free == 0 or not cell.children:
        result: Shape = (cell.guaranteed_free,)
    else:
        result = (cell.guaranteed_free, *sorted(shape(kid, memo) for kid in cell.children))
    memo[cell] = result
    return result


def victim_cost(gpus: Iterable[Cell], size_of: Callable[[int], int | None]) -> Cost:
    """The opportunistic pods on ``gpus`` and every GPU they hold. ``size_of(booking id)``: the
    GPUs of a booking that has a pod, ``None`` for one without (a gang slot nobody runs in is
    dropped, not preempted)."""
    owners = {gpu.opportunistic_owner for gpu in gpus if gpu.opportunistic_owner is not None}
    pods = held = 0
    for owner in owners:
        size = size_of(owner)
        if size is not None:
            pods += 1
            held += size
    return pods, held


def equal_spots(tops: Iterable[Cell], path: Sequence[Cell], memo: dict[Cell, Shape]) -> Iterator[Cell]:
    """Cells at ``path[-1]``'s level reachable from a cell of ``tops`` through cells shaped as
    ``path`` is (``path[0]`` a top, each next one a child): the images of ``path[-1]`` under the
    VC view's symmetries. ``path[-1]`` itself comes first when ``path[0]`` is among ``tops``."""
    wanted = [shape(cell, memo) for cell in path]

    def descend(cell: Cell, depth: int) -> Iterator[Cell]:
        if depth == len(path) - 1:
            yield cell
            return
        on_path = path[depth + 1]
        kids = list(cell.children)
        if cell is path[depth]:
            kids.remove(on_path)
            kids.insert(0, on_path)
        for kid in kids:
            if kid.guaranteed_free == on_path.guaranteed_free and shape(kid, memo) == wanted[depth + 1]:
                yield from descend(kid, depth + 1)

    for top in tops:
        if top.guaranteed_free == path[0].guaranteed_free and shape(top, memo) == wanted[0]:
            yield from descend(top, 0)


def equal_picks(spot: Cell, chosen: Sequence[Cell], image: Cell, memo: dict[Cell, Shape]) -> Iterator[list[Cell]]:
    """GPUs of ``image`` (shaped as ``spot``) that a symmetry maps ``chosen`` (GPUs of
    ``spot``) onto: every way to take the same GPUs, as the VC sees it."""
    if len(chosen) == spot.guaranteed_free:
        # Every available GPU of the cell (the usual case: a request filling its cell): one way.
        yield [leaf for leaf in image.leaves if leaf.guaranteed_owner is None and not leaf.is_bad]
        return
    pattern = _pattern(spot, set(chosen), memo)
    assert pattern is not None
    yield from _embed(image, pattern[1], memo)


# A pick inside a cell: (the cell's shape, its touched children's picks); a GPU: (shape, ()).
_Pick = tuple[Shape, tuple["_Pick", ...]]


def _pattern(cell: Cell, chosen: set[Cell], memo: dict[Cell, Shape]) -> _Pick | None:
    if not cell.children:
        return (shape(cell, memo), ()) if cell in chosen else None
    touched = [p for p in (_pattern(kid, chosen, memo) for kid in cell.children) if p is not None]
    if not touched:
        return None
    touched.sort(key=repr)  # identical picks side by side (see _embed)
    return shape(cell, memo), tuple(touched)


def _embed(cell: Cell, picks: tuple[_Pick, ...], memo: dict[Cell, Shape]) -> Iterator[list[Cell]]:
    """Each way to give every pick of ``picks`` its own child of ``cell`` of the pick's shape,
    recursively. Identical picks take children in increasing order (no permutation of the same
    choice is produced twice)."""
    if not cell.children:
        yield [cell]
        return
    kids = cell.children

    def place(index: int, used: frozenset[int], floor: int) -> Iterator[list[Cell]]:
        if index == len(picks):
            yield []
            return
        kid_shape, inner = picks[index]
        start = floor if index and picks[index] == picks[index - 1] else 0
        for position in range(start, len(kids)):
            kid = kids[position]
            if position in used or shape(kid, memo) != kid_shape:
                continue
            for below in _embed(kid, inner, memo):
                for rest in place(index + 1, used | {position}, position + 1):
                    yield below + rest

    yield from place(0, frozenset(), 0)
