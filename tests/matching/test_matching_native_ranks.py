"""The kind orders' ranks in C (``_positions.c``'s ``ranks``, where the extension was built from
a source that has it) against ``positions._ranks``'s NumPy, the reference: how many waits are
smaller and how many at most as large, for random sorted waits (runs that tie, 0.0 beside
-0.0, NaN at the end as a sort leaves them, one or no machine); and the decisions of Algorithm
2 and admission both ways."""

from __future__ import annotations

import importlib
import random
from typing import Any, Callable

import numpy as np
import pytest

from tests.matching.native_paths import assert_decisions_alike, both_ways

positions = importlib.import_module("scheduler.matching.positions")
native = pytest.importorskip("scheduler.matching._positions", reason="built without the C extension: nothing to compare")
if not hasattr(native, "ranks"):
    pytest.skip("the extension was built from an older _positions.c (without ranks): nothing to compare", allow_module_level=True)


def ranks_both_ways(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``call()`` with the ranks in C, then in NumPy."""
    return both_ways(call, monkeypatch, positions, attribute="ranking")


def test_ranks_in_c_are_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8771)
    tied = 0
    for _ in range(3000):
        values = [0.0, -0.0, 1.0, 4e-16, float(rng.randint(2, 5)), rng.uniform(0, 9), float("nan")]
        omega = np.sort(np.array([rng.choice(values) for _ in range(rng.randint(0, 30))]))
        in_c, in_numpy = ranks_both_ways(lambda: [part.tolist() for part in positions._ranks(omega)], monkeypatch)  # noqa: B023
        assert in_c == in_numpy
        tied += any(after - before > 1 for before, after in zip(in_c[0], in_c[1]))
    assert tied > 1000


def test_bad_buffers_are_refused_by_name() -> None:
    out = np.zeros(2, dtype=np.int64)
    with pytest.raises(TypeError, match="sorted_omega"):
        native.ranks(out, out.copy(), out.copy())
    with pytest.raises(ValueError, match="an earlier and an earlier_or_equal per omega"):
        native.ranks(np.zeros(3), out, out.copy())


def test_algorithm_2_and_admission_decide_the_same_with_the_ranks_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_decisions_alike(random.Random(8772), monkeypatch, positions, attribute="ranking")
