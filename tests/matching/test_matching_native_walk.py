"""Algorithm 2's bookkeeping in C (``_solve.c``'s ``class_count``, ``near`` and ``rows_of``,
where the extension was built from a source that has them) against ``allox``'s NumPy, the
reference: how many machines of a kind and wait are listed before a machine or are among a
plan's machines (``_listed_before``, ``_in_class``: ``_Plan.kept_after``, ``_Empty``), whether
a machine of a kind waits within a tolerance of a wait (``_near``), and each user set's waiting
rows (``_Left.rows``), on random machines (waits that tie, NaN, a rounding error apart, exactly
a tolerance apart) and random user sets with rows removed; and Algorithm 2's and admission's
decisions with them against without them.
"""

from __future__ import annotations

import importlib
import random
from typing import Any, Callable

import numpy as np
import pytest

from scheduler.matching.allox import _in_class, _Left, _listed_before, _near
from tests.matching.test_matching_native_allox import random_burst
from tests.matching.native_paths import assert_decisions_alike, both_ways

allox = importlib.import_module("scheduler.matching.allox")
native = pytest.importorskip("scheduler.matching._solve", reason="built without the C extension: nothing to compare")
if not hasattr(native, "class_count"):
    pytest.skip("the extension was built from an older _solve.c (without the walk's bookkeeping): nothing to compare",
                allow_module_level=True)


def walk_both_ways(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``call()`` with allox's ``walk`` in C, then in NumPy."""
    return both_ways(call, monkeypatch, allox, attribute="walk")


def random_machines(rng: random.Random) -> tuple[np.ndarray, np.ndarray]:
    """Up to three kinds; waits from a few values (ties), a NaN and a rounding error now and then."""
    count = rng.randint(1, 60)
    machine_kind = np.array([rng.randrange(3) for _ in range(count)], dtype=np.int64)
    waits = [0.0, 4e-16, 1.0, 1.0 + 2e-9, 2.5, float(rng.randint(1, 9)), float("nan")]
    delay = np.array([rng.choice(waits) if rng.random() < 0.8 else rng.uniform(0, 10) for _ in range(count)])
    return machine_kind, delay


def test_class_counts_in_c_are_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8721)
    found = 0
    for _ in range(3000):
        machine_kind, delay = random_machines(rng)
        count = machine_kind.shape[0]
        at = rng.randrange(count)
        kind, wait = int(machine_kind[at]), float(delay[at]) if rng.random() < 0.8 else rng.choice([0.0, 1.0, 7.0])
        end = rng.randint(0, count)
        before = walk_both_ways(lambda: _listed_before(end, kind=kind, wait=wait, delay=delay, machine_kind=machine_kind), monkeypatch)  # noqa: B023
        assert before[0] == before[1]
        machines = np.array(sorted(rng.sample(range(count), rng.randint(0, count))), dtype=np.int64)
        leaving_out = rng.choice([-1, at, rng.randrange(count)])
        among = walk_both_ways(lambda: _in_class(machines, kind=kind, wait=wait, delay=delay, machine_kind=machine_kind,  # noqa: B023
                                                 leaving_out=leaving_out), monkeypatch)  # noqa: B023
        assert among[0] == among[1]
        found += among[0] > 0
    assert found > 1000  # classes met, not only empty counts compared


def test_near_in_c_is_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8722)
    near = 0
    for _ in range(3000):
        machine_kind, delay = random_machines(rng)
        at = rng.randrange(machine_kind.shape[0])
        kind, wait = int(machine_kind[at]), float(delay[at])
        tolerance = rng.choice([1e-9, 2e-9, 1e-15, 0.0, 1.5])  # 1.0 and 1.0 + 2e-9: about a tolerance apart
        answers = walk_both_ways(lambda: _near(kind, wait, delay, machine_kind, tolerance), monkeypatch)  # noqa: B023
        assert answers[0] == answers[1]
        near += answers[0]
    assert near > 300


