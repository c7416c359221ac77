"""The runs of an experiment (scheduler/simulator/grid.py): every (label, seed) in order, grouped
by label, in this process or in worker processes, with the progress bar's calls."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from scheduler.simulator.grid import run_grid, run_label, run_reporter

Call = tuple[int, int, int, int, str]


def _square(args: tuple[int, int], on_progress: Callable[[int, int], None] | None) -> int:
    """A stand-in simulation of ``jobs`` jobs that reports each job and returns value²."""
    value, jobs = args
    for done in range(1, jobs + 1):
        if on_progress is not None:
            on_progress(done, jobs)
    return value * value


def _negated(args: tuple[int, int]) -> int:
    return -args[0]


PENDING = [("a", 1, (1, 2)), ("b", 1, (2, 2)), ("a", 2, (3, 2)), ("b", 2, (4, 2))]


def _grid(
    workers: int, *, task: Callable[[tuple[int, int]], int] | None = None, finished: int = 0, total: int | None = None
) -> tuple[dict[str, list[int]], list[Call]]:
    calls: list[Call] = []
    runs: dict[str, list[int]] = {"a": [], "b": []}
    run_grid(
        PENDING,
        run=_square,
        runs=runs,
        workers=workers,
        progress=lambda *call: calls.append(call),
        task=task,
        finished=finished,
        total=total,
    )
    return runs, calls


def test_in_process_every_run_in_order_with_its_jobs_progress() -> None:
    runs, calls = _grid(1)
    assert runs == {"a": [1, 9], "b": [4, 16]}
    # Per run: its two jobs with the runs finished before it, then its end.
    names = ["a, seed 1", "b, seed 1", "a, seed 2", "b, seed 2"]
    assert calls == [call for i, name in enumerate(names) for call in ((i, 4, 1, 2, name), (i, 4, 2, 2, name), (i + 1, 4, 0, 0, name))]


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_give_the_same_results_and_each_run_s_end(workers: int) -> None:
    serial, serial_calls = _grid(1)
    parallel, calls = _grid(workers)
    assert parallel == serial
    assert calls == [call for call in serial_calls if call[3] == 0]


def test_the_pool_runs_the_task_given() -> None:
    runs, _ = _grid(2, task=_negated)
    assert runs == {"a": [-1, -3], "b": [-2, -4]}
    in_process, _ = _grid(1, task=_negated)
    assert in_process == {"a": [1, 9], "b": [4, 16]}  # the task is for worker processes only


def test_runs_done_before_count_towards_the_total() -> None:
    _, calls = _grid(1, finished=2, total=6)
    assert [call[:2] for call in calls if call[3] == 0] == [(3, 6), (4, 6), (5, 6), (6, 6)]
    assert calls[0] == (2, 6, 1, 2, "a, seed 1")


def test_one_run_stays_in_this_process() -> None:
    calls: list[Call] = []
    runs: dict[str, list[int]] = {"x": []}
    run_grid([("x", 5, (3, 1))], run=_square, runs=runs, workers=4, progress=lambda *call: calls.append(call))
    assert runs == {"x": [9]}
    assert calls == [(0, 1, 1, 1, "x, seed 5"), (1, 1, 0, 0, "x, seed 5")]


def test_without_progress_no_reporter() -> None:
    seen: list[object] = []

    def run(args: int, on_progress: Callable[[int, int], None] | None) -> int:
        seen.append(on_progress)
        return args

    runs: dict[str, list[int]] = {"x": []}
    run_grid([("x", 1, 7), ("x", 2, 8)], run=run, runs=runs)
    assert runs == {"x": [7, 8]} and seen == [None, None]
    assert run_reporter(None, 0, 1, "x") is None
    assert run_label("arrivals (fifo)", 3) == "arrivals (fifo), seed 3"
