# The C extension built from _solve.c (its header and the comment above each function say what
# it reads and writes). Buffers: C-contiguous NumPy arrays; those written into are writable.
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

_Ints: TypeAlias = npt.NDArray[np.int64]
_Floats: TypeAlias = npt.NDArray[np.float64]

def canonical_levels(rows: _Ints, machine: _Ints, position: _Ints, slot_kind: _Ints, ready: _Floats, times: _Floats,
                     out_rows: _Ints, out_machine: _Ints, /) -> None: ...
def uncontended_plan(rows: _Ints, fastest: _Ints, machine_kind: _Ints, delay: _Floats, kind_count: int, bounds: _Ints,
                     queued: _Ints, used: _Ints, /) -> bool: ...
def vacancy_needs(times: _Floats, kind: int, other: int, shift: float, waits: _Floats, counts: _Floats, total: _Floats, /) -> int: ...
def vacancy_empty(rows: _Ints, positive: _Ints, runnable: _Ints, need: _Floats, machine_kind: _Ints, delay: _Floats,
                  position: int, /) -> bool: ...