def test_user_sets_rows_in_c_are_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8723)

    def rows_after_removals(left: _Left, removed: list[int], sets: list[frozenset[str] | None]) -> list[list[int]]:
        for row in removed:
            left.remove(row)
        return [left.rows(considered).tolist() for considered in sets]

    for _ in range(500):
        state = rng.getstate()
        left_c, _, _, _ = random_burst(rng)
        rng.setstate(state)
        with monkeypatch.context() as patched:
            patched.setattr(allox, "walk", None)
            left_numpy, _, _, _ = random_burst(rng)  # the same burst, rows removed in NumPy
        jobs = len(left_c._every_job.jobs)
        users = sorted({job.user for job in left_c._every_job.jobs})
        removed = [row for row in range(jobs) if rng.random() < 0.3]
        sets: list[frozenset[str] | None] = [None, *(frozenset(rng.sample(users, rng.randint(0, len(users)))) for _ in range(3)),
                                             frozenset({"nobody"})]
        with monkeypatch.context() as patched:
            patched.setattr(allox, "walk", native)
            in_c = rows_after_removals(left_c, removed, sets)
        with monkeypatch.context() as patched:
            patched.setattr(allox, "walk", None)
            assert rows_after_removals(left_numpy, removed, sets) == in_c


def sorted_bound_leaves_empty(need: np.ndarray, rows: int, before: int) -> bool:
    """``_Vacancy.empty``'s last step as NumPy takes it: the needs sorted, max over them of
    min(#{N <= t}, |S| - t) at most ``before``."""
    outside = np.sort(need)
    return float(np.minimum(np.arange(1, outside.shape[0] + 1), rows - outside).max()) <= before


def test_the_vacancy_test_counts_what_numpy_sorts() -> None:
    """``vacancy_empty`` counts the needs above ``|S| - r`` where NumPy sorts them: the same
    answer on random needs (whole numbers that tie, fractions, infinities), every row on the
    machine's kind, as many machines of its class listed before it as asked."""
    rng = random.Random(8725)
    answers = {True: 0, False: 0}
    for _ in range(4000):
        count = rng.randint(1, 40)
        need = np.array([rng.choice([float(rng.randint(0, count)), rng.uniform(0, count), float("inf")]) if rng.random() < 0.9 else 0.0
                         for _ in range(count)])
        before = rng.randint(0, count)
        machine_kind = np.zeros(before + 1, dtype=np.int64)  # the machine last, its class before it
        flags = np.ones(count, dtype=np.int64)
        rows = np.arange(count, dtype=np.int64)
        in_c = native.vacancy_empty(rows, flags, flags.reshape(count, 1), need, machine_kind, np.zeros(before + 1), before)
        # vacancy_empty's early answers, then NumPy's sorted bound.
        least = float(need.min())
        expected = (count <= before or count - least <= before
                    or (int((need <= least).sum()) <= before and sorted_bound_leaves_empty(need, count, before)))
        assert in_c == expected
        answers[in_c] += 1
    assert answers[True] > 1000 and answers[False] > 1000


def test_bad_buffers_are_refused_by_name() -> None:
    kinds = np.zeros(2, dtype=np.int64)
    with pytest.raises(TypeError, match="delay"):
        native.class_count(None, kinds, kinds, 0, 0.0, 1)
    with pytest.raises(TypeError, match="indices"):
        native.class_count(np.zeros(1), kinds, np.zeros(2), 0, 0.0, 1)
    with pytest.raises(ValueError, match="indices of machines"):
        native.class_count(kinds + 2, kinds, np.zeros(2), 0, 0.0, -1)
    with pytest.raises(ValueError, match="skip within"):
        native.class_count(None, kinds, np.zeros(2), 0, 0.0, 3)
    with pytest.raises(ValueError, match="a wait per machine"):
        native.near(kinds, np.zeros(3), 0, 0.0, 1.0)
    with pytest.raises(TypeError, match="waiting"):
        native.rows_of(kinds, kinds, np.zeros(2), np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="users of member"):
        native.rows_of(kinds, kinds + 2, kinds, np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="out as long"):
        native.rows_of(kinds, kinds, kinds, np.zeros(1, dtype=np.int64))


def test_algorithm_2_and_admission_decide_the_same_with_the_walk_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_decisions_alike(random.Random(8724), monkeypatch, allox, attribute="walk")
