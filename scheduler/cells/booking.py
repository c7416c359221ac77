"""What the allocator records per pod: a *booking* is one pod's GPUs (or one slot of a gang,
before its pod exists); a *group* is a gang's slots, booked all at once.

Guaranteed bookings hold GPUs inside their VC's cells; opportunistic bookings hold idle GPUs
anywhere. A guaranteed booking may overlap opportunistic ones: those pods are its *victims*
until they are gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from scheduler.cells.request import Priority
from scheduler.cells.topology import Cell, Chain

# How a booking holds its GPUs: as their guaranteed owner (in a VC cell of its VC) or as their
# opportunistic owner (preemptible by a guaranteed booking).
Hold = Literal["guaranteed", "opportunistic"]


@dataclass(eq=False)
class Group:
    """A gang: ``size`` slots booked all at once; pods take free slots as they arrive."""

    key: str
    name: str
    vc: str
    priority: Priority
    size: int
    gpus: int
    cell_type: str  # the level every slot was placed at
    slots: list[Booking] = field(default_factory=list)

    def members(self) -> list[str]:
        return [s.pod_uid for s in self.slots if s.pod_uid is not None]


@dataclass(eq=False, slots=True)
class Booking:
    id: int
    vc: str
    priority: Priority
    # "guaranteed": the GPUs carry this booking as their guaranteed owner; "opportunistic": as
    # their opportunistic owner (opportunistic pods, and guaranteed pods recovered outside any
    # legal VC cell).
    holds: Hold
    chain: Chain
    level: int
    root: Cell | None
    gpus: tuple[Cell, ...]
    pod_uid: str | None = None
    pod_key: str | None = None
    group: Group | None = None

    @property
    def node(self) -> str | None:
        return self.gpus[0].node if self.gpus else None

    @property
    def cell_type(self) -> str:
        return self.chain.type_at(self.level)

    @property
    def gpu_indices(self) -> list[int]:
        return sorted(g.gpu_index for g in self.gpus)
