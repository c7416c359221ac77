"""The matching's C calls refuse arguments whose sizes their buffers could not hold, before any
step reads or lays them out (review23): ``_transport.c``'s ``contended_plan`` read kind orders
shorter than the machines past their end (the fold reads one place per machine, and the
lengths were compared only after it), and a rank past its kind's order wrapped the bound's
sums into negative limits, fewer slots laid out than written; ``_solve.c``'s
``canonical_levels`` and ``canonical_plan`` took a position so large that its levels' tallies
((largest + 1) per kind) wrapped, a small buffer written far past its end; ``fold_match``'s
(kind, position) keys likewise, and its blocks' bytes. Each is now a ValueError naming what
is wrong. A call that could crash the process before runs in a subprocess, so that a crash
fails the test rather than the run. Positions above the jobs stay canonical's own where
nothing wraps: it takes any matching, as NumPy does.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

native = pytest.importorskip("scheduler.matching._solve", reason="built without the C extension: nothing to check")
native_transport = pytest.importorskip("scheduler.matching._transport", reason="built without the C extension: nothing to check")
solve = importlib.import_module("scheduler.matching.solve")  # the module: the package's ``solve`` is its function

ROOT = Path(__file__).resolve().parents[2]
HUGE = (1 << 62) - 1  # (HUGE + 1) · (3 + 1) == 2**64: a size_t product of it wraps to 0


def outcome(code: str) -> str:
    """What ``code`` (run in a fresh interpreter at the repository's root, with ``np`` and the
    two extensions imported) printed last: the exception's name it caught, or what it returned;
    a crash fails here, naming its signal."""
    prelude = "import numpy as np\nfrom scheduler.matching import _solve as native, _transport as native_transport\n"
    done = subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"the call crashed the process (exit {done.returncode}): {done.stderr[-600:]}"
    return done.stdout.strip().splitlines()[-1]


def contended_arguments(machines: int, laid: int) -> list[np.ndarray]:
    """contended_plan's arguments: 4 rows of one kind on ``machines`` machines whose kind order lists ``laid`` of them."""
    return [np.ones((4, 1)), np.arange(4, dtype=np.int64), np.zeros(machines, dtype=np.int64), np.zeros(machines),
            np.arange(laid, dtype=np.int64), np.zeros(laid), np.zeros(laid, dtype=np.int64), np.full(laid, laid, dtype=np.int64),
            np.array([0, laid], dtype=np.int64), np.empty(machines + 1, dtype=np.int64), np.empty(4, dtype=np.int64),
            np.full(1, -1, dtype=np.int64)]


def test_contended_plan_refuses_kind_orders_shorter_than_the_machines() -> None:
    # 64 machines, the kind order of one: the fold read 63 members and waits past its end.
    with pytest.raises(ValueError, match="a place in them per machine"):
        native_transport.contended_plan(*contended_arguments(64, 1))
    # ... and with them all, the same call answers.
    assert native_transport.contended_plan(*contended_arguments(64, 64)) in (True, False)


def test_contended_plan_refuses_kind_bounds_short_of_the_orders() -> None:
    arguments = contended_arguments(4, 4)
    arguments[8] = np.array([0, 2], dtype=np.int64)  # two of the four machines in no kind's order
    with pytest.raises(ValueError, match="a place in them per machine"):
        native_transport.contended_plan(*arguments)


