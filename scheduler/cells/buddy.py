"""Algorithm 1 of the HiveD paper: buddy cell allocation over one chain's physical cells.

Free lists hold, per level, the *highest* free cells only: a cell whose buddies are all free is
merged into its parent. Binding a level-k cell to a VC takes a free level-k cell or, when there is
none, splits the lowest free higher-level cell. Releasing merges buddies back up.

Deviations from the paper, and why they stay safe:

* Free cells are kept in two ordered sets per level, *clean* (no opportunistic GPU, no bad GPU)
  and *dirty*; a clean cell is taken first, then the dirty one with the fewest opportunistic
  GPUs (§3.2: "choose the free cells with the least GPUs used by low-priority jobs"). A cell split
  for a smaller one is first one with bad GPUs and no opportunistic GPU (a rack with a cordoned
  node can never be bound whole anyway), so that clean cells stay whole for the VCs that need
  them. Any choice among free level-k cells leaves the invariant of Theorem 1 unchanged.
* A cell can be unusable for one request (bad node, or not among the nodes kube-scheduler
  offered). Then the search may split a higher cell than Algorithm 1 would. Such a deviation is
  taken only if the invariant ``r_k - a_k <= f_k + F_k`` still holds at every level afterwards,
  so other VCs' guarantees never shrink because of it.
"""

from __future__ import annotations

from itertools import islice
from typing import Callable, Sequence

from scheduler.cells.topology import Cell, CellState, Chain

Accept = Callable[[Cell], bool]

