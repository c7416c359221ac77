"""``cellfit simulate`` as a cluster admin evaluating policies would misuse it: options that
cannot change a trace's run are refused naming the option (exit 2) instead of being ignored, and
a trace is read as spreadsheets write it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from scheduler.preemption import FitGppSettings
from scheduler.simulator.allox.workload import AlloxWorkload
from scheduler.simulator.cluster import ClusterSpec
from scheduler.simulator.cli import main
from scheduler.simulator.errors import InvalidWorkload, TraceError
from scheduler.simulator.fitgpp.policies import make_policy
from scheduler.simulator.fitgpp.simulation import Simulation
from scheduler.simulator.fitgpp.trace import load_trace
from scheduler.simulator.grid import run_grid
from scheduler.simulator.hived.exchange import main as exchange_main
from scheduler.simulator.policy_registry import PolicyOptions

from sim_helpers import SMALL_NODE, job

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


def unwritable(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(args)
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert captured.out == "" and captured.err.count("\n") == 1  # nothing ran
    return captured.err


def test_an_output_json_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It was found out after the whole run (an hour at the paper's size): the table printed, the
    # JSON lost.
    err = unwritable([*TRACE, "--output-json", str(tmp_path / "no-such-folder" / "out.json")], capsys)
    assert "--output-json" in err and "no folder" in err
    err = unwritable([*TRACE, "--output-json", str(tmp_path)], capsys)
    assert "--output-json" in err and "it is a folder" in err


def test_a_written_trace_that_cannot_be_written_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = unwritable([*TRACE, "--write-trace", str(tmp_path / "no-such-folder" / "t.csv")], capsys)
    assert "--write-trace" in err


@pytest.mark.parametrize("option", ["--output-json", "--write-trace"])
def test_an_output_over_the_input_trace_is_refused(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The trace being evaluated was overwritten by the results (or by the FIFO loop's arrivals).
    trace = tmp_path / "trace.csv"
    original = (EXAMPLES / "trace.csv").read_text(encoding="utf-8")
    trace.write_text(original, encoding="utf-8")
    args = [*TRACE, "--trace", str(trace), "--arrivals", "fifo-load", option, str(tmp_path / "." / "trace.csv")]
    err = refusal(args, capsys)
    assert option in err and "--trace" in err
    assert trace.read_text(encoding="utf-8") == original


def test_output_json_and_written_trace_on_one_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = str(tmp_path / "out.json")
    err = refusal([*TRACE, "--output-json", same, "--write-trace", same], capsys)
    assert "--write-trace" in err and "--output-json" in err


def test_output_json_over_the_configuration_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "cellfit.yaml"
    config.write_text("policy:\n  name: hived\n", encoding="utf-8")
    args = ["--workload", "allox", "--jobs", "5", "--config", str(config), "--output-json", str(config), "--no-progress"]
    err = refusal(args, capsys)
    assert "--output-json" in err and "--config" in err
    assert config.read_text(encoding="utf-8") == "policy:\n  name: hived\n"


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--sweep", "s", "--policies", "fifo,lrtp"], "--policies"),
        (["--sweep", "P", "--policies", "rand"], "--policies"),
        (["--sweep", "s", "-s", "2"], "--grace-period-weight"),
        (["--sweep", "P", "-P", "3"], "--max-preemptions"),
    ],
)
def test_options_a_sweep_of_fitgpp_overrides_are_refused(
    extra: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The s and P sweeps run fitgpp alone at each swept value: the policies named, or the s or P
    # given, were dropped and the table showed fitgpp's rows.
    err = refusal(["--jobs", "20", "--nodes", "2", "--no-progress", *extra, "--sweep-values", "1"], capsys)
    assert f"cellfit simulate: {option}" in err


ALLOX_SMALL = ["--workload", "allox", "--jobs", "20", "--no-progress"]


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--policies", "srpt,es", "--alpha", "0.5"], "--alpha"),
        (["--policies", "es,drff", "--omega-grid", "0"], "--omega-grid"),
        (["--policies", "es,srpt", "--sweep", "alpha", "--sweep-values", "0.1,1"], "--sweep"),
        (["--policies", "allox", "--sweep", "alpha", "--alpha", "0.3", "--sweep-values", "0.1,1"], "--alpha"),
    ],
)
def test_allox_options_no_policy_named_reads_are_refused(
    extra: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # --alpha is AlloX's, --omega-grid admission's (allox, allox+): with none of those run, the table came out unchanged as if they had been applied.
    err = refusal([*ALLOX_SMALL, *extra], capsys)
    assert f"cellfit simulate: {option}" in err


def test_allox_options_a_named_policy_reads_still_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ALLOX_SMALL, "--policies", "allox,allox+,srpt", "--alpha", "0.5", "--timeout", "10", "--omega-grid", "0"]) == 0
    assert "srpt" in capsys.readouterr().out


def test_a_user_count_no_cluster_has_is_refused() -> None:
    # allox.users=1e9 was accepted: generating the jobs built per-user arrays of a billion
    # entries and the run hung (over 2 minutes for 20 jobs) instead of answering.
    with pytest.raises(InvalidWorkload, match="allox.users"):
        AlloxWorkload().with_parameter("allox.users", 1e9)
    assert AlloxWorkload().with_parameter("allox.users", 1000).users == 1000


@pytest.mark.parametrize(
    ("args", "option"),
    [(["--hours", "0"], "--hours"), (["--hours", "48"], "--hours"), (["--seed", "-1"], "--seed")],
)
def test_the_cell_exchange_refuses_a_run_its_model_cannot_hold(
    args: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each ended in numpy's traceback ("negative dimensions are not allowed", "expected
    # non-negative integer"): a tenant's 72-hour burst is placed after the proxies' 24-hour lead.
    with pytest.raises(SystemExit) as exit_info:
        exchange_main(args)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert f"argument {option}" in err and "Traceback" not in err


@pytest.mark.parametrize("column", ["submit_time", "duration", "grace_period"])
def test_a_trace_time_beyond_any_real_run_is_refused_naming_line_and_field(column: str, tmp_path: Path) -> None:
    # submit_time 1e308 plus a duration overflowed to inf: every slowdown became NaN, the table
    # showed "-" and --output-json wrote NaN (not JSON) without a word.
    values = {"submit_time": "0", "duration": "60", "grace_period": "0", column: "1e308"}
    path = tmp_path / "t.csv"
    path.write_text(
        "id,submit_time,class,cpu,memory,gpu,duration,grace_period\n"
        f"a,{values['submit_time']},best-effort,1,1Gi,1,{values['duration']},{values['grace_period']}\n",
        encoding="utf-8",
    )
    with pytest.raises(TraceError, match=f"t.csv line 2: {column}: "):
        load_trace(path)


def test_a_trace_column_the_simulator_does_not_read_is_refused(tmp_path: Path) -> None:
    # "gpus" beside "gpu", or a "priority" column: silently ignored, the run looked as if it had
    # read them.
    csv_path = tmp_path / "t.csv"
    csv_path.write_text(
        "id,submit_time,class,cpu,memory,gpu,gpus,duration,grace_period\na,0,trial,1,1Gi,0,4,10,0\n", encoding="utf-8"
    )
    with pytest.raises(TraceError, match=r"t.csv line 1: unknown column 'gpus'"):
        load_trace(csv_path)
    json_path = tmp_path / "t.json"
    json_path.write_text(
        '[{"submit_time": 0, "class": "trial", "cpu": 1, "memory": "1Gi", "gpu": 0, "duration": 10,'
        ' "grace_period": 0, "priority": 5}]',
        encoding="utf-8",
    )
    with pytest.raises(TraceError, match=r"t.json jobs\[0\]: unknown field 'priority'"):
        load_trace(json_path)


@pytest.mark.parametrize(
    "args",
    [
        ["--jobs", "10", "--set", "te.gpus.mean=2", "--set", "te.gpus.mean = 3"],
        ["--workload", "allox", "--jobs", "10", "--set", "allox.sample_noise=0.1", "--set", "allox.sample_noise=0.2"],
        ["--workload", "hived", "--jobs", "10", "--set", "hived.queue=kube", "--set", "hived.queue=fifo"],
    ],
)
def test_a_parameter_set_twice_is_refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # The last value won without a word, in a command line built up from several scripts.
    err = refusal([*args, "--no-progress"], capsys)
    assert "cellfit simulate: --set " in err and "twice" in err


@pytest.mark.parametrize("submit", [0.3, 0.7, 1.1, 0.6])
def test_a_fractional_tick_decides_at_every_multiple(submit: float) -> None:
    # --tick 0.1: 0.3 / 0.1 is 2.9999999999999996 in floats, so the decision instant pushed for
    # 0.3 (0.30000000000000004, itself 3.0000000000000004 ticks) was not taken for one and the
    # job waited for a later tick.
    settings = FitGppSettings()
    simulation = Simulation(
        cluster=ClusterSpec(nodes=1, node=SMALL_NODE),
        jobs=[job("a", at=submit, duration=10)],
        policy=make_policy("fifo", PolicyOptions(settings=settings, seed=0)),
        settings=settings,
        tick=0.1,
    )
    result = simulation.run()
    assert result.first_start[0] == pytest.approx(submit, abs=1e-9)


def _siblings(_: object) -> int:
    """Processes the grid's process has forked, seen from one of them (Linux /proc)."""
    return _children_of(os.getppid())


