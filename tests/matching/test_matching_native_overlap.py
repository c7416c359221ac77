"""The matching's C extensions given arrays a caller should never pass: an output laid over an
input (``np.shares_memory``), wrong kinds of buffer, indexes out of range. Each loop of
``_solve.c`` and ``_positions.c`` that reads its inputs again after writing an output
(``rows_of``, ``uncontended_plan``, ``canonical_levels``, ``kind_limits``, ``slots``) would
read an overwritten index unchecked — past its buffers — so an output sharing memory with
another argument is a ValueError (``ranks`` too: it would rank values it had overwritten); every refusal leaves the arrays' reference counts as they
were (each buffer released). ``queue_names`` renames the machines NumPy's ``nonzero`` picks,
a count below 0 included, as ``solve._queue_names``'s NumPy steps do.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

import numpy as np
import pytest

from scheduler.matching.positions import kind_orders

native = pytest.importorskip("scheduler.matching._solve", reason="built without the C extension: nothing to check")
positions_native = pytest.importorskip("scheduler.matching._positions", reason="built without the C extension: nothing to check")
transport_native = pytest.importorskip("scheduler.matching._transport", reason="built without the C extension: nothing to check")
solve_module = importlib.import_module("scheduler.matching.solve")
if not all(hasattr(native, name) for name in ("class_count", "near", "rows_of", "kind_stats", "queue_names")) or not hasattr(
        positions_native, "ranks") or not hasattr(transport_native, "certificate"):
    pytest.skip("the extensions were built from older sources: nothing to check", allow_module_level=True)


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_rows_of_refuses_out_over_user() -> None:
    member, waiting = ints(1), np.ones(3, dtype=np.int64)
    user = np.zeros(3, dtype=np.int64)
    with pytest.raises(ValueError, match="shares memory"):
        native.rows_of(member, user, waiting, user)  # out over user: user[i] read after out[i] = i
    shared = np.zeros(4, dtype=np.int64)
    with pytest.raises(ValueError, match="shares memory"):
        native.rows_of(member, shared[:3], waiting, shared[1:])
    out = np.empty(3, dtype=np.int64)
    assert native.rows_of(member, user, waiting, out) == 3 and out.tolist() == [0, 1, 2]


def test_uncontended_plan_refuses_bounds_over_machine_kind() -> None:
    # bounds[m] written before machine_kind[m] is read: the kinds would become the counts.
    shared = np.zeros(4, dtype=np.int64)
    rows, fastest, delay = ints(0, 1, 2), ints(0, 0, 0), np.zeros(3)
    queued, used = np.empty(3, dtype=np.int64), np.empty(3, dtype=np.int64)
    with pytest.raises(ValueError, match="shares memory"):
        native.uncontended_plan(rows, fastest, shared[:3], delay, 1, shared, queued, used)
    with pytest.raises(ValueError, match="shares memory"):
        native.uncontended_plan(rows, fastest, ints(0, 0, 0), delay, 1, np.empty(4, dtype=np.int64), queued, rows)
    bounds = np.empty(4, dtype=np.int64)
    assert native.uncontended_plan(rows, fastest, ints(0, 0, 0), delay, 1, bounds, queued, used)
    assert bounds.tolist() == [0, 1, 2, 3] and queued.tolist() == [0, 1, 2] and used.tolist() == [0, 1, 2]


def test_canonical_levels_refuses_out_over_machine() -> None:
    rows, machine, position, slot_kind = ints(0, 1), ints(0, 1), ints(1, 1), ints(0, 0)
    times = np.ones((2, 1))
    with pytest.raises(ValueError, match="shares memory"):
        native.canonical_levels(rows, machine, position, slot_kind, np.zeros(2), times, np.empty(2, dtype=np.int64), machine)
    out_rows, out_machine = np.empty(2, dtype=np.int64), np.empty(2, dtype=np.int64)
    native.canonical_levels(rows, machine, position, slot_kind, np.zeros(2), times, out_rows, out_machine)
    assert out_rows.tolist() == [0, 1] and out_machine.tolist() == [0, 1]


def test_positions_refuse_outputs_over_inputs() -> None:
    # kind_limits writes limits[members[i]]: members read after limits written.
    members = ints(0, 1)
    with pytest.raises(ValueError, match="shares memory"):
        positions_native.kind_limits(members, np.zeros(2), ints(0, 0), ints(2, 2), 2, 0.0, members)
    limits = np.zeros(2, dtype=np.int64)
    positions_native.kind_limits(members, np.zeros(2), ints(0, 0), ints(2, 2), 2, 0.0, limits)
    assert limits.tolist() == [1, 1]
    # slots writes machine[at] and reads machine_kind[i] after it.
    machine_kind = ints(0, 0)
    with pytest.raises(ValueError, match="shares memory"):
        positions_native.slots(ints(1, 1), machine_kind, 1, machine_kind, np.empty(2, dtype=np.int64))
    machine, position = np.empty(2, dtype=np.int64), np.empty(2, dtype=np.int64)
    positions_native.slots(ints(1, 1), machine_kind, 1, machine, position)
    assert machine.tolist() == [0, 1] and position.tolist() == [1, 1]
    # ranks: an output over the values it reads would rank values it has overwritten.
    values = np.zeros(4)
    with pytest.raises(ValueError, match="shares memory"):
        positions_native.ranks(values, values.view(np.int64), np.empty(4, dtype=np.int64))


def test_queue_names_picks_nonzero_counts_as_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(native, "queue_names"):
        pytest.skip("built from an older _solve.c")
    kind, delay = ints(0, 0, 0), np.zeros(3)
    orders = kind_orders(machine_kind=kind, available=delay, kind_count=1)
    for count in (ints(-1, 0, 2), ints(0, -1, 2), ints(3, -2, 0), ints(1, 1, -1)):
        in_c = solve_module._queue_names(orders, kind=kind, delay=delay, count=count)
        with monkeypatch.context() as patched:
            patched.setattr(solve_module, "names", None)
            in_numpy = solve_module._queue_names(orders, kind=kind, delay=delay, count=count)
        assert in_c.tolist() == in_numpy.tolist(), count


def _refused_calls() -> list[tuple[str, Callable[..., Any], tuple[Any, ...], type[BaseException]]]:
    """The walk's, the bound's and the certificate's functions, each refusing its arguments
    (wrong kind, shape, lengths, indexes)."""
    m = ints(0, 1)
    d = np.zeros(2)
    return [
        ("class_count indices", native.class_count, (ints(0, 7), m, d, 0, 0.0, 0), ValueError),
        ("class_count skip", native.class_count, (None, m, d, 0, 0.0, 5), ValueError),
        ("class_count int32", native.class_count, (m.astype(np.int32), m, d, 0, 0.0, 0), TypeError),
        ("near lengths", native.near, (m, np.zeros(3), 0, 0.0, 1.0), ValueError),
        ("near float kinds", native.near, (d, d, 0, 0.0, 1.0), TypeError),
        ("rows_of user", native.rows_of, (ints(1), ints(0, 3), ints(1, 1), np.empty(2, dtype=np.int64)), ValueError),
        ("rows_of strided", native.rows_of, (ints(1), np.zeros(4, dtype=np.int64)[::2], ints(1, 1), np.empty(2, dtype=np.int64)),
         ValueError),
        ("rows_of read-only out", native.rows_of, (ints(1), ints(0, 0), ints(1, 1), np.broadcast_to(ints(0), (2,))), ValueError),
        ("kind_stats 1-d", native.kind_stats, (d, np.empty(2, dtype=np.int64), np.empty(2)), TypeError),
        ("kind_stats lengths", native.kind_stats, (np.zeros((2, 3)), np.empty(2, dtype=np.int64), np.empty(3)), ValueError),
        ("queue_names lengths", native.queue_names, (m, np.zeros(1), 0, m, d, m, np.empty(2, dtype=np.int64)), ValueError),
        ("uncontended rows", native.uncontended_plan, (ints(0, 9), ints(0, 0), m, d, 2, np.empty(3, dtype=np.int64),
                                                       np.empty(2, dtype=np.int64), np.empty(2, dtype=np.int64)), ValueError),
        ("uncontended kinds", native.uncontended_plan, (ints(0, 1), ints(0, 0), ints(0, 5), d, 2, np.empty(3, dtype=np.int64),
                                                        np.empty(2, dtype=np.int64), np.empty(2, dtype=np.int64)), ValueError),
        ("uncontended overlap", native.uncontended_plan, (ints(0, 1), ints(0, 0), m, d, 2, np.empty(3, dtype=np.int64),
                                                          m, np.empty(2, dtype=np.int64)), ValueError),
        ("ranks lengths", positions_native.ranks, (d, np.empty(1, dtype=np.int64), np.empty(2, dtype=np.int64)), ValueError),
        ("certificate local", transport_native.certificate, (np.zeros((2, 2)), ints(0, 1), ints(0, 2), d, ints(0, 1, 2)),
         ValueError),
        ("certificate bounds", transport_native.certificate, (np.zeros((2, 2)), ints(0, 1), ints(0, 1), d, ints(0, 2, 1)),
         ValueError),
        ("certificate group", transport_native.certificate, (np.zeros((2, 2)), ints(0, 2), ints(0, 1), d, ints(0, 1, 2)),
         ValueError),
    ]


@pytest.mark.parametrize("name", [call[0] for call in _refused_calls()])
def test_refusals_release_every_buffer(name: str) -> None:
    _, function, arguments, error = next(call for call in _refused_calls() if call[0] == name)
    arrays = [argument for argument in arguments if isinstance(argument, np.ndarray)]  # (small ints are shared)
    before = [sys.getrefcount(array) for array in arrays]
    for _ in range(200):
        with pytest.raises(error):
            function(*arguments)
    assert [sys.getrefcount(array) for array in arrays] == before
