"""``kubectl cellfit vcs`` says what its counts of pods and GPUs in use are (user21's item 10:
"PODS 2/0", "GPUS-USED 8/0" left the reader to guess what the second number counted): a column
each for guaranteed and opportunistic pods and GPUs, on the VC's first row; ``-o json`` and
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
    header, first, second = table()
    counted = dict(zip(header, first))
    assert (counted["GUARANTEED-PODS"], counted["GUARANTEED-GPUS"]) == ("2", "8")
    assert (counted["OPPORTUNISTIC-PODS"], counted["OPPORTUNISTIC-GPUS"]) == ("1", "4")
    assert not any("/" in value for value in first[2:]), first  # no "2/1" to decode
    # The VC's totals once, on its first row, as before.
    assert [v for h, v in zip(header, second) if h.endswith(("-PODS", "-GPUS"))] == ["-"] * 4