# Enum members as module constants: a global read is several times cheaper than an Enum
# attribute in CPython 3.11, and these are read on every placement.
_FREE, _INSIDE, _SPLIT = CellState.FREE, CellState.INSIDE, CellState.SPLIT
_BOUND, _PINNED = CellState.BOUND, CellState.PINNED



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
    """Free lists and split/merge for one chain. VC bookkeeping (r, a) lives in the caller.

    Free cells are grouped by parent (``None`` for top-level cells) so that splitting a cell
    puts all its children on a free list with one C-level ``dict.fromkeys``, and merging takes
    them off with one ``pop``: a 256-node rack splits and merges in O(1) Python steps rather
    than 256. For the same reason a free child of a SPLIT cell keeps the state INSIDE: it is
    free by position (see :meth:`~scheduler.cells.topology.Cell.buddy_state`), so neither a split
    nor a merge writes to the children."""

    def __init__(self, chain: Chain, top_cells: Sequence[Cell]) -> None:
        self.chain = chain
        # Per level: parent -> (clean or dirty) free children; both dicts keep insertion order,
        # so picks are deterministic.
        self._clean: list[dict[Cell | None, dict[Cell, None]]] = [{} for _ in range(chain.top)]
        self._dirty: list[dict[Cell | None, dict[Cell, None]]] = [{} for _ in range(chain.top)]
        self._free: list[int] = [0] * chain.top  # f_k, kept as counters
        self._held: list[int] = [0] * chain.top  # BOUND or PINNED cells per level (the gauges' "used")
        # Merged cells -> the free group of their children as the merge left it (all but the
        # child released last): a rack that splits and merges over and over reuses one dict.
        self._spare: dict[Cell, tuple[dict[Cell, None], Cell]] = {}
        # Split cells -> how many of their children are on a free list (a merge tests its
        # buddies in O(1)); a cell that is not split has none.
        self._free_children: dict[Cell, int] = {}
        self._bad_nodes: dict[Cell, None] = {}  # in the order they turned bad
        for cell in top_cells:
            self.seed(cell)

    def seed(self, cell: Cell) -> None:
        """Put a new top-level cell (and what it holds) into the free space."""
        if cell.pinned_id is not None:
            cell.state = _PINNED
            self._held[cell.level - 1] += 1
            return
        if any(c.pinned_id is not None for c in cell.walk()):
            # A cell holding a pinned cell can never be whole again: keep it split for good.
            cell.state = _SPLIT
            for child in cell.children:
                self.seed(child)
            return
        self._add_free(cell)

    def withdraw(self, cell: Cell) -> None:
        """Take a free top-level cell out of the chain for good (its node left the cluster)."""
        if cell.parent is not None or cell.state is not _FREE:
            raise ValueError(f"cell {cell.id} is not a free top-level cell (it is {cell.buddy_state().value})")
        self._remove_free(cell)
        cell.state = _INSIDE
        for inner in cell.walk():
            self._spare.pop(inner, None)
            self._free_children.pop(inner, None)
            self._bad_nodes.pop(inner, None)

    # ------------------------------------------------------------------ free-list primitives

    @staticmethod
    def _is_clean(cell: Cell) -> bool:
        return cell.opportunistic_used == 0 and cell.bad == 0

    def _add_free(self, cell: Cell) -> None:
        parent = cell.parent
        if parent is None:
            cell.state = _FREE
        else:
            cell.state = _INSIDE  # free by position: its parent is split
            self._free_children[parent] = self._free_children.get(parent, 0) + 1
        groups = (self._clean if cell.opportunistic_used == 0 and cell.bad == 0 else self._dirty)[cell.level - 1]
        group = groups.get(parent)
        if group is None:
            groups[parent] = {cell: None}
        else:
            group[cell] = None
        self._free[cell.level - 1] += 1

    def _remove_free(self, cell: Cell) -> None:
        index = cell.level - 1
        parent = cell.parent
        groups = self._clean[index]
        group = groups.get(parent)
        if group is None or group.pop(cell, 0) is not None:
            groups = self._dirty[index]
            group = groups.get(parent)
            if group is None or group.pop(cell, 0) is not None:
                raise ValueError(f"cell {cell.id} is not on a free list")
        if not group:
            del groups[parent]
        if parent is not None:
            self._free_children[parent] -= 1
        self._free[index] -= 1

    def _split(self, parent: Cell, kept: Cell) -> None:
        """Every child of ``parent`` but ``kept`` becomes free. A clean parent has only clean
        children: its group is the one its last merge set aside, patched in O(1) (else one
        C-level dict construction), whatever the fan-out."""
        index = parent.level - 2
        children = parent.children
        spare = self._spare.pop(parent, None)
        if self._is_clean(parent):
            if spare is not None:
                group, missing = spare
                group[missing] = None
                del group[kept]
            else:
                group = dict.fromkeys(children)
                del group[kept]
            if group:
                self._clean[index][parent] = group
        else:
            for child in children:
                if child is not kept:
                    groups = (self._clean if self._is_clean(child) else self._dirty)[index]
                    groups.setdefault(parent, {})[child] = None
        self._free_children[parent] = len(children) - 1
        self._free[index] += len(children) - 1

    def _merge(self, parent: Cell, released: Cell) -> None:
        """The inverse: every child of ``parent`` but ``released`` (just freed, on no list) leaves
        the free lists. A group of clean children is set aside for the parent's next split."""
        index = parent.level - 2
        clean = self._clean[index].pop(parent, None)
        dirty = self._dirty[index].pop(parent, None)
        if clean is not None and dirty is None:
            self._spare[parent] = (clean, released)
        self._free[index] -= self._free_children.pop(parent, 0)

    def is_free(self, cell: Cell) -> bool:
        return cell.buddy_state() is _FREE

    def reclassify(self, cell: Cell) -> None:
        """A cell's opportunistic or bad count changed: if it is free, move it between clean
        and dirty."""
        parent = cell.parent
        if parent is None:
            if cell.state is not _FREE:
                return
        elif cell.state is not _INSIDE or parent.state is not _SPLIT:
            return
        index = cell.level - 1
        if self._is_clean(cell):
            source, target = self._dirty[index], self._clean[index]
        else:
            source, target = self._clean[index], self._dirty[index]
        group = source.get(parent)
        if group is None or group.pop(cell, 0) is not None:
            return
        if not group:
            del source[parent]
        target.setdefault(parent, {})[cell] = None

    def free_counts(self) -> list[int]:
        """f_k per level (index 0 is level 1)."""
        return list(self._free)

    def held_counts(self) -> list[int]:
        """Cells bound or pinned per level (index 0 is level 1)."""
        return list(self._held)

    def free_cells(self, level: int) -> list[Cell]:
        return [
            cell for groups in (self._clean[level - 1], self._dirty[level - 1]) for group in groups.values() for cell in group
        ]

    # ------------------------------------------------------------------ search (no mutation)

    def first_clean_cells(self, level: int, count: int) -> list[Cell]:
        """Up to ``count`` clean free cells at ``level``, in free-list order: what ``count``
        bindings in a row take when each takes the first."""
        found: list[Cell] = []
        for group in self._clean[level - 1].values():
            found.extend(islice(group, count - len(found)))
            if len(found) == count:
                break
        return found

    def first_clean(self, level: int, search: Callable[[Cell], Cell | None]) -> tuple[Cell, Cell] | None:
        """The first clean free cell at ``level``, in free-list order, in which ``search`` finds
        something (what :meth:`find` takes when the level has free cells), and what it found.
        Nothing is changed."""
        for group in self._clean[level - 1].values():
            for cell in group:
                found = search(cell)
                if found is not None:
                    return cell, found
        return None

    def _candidates(self, level: int, accept: Accept, *, splitting: bool = False) -> Cell | None:
        """The best acceptable free cell at ``level``: the first clean one, else the dirty one
        with the fewest opportunistic GPUs (then fewest bad GPUs). A cell to be split for a
        smaller one is first one that bad GPUs already keep from being whole (and that has no
        opportunistic GPU): the clean cells stay whole for the VCs that need a whole one."""
        if splitting and self._bad_nodes:
            damaged = self._first_damaged(level, accept)
            if damaged is not None:
                return damaged
        for group in self._clean[level - 1].values():
            for cell in group:
                if accept(cell):
                    return cell
        best: Cell | None = None
        for group in self._dirty[level - 1].values():
            for cell in group:
                if (best is None or (cell.opportunistic_used, cell.bad) < (best.opportunistic_used, best.bad)) and accept(cell):
                    best = cell
        return best

    def _first_damaged(self, level: int, accept: Accept) -> Cell | None:
        """The first acceptable free cell at ``level`` holding a bad node and no opportunistic
        GPU, looked for from the bad nodes (few) rather than through the free list (many)."""
        seen: set[Cell] = set()
        for node in self._bad_nodes:
            cell: Cell | None = node
            while cell is not None and cell.level < level:
                cell = cell.parent
            if cell is None or cell.level != level or cell in seen:
                continue
            seen.add(cell)
            if self._on_free_list(cell) and cell.bad and not cell.opportunistic_used and accept(cell):
                return cell
        return None

    @staticmethod
    def _on_free_list(cell: Cell) -> bool:
        parent = cell.parent
        return cell.state is _FREE if parent is None else cell.state is _INSIDE and parent.state is _SPLIT

    def node_health(self, node: Cell, *, bad: bool) -> None:
        """A node of this chain turned bad or healthy (the splits look for bad nodes first)."""
        if bad:
            self._bad_nodes[node] = None
        else:
            self._bad_nodes.pop(node, None)

    def _descend(self, cell: Cell, level: int, accept: Accept) -> Cell | None:
        """Within a free cell, the level-``level`` descendant a split would hand out: at each
        level the cleanest acceptable child, as if the children were on the free list."""
        while cell.level > level:
            best: Cell | None = None
            for child in cell.children:
                if best is not None and (child.opportunistic_used, child.bad) >= (best.opportunistic_used, best.bad):
                    continue
                if accept(child):
                    best = child
                    if child.opportunistic_used == 0 and child.bad == 0:
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
        free = self._free  # read only
        standard: int | None = None  # the level Algorithm 1 would split from: the lowest with a free cell
        for source in range(level, self.chain.top + 1):
            if free[source - 1] == 0:
                continue
            if standard is None:
                standard = source
            cell = self._candidates(source, accept, splitting=source != level)
            if cell is None:
                continue
            target = cell if source == level else self._descend(cell, level, accept)
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
        parent = cell.parent
        if cell.state is _FREE or (cell.state is _INSIDE and parent is not None and parent.state is _SPLIT):
            self._remove_free(cell)  # the common case: the cell itself is on a free list
            cell.state = _BOUND
            self._held[cell.level - 1] += 1
            return
        path = [cell]
        source = cell
        while source.state is _INSIDE:
            parent = source.parent
            if parent is None or parent.state is _SPLIT:
                break  # free by position (or a detached cell, refused below)
            source = parent
            path.append(source)
        if source.buddy_state() is not _FREE:
            raise ValueError(f"cell {cell.id} is not free (its enclosing cell {source.id} is {source.buddy_state().value})")
        self._remove_free(source)
        for upper, lower in zip(reversed(path), list(reversed(path))[1:]):
            upper.state = _SPLIT
            self._split(upper, lower)
        cell.state = _BOUND
        self._held[cell.level - 1] += 1

    @staticmethod
    def _enclosing(cell: Cell) -> Cell:
        """The highest cell around ``cell`` that its state is inherited from (itself, unless it
        is inside an unsplit cell): the free cell a take of ``cell`` splits, when it is free."""
        current = cell
        while current.state is _INSIDE:
            parent = current.parent
            if parent is None or parent.state is _SPLIT:
                break
            current = parent
        return current

    def keeps_invariant(self, cell: Cell, demand: Sequence[int]) -> bool:
        """Whether taking ``cell`` (wholly inside free space) for a VC whose quota has a cell of
        its type left keeps Theorem 1's invariant, ``demand`` being r_k - a_k before."""
        return self._safe_after(cell.level, self._enclosing(cell).level, self._free, demand)

    def is_takeable(self, cell: Cell) -> bool:
        """Whether ``cell`` lies wholly inside free space."""
        return self._enclosing(cell).buddy_state() is _FREE

    def give(self, cell: Cell) -> None:
        """Release a bound cell and merge buddies upwards while all of them are free."""
        if cell.state is _BOUND or cell.state is _PINNED:
            self._held[cell.level - 1] -= 1
        cell.state = _INSIDE
        while True:
            parent = cell.parent
            if parent is None or parent.state is not _SPLIT:
                break
            if self._free_children.get(parent, 0) != len(parent.children) - 1:
                break
            self._merge(parent, cell)
            parent.state = _INSIDE
            cell = parent
        self._add_free(cell)
