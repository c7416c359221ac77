"""The ``allox`` tool: input validation naming fields, exit codes, output format."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scheduler.matching import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "scheduler" / "matching" / "examples" / "three-jobs.json"


def base() -> dict[str, Any]:
    return {
        "now": 0,
        "alpha": 1.0,
        "machines": [{"name": "gpu-0", "kind": "gpu"}, {"name": "cpu-0", "kind": "cpu"}],
        "jobs": [
            {"name": "j1", "user": "u1", "arrival": 0, "processing_time": {"gpu": 10, "cpu": 15}},
            {"name": "j2", "user": "u2", "arrival": 0, "processing_time": {"gpu": 8}},
        ],
        "busy_until": {},
    }


def run_tool(tmp_path: Path, document: Any, *extra: str) -> tuple[int, str]:
    source = tmp_path / "in.json"
    source.write_text(document if isinstance(document, str) else json.dumps(document))
    parser = argparse.ArgumentParser(prog="cellfit allox")
    cli.add_arguments(parser)
    out = tmp_path / "out.json"
    code = cli.run(parser.parse_args(["--input", str(source), "--output", str(out), *extra]))
    return code, out.read_text() if out.exists() else ""


def test_example_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--input", str(EXAMPLE)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["total_completion_time"] == 17
    assert document["average_completion_time"] == pytest.approx(17 / 3)
    assert set(document) == {"schedule", "total_completion_time", "average_completion_time"}
    for entry in document["schedule"]:
        assert set(entry) == {"job", "machine", "kind", "start", "finish"}
    assert {e["job"]: e["machine"] for e in document["schedule"]} in (
        {"j1": "cpu-0", "j2": "gpu-0", "j3": "gpu-0"},
        {"j1": "gpu-0", "j2": "cpu-0", "j3": "gpu-0"},
    )


def test_output_file_and_busy_machine(tmp_path: Path) -> None:
    document = base()
    document["now"] = 2
    document["busy_until"] = {"gpu-0": 12}
    code, out = run_tool(tmp_path, document)
    assert code == 0
    result = json.loads(out)
    by_job = {e["job"]: e for e in result["schedule"]}
    assert by_job["j2"] == {"job": "j2", "machine": "gpu-0", "kind": "gpu", "start": 12.0, "finish": 20.0}
    assert by_job["j1"]["machine"] == "cpu-0" and by_job["j1"]["start"] == 2.0
    # Completion measured from arrival (0): 20 + 17.
    assert result["total_completion_time"] == 37


def test_online_instance_with_fairness_and_arrivals(tmp_path: Path) -> None:
    document = base()
    document["alpha"] = 0.5
    document["jobs"].append({"name": "j3", "user": "u1", "arrival": 30, "processing_time": {"cpu": 1}})
    code, out = run_tool(tmp_path, document)
    assert code == 0
    by_job = {e["job"]: e for e in json.loads(out)["schedule"]}
    assert by_job["j3"]["start"] >= 30


def test_allox_plus_policy(tmp_path: Path) -> None:
    code, out = run_tool(tmp_path, base(), "--policy", "allox+", "--timeout", "5")
    assert code == 0
    assert len(json.loads(out)["schedule"]) == 2


def test_empty_instance(tmp_path: Path) -> None:
    code, out = run_tool(tmp_path, {"machines": [], "jobs": []})
    assert code == 0
    assert json.loads(out) == {"schedule": [], "total_completion_time": 0.0, "average_completion_time": None}


def _modified(path: str, value: Any) -> dict[str, Any]:
    document = base()
    target: Any = document
    keys = path.split("/")
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    last = keys[-1]
    if value is _DELETE:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return document


_DELETE = object()


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            _modified("jobs/1/processing_time", {"tpu": 3}),
            "jobs[1].processing_time: no machine kind in this instance can run job 'j2'",
        ),
        (_modified("jobs/0/processing_time/gpu", 0), "jobs[0].processing_time.gpu: Input should be greater than 0"),
        (_modified("jobs/0/processing_time/gpu", "10"), "jobs[0].processing_time.gpu: Input should be a valid number"),
        (_modified("jobs/0/arival", 0), "jobs[0].arival: Extra inputs are not permitted"),
        (_modified("jobs/0/user", _DELETE), "jobs[0].user: Field required"),
        (_modified("alpha", 1.5), "alpha: Input should be less than or equal to 1"),
        (_modified("busy_until", {"gpu-9": 3}), "busy_until.gpu-9: unknown machine 'gpu-9'"),
        (_modified("machines/1/name", "gpu-0"), "machines[1].name: duplicate machine name 'gpu-0'"),
        (_modified("jobs/1/name", "j1"), "jobs[1].name: duplicate job name 'j1'"),
        (_modified("jobs/0/demand", {"tpu": {"cpu": 1}}), "jobs[0].demand.tpu: job 'j1' has no processing time"),
        (_modified("jobs/0/demand", {"gpu": {"gpu": 1}}), "capacity: required when a job gives a demand"),
        (_modified("machines", _DELETE), "machines: Field required"),
        ("{not json", "input: Invalid JSON"),
        ("[]", "input: Input should be an object"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: Any, message: str
) -> None:
    code, out = run_tool(tmp_path, document)
    err = capsys.readouterr().err
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("cellfit allox: error: ")
    assert message in err


def test_demand_with_capacity_is_accepted(tmp_path: Path) -> None:
    document = _modified("jobs/0/demand", {"gpu": {"gpu": 1, "cpu": 1, "memory": 2}, "cpu": {"cpu": 20, "memory": 12}})
    document["capacity"] = {"cpu": 40, "gpu": 1, "memory": 64}
    document["alpha"] = 0.5
    code, out = run_tool(tmp_path, document)
    assert code == 0
    assert len(json.loads(out)["schedule"]) == 2


def test_missing_input_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main(["--input", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "Traceback" not in err


def test_runnable_as_a_module(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler.matching.cli", "--input", str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total_completion_time"] == 17
