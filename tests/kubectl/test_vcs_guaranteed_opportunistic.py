"""``kubectl cellfit vcs`` says what its counts of pods and GPUs in use are (user21's item 10:
"PODS 2/0", "GPUS-USED 8/0" left the reader to guess what the second number counted): a column
each for guaranteed and opportunistic pods and GPUs, the VC's totals: on its row when it has one
cell type, else on a row of their own (on its first cell type's row they read as that type's: a
live session saw 9 guaranteed GPUs on a row of 4-GPU cells); ``-o json`` and
``-o yaml`` stay the inspect API's own document (scheduler/kubectl/cli.py, not this table)."""

from __future__ import annotations

from typing import Any

from scheduler.kubectl import output, views

VIEW: dict[str, Any] = {"virtualClusters": [
    {"name": "quota", "cells": [{"cellType": "E2E-NODE", "gpusPerCell": 8, "quota": 1, "bound": 1, "draining": 0, "pinned": 0},
                                {"cellType": "E2E-GPU", "gpusPerCell": 1, "quota": 2, "bound": 0, "draining": 0, "pinned": 0}],
     "pods": {"guaranteed": 2, "opportunistic": 1}, "gpus": {"guaranteed": 8, "opportunistic": 4}},
]}


def table() -> list[list[str]]:
    return [line.split() for line in output.table(views.vc_rows(VIEW), views.VC_COLUMNS, empty="none").splitlines()]


def test_each_count_has_a_header_naming_guaranteed_or_opportunistic_pods_or_gpus() -> None:
    header, first, second, total = table()
    counted = dict(zip(header, total))
    assert counted["VC"] == "quota" and counted["CELL-TYPE"] == "(total)"
    assert (counted["GUARANTEED-PODS"], counted["GUARANTEED-GPUS"]) == ("2", "8")
    assert (counted["OPPORTUNISTIC-PODS"], counted["OPPORTUNISTIC-GPUS"]) == ("1", "4")
    assert not any("/" in value for value in total[2:]), total  # no "2/1" to decode
    # No cell type's row carries the VC's totals as if they were its own.
    for row in (first, second):
        assert [v for h, v in zip(header, row) if h.endswith(("-PODS", "-GPUS"))] == ["-"] * 4, row
    assert [v for h, v in zip(header, total) if h in ("GPUS/CELL", "QUOTA", "BOUND", "UNBOUND")] == ["-"] * 4


def test_a_vc_of_one_cell_type_has_its_totals_on_that_row() -> None:
    view = {"virtualClusters": [{**VIEW["virtualClusters"][0], "cells": VIEW["virtualClusters"][0]["cells"][:1]}]}
    header, only = [line.split() for line in output.table(views.vc_rows(view), views.VC_COLUMNS, empty="none").splitlines()]
    counted = dict(zip(header, only))
    assert (counted["CELL-TYPE"], counted["GUARANTEED-GPUS"], counted["OPPORTUNISTIC-PODS"]) == ("E2E-NODE", "8", "1")
