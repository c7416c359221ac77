"""Algorithm 2's waiting rows (``allox._Left``): the counts §4.4's raise reads, and the plans
written without solving, stay those of the jobs and the machines as they are now, however
the caller moves them (jobs started, a machine's wait changed in place)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scheduler.matching.allox import _Left
from scheduler.matching.model import Job, Machine
from scheduler.matching.solve import fleet, prepare_on, rows_on, solve


def jobs_and_machines(rng: random.Random) -> tuple[list[Job], list[Machine]]:
    machines = [Machine(name=f"{kind}-{i}", kind=kind) for kind in ("gpu", "cpu", "tpu") for i in range(rng.randint(1, 8))]
    rng.shuffle(machines)
    jobs = []
    for index in range(rng.randint(1, 30)):
        times = {kind: rng.uniform(10, 300) for kind in ("gpu", "cpu", "tpu", "fpga") if rng.random() < 0.6}
        times.setdefault(rng.choice(["gpu", "cpu", "tpu"]), rng.uniform(10, 300))  # a kind of the cluster, and maybe one it lacks
        jobs.append(Job(name=f"j{index}", user=f"u{rng.randrange(5)}", arrival=0.0, processing_time=times))
    return jobs, machines


@pytest.mark.parametrize("seed", range(4))
def test_the_raise_counts_each_user_s_jobs_that_can_run_on_each_kind(seed: int) -> None:
    rng = random.Random(6950 + seed)
    for _ in range(30):
        jobs, machines = jobs_and_machines(rng)
        every_job = prepare_on(fleet(machines=machines, now=0.0), jobs)
        expected: dict[str, dict[str, int]] = {kind: {} for kind in every_job.kinds}
        for job in jobs:
            for kind in job.processing_time:
                if kind in expected:
                    expected[kind][job.user] = expected[kind].get(job.user, 0) + 1
        assert _Left(every_job).runnable() == expected


@pytest.mark.parametrize("seed", range(4))
def test_a_plan_written_without_solving_reads_the_waits_as_they_are_when_asked(seed: int) -> None:
    """The caller moves one array of waits in place between its questions: each answer is the
    one a new ``_Left`` gives, and a written plan is the one solving gives."""
    rng = random.Random(6970 + seed)
    written = 0
    for _ in range(30):
        jobs, machines = jobs_and_machines(rng)
        arrays = fleet(machines=machines, now=0.0)
        every_job = prepare_on(arrays, jobs)
        left = _Left(every_job)
        delay = arrays.delay.copy()
        for _ in range(6):
            rows = np.flatnonzero(np.array([rng.random() < 0.5 for _ in jobs])).astype(np.int64)
            kept, fresh = left.uncontended(rows, delay, arrays), _Left(every_job).uncontended(rows, delay, arrays)
            assert (kept is None) == (fresh is None)
            if kept is not None and fresh is not None:
                written += 1
                assert kept.bounds is not None and fresh.bounds is not None and kept.queued is not None and fresh.queued is not None
                assert kept.bounds.tolist() == fresh.bounds.tolist() and kept.queued.tolist() == fresh.queued.tolist()
                moved = arrays.with_available({int(m): float(d) for m, d in enumerate(delay.tolist())})
                queues = solve(rows_on(every_job, rows, moved))
                assert kept.bounds.tolist() == queues.bounds.tolist()
                assert rows[queues.job].tolist() == kept.queued.tolist()
            delay[rng.randrange(len(machines))] = float(rng.choice([0, 60, 120]))  # a machine starts or frees, in place
    assert written > 20
