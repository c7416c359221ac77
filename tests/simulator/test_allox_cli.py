"""``cellfit simulate --workload allox``: the table, the JSON document, sweeps, PNGs, and one-line
errors with exit code 2 for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.simulator.cli import main

SMALL = ["--workload", "allox", "--jobs", "150", "--nodes", "3", "--no-progress"]
PNG = b"\x89PNG\r\n\x1a\n"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_table_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "out.json"
    code, out, err = run_cli(
        [*SMALL, "--repeat", "2", "--set", "allox.sample_noise=0.04", "--output-json", str(out_json), "--plots", str(tmp_path)],
        capsys,
    )
    assert code == 0, err
    assert "avg JCT [min]" in out and "progress sd" in out and "GPU util" in out and "est. MAE" in out
    assert "allox average JCT vs drff" in out and "(paper -95.0%)" in out and "vs srpt" in out
    assert "events/s" in err
    assert (tmp_path / "allox.png").read_bytes()[:8] == PNG
    document = json.loads(out_json.read_text())
    assert list(document) == ["allox", "allox+", "es", "drff", "drfs", "drfa", "srpt"]
    for entry in document.values():
        assert entry["jobs"] == 150 and entry["seeds"] == [1, 2] and len(entry["per_seed"]) == 2
        assert entry["average_jct_minutes"] > 0
        assert set(entry["jct_minutes"]) == {"p50", "p95", "p99"}
        assert entry["longest_1pct_jct_minutes"] > 0
        assert set(entry["progress"]) == {"sd", "mean", "per_user"} and len(entry["progress"]["per_user"]) == 10
        assert set(entry["utilisation"]) == {"gpu", "cpu"}
        for kind in ("gpu", "cpu"):
            assert set(entry["utilisation"][kind]) == {"jobs", "samples"}
            assert 0 <= sum(entry["utilisation"][kind].values()) <= 1 + 1e-9
        assert 0 <= entry["on_cpu_fraction"] <= 1
        assert entry["cpu_work_speedup"] is None or 1.8 - 1e-9 <= entry["cpu_work_speedup"] <= 10 + 1e-9
        settings = entry["settings"]
        assert settings["workload"] == "allox" and settings["load"] == 0.9 and settings["alpha"] == 0.1
        assert settings["machines"] == {"gpu": 3, "cpu": 3}
        assert settings["parameters"]["allox.sample_noise"] == 0.04
        assert settings["timeout_minutes"] == 240.0
        assert settings["omega_grid_seconds"] is None  # admission's own grid, as live
    assert document["srpt"]["preemptions"] > 0 and document["allox"]["preemptions"] == 0
    assert document["drff"]["utilisation"]["cpu"] == {"jobs": 0.0, "samples": 0.0}
    assert document["drff"]["cpu_work_speedup"] is None
    # The estimator's figures: measured on the sampled jobs, none for estimate-free policies.
    assert document["drff"]["estimation"] is None
    figures = document["allox"]["estimation"]
    assert figures["jobs"] == 300 and figures["estimates"] == 600  # 150 jobs x 2 seeds, 2 kinds each
    assert 0.05 < figures["mae"] < 0.5 and figures["error_sd"] > 0 and 0.15 < figures["overhead"] < 0.6
    assert figures["methods"].get("samples", 0) + figures["methods"].get("proportional", 0) == 600
    assert len(document["allox"]["per_seed"]) == 2 and document["allox"]["per_seed"][0]["estimation"]["jobs"] == 150


def test_same_seed_same_document_with_or_without_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [tmp_path / f"run{i}.json" for i in range(3)]
    for path, seed, workers in zip(paths, ("4", "4", "5"), ("1", "2", "1")):
        args = [*SMALL, "--policies", "allox,es", "--seed", seed, "--workers", workers, "--output-json", str(path)]
        code, _, err = run_cli(args, capsys)
        assert code == 0, err
    first, again, other = (json.loads(path.read_text()) for path in paths)
    assert first == again and first != other


def test_alpha_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "sweep.json"
    code, out, err = run_cli(
        [*SMALL, "--sweep", "alpha", "--sweep-values", "0.1,1", "--output-json", str(out_json), "--plots", str(tmp_path)],
        capsys,
    )
    assert code == 0, err
    assert "Sweep over alpha" in out
    document = json.loads(out_json.read_text())
    assert document["sweep"] == "alpha" and [p["value"] for p in document["points"]] == [0.1, 1.0]
    low, high = (point["policies"] for point in document["points"])
    assert list(low) == ["allox", "es", "srpt"]  # Fig. 16's lines
    assert low["es"] == high["es"] and low["srpt"] == high["srpt"]  # α-independent: run once
    assert low["allox"] != high["allox"]
    assert (tmp_path / "allox-sweep-alpha.png").read_bytes()[:8] == PNG


@pytest.mark.parametrize(("sweep", "values"), [("load", "0.5,0.9"), ("sample-noise", "0,0.04"), ("sampling-fraction", "0.015,0.1")])
def test_other_sweeps(sweep: str, values: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "sweep.json"
    args = [*SMALL, "--jobs", "80", "--policies", "allox,srpt", "--sweep", sweep, "--sweep-values", values, "--output-json", str(out_json)]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    points = json.loads(out_json.read_text())["points"]
    assert len(points) == 2 and set(points[0]["policies"]) == {"allox", "srpt"}
    assert points[0]["policies"]["allox"] != points[1]["policies"]["allox"]
    low, high = (point["policies"]["allox"]["estimation"] for point in points)
    if sweep == "sample-noise":  # exact samples, exact estimates; noise makes the error
        assert low["mae"] < 1e-9 and high["mae"] > 0.1
        assert "est. MAE" in out and "est. sd" in out
    if sweep == "sampling-fraction":  # longer samples: more accurate, more overhead
        assert low["mae"] > high["mae"] and low["overhead"] < high["overhead"]


ALLOX = ["--workload", "allox"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*ALLOX, "--policies", "allox,fitgpp"], "--policies: policy 'fitgpp' does not run on workload allox (known: allox, allox+, es,"),
        (["--policies", "fifo,allox"], "--policies: policy 'allox' does not run on workload fitgpp (known: fifo, lrtp, rand, fitgpp, kube)"),
        ([*ALLOX, "--policies", "sjf"], "--policies: unknown policy 'sjf' (known: allox, allox+, es, drff, drfs, drfa, srpt, bf, jsq+, sjf+)"),
        ([*ALLOX, "--set", "allox.bogus=1"], "--set allox.bogus: 'allox.bogus' is not a parameter of workload allox (known: allox.users,"),
        ([*ALLOX, "--set", "te.gpus.mean=2"], "--set te.gpus.mean: 'te.gpus.mean' is not a parameter of workload allox"),
        ([*ALLOX, "--set", "allox.sample_noise=-1"], "--set allox.sample_noise: allox.sample_noise: -1.0 is not a relative sd"),
        ([*ALLOX, "--set", "allox.estimation_error=0.1"], "--set allox.estimation_error: 'allox.estimation_error' is no longer a parameter: estimates come from the estimator run on simulated samples"),
        ([*ALLOX, "--set", "allox.profiling_overhead=0.1"], "--set allox.profiling_overhead: 'allox.profiling_overhead' is no longer a parameter: the profiling overhead is the simulated sampling runs' time; set allox.sampling_fraction"),
        ([*ALLOX, "--set", "allox.users=2.5"], "--set allox.users: allox.users: 2.5 is not a positive whole number"),
        ([*ALLOX, "--set", "allox.load"], "--set: 'allox.load' is not KEY=VALUE"),
        ([*ALLOX, "--alpha", "2"], "--alpha: '2' is not in [0, 1]"),
        ([*ALLOX, "--timeout", "soon"], "--timeout: 'soon' is not a number"),
        ([*ALLOX, "--omega-grid", "-1"], "--omega-grid: '-1' is out of range"),
        ([*ALLOX, "--omega-grid", "inf"], "--omega-grid: 'inf' is not finite"),
        ([*ALLOX, "--load", "-1"], "--load: '-1' is out of range"),
        ([*ALLOX, "--jobs", "0"], "--jobs: '0' is less than 1"),
        ([*ALLOX, "--sweep", "s"], "--sweep: unknown sweep 's' for workload allox (known: alpha, load, sample-noise, sampling-fraction)"),
        ([*ALLOX, "--sweep", "estimation-error"], "--sweep: 'estimation-error' is no longer a sweep: the estimation error is measured now, not set: sweep sample-noise (Fig. 17)"),
        ([*ALLOX, "--sweep", "profiling-overhead"], "--sweep: 'profiling-overhead' is no longer a sweep: the profiling overhead is measured now, not set: sweep sampling-fraction (Fig. 18)"),
        ([*ALLOX, "--sweep", "sampling-fraction", "--sweep-values", "0"], "--sweep-values: sampling-fraction values are in (0, 0.5]"),
        ([*ALLOX, "--sweep", "alpha", "--sweep-values", "0.1,2"], "--sweep-values: alpha values are in [0, 1]"),
        ([*ALLOX, "--te-share", "0.2"], "--te-share: not an option of workload allox"),
        ([*ALLOX, "-P", "2"], "--max-preemptions: not an option of workload allox"),
        ([*ALLOX, "--trace", "x.csv"], "--trace: not an option of workload allox"),
        ([*ALLOX, "--node-cpu", "10", "--node-gpus", "0"], "--nodes: the cluster has no GPU and no CPU slot"),
        (["--alpha", "0.5"], "--alpha: an option of workload allox only (add --workload allox)"),
        (["--omega-grid", "0"], "--omega-grid: an option of workload allox only (add --workload allox)"),
        (["--workload", "alibaba"], "--workload: unknown workload 'alibaba' (known: fitgpp, allox, hived)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli([*args, "--no-progress"], capsys)
    assert code == 2
    assert message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_configuration_composes_the_engine_as_cellfit_serve_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--config: the engine the pods are placed by (and admission's GPU machines, under HiveD the
    VC's guarantee) come from the file as ``cellfit serve --config`` reads it: HiveD with cells on
    two of the three nodes gives jobs two GPUs, not three. A broken file is one line, exit 2."""
    hived = tmp_path / "hived.yaml"
    hived.write_text(
        "policy: {name: hived}\ncells:\n  topology:\n    cellTypes:\n"
        "      GPU-NODE: {childType: GPU, childCount: 1, isNodeLevel: true}\n    physicalCells:\n"
        "    - {cellType: GPU-NODE, nodeName: node-00}\n    - {cellType: GPU-NODE, nodeName: node-01}\n"
    )
    common = [*SMALL, "--policies", "allox"]
    code, _, err = run_cli([*common, "--config", str(hived), "--output-json", str(tmp_path / "h.json")], capsys)
    assert code == 0, err
    code, _, err = run_cli([*common, "--output-json", str(tmp_path / "f.json")], capsys)
    assert code == 0, err
    under_hived = json.loads((tmp_path / "h.json").read_text())["allox"]
    under_fit = json.loads((tmp_path / "f.json").read_text())["allox"]
    assert under_hived["settings"]["config"] == str(hived) and under_fit["settings"]["config"] is None
    # The sampling runs take machines of the nodes' count (the estimator does not read HiveD's
    # guarantee): under HiveD some of their pods wait for a cell's GPU; under resource fit none.
    assert under_fit["pods_waited"] == 0 and under_hived["pods_waited"] > 0
    # Two GPUs of three: the GPUs hold fewer jobs at once, and the jobs wait longer.
    assert under_hived["average_jct_minutes"] > under_fit["average_jct_minutes"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("policy: {name: nonsense}\n")
    code, _, err = run_cli([*common, "--config", str(bad)], capsys)
    assert code == 2 and "policy" in err and err.count("\n") == 1


def test_admissions_knobs_come_from_the_configuration_unless_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--config's ``allox`` section sets α, AlloX+'s timeout and the ω grid as the live admission
    reads them (a null timeout: none); --alpha, --timeout and --omega-grid override it."""
    tuned = tmp_path / "allox.yaml"
    tuned.write_text("allox: {alpha: 0.5, omegaGridSeconds: 0, alloxPlusTimeoutSeconds: 600}\n")
    common = [*SMALL, "--jobs", "40", "--policies", "allox", "--config", str(tuned)]
    code, _, err = run_cli([*common, "--output-json", str(tmp_path / "a.json")], capsys)
    assert code == 0, err
    settings = json.loads((tmp_path / "a.json").read_text())["allox"]["settings"]
    assert (settings["alpha"], settings["omega_grid_seconds"], settings["timeout_minutes"]) == (0.5, 0.0, 10.0)
    code, _, err = run_cli([*common, "--alpha", "1", "--omega-grid", "30", "--timeout", "inf", "--output-json", str(tmp_path / "b.json")], capsys)
    assert code == 0, err
    settings = json.loads((tmp_path / "b.json").read_text())["allox"]["settings"]
    assert (settings["alpha"], settings["omega_grid_seconds"], settings["timeout_minutes"]) == (1.0, 30.0, None)
    default = tmp_path / "default.yaml"
    default.write_text("policy: {name: resource-fit}\n")
    code, _, err = run_cli([*SMALL, "--jobs", "40", "--policies", "allox", "--config", str(default), "--output-json", str(tmp_path / "c.json")], capsys)
    assert code == 0, err
    settings = json.loads((tmp_path / "c.json").read_text())["allox"]["settings"]
    assert (settings["alpha"], settings["omega_grid_seconds"], settings["timeout_minutes"]) == (0.1, 60.0, None)


def test_admission_runs_on_a_cluster_where_pods_wait_for_room(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nodes of 24 GiB: a job's pod and a sampling run's do not always fit beside each other, so
    pods wait for a node while their machines are counted; admission, reading the free
    capacity as live (no pending pod in it), may count a machine a waiting sampling run holds,
    and its start then waits for the next pass instead of failing the run."""
    out = tmp_path / "tight.json"
    code, _, err = run_cli([*SMALL, "--node-memory", "24Gi", "--policies", "allox,allox+", "--output-json", str(out)], capsys)
    assert code == 0, err
    document = json.loads(out.read_text())
    assert document["allox"]["pods_waited"] > 0 and document["allox+"]["pods_waited"] > 0
    assert document["allox"]["jobs"] == 150
