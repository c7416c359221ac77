"""``solve.JobsOfRows``, the jobs of a problem made of another's rows (``rows_on``), reads as the
tuple of those jobs it stands for: length, items (negative and out of range), slices, iteration;
and a problem made of rows solves to the same queues as one prepared from those jobs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.matching.model import Job, Machine
from scheduler.matching.solve import JobsOfRows, fleet, prepare_on, rows_on, solve


def test_jobs_of_rows_read_as_the_tuple_of_those_jobs() -> None:
    rng = random.Random(8731)
    jobs = tuple(Job(name=f"j{index}", user="u", arrival=0.0, processing_time={"gpu": 1.0}) for index in range(12))
    for _ in range(200):
        rows = [rng.randrange(len(jobs)) for _ in range(rng.randint(0, 8))]
        expected = tuple(jobs[row] for row in rows)
        view = JobsOfRows(jobs, np.array(rows, dtype=np.int64))
        assert len(view) == len(expected) and tuple(view) == expected and bool(view) == bool(expected)
        for index in range(-len(expected), len(expected)):
            assert view[index] is expected[index]
        for index in (len(expected), -len(expected) - 1):
            with pytest.raises(IndexError):
                view[index]
        begin, end, step = rng.randint(-9, 9), rng.randint(-9, 9), rng.choice([1, 2, -1, -3])
        assert tuple(view[begin:end:step]) == expected[begin:end:step]


def test_a_problem_of_rows_solves_as_one_prepared_from_those_jobs() -> None:
    rng = random.Random(8732)
    machines = [Machine(name=f"g{index}", kind="gpu") for index in range(3)] + [Machine(name=f"c{index}", kind="cpu") for index in range(3)]
    arrays = fleet(machines=machines, now=0.0, busy_until={"g0": 5.0, "c1": 2.0})
    for _ in range(100):
        jobs = [Job(name=f"j{index}", user="u", arrival=0.0, processing_time={"gpu": float(rng.randint(1, 9)), "cpu": float(rng.randint(2, 40))})
                for index in range(rng.randint(1, 14))]
        every_job = prepare_on(arrays, jobs)
        rows = rng.sample(range(len(jobs)), rng.randint(1, len(jobs)))
        of_rows = solve(rows_on(every_job, rows, arrays))
        prepared = solve(prepare_on(arrays, [jobs[row] for row in rows]))
        assert of_rows.job.tolist() == prepared.job.tolist() and of_rows.bounds.tolist() == prepared.bounds.tolist()
        assert of_rows.total_completion_time == prepared.total_completion_time
