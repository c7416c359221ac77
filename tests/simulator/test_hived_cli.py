"""``cellfit simulate --workload hived``: the Markdown tables, the JSON document, the PNG, and
one-line errors (exit 2) naming the option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.simulator.cli import main

SMALL = ["--workload", "hived", "--jobs", "150", "--no-progress"]


def test_tables_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "out.json"
    code = main([*SMALL, "--repeat", "2", "--output-json", str(out_json), "--plots", str(tmp_path / "figs")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "| tenant | GPUs | jobs | private | hived | quota-spread | quota-pack |" in captured.out
    assert "| prod-a | all |" in captured.out and "| hived | 0.0% | 0.0% | 0.0% | 0.0% |" in captured.out
    assert (tmp_path / "figs" / "hived-delay.png").stat().st_size > 10_000
    document = json.loads(out_json.read_text())
    assert document["settings"]["seeds"] == [1, 2] and document["settings"]["queue"] == "fifo"
    assert list(document["results"]) == ["private", "hived", "quota-spread", "quota-pack"]
    prod_a = document["results"]["hived"]["queueing_delay"]["prod-a"]["all"]
    assert set(prod_a) == {"jobs", "mean_minutes", "p50_minutes", "p95_minutes"}
    assert prod_a == document["results"]["private"]["queueing_delay"]["prod-a"]["all"]


def test_settings_queue_and_loads_are_options(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*SMALL, "--policies", "hived,quota-pack", "--set", "hived.queue=kube", "--set", "hived.load.prod-a=0.3", "--load", "0.8"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "| tenant | GPUs | jobs | hived | quota-pack |" in captured.out
    assert "| hived | – | – | – | – |" in captured.out  # no private run to compare with


def test_load_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "sweep.json"
    code = main([*SMALL, "--sweep", "load", "--sweep-values", "0.8,1.2", "--output-json", str(out_json), "--plots", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "| load | private delay | hived delay | quota-spread delay | quota-pack delay |" in captured.out
    rows = [line for line in captured.out.splitlines() if line.startswith(("| 0.8 |", "| 1.2 |"))]
    assert len(rows) == 2
    assert (tmp_path / "hived-sweep-load.png").stat().st_size > 10_000
    document = json.loads(out_json.read_text())
    assert [point["load"] for point in document["points"]] == [0.8, 1.2]
    for point in document["points"]:
        hived, private = point["results"]["hived"], point["results"]["private"]
        assert hived["node_level_jobs"] == private["node_level_jobs"]
        assert hived["node_level_jobs_longer_than_private"] == 0.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "hived.queue=lifo"], "--set hived.queue: 'lifo' is not one of fifo, kube"),
        (["--set", "hived.load.prod-z=1"], "--set hived.load.prod-z: no tenant 'prod-z' (tenants: prod-a, prod-c, prod-e, res-f)"),
        (["--set", "hived.load.prod-a=-1"], "--set hived.load.prod-a: '-1' is out of range"),
        (["--set", "te.gpus.mean=2"], "--set te.gpus.mean: 'te.gpus.mean' is not a parameter of workload hived"),
        (["--set", "hived.duration_low=900"], "--set hived.duration_low: durations [900.0, 720.0] min are not 0 < low <= high"),
        (["--policies", "fifo"], "--policies: unknown policy 'fifo' (known: private, hived, quota-spread, quota-pack)"),
        (["--jobs", "0"], "--jobs: '0' is less than 1"),
        (["--sweep", "s"], "--sweep: unknown sweep 's' for workload hived (known: load)"),
        (["--sweep-values", "1"], "--sweep-values: only with --sweep"),
        (["--sweep", "load", "--sweep-values", "0"], "--sweep-values: '0' is out of range"),
        (["--tick", "60"], "--tick: not an option of workload hived"),
        (["--alpha", "0.5"], "--alpha: not an option of workload hived"),
        (["--nodes", "4"], "--nodes: not an option of workload hived"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*SMALL, *args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
