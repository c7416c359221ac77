"""canonical's queue names in C (``_solve.c``'s ``queue_names``, where the extension was built
from a source that has it) against ``solve._queue_names``'s NumPy, the reference: the same name
for every machine on random machines (waits that tie, 0.0 and -0.0, a rounding error apart,
queues of every length, machines without one), with kind orders sorted from the waits and with
orders that are not the machines' (stale, shuffled: C declines, NumPy's steps run); and the
decisions of Algorithm 2 and admission both ways."""

from __future__ import annotations

import importlib
import random
from typing import Any, Callable

import numpy as np
import pytest

from scheduler.matching.positions import KindOrder, kind_orders
from tests.matching.native_paths import assert_decisions_alike, both_ways

solve = importlib.import_module("scheduler.matching.solve")
native = pytest.importorskip("scheduler.matching._solve", reason="built without the C extension: nothing to compare")
if not hasattr(native, "queue_names"):
    pytest.skip("the extension was built from an older _solve.c (without queue_names): nothing to compare", allow_module_level=True)


def names_both_ways(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``call()`` with solve's ``names`` in C, then in NumPy."""
    return both_ways(call, monkeypatch, solve, attribute="names")


def random_orders(rng: random.Random, machine_kind: np.ndarray, delay: np.ndarray, kinds: int) -> tuple[tuple[KindOrder, ...], bool]:
    """The kind orders of the machines, or now and then orders that are not theirs (sorted
    from other waits, or a kind's machines out of order); whether they are the machines'."""
    choice = rng.random()
    if choice < 0.8:
        return kind_orders(machine_kind=machine_kind, available=delay, kind_count=kinds), True
    if choice < 0.9:
        other = delay.copy()
        other[rng.randrange(other.shape[0])] += 1.0
        return kind_orders(machine_kind=machine_kind, available=other, kind_count=kinds), False
    orders = list(kind_orders(machine_kind=machine_kind, available=delay, kind_count=kinds))
    kind = rng.randrange(kinds)
    members = orders[kind].members[::-1].copy()
    orders[kind] = KindOrder(members=members, omega=delay[members], earlier=orders[kind].earlier, earlier_or_equal=orders[kind].earlier_or_equal)
    return tuple(orders), members.shape[0] < 2 or bool((np.diff(delay[members]) >= 0).all())


def named(orders: tuple[KindOrder, ...], machine_kind: np.ndarray, delay: np.ndarray, queues: np.ndarray) -> list[int] | str:
    """Each machine's name, or the error NumPy's steps raise on orders that are not the machines'."""
    try:
        return solve._queue_names(orders, kind=machine_kind, delay=delay, count=queues).tolist()  # type: ignore[no-any-return]
    except IndexError as error:
        return type(error).__name__


def test_queue_names_in_c_are_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(8741)
    renamed = declined = 0
    for _ in range(3000):
        kinds = rng.randint(1, 3)
        count = rng.randint(1, 40)
        machine_kind = np.array([rng.randrange(kinds) for _ in range(count)], dtype=np.int64)
        waits = [0.0, -0.0, 4e-16, 1.0, float(rng.randint(2, 6))]
        delay = np.array([rng.choice(waits) if rng.random() < 0.85 else rng.uniform(0, 6) for _ in range(count)])
        queues = np.array([rng.choice([0, 0, 1, 1, 2, 3, rng.randint(4, 9)]) for _ in range(count)], dtype=np.int64)
        orders, theirs = random_orders(rng, machine_kind, delay, kinds)
        in_c, in_numpy = names_both_ways(lambda: named(orders, machine_kind, delay, queues), monkeypatch)  # noqa: B023
        assert in_c == in_numpy
        renamed += theirs and in_c != list(range(count))
        declined += not theirs
    assert renamed > 1000 and declined > 200  # names moved and orders declined, not only compared


def test_an_order_not_the_machines_is_declined() -> None:
    machine_kind = np.zeros(3, dtype=np.int64)
    delay = np.array([0.0, 0.0, 5.0])
    count = np.array([1, 2, 0], dtype=np.int64)
    label = np.arange(3)
    stale = kind_orders(machine_kind=machine_kind, available=np.array([0.0, 5.0, 0.0]), kind_count=1)[0]
    assert not native.queue_names(stale.members, stale.omega, 0, machine_kind, delay, count, label)
    assert label.tolist() == [0, 1, 2]  # nothing written
    order = kind_orders(machine_kind=machine_kind, available=delay, kind_count=1)[0]
    assert native.queue_names(order.members, order.omega, 0, machine_kind, delay, count, label)
    assert label.tolist() == [1, 0, 2]  # the longer queue on the machine listed first
    with pytest.raises(ValueError, match="a delay, count and label per machine"):
        native.queue_names(order.members, order.omega, 0, machine_kind, delay, count[:2], label)
    with pytest.raises(TypeError, match="omega"):
        native.queue_names(order.members, order.members, 0, machine_kind, delay, count, label)


def test_algorithm_2_and_admission_decide_the_same_with_the_names_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_decisions_alike(random.Random(8742), monkeypatch, solve, attribute="names")
