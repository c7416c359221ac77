"""The certificate's test in C (``_transport.c``'s ``certificate``, where the extension was
built from a source that has it) against ``transport._certificate``'s NumPy, the reference:
the same answer (and ``certified``'s classes) for the optimal assignment and for random ones,
on random group problems (whole-number costs that tie, or miss a tie by less than the
tolerance, kinds a row cannot run on, groups of several classes, groups without a unit); and the decisions of Algorithm 2 and admission both
ways."""

from __future__ import annotations

import importlib
import random
from typing import Any, Callable

import numpy as np
import pytest

from scheduler.matching.transport import Groups, assign_to_classes, certified, only_optimum
from tests.matching.native_paths import assert_decisions_alike, both_ways

transport = importlib.import_module("scheduler.matching.transport")
native = pytest.importorskip("scheduler.matching._transport", reason="built without the C extension: nothing to compare")
if not hasattr(native, "certificate"):
    pytest.skip("the extension was built from an older _transport.c (without certificate): nothing to compare", allow_module_level=True)


def certifying_both_ways(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``call()`` with the certificate's test in C, then in NumPy."""
    return both_ways(call, monkeypatch, transport, attribute="certifying")


def random_groups(rng: np.random.Generator) -> tuple[Groups, np.ndarray]:
    """Rows over groups of classes (each class a group's offset and a capacity, now and then 0)."""
    rows, count = int(rng.integers(1, 40)), int(rng.integers(1, 9))
    group = np.concatenate([np.arange(count), rng.integers(0, count, size=int(rng.integers(0, 6)))]).astype(np.int64)
    offset = rng.integers(0, 5, size=group.shape[0]).astype(float) * 10
    capacity = rng.integers(0, 4, size=group.shape[0]).astype(np.int64)
    capacity[: min(count, group.shape[0])] += rows // count + 1  # room for every row
    whole = rng.random() < 0.5
    group_cost = rng.integers(1, 6, size=(rows, count)) * 10.0 if whole else rng.uniform(1, 60, size=(rows, count))
    if whole and rng.random() < 0.6:
        # A cost off a tie by less than the certificate's tolerance (1e-9 of the scale, ~5e-8
        # to ~1e-7 here): a cycle that costs more than 0 and is refused all the same.
        group_cost[int(rng.integers(0, rows)), int(rng.integers(0, count))] += float(rng.choice([1e-10, 6e-8]))
    group_cost[rng.random(size=(rows, count)) < 0.1] = np.inf
    if rng.random() < 0.5:
        group_cost = np.asfortranarray(group_cost)  # laid out column by column, as solve's groups gather it
    return Groups(group=group, offset=offset, group_cost=group_cost), capacity


def test_the_certificate_in_c_is_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8761)
    answers = {True: 0, False: 0}
    for _ in range(3000):
        groups, capacity = random_groups(rng)
        rows = groups.group_cost.shape[0]
        solved = assign_to_classes(None, capacity, max_augmentations=rows, groups=groups)
        choices = [rng.integers(0, groups.group_cost.shape[1], size=rows).astype(np.int64)]
        if solved is not None:
            choices.append(groups.group[solved].astype(np.int64))
        for assign in choices:
            in_c, in_numpy = certifying_both_ways(lambda: only_optimum(groups, capacity, assign), monkeypatch)  # noqa: B023
            assert in_c == in_numpy
            answers[in_c] += 1
            classes = certifying_both_ways(lambda: certified(groups, capacity, assign), monkeypatch)  # noqa: B023
            assert (None if classes[0] is None else classes[0].tolist()) == (None if classes[1] is None else classes[1].tolist())
    assert answers[True] > 500 and answers[False] > 500


def test_bad_buffers_are_refused_by_name() -> None:
    cost, ids, local = np.zeros((2, 2)), np.zeros(1, dtype=np.int64), np.zeros(2, dtype=np.int64)
    flat, bounds = np.zeros(2), np.array([0, 2], dtype=np.int64)
    with pytest.raises(TypeError, match="group_cost"):
        native.certificate(np.zeros(4), ids, local, flat, bounds)
    with pytest.raises(TypeError, match="bounds"):
        native.certificate(cost, ids, local, flat, bounds.astype(float))
    with pytest.raises(ValueError, match="a group of group_ids per row"):
        native.certificate(cost, ids, local + 1, flat, bounds)
    with pytest.raises(ValueError, match="a unit range per group within flat"):
        native.certificate(cost, ids, local, flat, bounds + 1)


def test_algorithm_2_and_admission_decide_the_same_with_the_certificate_in_c(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_decisions_alike(random.Random(8762), monkeypatch, transport, attribute="certifying")
