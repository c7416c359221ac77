# The C extension built from _walk.c (its header says what it reads and writes). Buffers:
# C-contiguous NumPy arrays; those written into are writable and share no memory with another
# argument (a ValueError).
from typing import Callable, TypeAlias

import numpy as np
import numpy.typing as npt

_Ints: TypeAlias = npt.NDArray[np.int64]
_Floats: TypeAlias = npt.NDArray[np.float64]
_HeldPlan: TypeAlias = tuple[_Ints, _Ints | None, _Ints | None, _Ints, _Ints | None]
_MadePlan: TypeAlias = tuple[list[int], list[int], list[int], list[int]]

def uncontended_run(visits: _Ints, machine_kind: _Ints, delay: _Floats, times: _Floats, fastest: _Ints, row_user: _Ints, waiting: _Ints,
                    ranking: _Ints, progress: _Floats, out_rows: _Ints, out_visits: _Ints, out_waits: _Floats, out_old: _Floats,
                    plans: list[_HeldPlan], value: Callable[[int, int], float] | None, start: int, base: int, now: float, fleet_now: float,
                    passed: tuple[int, float, int] | None, /) -> tuple[int, int, list[int], list[tuple[int, int]], list[_MadePlan]]: ...
