"""The bound's jobs per kind in C (``_solve.c``'s ``kind_stats``, where the extension was built
from a source that has it) against ``solve._per_kind``'s NumPy, the reference: how many jobs can
run on each kind and their shortest time there, on random times (kinds a job cannot run on,
times of 0 and -0.0, NaN, whole numbers that tie, no job); and the decisions of Algorithm 2
and admission both ways. (A shortest time of 0 may come out as 0.0 one way and -0.0 the other,
which compare equal: the bound reads only whether it is above 0.)"""

from __future__ import annotations

import importlib
import random
from typing import Any, Callable

import numpy as np
import pytest

from tests.matching.native_paths import assert_decisions_alike, both_ways

solve = importlib.import_module("scheduler.matching.solve")
native = pytest.importorskip("scheduler.matching._solve", reason="built without the C extension: nothing to compare")
if not hasattr(native, "kind_stats"):
    pytest.skip("the extension was built from an older _solve.c (without kind_stats): nothing to compare", allow_module_level=True)


def stats_both_ways(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``call()`` with the jobs per kind in C, then in NumPy."""
    return both_ways(call, monkeypatch, solve, attribute="stats")


def test_jobs_per_kind_in_c_are_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8751)
    fastest_zero = 0
    for _ in range(3000):
        kinds = rng.randint(1, 4)
        values = [float("inf"), 0.0, -0.0, float("nan"), float(rng.randint(1, 5)), rng.uniform(0.01, 100)]
        times = np.array([[rng.choice(values) for _ in range(kinds)] for _ in range(rng.randint(0, 30))]).reshape(-1, kinds)
        in_c, in_numpy = stats_both_ways(lambda: solve._per_kind(times), monkeypatch)  # noqa: B023
        assert in_c[0].tolist() == in_numpy[0].tolist() and in_c[1].tolist() == in_numpy[1].tolist()
        fastest_zero += bool((in_c[1] == 0).any() and (in_c[0] > 0).any())
    assert fastest_zero > 500


def test_bad_buffers_are_refused_by_name() -> None:
    with pytest.raises(TypeError, match="times"):
        native.kind_stats(np.zeros(3), np.zeros(3, dtype=np.int64), np.zeros(3))
    with pytest.raises(ValueError, match="a count and a time per kind"):
        native.kind_stats(np.zeros((2, 3)), np.zeros(2, dtype=np.int64), np.zeros(3))


def test_algorithm_2_and_admission_decide_the_same_with_the_jobs_per_kind_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_decisions_alike(random.Random(8752), monkeypatch, solve, attribute="stats")
