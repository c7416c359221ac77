"""What tenants post on the exchange's bulletin board (HiveD §3.3): offers of cells for a time
window and requests for cells during one, and the sizes of the cells they name.

Times are seconds on whatever clock the caller uses (the controller: Unix time); nothing here
reads a clock. A window is half-open, ``[start, end)``: a window ending at 10:00 and one
starting at 10:00 do not overlap, so a tenant can lend the same cell back to back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from scheduler.cells.config import CellTypeSpec, chains_of

SECONDS_PER_HOUR = 3600.0

# Cells named by an offer or a request: (cell type, count) pairs in the order the tenant wrote
# them, so that a problem names the field it wrote (``spec.cells[1].count``); a type listed twice
# is refused by ``validation``. A tuple, not a dict, so offers and requests are hashable values.
Cells = tuple[tuple[str, int], ...]


def cells_of(counts: Mapping[str, int] | Iterable[tuple[str, int]]) -> Cells:
    """``{"V100-NODE": 1}`` (or ``(type, count)`` pairs) -> :data:`Cells`, in the given order."""
    pairs = counts.items() if isinstance(counts, Mapping) else counts
    return tuple((cell_type, count) for cell_type, count in pairs)


def describe_cells(cells: Cells) -> str:
    """``1 V100-NODE + 2 V100-SWITCH``."""
    return " + ".join(f"{count} {cell_type}" for cell_type, count in cells) or "no cells"


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """``[start, end)`` in seconds."""

    start: float
    end: float

    @property
    def hours(self) -> float:
        return (self.end - self.start) / SECONDS_PER_HOUR

    def covers(self, other: Window) -> bool:
        return self.start <= other.start and other.end <= self.end

    def overlaps(self, other: Window) -> bool:
        return self.start < other.end and other.start < self.end

    def holds(self, at: float) -> bool:
        return self.start <= at < self.end

    def describe(self) -> str:
        return f"[{self.start:g}, {self.end:g})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Offer:
    """A tenant (a VC) lends ``cells`` of its own quota to whoever the arbiter picks, for any
    part of ``window`` a request asks for. ``posted``: when it reached the bulletin board (ties
    between equally good offers go to the earliest)."""

    id: str
    tenant: str
    cells: Cells
    window: Window
    posted: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """A tenant (a VC) asks for ``cells`` more during ``window``: one cell type and a count, or
    a set of smaller cells (spatial exchange: eight 1-GPU cells out of one 8-GPU node cell).
    Matched in posting order within its tenant."""

    id: str
    tenant: str
    cells: Cells
    window: Window
    posted: float


@dataclass(frozen=True, slots=True)
class CellSize:
    """Where a cell type sits: its chain (named by the chain's top type), level (1 = one GPU)
    and GPUs per cell."""

    chain: str
    level: int
    gpus: int


class CellCatalog:
    """Cell type -> :class:`CellSize`, for every type of the configured (or discovered) cell
    types, GPU leaf types included: offers and requests may name any level a VC may hold."""

    __slots__ = ("sizes",)

    def __init__(self, cell_types: Mapping[str, CellTypeSpec]) -> None:
        self.sizes: dict[str, CellSize] = {}
        for cell_type, shape in chains_of(cell_types).items():
            gpus = 1
            for level, name in enumerate(shape.types, start=1):
                if level > 1:
                    gpus *= cell_types[name].child_count
                if name == cell_type:
                    self.sizes[cell_type] = CellSize(chain=shape.types[-1], level=level, gpus=gpus)
                    break

    def size(self, cell_type: str) -> CellSize | None:
        return self.sizes.get(cell_type)

    def gpus(self, cells: Cells) -> int:
        """GPUs in ``cells`` (every type must be known)."""
        return sum(self.sizes[cell_type].gpus * count for cell_type, count in cells)
