"""Trace files: the documented examples, every error naming its line (CSV) or index (JSON) and
field, and writing a trace back."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.core.resources import Resources
from scheduler.preemption import JobClass
from scheduler.simulator.errors import TraceError
from scheduler.simulator.fitgpp.trace import dump_trace, load_trace, parse_csv_trace, parse_json_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "scheduler" / "simulator" / "examples"
HEADER = "submit_time,class,cpu,memory,gpu,duration,grace_period\n"
GIB = 2**30


def test_the_examples_parse_and_agree() -> None:
    csv_jobs = load_trace(EXAMPLES / "trace.csv")
    json_jobs = load_trace(EXAMPLES / "trace.json")
    assert csv_jobs == json_jobs
    assert len(csv_jobs) == 10
    first = csv_jobs[0]
    assert first.job_id == "train-resnet"
    assert first.job_class is JobClass.BEST_EFFORT
    assert first.demand == Resources(8000, 64 * GIB, 4)
    assert (first.submit_time, first.duration, first.grace_period) == (0.0, 3600.0, 180.0)
    notebook = next(job for job in csv_jobs if job.job_id == "notebook-eval")
    assert notebook.demand == Resources(500, 4 * GIB, 0) and notebook.job_class is JobClass.TRIAL


def test_aliases_defaults_and_blank_lines() -> None:
    jobs = parse_csv_trace(HEADER + "0,TE,1,1Gi,0,10,0\n\n5.5,be,2,2147483648,1,20,3\n")
    assert [job.job_id for job in jobs] == ["job-0", "job-1"]
    assert [job.job_class for job in jobs] == [JobClass.TRIAL, JobClass.BEST_EFFORT]
    assert jobs[1].demand.memory_bytes == 2 * GIB


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("submit_time,class,cpu,memory,gpu,grace_period\n0,trial,1,1Gi,0,0\n", r"trace.csv line 1: missing column 'duration'"),
        ("", r"trace.csv line 1: empty file"),
        (HEADER, r"trace.csv: no jobs"),
        (HEADER + "0,trial,1,1Gi,0,10,0\n0,trial,1,1Gi,0,-3,0\n", r"trace.csv line 3: duration: '-3' is negative"),
        (HEADER + "0,trial,1,1Gi,0,0,0\n", r"trace.csv line 2: duration: must be more than 0 seconds"),
        (HEADER + "-1,trial,1,1Gi,0,10,0\n", r"trace.csv line 2: submit_time: '-1' is negative"),
        (HEADER + "0,trial,1,1Gi,0,10,-5\n", r"trace.csv line 2: grace_period: '-5' is negative"),
        (HEADER + "0,trial,1,1Gi,0,ten,0\n", r"trace.csv line 2: duration: 'ten' is not a number of seconds"),
        (HEADER + "0,trial,1,1Gi,0,nan,0\n", r"trace.csv line 2: duration: 'nan' is not finite"),
        (HEADER + "0,urgent,1,1Gi,0,10,0\n", r"trace.csv line 2: class: 'urgent' is not 'trial' or 'best-effort'"),
        (HEADER + "0,trial,lots,1Gi,0,10,0\n", r"trace.csv line 2: cpu: 'lots' is not a Kubernetes quantity"),
        (HEADER + "0,trial,1,1Gi,1.5,10,0\n", r"trace.csv line 2: gpu: '1.5' is not a whole number of devices"),
        (HEADER + "0,trial,1,-1Gi,0,10,0\n", r"trace.csv line 2: memory: '-1Gi' is negative"),
        (HEADER + "0,trial,1,,0,10,0\n", r"trace.csv line 2: memory: missing value"),
        (HEADER + "0,trial,1,1Gi,0,10,0,extra\n", r"trace.csv line 2: more values than columns"),
        ("id," + HEADER + "a,0,trial,1,1Gi,0,10,0\na,1,trial,1,1Gi,0,10,0\n", r"trace.csv line 3: id: 'a' already used at trace.csv line 2"),
    ],
)
def test_csv_errors_name_the_line_and_field(text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        parse_csv_trace(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"jobs": [{"submit_time": 0}]}', r"trace.json jobs\[0\]: missing field 'class'"),
        ('[{"submit_time": 0, "class": "trial", "cpu": 1, "memory": "1Gi", "gpu": 0, "duration": 10, "grace_period": 0}, '
         '{"submit_time": 0, "class": "trial", "cpu": 1, "memory": "1Gi", "gpu": 0, "duration": -1, "grace_period": 0}]',
         r"trace.json jobs\[1\]: duration: -1 is negative"),
        ('[{"submit_time": true, "class": "trial", "cpu": 1, "memory": "1Gi", "gpu": 0, "duration": 1, "grace_period": 0}]',
         r"jobs\[0\]: submit_time: True is not a number"),
        ("[1, 2]", r"trace.json jobs\[0\]: expected an object"),
        ('{"jobs": 3}', r"expected a list of jobs"),
        ('{"jobs": [\n  {,}\n]}', r"trace.json line 2: not JSON"),
    ],
)
def test_json_errors_name_the_index_and_field(text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        parse_json_trace(text)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(tmp_path / "missing.csv")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TraceError, match="not UTF-8"):
        load_trace(binary)


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_a_written_trace_reads_back(tmp_path: Path, suffix: str) -> None:
    jobs = load_trace(EXAMPLES / "trace.csv")
    path = tmp_path / f"out{suffix}"
    dump_trace(jobs, path)
    assert load_trace(path) == jobs
