"""The position bound and its slots in C (``scheduler.matching._positions``) against
``positions.py``'s NumPy, the reference: the same limits (Claims 1-3) and the same slots, on
random machines with the bound's corners (Claim 3 past its 16 levels, windows rounding empty,
kinds without jobs or without machines); and Algorithm 2's and admission's decisions with both
extensions against neither. A process whose extension cannot be imported lays out the same
slots in NumPy.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scheduler.matching import positions, transport
from scheduler.matching.positions import kind_orders, position_limits, slots_for
from tests.matching.native_paths import assert_decisions_alike

native = pytest.importorskip("scheduler.matching._positions", reason="built without the C extension: nothing to compare")

ROOT = Path(__file__).resolve().parents[2]


def machines(rng: np.random.Generator) -> dict[str, Any]:
    """Machines of up to three kinds, many idle, the others waiting on a grid (ties) or
    anywhere; jobs per kind from none to more than the machines; each kind's shortest job from
    0 (no Claim 3) to far below the waits (every level, and past them) and against waits so
    large that ω + p rounds back to ω."""
    count, kinds = int(rng.integers(1, 250)), int(rng.integers(1, 4))
    machine_kind = rng.integers(0, kinds, count).astype(np.int64)
    scale = float(rng.choice([1.0, 1e16]))
    draw = rng.random()
    if draw < 0.3:
        delay = rng.integers(0, 30, count) * float(rng.choice([0.25, 1.0, 60.0])) * scale
    elif draw < 0.5:
        # A hair before multiples of the shortest jobs: Claim 3's windows, a hair narrower than
        # p, leave them out.
        delay = np.maximum(rng.integers(0, 30, count) * float(rng.choice([0.5, 7.0])) - 1e-12, 0.0)
    else:
        delay = rng.uniform(0, 500, count) * scale
    delay[rng.random(count) < rng.random()] = 0.0
    runnable = rng.integers(0, 3 * count + 2, kinds).astype(np.int64)
    shortest = rng.choice([0.0, 1e-3, 0.5, 7.0, 400.0], kinds)
    return {"machine_kind": machine_kind, "available": delay, "runnable_per_kind": runnable, "shortest_per_kind": shortest,
            "kind_count": kinds}


def laid_out(case: dict[str, Any], *, orders: bool) -> tuple[np.ndarray, ...]:
    kinds = case["kind_count"]
    kept = kind_orders(machine_kind=case["machine_kind"], available=case["available"], kind_count=kinds) if orders else None
    limits = position_limits(machine_kind=case["machine_kind"], available=case["available"], runnable_per_kind=case["runnable_per_kind"],
                             shortest_per_kind=case["shortest_per_kind"], orders=kept)
    slots = slots_for(limits=limits, machine_kind=case["machine_kind"], kind_count=kinds)
    return limits, slots.machine, slots.position, slots.kind_bounds


def test_the_bound_and_the_slots_in_c_are_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7920)
    tightened = 0
    for index in range(1500):
        case = machines(rng)
        monkeypatch.setattr(positions, "native", native)
        in_c = laid_out(case, orders=index % 2 == 0)
        monkeypatch.setattr(positions, "native", None)
        in_numpy = laid_out(case, orders=index % 2 == 0)
        assert all(np.array_equal(a, b) for a, b in zip(in_c, in_numpy, strict=True))
        untightened = position_limits(machine_kind=case["machine_kind"], available=case["available"],
                                      runnable_per_kind=case["runnable_per_kind"])
        tightened += int(not np.array_equal(untightened, in_numpy[0]))
    assert tightened > 300  # Claim 3 lowered the bound, not only Claim 1's passed through


def test_bad_buffers_are_refused_by_name() -> None:
    limits = np.ones(2, dtype=np.int64)
    with pytest.raises(TypeError, match="machine_kind"):
        native.slots(limits, np.zeros(2, dtype=np.int32), 1, np.empty(2, dtype=np.int64), np.empty(2, dtype=np.int64))
    with pytest.raises(ValueError, match="below kind_count"):
        native.slots(limits, np.array([0, 3], dtype=np.int64), 1, np.empty(2, dtype=np.int64), np.empty(2, dtype=np.int64))
    order = kind_orders(machine_kind=np.zeros(2, dtype=np.int64), available=np.zeros(2), kind_count=1)[0]
    with pytest.raises(ValueError, match="n_c >= 1"):
        native.kind_limits(order.members, order.omega, order.earlier, order.earlier_or_equal, 0, 1.0, limits)


def test_algorithm_2_and_admission_decide_the_same_with_the_extensions(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_decisions_alike(random.Random(7921), monkeypatch, positions, transport)


FALLBACK = """
import json, sys
sys.modules["scheduler.matching._positions"] = None  # as if built without a C compiler: the import fails
import numpy as np
from scheduler.matching import positions
kind = np.array([0, 1, 0, 0, 1], dtype=np.int64)
limits = positions.position_limits(machine_kind=kind, available=np.array(json.loads(sys.argv[1])),
                                   runnable_per_kind=np.array([6, 2]), shortest_per_kind=np.array([2.0, 0.0]))
slots = positions.slots_for(limits=limits, machine_kind=kind, kind_count=2)
print(json.dumps({"native": positions.NATIVE, "in_use": positions.native is not None, "machine": slots.machine.tolist()}))
"""


def test_without_the_extension_numpy_lays_out_the_same_slots() -> None:
    available = [0.0, 0.0, 1.0, 9.0, 3.0]
    done = subprocess.run([sys.executable, "-c", FALLBACK, json.dumps(available)], cwd=ROOT, capture_output=True, text=True, check=True)
    answer = json.loads(done.stdout)
    assert answer["native"] is False and answer["in_use"] is False
    assert positions.NATIVE and positions.native is not None
    kind = np.array([0, 1, 0, 0, 1], dtype=np.int64)
    limits = position_limits(machine_kind=kind, available=np.array(available), runnable_per_kind=np.array([6, 2]),
                             shortest_per_kind=np.array([2.0, 0.0]))
    assert answer["machine"] == slots_for(limits=limits, machine_kind=kind, kind_count=2).machine.tolist()
