"""``cellfit simulate`` as a cluster admin evaluating policies would misuse it: options that
cannot change a trace's run are refused naming the option (exit 2) instead of being ignored, and
a trace is read as spreadsheets write it."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.simulator.cli import main
from scheduler.simulator.fitgpp.trace import load_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "scheduler" / "simulator" / "examples"
TRACE = ["--trace", str(EXAMPLES / "trace.csv"), "--nodes", "2", "--policies", "fifo", "--no-progress"]


def refusal(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(args)
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.out == "" and captured.err.count("\n") == 1
    return captured.err


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--te-share", "0.5"], "--te-share"),
        (["--gp-scale", "2"], "--gp-scale"),
        (["--set", "te.gpus.mean=2"], "--set"),
        (["--load", "1.5"], "--load"),
        (["--jobs", "500"], "--jobs"),
        (["--sweep", "te-share", "--sweep-values", "0.1,0.2"], "--sweep"),
        (["--sweep", "gp-scale", "--sweep-values", "1,2"], "--sweep"),
    ],
)
def test_options_a_trace_run_cannot_use_are_refused(
    extra: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each was ignored: the tables came out as without it, as if it had been applied.
    err = refusal([*TRACE, *extra], capsys)
    assert f"cellfit simulate: {option}" in err


def test_the_options_a_trace_run_uses_still_run(capsys: pytest.CaptureFixture[str]) -> None:
    trace_jobs = len(load_trace(EXAMPLES / "trace.csv"))
    assert main([*TRACE, "--jobs", str(trace_jobs - 1)]) == 0
    # fifo-load arrivals take the trace's jobs and hold --load, so --load counts there.
    assert main([*TRACE, "--arrivals", "fifo-load", "--load", "1.5"]) == 0
    assert "Table 1" in capsys.readouterr().out


def test_a_csv_saved_with_a_byte_order_mark_keeps_its_first_column(tmp_path: Path) -> None:
    # Excel's "CSV UTF-8" starts with a BOM: the header's first name became "\ufeffid", the
    # optional id column was not found and every job was renamed job-<row> without a word.
    source = (EXAMPLES / "trace.csv").read_text(encoding="utf-8")
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeff".encode() + source.replace("\n", "\r\n").encode())
    assert [job.job_id for job in load_trace(path)] == [job.job_id for job in load_trace(EXAMPLES / "trace.csv")]
