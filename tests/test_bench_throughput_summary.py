"""e2e/bench_throughput.py's summary of its rounds (issue 15): the ratios against kube-scheduler
alone, and the control rounds (``--control``: kube-scheduler alone with cellfit started beside it,
never asked) that split the first binding's extra between cellfit's presence and the extender's
calls. The rounds here are written by hand; the benchmark itself runs on the control plane."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

E2E = Path(__file__).resolve().parents[1] / "e2e"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_throughput", E2E / "bench_throughput.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_throughput", module)
    spec.loader.exec_module(module)
    return module


def round_of(bench: ModuleType, *, rate: float, first: float, cellfit: bool, extender: bool) -> dict[str, Any]:
    result: dict[str, Any] = {
        "pods_per_s": rate, "end_to_end_pods_per_s": rate / 2, "first_bind_s": first,
        "cpu_ms_per_pod": {"kube-scheduler": 5.0, **({"cellfit": 1.0} if cellfit else {})},
        "apiserver_binding_p50_ms": 100.0, "apiserver_binding_p99_ms": 900.0,
    }
    if cellfit:
        result.update(cellfit_ready_s=3.0, cellfit_cpu_ms_per_pod={part: 0.125 for part in bench.COMPONENTS})
    if extender:
        result.update(bind_p50_ms=10.0, bind_p99_ms=90.0, bind_api_wait_p50_ms=8.0, bind_api_wait_p99_ms=80.0)
    return result


def test_control_rounds_split_the_first_bindings_extra(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    results = {
        "plain": [round_of(bench, rate=100, first=1.0, cellfit=False, extender=False),
                  round_of(bench, rate=80, first=1.4, cellfit=False, extender=False)],
        "control": [round_of(bench, rate=90, first=1.5, cellfit=True, extender=False),
                    round_of(bench, rate=90, first=1.9, cellfit=True, extender=False)],
        "hived": [round_of(bench, rate=81, first=2.0, cellfit=True, extender=True),
                  round_of(bench, rate=72, first=2.4, cellfit=True, extender=True)],
    }
    summary = bench.summarise(results, ["hived"], plain=True)
    assert summary["control"]["first_bind_extra_s"] == pytest.approx(0.5)  # cellfit's presence
    assert summary["hived"]["first_bind_extra_s"] == pytest.approx(1.0)
    assert summary["hived"]["first_bind_extra_over_control_s"] == pytest.approx(0.5)  # the extender's calls
    assert summary["hived"]["rate_ratios_by_round"] == pytest.approx([0.81, 0.9])
    assert summary["control"]["rate_ratio"] == pytest.approx(1.0)
    assert "first_bind_extra_over_control_s" not in summary["control"]
    bench.print_summary(summary)
    printed = capsys.readouterr().out
    assert "cellfit beside it, never asked" in printed and "+0.50s against kube-scheduler with cellfit beside it" in printed


def test_without_control_rounds_the_policies_compare_with_kube_scheduler_alone_only(bench: ModuleType) -> None:
    results = {"plain": [round_of(bench, rate=100, first=1.0, cellfit=False, extender=False)],
               "hived": [round_of(bench, rate=90, first=1.2, cellfit=True, extender=True)]}
    summary = bench.summarise(results, ["hived"], plain=True)
    assert summary["hived"]["rate_ratio"] == pytest.approx(0.9) and "first_bind_extra_over_control_s" not in summary["hived"]
