# The C extension built from _transport.c (its header says what each function reads and
# writes). Buffers: C-contiguous NumPy arrays; those written into are writable.
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

_Ints: TypeAlias = npt.NDArray[np.int64]
_Floats: TypeAlias = npt.NDArray[np.float64]

# 0 solved (assign written), 1 no reliable answer, 2 declined (the caller runs the Python phases).
def solve_groups(cost: _Floats, flat: _Floats, bounds: _Ints, assign: _Ints, max_augmentations: int, /) -> int: ...
def cheapest_classes(group: _Ints, offset: _Floats, group_cost: _Floats, chosen: _Ints, /) -> bool: ...
def fold_match(slot_machine: _Ints, slot_position: _Ints, machine_kind: _Ints, delay: _Floats, times: _Floats, members: _Ints,
               omega: _Floats, rows: _Ints, columns: _Ints, /) -> bool: ...
# fold_match, and into certain (one entry) whether the matching is certainly the only optimum: 1, 0, or -1 (not worked out).
def fold_certified(slot_machine: _Ints, slot_position: _Ints, machine_kind: _Ints, delay: _Floats, times: _Floats, members: _Ints,
                   omega: _Floats, rows: _Ints, columns: _Ints, certain: _Ints, /) -> bool: ...
def certificate(group_cost: _Floats, group_ids: _Ints, local: _Ints, flat: _Floats, bounds: _Ints, /) -> bool: ...
def contended_plan(times: _Floats, rows: _Ints, machine_kind: _Ints, delay: _Floats, members: _Ints, omega: _Floats, earlier: _Ints,
                   earlier_or_equal: _Ints, kind_bounds: _Ints, bounds: _Ints, queued: _Ints, certain: _Ints, /) -> bool: ...
