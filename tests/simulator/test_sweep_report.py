"""A ``fitgpp`` or ``allox`` sweep's report (``session.sweep_producer``, shared by both
workloads): the events line on stderr counts every seed of every policy at every point, the
same runs the ``--output-json`` document describes, and the figure carries the workload's name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from scheduler.simulator.cli import main

PNG = b"\x89PNG\r\n\x1a\n"
SWEEPS = [
    (["--jobs", "100", "--nodes", "3", "--sweep", "te-share", "--sweep-values", "0.2,0.4"], "sweep-te-share.png"),
    (["--workload", "allox", "--jobs", "80", "--nodes", "3", "--sweep", "load", "--sweep-values", "0.5,0.9"], "allox-sweep-load.png"),
]


@pytest.mark.parametrize(("args", "png"), SWEEPS)
def test_a_sweep_counts_the_events_of_every_seed_it_documents(
    args: list[str], png: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "sweep.json"
    code = main([*args, "--repeat", "2", "--no-progress", "--output-json", str(out_json), "--plots", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 0, err
    reported = re.search(r"cellfit simulate: (\d+) events in ", err)
    assert reported is not None, err
    summaries = [summary for point in json.loads(out_json.read_text())["points"] for summary in point["policies"].values()]
    assert summaries and all(len(summary["seeds"]) == 2 for summary in summaries)
    # Each policy's summary holds its seeds' mean events: the runs' total is that times the seeds.
    documented = sum(summary["events"] * len(summary["seeds"]) for summary in summaries)
    assert documented > 0
    assert int(reported.group(1)) == round(documented)
    assert (tmp_path / png).read_bytes()[:8] == PNG
