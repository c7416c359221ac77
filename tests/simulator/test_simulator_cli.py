"""``cellfit simulate`` (``python -m scheduler.simulator.cli``): tables, the JSON document, plots,
sweeps, and one-line errors with exit code 2 for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.simulator.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "scheduler" / "simulator" / "examples"
SMALL = ["--jobs", "300", "--nodes", "4", "--no-progress"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_tables_and_json_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "out.json"
    code, out, err = run_cli([*SMALL, "--repeat", "2", "--table4", "--paper", "--output-json", str(out_json)], capsys)
    assert code == 0, err
    for title in ("Table 1", "Table 2", "Table 3", "Table 4", "paper fitgpp", "fitgpp vs fifo"):
        assert title in out
    assert "events/s" in err
    document = json.loads(out_json.read_text())
    assert list(document) == ["fifo", "lrtp", "rand", "fitgpp"]
    for policy, entry in document.items():
        for job_class in ("te", "be"):
            assert set(entry[job_class]["slowdown"]) == {"p50", "p95", "p99"}
            assert entry[job_class]["slowdown"]["p50"] >= 1.0
        assert 0.0 <= entry["preempted_fraction"] <= 1.0
        assert {"p50", "p95"} <= set(entry["rescheduling_interval_minutes"])
        assert entry["jobs"] == 300
        assert entry["seeds"] == [1, 2] and len(entry["per_seed"]) == 2
        assert entry["settings"]["s"] == 4.0 and entry["settings"]["P"] == 1
        assert ("unlimited_preemptions" in entry) == (policy != "fifo")
    assert document["fifo"]["preempted_fraction"] == 0.0


def test_same_seed_same_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [tmp_path / f"run{i}.json" for i in range(3)]
    for path, seed in zip(paths, ("5", "5", "6")):
        code, _, err = run_cli([*SMALL, "--policies", "fifo,rand", "--seed", seed, "--output-json", str(path)], capsys)
        assert code == 0, err
    first, again, other = (json.loads(path.read_text()) for path in paths)
    assert first == again
    assert first != other


def test_trace_input_plots_and_written_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    written = tmp_path / "arrivals.csv"
    code, out, err = run_cli(
        [
            "--trace", str(EXAMPLES / "trace.csv"), "--nodes", "2", "--no-progress",
            "--plots", str(tmp_path / "figs"), "--write-trace", str(written),
        ],
        capsys,
    )
    assert code == 0, err
    assert (tmp_path / "figs" / "slowdown.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert written.read_text().startswith("id,submit_time,class,cpu,memory,gpu,duration,grace_period")
    # FitGpp suspends the small job with the short grace period; LRTP the longest remaining one.
    assert "fitgpp vs lrtp" in out


@pytest.mark.parametrize(("sweep", "values"), [("s", "0,4"), ("P", "1,inf"), ("te-share", "0.2,0.4"), ("gp-scale", "1,2")])
def test_sweeps(sweep: str, values: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "sweep.json"
    args = ["--jobs", "150", "--nodes", "3", "--no-progress", "--sweep", sweep, "--sweep-values", values, "--output-json", str(out_json)]
    if sweep == "s":
        args += ["--plots", str(tmp_path)]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert f"Sweep over {sweep}" in out
    document = json.loads(out_json.read_text())
    assert document["sweep"] == sweep and len(document["points"]) == 2
    labels = set(document["points"][0]["policies"])
    if sweep in ("s", "P"):
        assert labels == {"fitgpp"}
    elif sweep == "te-share":
        assert labels == {"fifo", "lrtp", "rand", "fitgpp"}
    else:
        assert labels == {"fifo", "lrtp", "rand", "fitgpp", "fitgpp s=8"}
    if sweep == "P":
        assert document["points"][1]["value"] == "unlimited"
    if sweep == "s":
        assert (tmp_path / "sweep-s.png").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "fifo,sjf"], "--policies: unknown policy 'sjf' (known: fifo, lrtp, rand, fitgpp, kube)"),
        (["--jobs", "-5"], "--jobs: '-5' is less than 1"),
        (["--jobs", "many"], "--jobs: 'many' is not a whole number"),
        (["-P", "x"], "--max-preemptions: 'x' is not a whole number"),
        (["-s", "-1"], "--grace-period-weight: '-1' is out of range"),
        (["--te-share", "2"], "--te-share: '2' is not a fraction"),
        (["--load", "0"], "--load: '0' is out of range"),
        (["--sweep", "alpha"], "--sweep: unknown sweep 'alpha'"),
        (["--workload", "alibaba"], "--workload: unknown workload 'alibaba'"),
        (["--node-memory", "lots"], "--node-memory: 'lots' is not a Kubernetes quantity"),
        (["--arrivals", "trace"], "--arrivals: trace arrivals need --trace FILE"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--set", "te.gpus.mean"], "--set: 'te.gpus.mean' is not KEY=VALUE"),
        (["--set", "te.gpu.mean=2"], "--set te.gpu.mean: 'te.gpu.mean' is not a workload parameter"),
        (["--set", "be.cpu.sd=-1"], "--set be.cpu.sd: sd: needs a finite mean and sd >= 0"),
        (["--tick", "-60"], "--tick: '-60' is out of range"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code, out, err = run_cli([*args, "--no-progress"], capsys)
    except SystemExit as exit:  # argparse's own errors
        code, err = int(exit.code or 0), capsys.readouterr().err
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_trace_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text("submit_time,class,cpu,memory,gpu,duration,grace_period\n0,trial,1,1Gi,0,10,0\n0,trial,1,1Gi,0,-10,0\n")
    code, _, err = run_cli(["--trace", str(trace), "--no-progress"], capsys)
    assert code == 2
    assert err == "cellfit simulate: jobs.csv line 3: duration: '-10' is negative\n"
    trace.write_text("submit_time,class,cpu,memory,gpu,grace_period\n")
    code, _, err = run_cli(["--trace", str(trace), "--no-progress"], capsys)
    assert code == 2 and "jobs.csv line 1: missing column 'duration'" in err
    trace.write_text("submit_time,class,cpu,memory,gpu,duration,grace_period\n0,trial,1,1Gi,9,10,0\n")
    code, _, err = run_cli(["--trace", str(trace), "--no-progress"], capsys)
    assert code == 2 and "jobs.csv line 2: demand" in err and "does not fit on a node" in err


def test_runs_as_a_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler.simulator.cli", "--trace", str(EXAMPLES / "trace.json"), "--nodes", "2", "--policies", "fifo,fitgpp", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    assert "Table 1" in result.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "scheduler.simulator.cli", "--policies", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_worker_processes_give_the_same_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [tmp_path / "one.json", tmp_path / "two.json"]
    for path, workers in zip(paths, ("1", "2")):
        code, _, err = run_cli([*SMALL, "--repeat", "2", "--workers", workers, "--output-json", str(path)], capsys)
        assert code == 0, err
    assert json.loads(paths[0].read_text()) == json.loads(paths[1].read_text())


def test_progress_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["--jobs", "200", "--nodes", "3", "--policies", "fifo,fitgpp"], capsys)
    assert code == 0
    assert "[1/2] arrivals (fifo), seed 1" in err and "[2/2] fitgpp, seed 1" in err
    assert "[1/2]" not in out


ALLOX = ["--workload", "allox", "--jobs", "40"]


@pytest.mark.parametrize(
    ("workload", "option"),
    [([], "--plots"), ([], "--output-json"), ([], "--write-trace"), (ALLOX, "--plots"), (ALLOX, "--output-json")],
)
def test_a_file_that_cannot_be_written_is_one_line_and_exit_1(
    workload: list[str], option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    target = blocker / "inside"  # a path under a regular file: neither folder nor file can be made
    policies = "allox,srpt" if workload else "fifo"
    code, out, err = run_cli([*SMALL, *workload, "--policies", policies, option, str(target)], capsys)
    assert code == 1
    verb = "create" if option == "--plots" else "write"
    assert err.strip().splitlines()[-1].startswith(f"cellfit simulate: cannot {verb} {target}: ")
    if option == "--plots":
        assert out == ""  # refused before anything ran


def test_a_configuration_composes_the_engine_as_cellfit_serve_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--config: the engine is composed from the file as ``cellfit serve --config`` composes it;
    HiveD without a topology discovers its cells from the simulated nodes (one VC, ``default``,
    owning them), and its decisions are not resource fit's on the same jobs."""
    hived = tmp_path / "hived.yaml"
    hived.write_text("policy:\n  name: hived\npreemption:\n  gracePeriodWeight: 2\n")
    common = ["--jobs", "400", "--nodes", "6", "--policies", "fitgpp", "--no-progress"]
    code, out_hived, err = run_cli([*common, "--config", str(hived), "--output-json", str(tmp_path / "h.json")], capsys)
    assert code == 0, err
    code, out_fit, err = run_cli([*common, "--output-json", str(tmp_path / "f.json")], capsys)
    assert code == 0, err
    under_hived = json.loads((tmp_path / "h.json").read_text())
    under_fit = json.loads((tmp_path / "f.json").read_text())
    assert under_hived["fitgpp"]["settings"]["config"] == str(hived) and under_fit["fitgpp"]["settings"]["config"] is None
    assert under_hived["fitgpp"]["settings"]["s"] == 2.0 and under_fit["fitgpp"]["settings"]["s"] == 4.0  # the file's s
    assert under_hived["fitgpp"]["preemption_decisions"] > 0
    assert under_hived["fitgpp"]["be"] != under_fit["fitgpp"]["be"]  # HiveD places differently


def test_a_configuration_that_cannot_be_read_or_is_invalid_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli([*SMALL, "--config", str(tmp_path / "missing.yaml")], capsys)
    assert code == 2 and "missing.yaml: cannot read" in err and err.count("\n") == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("preemption:\n  gracePeriodWeight: -1\n")
    code, _, err = run_cli([*SMALL, "--config", str(bad)], capsys)
    assert code == 2 and "gracePeriodWeight" in err and err.count("\n") == 1
    code, _, err = run_cli(["--workload", "allox", "--config", str(bad), "--no-progress"], capsys)
    assert code == 2 and "gracePeriodWeight" in err and err.count("\n") == 1  # allox composes from it too
    code, _, err = run_cli(["--workload", "hived", "--config", str(bad), "--no-progress"], capsys)
    assert code == 2 and "--config: not an option of workload hived" in err
