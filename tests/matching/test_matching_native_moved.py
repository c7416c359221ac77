"""A kind order's move in C (``_positions.c``'s ``moved``, where the extension was built from a
source that has it) against ``positions.kind_orders_after``'s NumPy, the reference: the same
members, waits and ranks after each of a run of moves (onto a wait others have, back to 0, where
it was, to -0.0 beside 0.0; runs that tie), each also the orders sorted afresh; NaN waits and a
machine not of the kind left to NumPy; Algorithm 2's moves of many machines at once against a
sort; and the decisions of Algorithm 2 and admission both ways."""

from __future__ import annotations

import importlib
import random
from typing import Any, Callable

import numpy as np
import pytest

from tests.matching.native_paths import assert_decisions_alike, both_ways

positions = importlib.import_module("scheduler.matching.positions")
allox = importlib.import_module("scheduler.matching.allox")
native = pytest.importorskip("scheduler.matching._positions", reason="built without the C extension: nothing to compare")
if not hasattr(native, "moved"):
    pytest.skip("the extension was built from an older _positions.c (without moved): nothing to compare", allow_module_level=True)


def moves_both_ways(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``call()`` with the moves in C, then in NumPy."""
    return both_ways(call, monkeypatch, positions, attribute="moving")


def _lists(orders: tuple[Any, ...]) -> list[list[list[float]]]:
    return [[order.members.tolist(), order.omega.tolist(), order.earlier.tolist(), order.earlier_or_equal.tolist()] for order in orders]


def _signs(orders: tuple[Any, ...]) -> list[list[bool]]:
    """Which waits are -0.0 (equal to 0.0, so not told apart by ==)."""
    return [np.signbit(order.omega).tolist() for order in orders]


def _waits(rng: random.Random, count: int) -> np.ndarray:
    choices = [0.0, -0.0, 60.0, 120.0, 4e-16]
    if rng.random() < 0.3:
        return np.array([rng.uniform(0, 500) for _ in range(count)])
    return np.array([rng.choice(choices) for _ in range(count)])


def _machines(rng: random.Random, *, least: int, most: int) -> tuple[int, int, np.ndarray, np.ndarray, tuple[Any, ...]]:
    """Random machines of one to three kinds: their count, the kinds, each one's kind and wait,
    and their kind orders."""
    count = rng.randint(least, most)
    kinds = rng.randint(1, 3)
    machine_kind = np.array([rng.randrange(kinds) for _ in range(count)], dtype=np.int64)
    delay = _waits(rng, count)
    return count, kinds, machine_kind, delay, positions.kind_orders(machine_kind=machine_kind, available=delay, kind_count=kinds)


def test_each_move_in_c_is_numpys_and_a_fresh_sort(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(4411)
    tied = moved_past = 0
    for _ in range(600):
        count, kinds, machine_kind, delay, orders = _machines(rng, least=1, most=40)
        for _ in range(rng.randint(1, 10)):
            machine = rng.randrange(count)
            choice = rng.randrange(5)
            wait = (
                float(delay[rng.randrange(count)])
                if choice == 0
                else 0.0
                if choice == 1
                else float(delay[machine])
                if choice == 2
                else -0.0
                if choice == 3
                else float(rng.randint(0, 4) * 60)
            )
            kind = int(machine_kind[machine])
            in_c, in_numpy = moves_both_ways(lambda: positions.kind_orders_after(orders, machine=machine, kind=kind, omega=wait), monkeypatch)  # noqa: B023
            assert _lists(in_c) == _lists(in_numpy)
            assert _signs(in_c) == _signs(in_numpy)
            before = orders[kind].members.tolist().index(machine)
            after = in_c[kind].members.tolist().index(machine)
            moved_past += before != after
            tied += any(b - a > 1 for a, b in zip(in_c[kind].earlier.tolist(), in_c[kind].earlier_or_equal.tolist()))
            orders = in_c
            delay[machine] = wait
            assert _lists(orders) == _lists(positions.kind_orders(machine_kind=machine_kind, available=delay, kind_count=kinds))
    assert tied > 1000 and moved_past > 500


def test_nan_waits_and_strangers_are_left_to_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    machine_kind = np.zeros(4, dtype=np.int64)
    delay = np.array([0.0, 60.0, float("nan"), 0.0])
    orders = positions.kind_orders(machine_kind=machine_kind, available=delay, kind_count=1)
    order = orders[0]
    out = [np.empty(4, dtype=np.int64), np.empty(4), np.empty(4, dtype=np.int64), np.empty(4, dtype=np.int64)]
    assert native.moved(order.members, order.omega, 1, 0.0, *out) is False  # a NaN wait among the others
    clean = positions.kind_orders(machine_kind=machine_kind, available=np.zeros(4), kind_count=1)[0]
    assert native.moved(clean.members, clean.omega, 1, float("nan"), *out) is False  # moved to NaN
    assert native.moved(clean.members, clean.omega, 7, 0.0, *out) is False  # not a member
    in_c, in_numpy = moves_both_ways(lambda: _lists(positions.kind_orders_after(orders, machine=1, kind=0, omega=30.0)), monkeypatch)
    assert repr(in_c) == repr(in_numpy)  # NumPy's way, a NaN among the waits (nan != nan: compared as written)
    for way in (True, False):
        with monkeypatch.context() as patched:
            patched.setattr(positions, "moving", native if way else None)
            with pytest.raises(IndexError):
                positions.kind_orders_after((clean,), machine=7, kind=0, omega=0.0)


def test_bad_buffers_are_refused_by_name() -> None:
    members, omega = np.arange(3, dtype=np.int64), np.zeros(3)
    out = [np.empty(3, dtype=np.int64), np.empty(3), np.empty(3, dtype=np.int64), np.empty(3, dtype=np.int64)]
    with pytest.raises(TypeError, match="omega"):
        native.moved(members, members.copy(), 0, 0.0, *out)
    with pytest.raises(TypeError, match="out_members"):
        native.moved(members, omega, 0, 0.0, np.empty(3), *out[1:])
    with pytest.raises(ValueError, match="an omega per member"):
        native.moved(members, np.zeros(2), 0, 0.0, *out)
    with pytest.raises(ValueError, match="an omega per member"):
        native.moved(members, omega, 0, 0.0, out[0], out[1], out[2], np.empty(2, dtype=np.int64))
    with pytest.raises(ValueError, match="shares memory"):
        native.moved(members, omega, 0, 0.0, members, *out[1:])


def test_many_machines_moved_at_once_are_the_orders_sorted_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Algorithm 2 moves up to _RESORT_NATIVE machines one by one in C (3 in NumPy) before it
    sorts every kind again: each way gives the sort."""
    rng = random.Random(4412)
    for _ in range(200):
        count, kinds, machine_kind, delay, orders = _machines(rng, least=2, most=50)
        shifted = rng.sample(range(count), rng.randint(1, min(count, allox._RESORT_NATIVE - 1)))
        for machine in shifted:
            delay[machine] = rng.choice([0.0, 60.0, float(delay[rng.randrange(count)]), rng.uniform(0, 500)])
        in_c, in_numpy = moves_both_ways(lambda: _lists(allox._reordered(orders, shifted, delay, machine_kind)), monkeypatch)  # noqa: B023
        expected = _lists(positions.kind_orders(machine_kind=machine_kind, available=delay, kind_count=kinds))
        assert in_c == expected and in_numpy == expected


def test_algorithm_2_and_admission_decide_the_same_with_the_moves_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_decisions_alike(random.Random(4413), monkeypatch, positions, attribute="moving")
