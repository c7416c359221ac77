"""Which (machine, position) slots the matching needs: the paper's Q has n positions on every
machine (n·m·n entries); almost all of them can never appear in an optimal schedule.

Bound (why the slots built here lose nothing)
---------------------------------------------
Write ``ω_i`` for the time machine ``i`` becomes available, ``c(i)`` for its kind, ``n_c`` for the
number of jobs that can run on kind ``c``, and

    r_i = |{ i' : c(i') = c(i) and ω_i' <= ω_i }|   (``i`` itself included).

A job placed ``k``-th from the end of machine ``i`` costs ``k·p_j,c(i) + ω_i - a_j`` (§3.1–3.2):
it delays itself and the ``k - 1`` jobs behind it.

*Claim 1.* Some optimal schedule puts at most ``K_i = ceil(n_c / r_i)`` jobs on every machine
``i``, for processing times ``p >= 0``.

*Proof.* Start from any optimal schedule and let ``k_i`` count the jobs on ``i``. While two machines
``i, i'`` of one kind have ``ω_i' <= ω_i`` and ``k_i' <= k_i - 2``, move the job that runs first on
``i`` to the front of ``i'``. The positions-from-the-end of every other job are unchanged, and the
moved job's cost changes by ``(k_i' + 1 - k_i)·p + ω_i' - ω_i <= -p <= 0``, so the schedule stays
optimal. Each move lowers ``Σ k_i²`` by at least 2, so the moves stop. Then every machine of
``i``'s kind that is available no later than ``i`` holds at least ``k_i - 1`` jobs, so the kind
runs at least ``k_i + (r_i - 1)(k_i - 1)`` jobs, and at most ``n_c``:
``r_i·k_i - r_i + 1 <= n_c``, i.e. ``k_i <= ceil(n_c / r_i)``. ∎

*Claim 2.* Among ``g`` machines of one kind with the same ``ω`` (interchangeable, and with equal
``K``), some optimal schedule meeting Claim 1 uses only the first ``min(g, n_c)``.

*Proof.* A schedule runs at most ``n_c`` jobs on the kind, so at most ``n_c`` machines of the group
are non-empty; relabelling the machines of the group moves those to the front without changing
any cost or count. ∎

Conversely, every matching of the kept slots is a schedule (Algorithm 1 reads each machine's
queue from its largest position down; a gap in the positions only overstates the cost), so the
optimum over the kept slots equals the paper's. With idle, identical machines (the common case)
this keeps ``ceil(n_c / m_c)`` positions on at most ``n_c`` machines per kind: for 1,000 jobs and
5,000 GPUs, 1,000 columns instead of 5,000,000. With distinct ``ω`` the total stays below
``n_c·(1 + ln n_c) + m_c`` per kind (a harmonic sum).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Slots:
    """The columns of the cost matrix: column ``s`` is position ``position[s]`` from the end of
    machine ``machine[s]``. Columns are grouped by kind (``kind_bounds[c]:kind_bounds[c+1]``)
    so that the cost matrix can be written one kind at a time without fancy indexing."""

    machine: IntArray
    position: IntArray
    kind_bounds: IntArray

    @property
    def count(self) -> int:
        return int(self.machine.shape[0])


def position_limits(
    *, machine_kind: IntArray, available: FloatArray, runnable_per_kind: IntArray
) -> IntArray:
    """``K_i`` of Claim 1 for every machine, and 0 for machines Claim 2 drops.

    ``machine_kind[i]`` indexes ``runnable_per_kind`` (``n_c``); ``available[i]`` is ``ω_i``.
    """
    limits = np.zeros(machine_kind.shape[0], dtype=np.int64)
    for kind in np.unique(machine_kind):
        members = np.flatnonzero(machine_kind == kind)
        runnable = int(runnable_per_kind[kind])
        if runnable == 0:
            continue
        omega = available[members]
        # Stable sort by ω keeps input order inside a group of equal ω, so Claim 2 keeps the
        # machines the caller listed first: the choice is deterministic and predictable.
        order = np.argsort(omega, kind="stable")
        sorted_omega = omega[order]
        earlier_or_equal = np.searchsorted(sorted_omega, sorted_omega, side="right")
        group_start = np.searchsorted(sorted_omega, sorted_omega, side="left")
        rank_in_group = np.arange(members.shape[0]) - group_start
        bound = (runnable + earlier_or_equal - 1) // earlier_or_equal
        limits[members[order]] = np.where(rank_in_group < runnable, bound, 0)
    return limits


def all_positions(*, machine_count: int, job_count: int) -> IntArray:
    """The paper's layout: ``n`` positions on every machine (no bound)."""
    return np.full(machine_count, job_count, dtype=np.int64)


def slots_for(*, limits: IntArray, machine_kind: IntArray, kind_count: int) -> Slots:
    """Lay out ``limits[i]`` positions for every machine, grouped by kind."""
    machine = np.repeat(np.arange(limits.shape[0], dtype=np.int64), limits)
    first_column = np.cumsum(limits) - limits
    position = np.arange(machine.shape[0], dtype=np.int64) - np.repeat(first_column, limits) + 1
    slot_kind = machine_kind[machine]
    # Within a kind, order by position then machine: the paper's block order Q = [P 2P … nP].
    order = np.lexsort((machine, position, slot_kind))
    counts = np.bincount(slot_kind, minlength=kind_count)
    kind_bounds = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    return Slots(machine=machine[order], position=position[order], kind_bounds=kind_bounds)
