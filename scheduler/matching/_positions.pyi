# The C extension built from _positions.c (its header says what each function reads and
# writes). Buffers: C-contiguous NumPy arrays; those written into are writable and share no memory
# with another argument (a ValueError).
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

_Ints: TypeAlias = npt.NDArray[np.int64]
_Floats: TypeAlias = npt.NDArray[np.float64]

def kind_limits(members: _Ints, omega: _Floats, earlier: _Ints, earlier_or_equal: _Ints, runnable: int, shortest: float,
                limits: _Ints, /) -> None: ...
def slots(limits: _Ints, machine_kind: _Ints, kind_count: int, machine: _Ints, position: _Ints, /) -> None: ...
def ranks(sorted_omega: _Floats, earlier: _Ints, earlier_or_equal: _Ints, /) -> None: ...
def moved(members: _Ints, omega: _Floats, machine: int, new_omega: float, out_members: _Ints, out_omega: _Floats, out_earlier: _Ints,
          out_earlier_or_equal: _Ints, /) -> bool: ...
