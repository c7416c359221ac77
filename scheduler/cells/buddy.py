"""Algorithm 1 of the HiveD paper: buddy cell allocation over one chain's physical cells.

Free lists hold, per level, the *highest* free cells only: a cell whose buddies are all free is
merged into its parent. Binding a level-k cell to a VC takes a free level-k cell or, when there is
none, splits the lowest free higher-level cell. Releasing merges buddies back up.

Deviations from the paper, and why they stay safe:

* Free cells are kept in two ordered sets per level, *clean* (no opportunistic GPU, no bad GPU)
  and *dirty*; a clean cell is taken first, then the dirty one with the fewest opportunistic
  GPUs (§3.2: "choose the free cells with the least GPUs used by low-priority jobs"). Any choice
  among free level-k cells leaves the invariant of Theorem 1 unchanged.
* A cell can be unusable for one request (bad node, or not among the nodes kube-scheduler
  offered). Then the search may split a higher cell than Algorithm 1 would. Such a deviation is
  taken only if the invariant ``r_k - a_k <= f_k + F_k`` still holds at every level afterwards,
  so other VCs' guarantees never shrink because of it.
"""

from __future__ import annotations

from typing import Callable, Sequence

from scheduler.cells.topology import Cell, CellState, Chain

Accept = Callable[[Cell], bool]


def derived_capacity(free: Sequence[int], demand: Sequence[int], chain: Chain) -> list[int]:
    """F_k of Eqn. (1): level-k cells obtainable by splitting higher free cells that the higher
    levels' outstanding demand does not need. Index 0 is level 1."""
    top = chain.top
    capacity = [0] * top
    for level in range(top - 1, 0, -1):
        above = level + 1
        spare = free[above - 1] + capacity[above - 1] - demand[above - 1]
        # A negative spare means the invariant is already broken above; it cannot feed lower levels.
        capacity[level - 1] = max(spare, 0) * chain.child_counts[above - 1]
    return capacity


def invariant_holds(free: Sequence[int], demand: Sequence[int], chain: Chain) -> bool:
    capacity = derived_capacity(free, demand, chain)
    return all(demand[k] <= free[k] + capacity[k] for k in range(chain.top))


