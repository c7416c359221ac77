"""The runs of an experiment, whichever the workload: every line of a table (a policy, a
variant, a setting) on every seed, one simulation each, in this process or in worker processes.
Each run is deterministic on its own, so ``workers`` > 1 gives the same results in the same
order; it only changes when they arrive. The workloads' experiments say what their runs are
(:func:`run_grid`'s ``pending``) and how one is simulated; what they do around the runs (the
``fitgpp`` workload's closed FIFO loop, the tables) stays theirs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from typing import TypeVar

# Progress: (runs finished, runs in all, jobs finished in the current run, its jobs, label).
ProgressCallback = Callable[[int, int, int, int, str], None]
# One run's progress: (jobs finished, its jobs).
RunProgress = Callable[[int, int], None]

Args = TypeVar("Args")
Result = TypeVar("Result")


def run_label(label: str, seed: int) -> str:
    """How the progress bar names a run: ``fitgpp, seed 2``."""
    return f"{label}, seed {seed}"


def run_reporter(progress: ProgressCallback | None, finished: int, total: int, label: str) -> RunProgress | None:
    """A run's progress (jobs finished of its jobs) as the experiment's progress bar reads it,
    ``finished`` runs of ``total`` done before it."""
    if progress is None:
        return None

    def report(jobs_done: int, jobs_total: int) -> None:
        progress(finished, total, jobs_done, jobs_total, label)

    return report


def run_grid(
    pending: Sequence[tuple[str, int, Args]],
    *,
    run: Callable[[Args, RunProgress | None], Result],
    runs: Mapping[str, list[Result]],
    task: Callable[[Args], Result] | None = None,
    workers: int = 1,
    progress: ProgressCallback | None = None,
    finished: int = 0,
    total: int | None = None,
) -> None:
    """Run every ``(label, seed, args)`` of ``pending``, in its order, and append each result to
    ``runs[label]``.

    ``run`` simulates one in this process, given a reporter of its jobs' progress (None when
    ``progress`` is). ``workers`` > 1 (and more than one run) maps ``task`` over the args in a
    process pool instead: ``task`` and the args must pickle; the default ``task`` is ``run``
    without a reporter, for a module-level ``run``. ``progress`` hears of every run as it ends
    (jobs 0 of 0) and, in this process, of its jobs as they finish; ``finished`` runs of
    ``total`` (default: those of ``pending``) count as done before the first (the ``fitgpp``
    workload's closed FIFO loops)."""
    count = finished + len(pending) if total is None else total
    done = finished

    def ran(label: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, count, 0, 0, label)

    if workers > 1 and len(pending) > 1:
        # No more processes than runs: the pool forks every worker it may have at once.
        with ProcessPoolExecutor(max_workers=min(workers, len(pending))) as pool:
            each = task if task is not None else partial(_unreported, run)
            for (label, seed, _), result in zip(pending, pool.map(each, [args for _, _, args in pending])):
                runs[label].append(result)
                ran(run_label(label, seed))
    else:
        for label, seed, args in pending:
            name = run_label(label, seed)
            runs[label].append(run(args, run_reporter(progress, done, count, name)))
            ran(name)


def _unreported(run: Callable[[Args, RunProgress | None], Result], args: Args) -> Result:
    return run(args, None)
