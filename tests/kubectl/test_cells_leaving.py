"""``kubectl cellfit cells``: the GPUs booked for a guaranteed pod while the opportunistic pod
preempted for it still runs there (the inspect API's ``leaving`` count, scheduler/cells/
inspection.py) have their own LEAVING column. Before, the table had none: such a node read
GUARANTEED 4 OPPORTUNISTIC 4 IDLE 0 with 8 GPUs whose opportunistic pod held all 8.

The view is a real HiveD engine's, just after kube-scheduler's preemption for a guaranteed pod
(tests/cells/test_restart_mid_preemption.py), served through test_cli's API server double."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from scheduler.kubectl import cli, views
from tests.cells.test_restart_mid_preemption import preempted_by_kube_scheduler
from tests.kubectl.test_cli import PROXY, ApiServer, config

__all__ = ["config"]  # test_cli's fixture: a kubeconfig for this API server


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    server = ApiServer(None)
    yield server
    server.close()


def test_the_gpus_whose_victim_still_leaves_have_a_leaving_column(config: Path, apiserver: ApiServer) -> None:
    cluster, victim, node = preempted_by_kube_scheduler()
    view = cluster.engine.inspect_cells(node=node)
    apiserver.routes[f"{PROXY}/v1/inspect/cells"] = (200, view)
    lines = cli.run(["cells", "--node", node]).splitlines()
    header = lines[0].split()
    assert header[header.index("OPPORTUNISTIC") + 1] == "LEAVING"
    rows = [dict(zip(header, line.split())) for line in lines[1:]]
    assert (rows[0]["CELL"], rows[0]["GPUS"], rows[0]["IDLE"], rows[0]["GUARANTEED"], rows[0]["OPPORTUNISTIC"],
            rows[0]["LEAVING"]) == (node, "8", "0", "4", "4", "4")
    gpus = [row for row in rows if row["TYPE"] == "V100"]
    assert sorted(row["LEAVING"] for row in gpus) == ["0"] * 4 + ["1"] * 4
    # -o json is the inspect API's own document, its "leaving" counts included.
    assert json.loads(cli.run(["cells", "--node", node, "-o", "json"])) == view


def test_a_view_without_the_count_reads_none_leaving() -> None:
    """An older cellfit's view has no ``leaving``: the column says 0, not ``-``."""
    (row,) = views.cell_rows({"cells": [{"id": "n", "level": 4, "gpus": {"total": 8, "idle": 8}}]}, gpus=False)
    assert row["leaving"] == 0