def _children_of(parent: int) -> int:
    """How many live processes ``parent`` has forked (Linux /proc)."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        count += int(fields[1]) == parent
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="counts processes through /proc")
def test_more_workers_than_runs_start_no_idle_processes() -> None:
    # --workers 500 on a two-run table forked 500 copies of the simulator (the pool starts every
    # worker it may have at once) on a shared machine.
    runs: dict[str, list[int]] = {"a": []}
    # In a whole test session earlier tests may have left children of this process (a solver
    # process, multiprocessing's resource tracker): the grid's own are counted beyond those.
    before = _children_of(os.getpid())
    run_grid([("a", 1, None), ("a", 2, None)], run=lambda args, progress: 0, runs=runs, task=_siblings, workers=8)
    assert len(runs["a"]) == 2
    assert max(runs["a"]) - before <= 2


def test_a_configuration_asking_for_another_preemption_is_refused_by_the_fitgpp_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # preemption.policy: placement was replaced by FitGpp without a word: the tables evaluated
    # FitGpp's victims while the admin asked about the placement's own.
    config = tmp_path / "placement.yaml"
    config.write_text("preemption:\n  policy: placement\n", encoding="utf-8")
    err = refusal([*TRACE, "--config", str(config)], capsys)
    assert "cellfit simulate: --config" in err and "preemption.policy" in err and "placement" in err
    config.write_text("preemption:\n  policy: fitgpp\n", encoding="utf-8")
    assert main([*TRACE, "--config", str(config)]) == 0


MOVED_BOUNDS = [
    ["--jobs", "10", "--set", "te.duration.low=40", "--set", "te.duration.high=60"],
    ["--workload", "allox", "--jobs", "10", "--policies", "es", "--set", "allox.gpu_min_minutes=300",
     "--set", "allox.gpu_max_minutes=600"],
    ["--workload", "hived", "--jobs", "10", "--set", "hived.duration_low=1000", "--set", "hived.duration_high=2000"],
]


@pytest.mark.parametrize("args", MOVED_BOUNDS)
def test_set_options_in_either_order_give_the_same_run(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A low bound above the default high was refused when given before its high ("durations
    # [1000.0, 720.0] min are not 0 < low <= high"), accepted after it.
    *head, set_low, low, set_high, high = args
    documents = []
    for order, tail in enumerate(([set_low, low, set_high, high], [set_high, high, set_low, low])):
        out = tmp_path / f"{order}.json"
        code = main([*head, *tail, "--no-progress", "--output-json", str(out)])
        assert code == 0, capsys.readouterr().err
        documents.append(json.loads(out.read_text()))
    capsys.readouterr()
    first, second = documents
    assert strip_set(first) == strip_set(second)


def strip_set(document: object) -> object:
    """The document without the --set list as given (its order is the only difference)."""
    if isinstance(document, dict):
        return {key: strip_set(value) for key, value in document.items() if key != "set"}
    if isinstance(document, list):
        return [strip_set(value) for value in document]
    return document


@pytest.mark.parametrize("args", MOVED_BOUNDS)
def test_set_bounds_no_order_accepts_are_refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    *head, _, low, set_high, high = args
    low_key = low.partition("=")[0]
    above = f"{low_key}={float(high.partition('=')[2]) * 2:g}"
    err = refusal([*head, set_high, high, "--set", above, "--no-progress"], capsys)
    assert f"cellfit simulate: --set {low_key}" in err


@pytest.mark.parametrize(
    ("extra", "option"),
    [(["--table4"], "--table4"), (["--paper"], "--paper"), (["--write-trace", "arrivals.csv"], "--write-trace")],
)
def test_experiment_options_a_fitgpp_sweep_does_not_produce_are_refused(
    extra: list[str], option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A sweep prints its own table: Table 4, the paper's rows and the written trace were
    # dropped without a word.
    args = ["--jobs", "10", "--nodes", "2", "--sweep", "gp-scale", "--sweep-values", "1", "--no-progress", *extra]
    if option == "--write-trace":
        args[-1] = str(tmp_path / "arrivals.csv")
    err = refusal(args, capsys)
    assert f"cellfit simulate: {option}" in err
