"""``cellfit allox`` as an admin would misuse it: each bad file is one error line naming the field
(exit 2), never a traceback, an ``Infinity`` in the JSON, or a value silently dropped."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from scheduler.matching import cli


def instance(*jobs: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "machines": [{"name": "gpu-0", "kind": "gpu"}, {"name": "cpu-0", "kind": "cpu"}],
        "jobs": list(jobs),
        **top,
    }


def job(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "user": "u1", "arrival": 0, "processing_time": {"gpu": 10, "cpu": 15}, **fields}


def run_tool(tmp_path: Path, text: str) -> tuple[int, str]:
    source = tmp_path / "in.json"
    source.write_text(text)
    parser = argparse.ArgumentParser(prog="cellfit allox")
    cli.add_arguments(parser)
    out = tmp_path / "out.json"
    code = cli.run(parser.parse_args(["--input", str(source), "--output", str(out)]))
    return code, out.read_text() if out.exists() else ""


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], document: Any) -> str:
    text = document if isinstance(document, str) else json.dumps(document)
    code, out = run_tool(tmp_path, text)
    err = capsys.readouterr().err
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_times_too_large_to_add_up_are_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Three jobs of 1e308 s on one machine's queue overflowed the matching's costs: scipy raised
    # "cost matrix is infeasible" as a traceback.
    jobs = [job(f"j{i}", processing_time={"gpu": 1e308, "cpu": 1e308}) for i in range(3)]
    err = refused(tmp_path, capsys, instance(*jobs))
    assert "jobs[0].processing_time.gpu" in err


def test_a_busy_until_past_any_real_time_is_refused_not_printed_as_infinity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It used to print "start": Infinity, which no JSON reader accepts.
    document = instance(job("j1", processing_time={"gpu": 1e308}), busy_until={"gpu-0": 1e308})
    err = refused(tmp_path, capsys, document)
    assert "busy_until.gpu-0" in err


def test_a_processing_time_on_a_kind_no_machine_has_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "GPU" for "gpu": the job was silently scheduled as CPU-only.
    err = refused(tmp_path, capsys, instance(job("j1", processing_time={"cpu": 15, "GPU": 1})))
    assert "jobs[0].processing_time.GPU" in err
    assert "'GPU'" in err and "cpu, gpu" in err


def test_a_duplicate_key_is_refused_naming_where(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # JSON readers keep the last of two equal keys: the first time was dropped without a word.
    text = json.dumps(instance(job("j1"))).replace('"gpu": 10', '"cpu": 3, "gpu": 10')
    assert text.count('"cpu": ') == 2
    err = refused(tmp_path, capsys, text)
    assert "jobs[0].processing_time.cpu" in err and "duplicate key" in err


def test_a_demand_of_a_resource_the_capacity_lacks_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # capacity.gpu defaults to 0 and a share over 0 was skipped: the job's GPU counted for
    # nothing in fairness.
    document = instance(
        job("j1", demand={"gpu": {"gpu": 1, "cpu": 1}}), alpha=0.5, capacity={"cpu": 40, "memory": 64}
    )
    err = refused(tmp_path, capsys, document)
    assert "jobs[0].demand.gpu.gpu" in err and "capacity.gpu" in err


def test_a_demand_larger_than_the_capacity_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = instance(job("j1", demand={"gpu": {"gpu": 4}}), alpha=0.5, capacity={"gpu": 2, "cpu": 8})
    err = refused(tmp_path, capsys, document)
    assert "jobs[0].demand.gpu.gpu" in err and "capacity.gpu" in err


def test_sound_instances_still_schedule(tmp_path: Path) -> None:
    document = instance(
        job("j1", demand={"gpu": {"gpu": 1, "cpu": 1}}),
        job("j2", arrival=5, processing_time={"gpu": 4}),
        alpha=0.5,
        capacity={"cpu": 8, "gpu": 1, "memory": 0},
        busy_until={"gpu-0": 1e9},
    )
    code, out = run_tool(tmp_path, json.dumps(document))
    assert code == 0
    schedule = {entry["job"]: entry for entry in json.loads(out)["schedule"]}
    assert schedule["j1"]["kind"] == "cpu"
    assert schedule["j2"]["start"] == 1e9


def test_timeout_without_allox_plus_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --timeout only changes allox+; under the default policy it was ignored without a word.
    source = tmp_path / "in.json"
    source.write_text(json.dumps(instance(job("j1"))))
    assert cli.main(["--input", str(source), "--timeout", "30"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--timeout" in captured.err and "allox+" in captured.err
    assert cli.main(["--input", str(source), "--timeout", "30", "--policy", "allox+"]) == 0


def test_an_output_over_the_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The instance was replaced by its schedule.
    source = tmp_path / "in.json"
    text = json.dumps(instance(job("j1")))
    source.write_text(text)
    assert cli.main(["--input", str(source), "--output", str(tmp_path / "." / "in.json")]) == 2
    err = capsys.readouterr().err
    assert "--output" in err and "--input" in err
    assert source.read_text() == text
