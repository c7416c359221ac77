"""The visited machine's class counted once a visit (``allox._Here``, ``allox._HERE_KEPT``)
tells each fact what counting it again does.

``_Empty.beyond`` asks of the visited machine's class whether a machine of its kind waits within
rounding of it and how many of it are listed before it; the raise asks that of every fact it
reads at a visit, on the same waits. Here ``beyond`` with and without ``_Here`` is compared on
random machines (classes of several machines, waits within a tolerance of each other, a
``_Here`` of another machine or of other buffers, which is not read), and the starts both ways
on random bursts, live states through ``decide`` and the benchmark's burst.

In a walk, the count never decides a start: a fact is made at a visit, of a free machine's class (wait 0), from a plan whose queues in that class are on
machines listed before the visited one, which stay in the class (visited, they started
nothing); so at a later visit of the class at least ``count`` of it are listed before. Nor did
the rounding on the bursts below: every fact of the visited class's kind told. The count and the
rounding are compared fact by fact above; in the starts, the kind decides, where a fact of one
kind is read at a visit of another with no start between (a start of another kind drops the
facts). Each kind's machines visited one after another, that is at the first of a kind only, so
bursts visited with their kinds interleaved (``matched``'s ``machines``) are compared too, with
the facts read at a visit of another kind counted.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from scheduler.matching import allox
from scheduler.matching.admission import decide
from scheduler.matching.allox import _Empty, _Here
from tests.matching.native_paths import Ways, live_states_decide_alike, random_bursts_start_alike, switched_both_ways, varied_bursts_start_alike
from tests.matching.test_matching_walk_run import benchmark_state


def both_ways(monkeypatch: pytest.MonkeyPatch) -> Ways:
    """A call made with the class counted once a visit, then counted for each fact."""
    return lambda call: switched_both_ways(call, monkeypatch, allox, "_HERE_KEPT")


def facts_read(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[bool, bool]]:
    """Of the facts ``_Empty.beyond`` read from the class counted once: how many were (of the
    visited machine's kind, told)."""
    read: Counter[tuple[bool, bool]] = Counter()
    beyond = _Empty.beyond

    def recorded(fact: _Empty, position: int, delay: Any, machine_kind: Any, here: _Here | None = None) -> bool:
        told = beyond(fact, position, delay, machine_kind, here)
        if here is not None and here.of(position, delay, machine_kind):
            read[fact.kind == here.kind, told] += 1
        return told

    monkeypatch.setattr(_Empty, "beyond", recorded)
    return read


@pytest.mark.parametrize("in_c", [True, False])
def test_a_fact_tells_the_same_from_the_class_counted_once(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    monkeypatch.setattr(allox, "walk", allox.walk if in_c else None)
    rng = random.Random(28301 + in_c)
    read = {True: 0, False: 0}
    for _ in range(800):
        machines = rng.randint(1, 30)
        machine_kind = np.array([rng.randrange(3) for _ in range(machines)], dtype=np.int64)
        delay = np.array([float(rng.choice([0, 0, 5, 5, 10])) for _ in range(machines)])
        if rng.random() < 0.3:
            delay[rng.randrange(machines)] += rng.choice([1e-12, 4e-16, 1e-3])  # within a tolerance, or not
        position = rng.randrange(machines)
        here = _Here(position, delay, machine_kind)
        other = rng.random()
        if other < 0.2:
            here = _Here(rng.randrange(machines), delay, machine_kind)  # another machine's: not read
        elif other < 0.3:
            here = _Here(position, delay.copy(), machine_kind)  # other buffers: not read
        for _ in range(5):
            fact = _Empty(kind=rng.choice([int(machine_kind[position]), rng.randrange(3)]),
                          wait=rng.choice([float(delay[position]), 0.0, 5.0]), count=rng.randrange(4), unique=None,
                          tolerance=rng.choice([1e-9, 1e-20]))
            told = fact.beyond(position, delay, machine_kind, here)
            assert told == fact.beyond(position, delay, machine_kind)
            read[here.of(position, delay, machine_kind)] += 1
    assert read[True] > 2000 and read[False] > 500


@pytest.mark.parametrize("in_c", [True, False])
def test_random_bursts_start_the_same_with_the_class_counted_once(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    monkeypatch.setattr(allox, "runs", allox.runs if in_c else None)
    read = facts_read(monkeypatch)
    random_bursts_start_alike(random.Random(28302), both_ways(monkeypatch), gpu_bursts=100, bursts=150)
    assert read[False, False] > 5 and read[True, True] > 300, read  # facts of another kind read: the kind decided (9)


@pytest.mark.parametrize("in_c", [True, False])
def test_interleaved_bursts_start_the_same_with_the_class_counted_once(monkeypatch: pytest.MonkeyPatch, in_c: bool) -> None:
    monkeypatch.setattr(allox, "runs", allox.runs if in_c else None)
    read = facts_read(monkeypatch)
    varied_bursts_start_alike(random.Random(28304), both_ways(monkeypatch), bursts=250, interleaved=True, no_time=0.0)
    # 43 facts of another kind than the visited machine's (9 on the random bursts above), and
    # every fact of its kind told.
    assert read[False, False] > 20 and read[True, True] > 200 and not read[True, False], read


def test_admission_and_the_burst_decide_the_same_with_the_class_counted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.benchmarks.bench_admission import BURST_BUSY

    live_states_decide_alike(random.Random(28303), both_ways(monkeypatch), states=10, options=({"alpha": 0.1}, {"alpha": 0.3}))
    arguments = benchmark_state(BURST_BUSY)
    read = facts_read(monkeypatch)
    kept, counted = both_ways(monkeypatch)(lambda: decide(**arguments, alpha=0.1))
    assert kept == counted and len(kept.starts) == 455
    assert sum(read.values()) > 100  # the facts the raise read at its visits, from the class counted once
