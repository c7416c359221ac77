"""What every ``cellfit simulate`` run does around its experiment, whichever the workload: the
plots folder made before anything runs (a bad path fails in a second, not after an hour of
simulation), a progress bar, the table on stdout, the simulated events per second on stderr,
the PNGs and the ``--output-json`` document. A workload's command path only says how to run
its experiment or sweep and what that produced (:class:`RunReport`); a ``fitgpp`` or ``allox``
sweep's report is put together here once (:func:`sweep_producer`)."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Final, Mapping, Protocol, Sequence, TypeVar

from scheduler.errors import CellfitError
from scheduler.simulator.options import fail_option
from scheduler.simulator.progress import ProgressBar
from scheduler.simulator.report import Documented, sweep_document

PROG: Final = "cellfit simulate"


class OutputError(CellfitError):
    """A file the run was asked to write could not be written (exit 1)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """What one experiment or sweep produced."""

    table: str  # for stdout
    document: dict[str, object]  # for --output-json
    events: float  # simulated events, all runs together
    # Writes the PNG(s) into the plots folder and returns the files written.
    plot: Callable[[Path], list[Path]]


class Counted(Protocol):
    """One simulated run, or a summary of runs: the events it simulated."""

    @property
    def events(self) -> float: ...


class SweptSummary(Documented, Counted, Protocol):
    """A policy's summary at a sweep's point: ``events`` is its seeds' mean, so the sweep's
    total counts it once per seed."""

    @property
    def seeds(self) -> tuple[int, ...]: ...


class SweptPoint(Protocol):
    """A sweep's point (the ``fitgpp`` and ``allox`` workloads): the swept value, a summary per policy."""

    @property
    def value(self) -> float: ...

    @property
    def summaries(self) -> Mapping[str, SweptSummary]: ...


Point = TypeVar("Point", bound=SweptPoint)
_DrawnPoint = TypeVar("_DrawnPoint", bound=SweptPoint, contravariant=True)


class DrawsSweep(Protocol[_DrawnPoint]):
    """A workload's sweep figure: ``plot_sweep(name, points, path, title=...)``."""

    def __call__(self, name: str, points: Sequence[_DrawnPoint], path: Path, /, *, title: str) -> Path: ...


def events_in(runs: Mapping[str, Sequence[Counted]]) -> float:
    """The events of every run of every policy."""
    return sum(run.events for results in runs.values() for run in results)


def sweep_producer(
    *,
    sweep: str,
    run: Callable[[ProgressBar], Sequence[Point]],
    table: Callable[[str, Sequence[Point]], str],
    draw: DrawsSweep[Point],
    png: str,
    title: str,
    settings: Mapping[str, object],
) -> Callable[[ProgressBar], RunReport]:
    """What a ``fitgpp`` or ``allox`` sweep produces: ``run``'s points as the workload's
    ``table``, the shared sweep document and ``draw``'s figure, written as ``png`` in the plots
    folder."""

    def produce(progress: ProgressBar) -> RunReport:
        points = run(progress)
        return RunReport(
            table=table(sweep, points),
            document=sweep_document(sweep, points, settings=settings),
            events=sum(s.events * len(s.seeds) for p in points for s in p.summaries.values()),
            plot=lambda folder: [draw(sweep, points, folder / png, title=title)],
        )

    return produce


def run_and_report(
    produce: Callable[[ProgressBar], RunReport], *, plots: str | None, output_json: str | None, show_progress: bool
) -> None:
    """Run ``produce`` and report what it returns; raises :class:`OutputError` for a folder or
    file that cannot be written."""
    if output_json:
        check_output_file(output_json, option="--output-json")
    plots_dir = Path(plots) if plots else None
    if plots_dir is not None:
        try:
            plots_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputError(f"cannot create {plots_dir}: {error.strerror or error}") from None
    progress = ProgressBar(enabled=show_progress)
    started = time.perf_counter()
    try:
        report = produce(progress)
    finally:
        progress.close()
    elapsed = time.perf_counter() - started
    sys.stdout.write(report.table)
    if plots_dir is not None:
        for path in report.plot(plots_dir):
            print(f"wrote {path}", file=sys.stderr)
    print(
        f"{PROG}: {report.events:.0f} events in {elapsed:.1f} s ({report.events / max(elapsed, 1e-9):,.0f} events/s)",
        file=sys.stderr,
    )
    if output_json:
        write_text(output_json, json.dumps(report.document, indent=2) + "\n")


def write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise OutputError(f"cannot write {path}: {error.strerror or error}") from None


def check_output_file(path: str, *, option: str) -> None:
    """Refuse (:class:`OutputError`), before anything runs, a file the run could not write at its
    end: a run at the papers' sizes takes an hour, and its results would be lost."""
    target = Path(path)
    folder = target.parent
    problem = None
    if target.is_dir():
        problem = "it is a folder"
    elif not folder.is_dir():
        problem = f"{folder} is not a folder" if folder.exists() else f"no folder {folder}"
    elif not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        problem = "permission denied"
    if problem is not None:
        raise OutputError(f"cannot write {path}: {problem} ({option})")


def refuse_same_files(files: Sequence[tuple[str, str | None]]) -> None:
    """Refuse two of ``files`` (option, path or None) naming one file: an output would overwrite
    the run's input, or another output."""
    seen: dict[Path, str] = {}
    for option, path in files:
        if not path or path == "-":
            continue
        resolved = Path(path).resolve()
        if resolved in seen:
            fail_option(option, f"{path} is also the file of {seen[resolved]}")
        seen[resolved] = option
