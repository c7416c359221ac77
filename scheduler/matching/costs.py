"""The matrices of §3.1–3.2: processing times P, delays D and the cost matrix Q.

Entry (j, s) of Q is what job ``j`` adds to the total completion time when it runs in slot ``s``
(position ``k`` from the end of machine ``i``):

    Q(j, s) = k · P(j, i) + D(j, i),    D(j, i) = ω(i) - a(j)         (§3.2)

A job that cannot use a machine's kind costs ``inf`` there, which
``scipy.optimize.linear_sum_assignment`` treats as a forbidden edge.
"""

from __future__ import annotations

import math
from operator import methodcaller
from typing import Sequence

import numpy as np
import numpy.typing as npt

from scheduler.matching.model import Job, Machine
from scheduler.matching.positions import Slots

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def kind_times(jobs: Sequence[Job], kinds: Sequence[str]) -> FloatArray:
    """Processing time of every job on every kind (jobs × kinds), ``inf`` where it has none.

    Machines of one kind are identical, so this is P with its repeated columns folded; the
    jobs × machines P is ``kind_times(...)[:, machine_kind]``.
    """
    times = np.full((len(jobs), len(kinds)), math.inf)
    mappings = [job.processing_time for job in jobs]
    for column, kind in enumerate(kinds):  # a column at a time, the lookups in C
        times[:, column] = np.fromiter(map(methodcaller("get", kind, math.inf), mappings), dtype=np.float64, count=len(mappings))
    return times


def processing_matrix(jobs: Sequence[Job], machines: Sequence[Machine]) -> FloatArray:
    """P of §3.1: jobs × machines processing times, ``inf`` where a job cannot use the kind."""
    kinds = sorted({machine.kind for machine in machines})
    column_of = {kind: column for column, kind in enumerate(kinds)}
    machine_kind = np.fromiter((column_of[m.kind] for m in machines), dtype=np.int64, count=len(machines))
    return kind_times(jobs, kinds)[:, machine_kind]


def delay_matrix(*, available: FloatArray, arrival: FloatArray) -> FloatArray:
    """D of §3.2: ``D(j, i) = ω(i) - a(j)`` (jobs × machines)."""
    return available[np.newaxis, :] - arrival[:, np.newaxis]


def paper_cost_matrix(processing: FloatArray, delay: FloatArray) -> FloatArray:
    """Q = [P 2P … nP] + [D D … D] exactly as §3.2 writes it: n positions on every machine, column
    ``m(k-1) + i`` for position ``k`` of machine ``i``. Kept as the reference the bounded layout
    is tested against; :func:`slot_cost_matrix` is what the solver uses."""
    jobs, machines = processing.shape
    multiples = np.repeat(np.arange(1, jobs + 1, dtype=np.float64), machines)
    cost: FloatArray = np.tile(processing, (1, jobs)) * multiples + np.tile(delay, (1, jobs))
    return cost


def slot_cost_matrix(*, times: FloatArray, slots: Slots, delay: FloatArray) -> FloatArray:
    """Q restricted to ``slots``, without the ``-a(j)`` half of D.

    ``-a(j)`` is the same in every column of row ``j`` and every job is matched exactly once, so
    it shifts every matching's cost by the same ``Σ a(j)`` and cannot change which one is
    cheapest; leaving it out saves a pass over the matrix. ``delay`` is ``ω(i)`` (per machine,
    best measured from ``now`` so that large clock values do not swamp processing times).
    """
    jobs = times.shape[0]
    cost = np.empty((jobs, slots.count), dtype=np.float64)
    # Slots are grouped by kind, so each kind is one contiguous block written by an outer
    # product and an add: two streaming passes instead of a gather over jobs × slots.
    for kind in range(slots.kind_bounds.shape[0] - 1):
        start, stop = int(slots.kind_bounds[kind]), int(slots.kind_bounds[kind + 1])
        if start == stop:
            continue
        block = cost[:, start:stop]
        np.multiply(times[:, kind, np.newaxis], slots.position[np.newaxis, start:stop], out=block)
        waits = delay[slots.machine[start:stop]]
        if waits.any():  # idle machines (the usual case) wait 0: skip a pass over the block
            block += waits
    return cost
