"""Trace files: the jobs to simulate, one per CSV row or JSON object.

Columns / keys (all required except ``id``):

============== ==============================================================================
``submit_time`` seconds from the start of the trace (>= 0)
``class``       ``trial`` or ``best-effort`` (the ``cellfit.io/job-class`` values; ``TE`` and
                ``BE`` are accepted too)
``cpu``         a Kubernetes CPU quantity: ``4`` (cores), ``500m``
``memory``      a Kubernetes memory quantity: ``16Gi``, ``512Mi``; a bare number is bytes
``gpu``         whole GPUs (``nvidia.com/gpu``)
``duration``    seconds of work (> 0: the slowdown divides by it)
``grace_period`` seconds the job needs to checkpoint when preempted (>= 0)
``id``          optional job name; default ``job-<row>``
============== ==============================================================================

Every time is at most 1e12 seconds; other columns or keys are errors (a CSV's unnamed trailing
column aside). JSON is a list of such objects, or ``{"jobs": [...]}``. Every error names the
file and the CSV line (the header is line 1) or the JSON index, and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Final, Iterable, Mapping, Sequence

from scheduler.core.resources import Resources, cpu_millis, device_count, format_bytes, format_cpu, whole_units
from scheduler.errors import InvalidQuantity
from scheduler.preemption.model import JobClass
from scheduler.simulator.errors import TraceError
from scheduler.simulator.fitgpp.workload import JobSpec

# About 31,700 years: a time beyond it is a mistake in the file, and sums of such times overflow
# to infinity (every slowdown NaN, and NaN in --output-json, which is not JSON).
MAX_SECONDS: Final = 1e12
COLUMNS: Final = ("submit_time", "class", "cpu", "memory", "gpu", "duration", "grace_period")
OPTIONAL_COLUMNS: Final = ("id",)
_CLASSES: Final = {
    "trial": JobClass.TRIAL,
    "te": JobClass.TRIAL,
    "best-effort": JobClass.BEST_EFFORT,
    "be": JobClass.BEST_EFFORT,
}


def load_trace(path: str | Path) -> list[JobSpec]:
    """Read a ``.csv`` or ``.json`` trace (by extension; anything else is tried as CSV)."""
    name = Path(path).name
    try:
        # utf-8-sig: a spreadsheet's "CSV UTF-8" starts with a byte order mark, which would
        # otherwise become part of the first column's name.
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as error:
        raise TraceError(f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise TraceError(f"{name}: not UTF-8 text") from None
    if str(path).lower().endswith(".json"):
        return parse_json_trace(text, name=name)
    return parse_csv_trace(text, name=name)


def parse_csv_trace(text: str, *, name: str = "trace.csv") -> list[JobSpec]:
    reader = csv.DictReader(io.StringIO(text))
    header = [column.strip() for column in (reader.fieldnames or [])]
    if not header:
        raise TraceError(f"{name} line 1: empty file, expected a header with {', '.join(COLUMNS)}")
    missing = [column for column in COLUMNS if column not in header]
    if missing:
        raise TraceError(f"{name} line 1: missing column {missing[0]!r} (columns: {', '.join(COLUMNS)}; optional: id)")
    _refuse_unknown(header, where=f"{name} line 1", noun="column")
    reader.fieldnames = header
    jobs: list[JobSpec] = []
    try:
        for row in reader:
            where = f"{name} line {reader.line_num}"
            if None in row:
                raise TraceError(f"{where}: more values than columns")
            if all(not (value or "").strip() for value in row.values()):
                continue  # blank line
            jobs.append(_job(row, where=where, number=len(jobs)))
    except csv.Error as error:
        raise TraceError(f"{name} line {reader.line_num}: {error}") from None
    return _checked(jobs, name)


def parse_json_trace(text: str, *, name: str = "trace.json") -> list[JobSpec]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise TraceError(f"{name} line {error.lineno}: not JSON ({error.msg})") from None
    items = document.get("jobs") if isinstance(document, dict) else document
    if not isinstance(items, list):
        raise TraceError(f"{name}: expected a list of jobs or {{\"jobs\": [...]}}")
    jobs: list[JobSpec] = []
    for index, item in enumerate(items):
        where = f"{name} jobs[{index}]"
        if not isinstance(item, dict):
            raise TraceError(f"{where}: expected an object with {', '.join(COLUMNS)}")
        for column in COLUMNS:
            if column not in item:
                raise TraceError(f"{where}: missing field {column!r}")
        _refuse_unknown(item, where=where, noun="field")
        jobs.append(_job(item, where=where, number=index))
    return _checked(jobs, name)


def _refuse_unknown(names: Iterable[object], *, where: str, noun: str) -> None:
    # A column the simulator does not read ("gpus" beside "gpu", a "priority") would be ignored
    # while the run looked as if it had read it.
    for column in names:
        if column and column not in COLUMNS and column not in OPTIONAL_COLUMNS:
            raise TraceError(f"{where}: unknown {noun} {column!r} (columns: {', '.join(COLUMNS)}; optional: id)")


def _checked(jobs: list[JobSpec], name: str) -> list[JobSpec]:
    seen: dict[str, str] = {}
    for job in jobs:
        if job.job_id in seen:
            raise TraceError(f"{job.origin}: id: {job.job_id!r} already used at {seen[job.job_id]}")
        seen[job.job_id] = job.origin
    if not jobs:
        raise TraceError(f"{name}: no jobs")
    return jobs


def _job(row: Mapping[str, object], *, where: str, number: int) -> JobSpec:
    def field(column: str) -> object:
        value = row.get(column)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise TraceError(f"{where}: {column}: missing value")
        return value.strip() if isinstance(value, str) else value

    submit = _number(field("submit_time"), where=where, column="submit_time", positive=False)
    duration = _number(field("duration"), where=where, column="duration", positive=True)
    grace = _number(field("grace_period"), where=where, column="grace_period", positive=False)
    raw_class = field("class")
    job_class = _CLASSES.get(str(raw_class).lower()) if isinstance(raw_class, str) else None
    if job_class is None:
        raise TraceError(f"{where}: class: {raw_class!r} is not 'trial' or 'best-effort' (or TE/BE)")
    try:
        demand = Resources(
            cpu_millis=cpu_millis(_quantity(field("cpu")), field=f"{where}: cpu"),
            memory_bytes=whole_units(_quantity(field("memory")), field=f"{where}: memory"),
            gpus=device_count(_quantity(field("gpu")), field=f"{where}: gpu"),
        )
    except InvalidQuantity as error:
        raise TraceError(str(error)) from None
    raw_id = row.get("id")
    job_id = str(raw_id).strip() if raw_id is not None and str(raw_id).strip() else f"job-{number}"
    return JobSpec(
        job_id=job_id,
        submit_time=submit,
        job_class=job_class,
        demand=demand,
        duration=duration,
        grace_period=grace,
        origin=where,
    )


def _quantity(value: object) -> str | int | float:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    return str(value)


def _number(value: object, *, where: str, column: str, positive: bool) -> float:
    if isinstance(value, bool):
        raise TraceError(f"{where}: {column}: {value!r} is not a number of seconds")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TraceError(f"{where}: {column}: {value!r} is not a number of seconds") from None
    if not math.isfinite(number):
        raise TraceError(f"{where}: {column}: {value!r} is not finite")
    if number < 0:
        raise TraceError(f"{where}: {column}: {value!r} is negative")
    if number > MAX_SECONDS:
        raise TraceError(f"{where}: {column}: {value!r} is more than {MAX_SECONDS:g} seconds")
    if positive and number == 0:
        raise TraceError(f"{where}: {column}: must be more than 0 seconds")
    return number


# ---------------------------------------------------------------------- writing


def trace_rows(jobs: Iterable[JobSpec]) -> list[dict[str, str | float | int]]:
    return [
        {
            "id": job.job_id,
            "submit_time": round(job.submit_time, 3),
            "class": job.job_class.value,
            "cpu": format_cpu(job.demand.cpu_millis),
            "memory": format_bytes(job.demand.memory_bytes),
            "gpu": job.demand.gpus,
            "duration": round(job.duration, 3),
            "grace_period": round(job.grace_period, 3),
        }
        for job in jobs
    ]


def dump_trace(jobs: Sequence[JobSpec], path: str | Path) -> None:
    """Write ``jobs`` as CSV, or JSON when ``path`` ends in ``.json``. Times are rounded to
    milliseconds, so a trace read back replays the same schedule up to that rounding."""
    rows = trace_rows(jobs)
    if str(path).lower().endswith(".json"):
        Path(path).write_text(json.dumps({"jobs": rows}, indent=1) + "\n", encoding="utf-8")
        return
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", *COLUMNS])
        writer.writeheader()
        writer.writerows(rows)