def test_contended_plan_refuses_a_rank_past_its_kinds_order() -> None:
    # earlier_or_equal 2**63 - 2 (above earlier, as before) with 4 rows: n_c - 1 + it wrapped to
    # -(2**63 - 1), so two machines' limits were -1 each and the third's 4: 2 + 1 slots laid out,
    # 4 written (ASan: a heap-buffer-overflow write in slots_of). Zero times: no Claim 3.
    code = """
a = [np.zeros((4, 1)), np.arange(4, dtype=np.int64), np.zeros(3, dtype=np.int64), np.zeros(3), np.arange(3, dtype=np.int64), np.zeros(3),
     np.zeros(3, dtype=np.int64), np.array([2**63 - 2, 2**63 - 2, 1], dtype=np.int64), np.array([0, 3], dtype=np.int64),
     np.empty(4, dtype=np.int64), np.empty(4, dtype=np.int64), np.full(1, -1, dtype=np.int64)]
try:
    print(native_transport.contended_plan(*a))
except ValueError as refused:
    print("ValueError", refused)
"""
    assert outcome(code).startswith("ValueError contended_plan: ")


LEVELS = """
position = np.array([{position}], dtype=np.int64)
one = np.zeros(1, dtype=np.int64)
try:
    native.canonical_levels(one, one, position, one, np.zeros(1), np.ones((1, 3)), np.empty(1, dtype=np.int64), np.empty(1, dtype=np.int64))
    print("returned")
except (ValueError, MemoryError) as refused:
    print(type(refused).__name__, refused)
"""


def test_canonical_levels_refuses_a_position_whose_levels_wrap() -> None:
    answer = outcome(LEVELS.format(position=HUGE))
    assert answer.startswith("ValueError canonical_levels: position 4611686018427387903"), answer


def test_canonical_levels_takes_positions_above_the_jobs_as_numpy_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # An arbitrary matching (canonical takes any): 2 jobs at positions 5 and 9 on one machine.
    from scheduler.matching.solve import canonical, prepare
    from scheduler.matching.model import Job, Machine

    problem = prepare(jobs=[Job(name=f"j{i}", user="u", arrival=0.0, processing_time={"gpu": 2.0 + i}) for i in range(2)],
                      machines=[Machine(name="g0", kind="gpu"), Machine(name="g1", kind="gpu")], now=0.0, busy_until={"g1": 3.0})
    rows, machine, position = np.array([1, 0], dtype=np.int64), np.array([0, 1], dtype=np.int64), np.array([5, 9], dtype=np.int64)
    in_c = canonical(problem, rows=rows, machine=machine, position=position)
    with monkeypatch.context() as numpy_only:
        numpy_only.setattr(solve, "native", None)
        in_numpy = canonical(problem, rows=rows, machine=machine, position=position)
    assert all(np.array_equal(a, b) for a, b in zip(in_c, in_numpy, strict=True))


PLAN = """
one, kinds = np.zeros(1, dtype=np.int64), np.array([0, 1, 1, 1], dtype=np.int64)
try:
    print(native.canonical_plan(one, one, one, np.array([{position}], dtype=np.int64), one, np.zeros(1), kinds, one, np.zeros(1),
                                np.ones((1, 3)), np.empty(2, dtype=np.int64), np.empty(1, dtype=np.int64)))
except (ValueError, MemoryError) as refused:
    print(type(refused).__name__, refused)
"""


def test_canonical_plan_refuses_a_position_past_the_jobs() -> None:
    assert outcome(PLAN.format(position=1)) == "True"  # one job at position 1 of the one machine
    assert outcome(PLAN.format(position=2)).startswith("ValueError canonical_plan: ")
    assert outcome(PLAN.format(position=HUGE)).startswith("ValueError canonical_plan: ")


def test_fold_match_refuses_a_position_past_the_rows() -> None:
    # A slot at 2**61: its counts' bytes, (2**61 + 1) · 8, wrapped to 8.
    code = """
one = np.zeros(1, dtype=np.int64)
try:
    print(native_transport.fold_match(one, np.array([2**61], dtype=np.int64), one, np.zeros(1), np.ones((1, 1)), one, np.zeros(1),
                                      np.empty(1, dtype=np.int64), np.empty(1, dtype=np.int64)))
except (ValueError, MemoryError) as refused:
    print(type(refused).__name__, refused)
"""
    assert outcome(code).startswith("ValueError fold_match: a position per slot (at most the rows)")