class BuddyAllocator:
    """Free lists and split/merge for one chain. VC bookkeeping (r, a) lives in the caller."""

    def __init__(self, chain: Chain, top_cells: Sequence[Cell]) -> None:
        self.chain = chain
        # Per level: (clean, dirty) ordered sets (dicts keep insertion order: deterministic picks).
        self._clean: list[dict[Cell, None]] = [{} for _ in range(chain.top)]
        self._dirty: list[dict[Cell, None]] = [{} for _ in range(chain.top)]
        for cell in top_cells:
            self._seed(cell)

    def _seed(self, cell: Cell) -> None:
        if cell.pinned_id is not None:
            cell.state = CellState.PINNED
            return
        if any(c.pinned_id is not None for c in cell.walk()):
            # A cell holding a pinned cell can never be whole again: keep it split for good.
            cell.state = CellState.SPLIT
            for child in cell.children:
                self._seed(child)
            return
        self._add_free(cell)

    # ------------------------------------------------------------------ free-list primitives

    @staticmethod
    def _is_clean(cell: Cell) -> bool:
        return cell.opp == 0 and cell.bad == 0

    def _add_free(self, cell: Cell) -> None:
        cell.state = CellState.FREE
        (self._clean if self._is_clean(cell) else self._dirty)[cell.level - 1][cell] = None
        if cell.parent is not None:
            cell.parent.free_kids += 1

    def _remove_free(self, cell: Cell) -> None:
        index = cell.level - 1
        if self._clean[index].pop(cell, 0) == 0:
            del self._dirty[index][cell]
        if cell.parent is not None:
            cell.parent.free_kids -= 1

    def _free_children_except(self, parent: Cell, kept: Cell) -> None:
        """Split ``parent``: every child but ``kept`` goes on the free list. A clean parent has
        only clean children, so a 256-node rack is split with one C-level dict update."""
        siblings = [c for c in parent.children if c is not kept]
        if self._is_clean(parent):
            for sibling in siblings:
                sibling.state = CellState.FREE
            self._clean[parent.level - 2].update(dict.fromkeys(siblings))
            parent.free_kids += len(siblings)
        else:
            for sibling in siblings:
                self._add_free(sibling)

    def _merge_children(self, parent: Cell, released: Cell) -> None:
        """The inverse: every child but ``released`` (just freed) leaves the free lists."""
        clean, dirty = self._clean[parent.level - 2], self._dirty[parent.level - 2]
        for sibling in parent.children:
            if sibling is not released:
                if clean.pop(sibling, 0) == 0:
                    del dirty[sibling]
                sibling.state = CellState.INSIDE
        parent.free_kids = 0

    def reclassify(self, cell: Cell) -> None:
        """A free cell's opportunistic or bad count changed: move it between clean and dirty."""
        index = cell.level - 1
        clean = self._is_clean(cell)
        if clean and cell in self._dirty[index]:
            del self._dirty[index][cell]
            self._clean[index][cell] = None
        elif not clean and cell in self._clean[index]:
            del self._clean[index][cell]
            self._dirty[index][cell] = None

    def free_counts(self) -> list[int]:
        """f_k per level (index 0 is level 1)."""
        return [len(c) + len(d) for c, d in zip(self._clean, self._dirty)]

    def free_cells(self, level: int) -> list[Cell]:
        return [*self._clean[level - 1], *self._dirty[level - 1]]

    # ------------------------------------------------------------------ search (no mutation)

    def _candidates(self, level: int, accept: Accept) -> Cell | None:
        """The best acceptable free cell at ``level``: the first clean one, else the dirty one
        with the fewest opportunistic GPUs (then fewest bad GPUs)."""
        for cell in self._clean[level - 1]:
            if accept(cell):
                return cell
        best: Cell | None = None
        for cell in self._dirty[level - 1]:
            if (best is None or (cell.opp, cell.bad) < (best.opp, best.bad)) and accept(cell):
                best = cell
        return best

    def _descend(self, cell: Cell, level: int, accept: Accept) -> Cell | None:
        """Within a free cell, the level-``level`` descendant a split would hand out: at each
        level the cleanest acceptable child, as if the children were on the free list."""
        while cell.level > level:
            best: Cell | None = None
            for child in cell.children:
                if best is not None and (child.opp, child.bad) >= (best.opp, best.bad):
                    continue
                if accept(child):
                    best = child
                    if child.opp == 0 and child.bad == 0:
                        break
            if best is None:
                return None
            cell = best
        return cell

    def find(self, level: int, accept: Accept, demand: Callable[[], Sequence[int]]) -> Cell | None:
        """The level-``level`` cell Algorithm 1 would bind, among cells ``accept`` allows.

        ``accept(c)`` must be monotone: true for a cell whenever it is true for one of its
        descendants (e.g. "holds a usable spot for the request"). ``demand()`` gives r_k - a_k per
        level *before* this binding; it is only computed (it costs a pass over the VCs) when a
        deviation from Algorithm 1 has to be proven safe. Nothing is changed."""
        free = self.free_counts()
        standard = next((lv for lv in range(level, self.chain.top + 1) if free[lv - 1] > 0), None)
        for source in range(level, self.chain.top + 1):
            if free[source - 1] == 0:
                continue
            cell = self._candidates(source, accept)
            if cell is None:
                continue
            target = self._descend(cell, level, accept)
            if target is None:
                continue
            if source != standard and not self._safe_after(level, source, free, demand()):
                continue
            return target
        return None

    def _safe_after(self, level: int, source: int, free: Sequence[int], demand: Sequence[int]) -> bool:
        after = list(free)
        after[source - 1] -= 1
        for lv in range(source - 1, level - 1, -1):
            # Splitting a level-(lv+1) cell frees its children but one, which is split further
            # (or, at the target level, bound).
            after[lv - 1] += self.chain.child_counts[lv] - 1
        wanted = list(demand)
        wanted[level - 1] = max(wanted[level - 1] - 1, 0)
        return invariant_holds(after, wanted, self.chain)

    # ------------------------------------------------------------------ mutation

    def take(self, cell: Cell) -> None:
        """Remove ``cell`` from the free space, splitting its free ancestor down to it. Used both
        for the cell :meth:`find` chose and, on recovery, for the cell a bind-info names."""
        path = [cell]
        while path[-1].state is CellState.INSIDE:
            parent = path[-1].parent
            if parent is None:
                break
            path.append(parent)
        source = path[-1]
        if source.state is not CellState.FREE:
            raise ValueError(f"cell {cell.id} is not free (its enclosing cell {source.id} is {source.state.value})")
        self._remove_free(source)
        for upper, lower in zip(reversed(path), list(reversed(path))[1:]):
            upper.state = CellState.SPLIT
            self._free_children_except(upper, lower)
        cell.state = CellState.BOUND

    def is_takeable(self, cell: Cell) -> bool:
        """Whether ``cell`` lies wholly inside free space."""
        current: Cell | None = cell
        while current is not None and current.state is CellState.INSIDE:
            current = current.parent
        return current is not None and current.state is CellState.FREE

    def give(self, cell: Cell) -> None:
        """Release a bound cell and merge buddies upwards while all of them are free."""
        cell.state = CellState.INSIDE
        while True:
            parent = cell.parent
            if parent is None or parent.state is not CellState.SPLIT:
                break
            if parent.free_kids != len(parent.children) - 1:
                break
            self._merge_children(parent, cell)
            parent.state = CellState.INSIDE
            cell = parent
        self._add_free(cell)
